import itertools

import icml26_sco_erm as sco
import numpy as np
import pytest


def _bruteforce_expected_g(W, x, p, theta):
    """E_V max{theta, max_{w in V} <w, x>} by enumerating all 2^N subsets V."""
    s, N, total = W @ x, W.shape[0], 0.0
    for bits in itertools.product((0, 1), repeat=N):
        b = np.array(bits, dtype=bool)
        prob = np.prod(np.where(b, p, 1 - p))
        total += prob * max(theta, s[b].max() if b.any() else -np.inf)
    return total


@pytest.fixture(scope="module")
def small():
    _G, C, _ = sco.good_code(24, 3, np.random.default_rng(1))  # 8 codewords in R^24
    return sco.codeword_vectors(C)


@pytest.mark.parametrize("p,theta", [(0.5, 0.5), (0.3, 0.6), (0.8, 0.55)])
def test_expected_g_closed_form_vs_enumeration(small, p, theta):
    inst = sco.FeldmanInstance(small, p=p, theta=theta)
    rng = np.random.default_rng(2)
    points = [small[0], 0.8 * small[3] + 0.2 * small[5], np.zeros(24)]
    points += [rng.standard_normal(24) * 0.3 for _ in range(3)]
    for x in points:
        x = x / max(1.0, np.linalg.norm(x))
        got = inst.expected_g(x)
        assert got == pytest.approx(_bruteforce_expected_g(small, x, p, theta), rel=1e-12)


def test_population_risk_at_codewords_and_zero(code8):
    C, _ = code8
    inst = sco.FeldmanInstance.from_code(C)
    for j in (0, 5, 300, 511):
        assert inst.population_risk(inst.W[j]) == pytest.approx(0.75, rel=1e-12)
    assert inst.population_risk(np.zeros(48)) == pytest.approx(0.5, rel=1e-12)
    assert inst.population_min == 0.5
    lam, alpha = 0.02, 0.3
    pert = sco.FeldmanInstance.from_code(C, alpha=alpha, lam=lam)
    a = 1 - alpha - lam
    assert pert.population_risk(pert.W[7]) == pytest.approx(a * 0.75 + lam / 2, rel=1e-12)
    assert pert.population_risk(np.zeros(48)) == pytest.approx(a * 0.5, rel=1e-12)


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_population_risk_matches_monte_carlo(code8, p):
    C, _ = code8
    inst = sco.FeldmanInstance.from_code(C, alpha=0.2, lam=0.05, p=p)
    rng = np.random.default_rng(3)
    x = 0.7 * inst.W[3] + 0.3 * inst.W[9]
    S = inst.sample(20000, rng)
    assert abs(S.masks.mean() - p) < 0.01
    mc = inst.losses(x, S)
    assert abs(mc.mean() - inst.population_risk(x)) < 4 * mc.std() / np.sqrt(mc.size)


def test_unseen_codeword_is_an_overfitting_empirical_minimiser(code8):
    C, _ = code8
    inst = sco.FeldmanInstance.from_code(C)
    rng = np.random.default_rng(4)
    for _ in range(20):
        S = inst.sample(8, rng)
        if inst.unseen(S).size:
            break
    w0 = inst.W[inst.unseen(S)[0]]
    assert inst.empirical_risk(w0, S) == 0.5  # the floor theta: no loss is below it
    assert inst.excess_risk(w0) == pytest.approx(0.25, rel=1e-12)
    seen = np.flatnonzero(S.masks.any(0))[0]
    assert inst.empirical_risk(inst.W[seen], S) > 0.5


def test_lipschitz_constant_is_one_analytic_sampled_and_tight(code8):
    C, _ = code8
    rng = np.random.default_rng(5)
    for alpha, lam in ((0.0, 0.0), (0.3, 0.05)):
        inst = sco.FeldmanInstance.from_code(C, alpha=alpha, lam=lam)
        S = inst.sample(4, rng)
        assert inst.lipschitz_bound() == pytest.approx(1.0, rel=1e-12)
        assert inst.sampled_lipschitz(S, rng, n=300) <= 1.0 + 1e-9
        assert np.linalg.norm(inst.subgradients(inst.W[0], S), axis=1).max() <= 1.0 + 1e-12
    # tight: along a codeword w in V the loss of Feldman's instance has slope exactly 1
    inst = sco.FeldmanInstance.from_code(C)
    S = inst.sample(1, rng)
    w = inst.W[np.flatnonzero(S.masks[0])[0]]
    slope = (inst.losses(w, S) - inst.losses(0.6 * w, S))[0] / 0.4
    assert slope == pytest.approx(1.0, rel=1e-12)


def test_convexity_on_random_chords(code8):
    C, _ = code8
    inst = sco.FeldmanInstance.from_code(C, alpha=0.3, lam=0.05)
    rng = np.random.default_rng(6)
    assert inst.convexity_defect(inst.sample(4, rng), rng, n=300) >= -1e-12


def test_bad_instance_arguments_raise(small, code8):
    _C, _ = code8
    with pytest.raises(ValueError, match="unit vectors"):
        sco.FeldmanInstance(2 * small)
    close = np.stack([small[0], small[0] + 0.1 * small[1]])
    close /= np.linalg.norm(close, axis=1, keepdims=True)
    with pytest.raises(ValueError, match="construction needs pairwise inner products"):
        sco.FeldmanInstance(close)
    _G, Cbad = sco.random_linear_code(12, 6, np.random.default_rng(0))  # distance < 12/4 likely
    if sco.min_distance(Cbad) < 3:
        with pytest.raises(ValueError, match="theta"):
            sco.FeldmanInstance.from_code(Cbad)
    with pytest.raises(ValueError, match="alpha \\+ lam < 1"):
        sco.FeldmanInstance(small, alpha=0.6, lam=0.5)
    inst = sco.FeldmanInstance(small)
    rng = np.random.default_rng(0)
    for m in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="m \\(sample size\\)"):
            inst.sample(m, rng)
    S = inst.sample(2, rng)
    with pytest.raises(ValueError, match="x must have shape"):
        inst.empirical_risk(np.zeros(5), S)
    with pytest.raises(ValueError, match="x must be finite"):
        inst.population_risk(np.full(24, np.nan))


@pytest.mark.parametrize("p,theta", [(0.5, 0.5), (0.3, 0.5), (0.8, 0.4)])
def test_expected_g_with_several_active_caps_vs_enumeration(small, p, theta):
    """Points inside 2, 3 and 4 caps at once (distinct values <w, x> > theta): the closed form's
    geometric weights p (1 - p)^(j - 1) must go to the values in *decreasing* order. Checked against
    enumeration of all 2^8 subsets V (independent of the closed form)."""
    inst = sco.FeldmanInstance(small, p=p, theta=theta)
    rng = np.random.default_rng(7)
    seen_counts = set()
    for n_mix in (2, 3, 4):
        for _ in range(4):
            idx = rng.choice(small.shape[0], size=n_mix, replace=False)
            coef = rng.uniform(0.4, 1.0, size=n_mix)
            x = coef @ small[idx]
            x /= np.linalg.norm(x)
            s = small @ x
            active = s[s > theta]
            if active.size < 2:
                continue
            assert np.unique(active).size == active.size  # distinct: the order matters
            seen_counts.add(int(active.size))
            want = _bruteforce_expected_g(small, x, p, theta)
            assert inst.expected_g(x) == pytest.approx(want, rel=1e-12)
    assert max(seen_counts) >= 3 and 2 in seen_counts  # the test really had multi-cap points
