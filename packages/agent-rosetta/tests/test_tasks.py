"""The paper's tasks as code: pack-NCAA and fixed-backbone design, with their metrics."""

import numpy as np
import pytest
from icml26_agent_rosetta import Design, HPBackend, RosettaEnv, hp_optimum
from icml26_agent_rosetta.hp import HYDROPHOBIC, hp_energy, lattice_design, self_avoiding_walks
from icml26_agent_rosetta.tasks import (
    cavity_volume,
    fixed_backbone_task,
    hp_fold_confidence,
    ncaa_core_metrics,
    pack_ncaa_task,
    radius_of_gyration,
)


def test_radius_of_gyration_closed_form():
    ca = np.array([[0.0, 0, 0], [2, 0, 0]])
    assert radius_of_gyration(ca) == pytest.approx(1.0)
    sq = np.array([[1.0, 1, 0], [-1, 1, 0], [-1, -1, 0], [1, -1, 0]])
    assert radius_of_gyration(sq) == pytest.approx(np.sqrt(2))
    with pytest.raises(ValueError, match="non-finite"):
        radius_of_gyration(np.array([[np.nan, 0, 0]]))


def test_cavity_proxy_counts_the_enclosed_empty_site():
    ring = [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (1, 2), (0, 2), (0, 1)]  # around (1, 1)
    ca = np.array([[x, y, 0.0] for x, y in ring])
    assert cavity_volume(ca) == 1.0
    straight = np.array([[i, 0.0, 0.0] for i in range(8)])
    assert cavity_volume(straight) == 0.0
    u = np.array([[x, y, 0.0] for x, y in ring[:-1]])  # open on one side: (0, 1) missing
    assert cavity_volume(u) == 0.0


def test_ncaa_core_success_is_exactly_one_in_the_core():
    d = Design(("TRF", "LEU", "TRF", "SER"), np.zeros((4, 3)))
    m = ncaa_core_metrics(d, ["core", "core", "surface", "core"], "TRF")
    assert m == {
        "ncaa_count": 2.0,
        "ncaa_core_count": 1.0,
        "ncaa_core_success": 1.0,
        "ncaa_core_miss": 0.0,
    }
    two = ncaa_core_metrics(d, ["core", "core", "core", "core"], "TRF")
    assert two["ncaa_core_success"] == 0.0  # two in the core is a failure, as officially


def test_pack_ncaa_task_runs_on_the_hp_backend():
    backend = HPBackend(hydrophobic=HYDROPHOBIC | {"TRF"})
    task = pack_ncaa_task(backend, n=8, n_h=4, nstruct=8, max_steps=3)
    assert task.ncaa == ("TRF",) and task.objectives["ncaa_core_success"] == "max"
    env = RosettaEnv(task, backend)
    assert env.best() is None  # the start has no TRF: infeasible
    env.step('<action tag="choose"><name>rotamer_change</name></action>')
    obs, *_, info = env.step(
        '<action tag="run"><name>rotamer_change</name>'
        '<design_selector>{"type": "layer", "core": true}</design_selector>'
        "<restrict>TRF,LEU</restrict>"
        '<composition_penalties>[{"types": ["TRF"], "target": 1, "weight": 3.0}]'
        "</composition_penalties></action>"
    )
    assert info["valid"] is True, obs
    designs = env.trajectory[-1].designs
    ok = [d for d in designs if d.metrics["ncaa_core_success"] == 1.0]
    assert ok and env.best() is not None
    for d in designs:  # the metrics agree with the definition
        lay = backend.layers(d)
        core_trf = sum(s == "TRF" and lay[i] == "core" for i, s in enumerate(d.sequence))
        assert d.metrics["ncaa_core_success"] == float(core_trf == 1)
        assert d.metrics["rg"] == pytest.approx(radius_of_gyration(d.ca))


def test_hp_confidence_is_the_boltzmann_weight_of_the_target_fold():
    n, n_h = 8, 4
    _, h, xy = hp_optimum(n, n_h)
    target = lattice_design(["SER"] * n, xy)
    score = hp_fold_confidence(target, kt=0.5)
    walks = self_avoiding_walks(n)
    assert score(target)["confidence"] == pytest.approx(1 / len(walks))  # all polar: no preference
    seq = ["LEU" if b else "SER" for b in h]
    hm = np.array(h)
    e = np.array([hp_energy(hm, w) for w in walks], dtype=float)  # brute force, loop
    expected = np.exp(-hp_energy(hm, xy) / 0.5) / np.exp(-e / 0.5).sum()
    got = score(lattice_design(seq, xy))
    assert got["confidence"] == pytest.approx(expected, rel=1e-9)
    assert got["confidence"] > 10 / len(walks)
    rng = np.random.default_rng(0)
    seen_excited = False
    for _ in range(6):  # sequences whose ground state is not the target too
        hm = rng.random(n) < 0.5
        e = np.array([hp_energy(hm, w) for w in walks], dtype=float)
        e_t = hp_energy(hm, xy)
        seen_excited |= e_t > e.min()
        seq = ["LEU" if b else "SER" for b in hm]
        expected = np.exp(-e_t / 0.5) / np.exp(-e / 0.5).sum()
        assert score(lattice_design(seq, xy))["confidence"] == pytest.approx(expected, rel=1e-9)
    assert seen_excited


def test_fixed_backbone_task_with_a_pluggable_scorer():
    task = fixed_backbone_task(n=8, n_h=4, nstruct=8, max_steps=2)
    env = RosettaEnv(task, HPBackend())
    start = env.trajectory[0].designs[0].metrics
    assert start["confidence"] < 0.01  # all-polar start
    calls = []

    def scorer(d):
        calls.append(d.sequence)
        return {"confidence": 0.5, "pred_rmsd_to_init": 1.0}

    custom = RosettaEnv(fixed_backbone_task(n=8, n_h=4, scorer=scorer), HPBackend())
    assert calls and custom.trajectory[0].designs[0].metrics["confidence"] == 0.5
    with pytest.raises(ValueError, match="scorer must return"):
        RosettaEnv(fixed_backbone_task(n=8, n_h=4, scorer=lambda d: {}), HPBackend())
