"""Tests with power at n >= 4: the cap-overshoot family, perturbations of it, the adversary with
totals at n = 4, and planted bugs that the harness must catch (each guarantee's test is run
against a deliberately broken policy and has to report the violation)."""

import icml26_online_fair as of
import numpy as np
import pytest


def _norm(inst):
    return of.NormalizationInfo.exact(inst)


class HalfCapGreedy(of.CappedGreedy):
    """Planted bug (issue 31): eligibility have + u/2 <= cap instead of have + u <= cap.
    PROP1 for n <= 3, not for n >= 4."""

    def allocate(self, t, values):
        u = self._normalised(values)
        eligible = (self.have + u / 2 <= self.cap * (1 + 1e-9)) & (self.totals > 0)
        a = int(np.argmax(np.where(eligible, u, -np.inf))) if eligible.any() else int(np.argmax(u))
        self.have[a] += u[a]
        return a


def _perturbed_overshoot(rng, n):
    """An overshoot instance with the victim's values jittered down (her slack moved to her last
    good), agents relabelled and the number of goods per agent varied."""
    inst = of.overshoot_instance(
        n, k=int(rng.integers(2, n // 2 + 1)), delta=float(rng.uniform(0.002, 0.05))
    )
    v = inst.values.copy()
    v[n - 1, :-1] *= rng.uniform(0.9, 1.0, inst.m - 1)
    v[n - 1, -1] = 1.0 - v[n - 1, :-1].sum()
    return of.OnlineInstance(v[rng.permutation(n)])


def test_overshoot_family_catches_the_half_cap_bug_from_n_4():
    expected = {4: 0.70, 5: 0.67, 6: 0.46}
    for n in range(2, 9):
        inst = of.overshoot_instance(n)
        good = of.divide_online(of.CappedGreedy(), inst, _norm(inst))
        bad = of.divide_online(HalfCapGreedy(), inst, _norm(inst))
        assert of.prop1_ratio(inst.values, good) == 1.0
        if n <= 3:
            assert of.prop1_ratio(inst.values, bad) == 1.0  # no room below n = 4
        else:
            assert of.prop1_ratio(inst.values, bad) < 0.75
        if n in expected:
            assert of.prop1_ratio(inst.values, bad) == pytest.approx(expected[n], abs=0.01)
    # ThresholdGreedy overshoots too: the family refutes it beyond its n = 3 counterexample
    inst = of.overshoot_instance(4)
    assert (
        of.prop1_ratio(inst.values, of.divide_online(of.ThresholdGreedy(), inst, _norm(inst))) < 1
    )


def test_the_old_small_grids_could_not_see_the_half_cap_bug():
    # why the family is needed: the n = 2, 3 exhaustive grids pass the planted bug
    for n, m, grid in [(2, 4, [0, 1, 2]), (3, 3, [0, 1])]:
        assert of.exhaustive_check(HalfCapGreedy(), n, m, grid, "prop1", _norm)[0] == 1.0


def test_capped_greedy_on_perturbed_overshoot_instances():
    rng = np.random.default_rng(0)
    caught = 0
    for _ in range(40):
        inst = _perturbed_overshoot(rng, int(rng.integers(4, 8)))
        assert (
            of.prop1_ratio(inst.values, of.divide_online(of.CappedGreedy(), inst, _norm(inst)))
            == 1.0
        )
        caught += (
            of.prop1_ratio(inst.values, of.divide_online(HalfCapGreedy(), inst, _norm(inst))) < 1
        )
    assert caught >= 25  # 28 of 40 at this seed


@pytest.mark.parametrize("n", [4, 5])
def test_capped_greedy_prop1_at_n_4_and_5_random_orders_and_blocks(n):
    # the family's goods in random arrival orders: still PROP1
    rng = np.random.default_rng(n)
    inst = of.overshoot_instance(n)
    for _ in range(60):
        shuffled = inst.with_order(rng.permutation(inst.m))
        alloc = of.divide_online(of.CappedGreedy(), shuffled, _norm(shuffled))
        assert of.prop1_ratio(inst.values, alloc) == 1.0


def test_adversary_with_totals_at_n_4():
    r, values, _ = of.adversary_search(
        of.CappedGreedy(), 4, 4, [0, 1], "prop1", totals=[2, 2, 2, 2]
    )
    assert r == 1.0
    assert np.allclose(values.sum(1), 2)


@pytest.mark.slow
def test_adversary_with_totals_at_n_4_larger():
    r, _, _ = of.adversary_search(of.CappedGreedy(), 4, 5, [0, 1], "prop1", totals=[3, 3, 3, 3])
    assert r == 1.0
    assert of.exhaustive_check(of.CappedGreedy(), 4, 3, [0, 1, 2], "prop1", _norm)[0] == 1.0


def _noisy_overshoot(eps, k=40, delta=0.002):
    """n = 3, totals all 1 but predicted as 1 + ε: two agents take small goods (a each) the victim
    values at a (1 - δ) until their normalised bundle reaches the cap; the victim's rest arrives
    last. Without slack each taker ends at (1 + ε)/3 of her true total."""
    a = (1 + eps) / 3 / k * (1 - 1e-6)
    cols = []
    for j in (0, 1):
        for _ in range(k):
            c = np.zeros(3)
            c[j], c[2] = a, a * (1 - delta)
            cols.append(c)
    for j in (0, 1):
        c = np.zeros(3)
        c[j] = 1 - k * a
        cols.append(c)
    cols.append(np.array([0.0, 0.0, 1 - 2 * k * a * (1 - delta)]))
    inst = of.OnlineInstance(np.stack(cols, 1))
    return inst, of.NormalizationInfo(inst.values.sum(1) * (1 + eps), eps)


@pytest.mark.parametrize("eps", [0.2, 0.25, 0.3])
def test_noisy_totals_need_the_slack(eps):
    # the robust cap 1/(n(1+ε)) keeps (1-ε)/(1+ε)-PROP1; a cap that ignores the declared error
    # (the planted bug "slack = 0") falls below it at n = 3, and only keeps its own weaker bound
    inst, info = _noisy_overshoot(eps)
    robust = of.prop1_ratio(inst.values, of.divide_online(of.CappedGreedy(), inst, info))
    naive = of.prop1_ratio(inst.values, of.divide_online(of.CappedGreedy(slack=0.0), inst, info))
    assert robust >= of.CappedGreedy.guarantee(3, eps)[1] - 1e-9
    assert naive < (1 - eps) / (1 + eps)
    assert naive >= of.CappedGreedy.guarantee(3, eps, slack=0.0)[1] - 1e-9


def test_mms_threshold_greedy_closes_agents_at_share_over_n():
    # agent 0 takes g1 (worth 0.61 of her share) and would go on to take g2 if she stayed open
    # until her full share (a planted bug: threshold ŝ instead of ŝ/n); agent 1 would then end
    # with 0.4 of her MMS. The 1/n threshold closes agent 0 after g1, in every arrival order.
    v = np.array([[0.61, 1.0, 0.0, 0.39], [0.6, 1.0, 0.4, 0.0]])
    inst = of.OnlineInstance(v)
    pred = of.FrequencyPrediction(v, "per_agent")
    r, _ = of.worst_order(of.MMSThresholdGreedy(mms="exact"), inst, pred, "mms")
    assert r >= 0.5 - 1e-9
