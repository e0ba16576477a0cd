"""Pareto fronts (brute force and paretoset side by side) and Kabsch RMSD identities."""

import itertools

import numpy as np
import pytest
from icml26_agent_rosetta import ideal_helix_ca, kabsch_rmsd, pareto_front


def brute_front(v, sense):
    s = np.array([1 if x == "min" else -1 for x in sense])
    w = v * s
    keep = []
    for i in range(len(w)):
        dominated = any(
            all(w[j, k] <= w[i, k] for k in range(w.shape[1]))
            and any(w[j, k] < w[i, k] for k in range(w.shape[1]))
            for j in range(len(w))
        )
        keep.append(not dominated)
    return np.array(keep)


@pytest.mark.parametrize("seed", range(6))
def test_pareto_front_vs_brute_force(seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 6, size=(40, 3)).astype(float)  # many ties and duplicates
    sense = ["min", "max", "min"]
    assert (pareto_front(v, sense) == brute_front(v, sense)).all()


@pytest.mark.parametrize("seed", range(4))
def test_pareto_front_vs_paretoset(seed):
    pd = pytest.importorskip("pandas")
    paretoset = pytest.importorskip("paretoset").paretoset
    rng = np.random.default_rng(100 + seed)
    v = np.round(rng.normal(size=(60, 3)), 1)
    sense = ["min", "min", "max"]
    ref = paretoset(pd.DataFrame(v), sense=sense, distinct=False)
    assert (pareto_front(v, sense) == np.asarray(ref)).all()


def test_pareto_front_bad_input():
    with pytest.raises(ValueError, match="sense"):
        pareto_front(np.zeros((3, 2)), ["min"])
    with pytest.raises(ValueError, match="finite"):
        pareto_front(np.array([[0.0, np.nan]]), ["min", "min"])


def _rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_kabsch_rigid_motion_is_zero_and_symmetric():
    rng = np.random.default_rng(0)
    p = ideal_helix_ca(12)
    q = p @ _rotation(rng).T + rng.normal(size=3) * 10
    assert kabsch_rmsd(p, q) == pytest.approx(0.0, abs=1e-6)
    r = p + rng.normal(scale=0.7, size=p.shape)
    assert kabsch_rmsd(p, r) == pytest.approx(kabsch_rmsd(r, p), rel=1e-9)
    # superposition never does worse than the raw (centred) RMSD
    raw = np.sqrt((((p - p.mean(0)) - (r - r.mean(0))) ** 2).sum(1).mean())
    assert kabsch_rmsd(p, r) <= raw + 1e-12


def test_kabsch_proper_rotations_only():
    # a mirror image of a chiral helix cannot be superposed by a rotation
    p = ideal_helix_ca(12)
    mirror = p * np.array([1.0, 1.0, -1.0])
    assert kabsch_rmsd(p, mirror) > 1.0


def test_kabsch_closed_form_for_a_uniform_offset_along_one_coordinate():
    # p and q differ by scaling one axis: after superposition the optimum is the axis residual
    p = np.array([[-1.0, 0, 0], [1.0, 0, 0], [0, -2.0, 0], [0, 2.0, 0]])
    q = p * np.array([1.0, 1.5, 1.0])
    # best rotation is the identity here (both symmetric about the axes): RMSD = sqrt(2·1²/4)
    assert kabsch_rmsd(p, q) == pytest.approx(np.sqrt(2 * 1.0**2 / 4))


def test_ideal_helix_geometry():
    ca = ideal_helix_ca(10)
    d = np.linalg.norm(np.diff(ca, axis=0), axis=1)
    assert d == pytest.approx(np.full(9, 3.83), abs=0.01)  # CA-CA virtual bond
    i3 = np.linalg.norm(ca[3:] - ca[:-3], axis=1)  # i, i+3 ≈ 5.0-5.4 Å in α-helices
    assert ((i3 > 4.8) & (i3 < 5.5)).all()


@pytest.mark.parametrize(("n", "m"), list(itertools.product([1, 5], [1, 2])))
def test_pareto_small_shapes(n, m):
    v = np.arange(n * m, dtype=float).reshape(n, m)
    assert pareto_front(v, ["min"] * m).sum() == 1


def test_reference_energies_recover_per_type_terms_and_compare_sequences():
    from icml26_agent_rosetta.metrics import fit_reference_energies, reference_corrected

    types = ["ALA", "GLU", "LEU", "LYS"]
    true_r = {"ALA": -40.0, "GLU": -190.0, "LEU": -138.0, "LYS": -60.0}
    rng = np.random.default_rng(0)
    seqs = [list(rng.choice(types, size=8)) for _ in range(30)]
    # energy = composition part + a design part (here: +-5 kJ/mol per sequence)
    quality = rng.normal(0.0, 5.0, size=30)
    energies = [sum(true_r[s] for s in q) + d for q, d in zip(seqs, quality)]
    ref = fit_reference_energies(seqs, energies, types)
    for t in types:  # 30 x 4 least squares, noise 5: each term within ~3 kJ/mol
        assert ref[t] == pytest.approx(true_r[t], abs=3.0)
    # poly-Glu is 1200 kJ/mol "better" than poly-Ala in absolute energy, not as a design
    e_ala, e_glu = 8 * true_r["ALA"] + 1.0, 8 * true_r["GLU"] + 1.0
    assert e_glu < e_ala - 1000
    a, g = (
        reference_corrected(["ALA"] * 8, e_ala, ref),
        reference_corrected(["GLU"] * 8, e_glu, ref),
    )
    assert abs(a - g) < 50
    with pytest.raises(ValueError, match="no reference energy"):
        reference_corrected(["TRP"], 0.0, ref)
    with pytest.raises(ValueError, match="equal length"):
        fit_reference_energies(seqs, energies[:3], types)
