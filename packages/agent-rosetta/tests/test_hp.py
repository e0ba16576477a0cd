"""The HP lattice backend: enumeration, ground states by independent brute force, moves."""

import itertools

import numpy as np
import pytest
from icml26_agent_rosetta import BackboneChange, HPBackend, IndexSelector, RotamerChange, hp_optimum
from icml26_agent_rosetta.hp import (
    contact_matrix,
    hp_design_optimum,
    hp_energy,
    is_self_avoiding,
    lattice_design,
    self_avoiding_walks,
    straight_chain,
)

# number of self-avoiding walks of k steps on the square lattice (OEIS A001411)
SAW_COUNTS = [1, 4, 12, 36, 100, 284, 780, 2172, 5916, 16268]


@pytest.mark.parametrize("n", range(3, 11))
def test_walk_enumeration_matches_oeis(n):
    # c_{n-1} = 4 straight-ish symmetric walks + 8 per reduced bent walk; our set has 1 + (c-4)/8
    walks = self_avoiding_walks(n)
    assert len(walks) == 1 + (SAW_COUNTS[n - 1] - 4) // 8
    assert all(is_self_avoiding(w) for w in walks)


def _all_walks(n):
    """Every walk (no symmetry reduction), from direction strings."""
    dirs = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    for steps in itertools.product(range(4), repeat=n - 1):
        xy = [(0, 0)]
        for s in steps:
            xy.append((xy[-1][0] + dirs[s][0], xy[-1][1] + dirs[s][1]))
        if len(set(xy)) == n:
            yield np.array(xy)


@pytest.mark.parametrize(("n", "n_h"), [(6, 3), (7, 4), (8, 4)])
def test_hp_optimum_vs_independent_brute_force(n, n_h):
    e_star, h, xy = hp_optimum(n, n_h)
    best = 0
    for w in _all_walks(n):
        d = np.abs(w[:, None] - w[None]).sum(-1)
        for sub in itertools.combinations(range(n), n_h):
            e = -sum(1 for i, j in itertools.combinations(sub, 2) if j - i > 1 and d[i, j] == 1)
            best = min(best, e)
    assert e_star == best
    assert h.sum() == n_h and hp_energy(h, xy) == e_star and is_self_avoiding(xy)


def test_energy_by_hand():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])  # residues 1 and 4 touch
    assert hp_energy(np.ones(4, bool), square) == -1
    assert hp_energy(np.array([1, 1, 1, 0], bool), square) == 0
    assert contact_matrix(square).sum() == 2  # one contact, counted twice


def test_design_optimum_on_fixed_conformation():
    _, _, xy = hp_optimum(8, 4)
    e = hp_design_optimum(xy, 4)
    assert e == hp_optimum(8, 4)[0]
    assert hp_design_optimum(straight_chain(["SER"] * 8).payload, 4) == 0


@pytest.mark.parametrize("mover", ["small", "shear", "backrub"])
def test_moves_keep_a_connected_self_avoiding_chain(mover):
    b = HPBackend()
    # a loose start with corners and U-turns: the comb (0,0),(0,1),(1,1),(1,0),(2,0),(2,1)...
    comb = [(i // 2, (i % 4) in (1, 2)) for i in range(10)]
    start = lattice_design(["LEU", "SER"] * 5, np.array(comb))
    assert is_self_avoiding(start.payload)
    a = BackboneChange(
        mover=mover, selector=IndexSelector(resnums="1-10"), nmoves=200, temperature=5.0
    )
    out = b.run(a, "", [start], nstruct=6, seed=1)
    assert all(is_self_avoiding(d.payload) for d in out)
    assert any((d.payload != start.payload).any() for d in out)  # the move set moves
    assert all(d.sequence == start.sequence for d in out)


def test_rotamer_change_finds_the_fixed_backbone_optimum():
    e_star, _, xy = hp_optimum(10, 5)
    start = lattice_design(["SER"] * 10, xy)
    a = RotamerChange(
        design_selector=IndexSelector(resnums="1-10"),
        restrict=["LEU", "SER"],
        composition_penalties=[{"types": ["LEU"], "target": 5, "weight": 3.0}],
        repeats=3,
    )
    out = HPBackend().run(a, "", [start], nstruct=8, seed=0)
    feasible = [d.metrics["total_score"] for d in out if d.sequence.count("LEU") == 5]
    assert feasible and min(feasible) == e_star  # annealing reaches the exhaustive optimum
    frozen = RotamerChange(design_selector=IndexSelector(resnums="1-3"), restrict=["LEU"])
    out = HPBackend().run(frozen, "", [start], nstruct=2, seed=0)
    assert all(d.sequence[3:] == start.sequence[3:] for d in out)  # outside the selector: untouched


def test_composition_error_counts_the_tasks_non_canonical_hydrophobic_types():
    import numpy as np
    from icml26_agent_rosetta import Design
    from icml26_agent_rosetta.hp import HYDROPHOBIC, hp_task

    h = HYDROPHOBIC | {"TRF"}
    task = hp_task(6, 3, ncaa=("TRF",), hydrophobic=h)
    assert task.ncaa == ("TRF",) and "TRF" in task.description
    d = Design(("TRF", "TRF", "LEU", "SER", "SER", "SER"), np.zeros((6, 3)))
    assert task.extra_metrics(d) == {"composition_error": 0.0}  # 3 H: TRF, TRF, LEU
    canonical_only = hp_task(6, 3)
    assert canonical_only.extra_metrics(d) == {"composition_error": 2.0}
