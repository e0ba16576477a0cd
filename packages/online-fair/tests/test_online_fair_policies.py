"""Online policies: each stated guarantee checked exhaustively on small grids and on random
instances; each stated failure exhibited."""

import icml26_online_fair as of
import numpy as np
import pytest


def _norm(inst):
    return of.NormalizationInfo.exact(inst)


# ----------------------------------------------------------------------------- loop and model
def test_divide_online_follows_the_arrival_order():
    inst = of.OnlineInstance(np.array([[1.0, 5.0, 2.0], [2.0, 1.0, 4.0]]), order=[2, 0, 1])
    alloc = of.divide_online(of.GreedyPolicy(), inst)
    assert [h[1] for h in alloc.history] == [2, 0, 1]
    assert alloc.owner.tolist() == [1, 0, 1]
    assert alloc.to_dict() == {0: [1], 1: [0, 2]}
    assert np.allclose(alloc.bundle_values(inst.values), [[5.0, 3.0], [1.0, 6.0]])
    rr = of.divide_online(of.RoundRobinPolicy(), inst)
    assert [h[2] for h in rr.history] == [0, 1, 0]


def test_stream_round_trip_and_random_policy_is_reproducible():
    inst = of.random_instance(3, 10, "heavy_tailed", rng=1)
    again = of.OnlineInstance.from_stream(v for _, _, v in inst.stream())
    assert np.array_equal(again.values, inst.values[:, inst.order])
    p = of.RandomPolicy(seed=5)
    a, b = of.divide_online(p, inst), of.divide_online(p, inst)
    assert np.array_equal(a.owner, b.owner)


# ----------------------------------------------------------------------------- normalization
def test_capped_greedy_is_prop1_on_every_small_grid_instance_and_order():
    for n, m, grid in [(2, 4, [0, 1, 2]), (3, 3, [0, 1])]:
        r, _ = of.exhaustive_check(of.CappedGreedy(), n, m, grid, "prop1", _norm)
        assert r == 1.0


@pytest.mark.slow
def test_capped_greedy_is_prop1_on_larger_grids():
    for n, m, grid in [(3, 3, [0, 1, 2]), (2, 5, [0, 1, 3]), (4, 3, [0, 1])]:
        r, _ = of.exhaustive_check(of.CappedGreedy(), n, m, grid, "prop1", _norm)
        assert r == 1.0


@pytest.mark.parametrize("kind", ["uniform", "correlated", "heavy_tailed", "bivalued"])
def test_capped_greedy_is_prop1_on_random_instances(kind):
    rng = np.random.default_rng(0)
    for n in (2, 3, 5):
        for _ in range(15):
            inst = of.random_instance(n, int(rng.integers(n, 40)), kind, rng)
            alloc = of.divide_online(of.CappedGreedy(), inst, _norm(inst))
            assert of.prop1_ratio(inst.values, alloc) == 1.0


def test_threshold_greedy_is_prop1_for_two_agents_exhaustively():
    r, _ = of.exhaustive_check(of.ThresholdGreedy(), 2, 4, [0, 1, 2], "prop1", _norm)
    assert r == 1.0


def test_threshold_greedy_fails_prop1_for_three_agents_but_keeps_its_bound():
    # [recon] refuted: agents 1 and 2 each overshoot 1/3 with a good agent 0 values 0.2-0.3
    v = np.array([[30, 20, 30, 20, 0], [31, 21, 0, 0, 48], [0, 0, 31, 21, 48]], dtype=float)
    inst = of.OnlineInstance(v)
    bad = of.divide_online(of.ThresholdGreedy(), inst, _norm(inst))
    r = of.prop1_ratio(v, bad)
    assert r < 1.0
    assert r >= of.ThresholdGreedy.guarantee(3)[1]  # 1/(n-1) = 1/2
    good = of.divide_online(of.CappedGreedy(), inst, _norm(inst))
    assert of.prop1_ratio(v, good) == 1.0


def test_threshold_greedy_respects_one_over_n_minus_one_on_random_orders():
    rng = np.random.default_rng(3)
    for n in (3, 4):
        worst = 1.0
        for _ in range(60):
            inst = of.random_instance(n, 12, "correlated", rng)
            alloc = of.divide_online(of.ThresholdGreedy(), inst, _norm(inst))
            worst = min(worst, of.prop1_ratio(inst.values, alloc))
        assert worst >= 1.0 / (n - 1) - 1e-12


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_capped_greedy_degrades_gracefully_with_noisy_totals(eps):
    rng = np.random.default_rng(int(eps * 10))
    for n in (2, 3, 5):
        robust = of.CappedGreedy.guarantee(n, eps)[1]  # slack = eps
        naive = of.CappedGreedy.guarantee(n, eps, slack=0.0)[1]
        assert robust == pytest.approx((1 - eps) / (1 + eps))
        assert naive == pytest.approx(max(0.0, min(1 - eps, 1 - (n - 1) * eps)))
        for _ in range(25):
            inst = of.random_instance(n, 30, "correlated", rng)
            info = of.NormalizationInfo.noisy(inst, eps, rng, mode="extreme")
            a = of.divide_online(of.CappedGreedy(), inst, info)
            b = of.divide_online(of.CappedGreedy(slack=0.0), inst, info)
            assert of.prop1_ratio(inst.values, a) >= robust - 1e-9
            assert of.prop1_ratio(inst.values, b) >= naive - 1e-9


def test_capped_greedy_noisy_bound_exhaustively():
    eps = 0.25
    bound = (1 - eps) / (1 + eps)
    for signs in ([1, -1], [-1, 1]):
        make = lambda inst, s=np.array(signs): of.NormalizationInfo(
            inst.values.sum(1) * (1 + eps * s), eps
        )
        r, _ = of.exhaustive_check(of.CappedGreedy(), 2, 3, [0, 1, 2], "prop1", make)
        assert r >= bound - 1e-9


# ----------------------------------------------------------------------------- per-agent frequencies
def test_mms_threshold_greedy_meets_one_over_n_mms_exhaustively():
    per_agent = lambda inst: of.FrequencyPrediction.exact(inst, "per_agent", rng=0)
    r2, _ = of.exhaustive_check(of.MMSThresholdGreedy(), 2, 4, [0, 1, 2], "mms", per_agent)
    assert r2 >= 0.5 - 1e-9


@pytest.mark.slow
def test_mms_threshold_greedy_three_agents_exhaustively():
    per_agent = lambda inst: of.FrequencyPrediction.exact(inst, "per_agent", rng=0)
    r3, _ = of.exhaustive_check(of.MMSThresholdGreedy(), 3, 3, [0, 1, 2], "mms", per_agent)
    assert r3 >= 1 / 3 - 1e-9


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_mms_threshold_greedy_random_with_noise(eps):
    rng = np.random.default_rng(7)
    for n in (2, 3):
        for mms in ("exact", "lpt"):
            pol = of.MMSThresholdGreedy(mms=mms)
            bound = pol.guarantee(n, eps)[1]
            for _ in range(4):
                inst = of.random_instance(n, 9, "heavy_tailed", rng)
                info = of.FrequencyPrediction.noisy(inst, eps, "per_agent", rng, mode="extreme")
                alloc = of.divide_online(pol, inst, info)
                assert of.mms_ratio(inst.values, alloc) >= bound - 1e-9


# ----------------------------------------------------------------------------- joint frequencies
@pytest.mark.parametrize(
    "offline", [of.round_robin, of.envy_cycle_elimination, of.mms_bag_filling, of.max_mms_ratio]
)
def test_plan_and_match_reproduces_the_offline_allocation(offline):
    rng = np.random.default_rng(11)
    for _ in range(5):
        inst = of.random_instance(3, 7, "uniform", rng)  # continuous values: no ties
        # prediction listing the goods in id order: the online result is offline(values) bit for bit
        pred = of.FrequencyPrediction(inst.values, "joint")
        alloc = of.divide_online(of.PlanAndMatch(offline), inst, pred)
        assert np.array_equal(alloc.owner, offline(inst.values))
        # shuffled prediction: every good goes to the planned owner of its identical twin
        shuffled = of.FrequencyPrediction.exact(inst, "joint", rng)
        pol = of.PlanAndMatch(offline)
        alloc = of.divide_online(pol, inst, shuffled)
        for t, g, a in alloc.history:
            assert np.array_equal(shuffled.values[:, pol.matched[t]], inst.values[:, g])
            assert a == pol.plan[pol.matched[t]]
        assert pol.max_distance == 0.0


def test_plan_and_match_gives_each_agent_her_planned_multiset_with_ties():
    rng = np.random.default_rng(12)
    for _ in range(20):
        inst = of.random_instance(2, 6, "bivalued", rng)  # many identical goods
        pred = of.FrequencyPrediction.exact(inst, "joint", rng)
        pol = of.PlanAndMatch(of.envy_cycle_elimination)
        alloc = of.divide_online(pol, inst, pred)
        got = sorted((tuple(inst.values[:, g]), int(alloc.owner[g])) for g in range(inst.m))
        plan = sorted((tuple(pred.values[:, k]), int(pol.plan[k])) for k in range(pred.m))
        assert got == plan
        assert of.is_fair(inst.values, alloc, "ef1")  # hence the offline guarantee transfers


def _joint(inst):
    return of.FrequencyPrediction.exact(inst, "joint", rng=0)  # shuffled: matching must find twins


_LIFTED = [(of.round_robin, "ef1", 1.0), (of.envy_cycle_elimination, "ef1", 1.0)]
_LIFTED += [(of.mms_bag_filling, "mms", 0.5)]


@pytest.mark.parametrize("offline, notion, alpha", _LIFTED)
def test_plan_and_match_lifts_the_offline_guarantee_exhaustively(offline, notion, alpha):
    # every grid instance x every arrival order (grid values: many identical goods)
    for n, m, grid in [(2, 3, [0, 1, 2]), (3, 3, [0, 1])]:
        r, _ = of.exhaustive_check(of.PlanAndMatch(offline), n, m, grid, notion, _joint)
        assert r >= alpha - 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("offline", [of.round_robin, of.envy_cycle_elimination])
def test_plan_and_match_is_ef1_on_a_larger_grid(offline):
    r, _ = of.exhaustive_check(of.PlanAndMatch(offline), 2, 4, [0, 1, 2], "ef1", _joint)
    assert r == 1.0


def test_plan_and_match_noisy_bound_exhaustively():
    # grid {0, 1, 4} with ε = 0.2: bands of distinct values never overlap, so the lifted EF1 bound
    # (1-ε)/(1+ε) must hold on every instance x order (noise at the band's ends)
    eps = 0.2
    rng = np.random.default_rng(0)
    noisy = lambda inst: of.FrequencyPrediction.noisy(inst, eps, "joint", rng, mode="extreme")
    r, _ = of.exhaustive_check(of.PlanAndMatch(of.round_robin), 2, 3, [0, 1, 4], "ef1", noisy)
    assert r >= (1 - eps) / (1 + eps) - 1e-9


@pytest.mark.parametrize("eps", [0.05, 0.2, 0.35])
def test_plan_and_match_noisy_predictions_keep_the_degraded_bound(eps):
    rng = np.random.default_rng(int(100 * eps))
    for _ in range(6):
        v = rng.choice([1.0, 4.0, 16.0], (2, 6))  # true types 4x apart: bands never mix types
        inst = of.OnlineInstance(v, rng.permutation(6))
        pred = of.FrequencyPrediction.noisy(inst, eps, "joint", rng, mode="extreme")
        pol = of.PlanAndMatch(of.mms_bag_filling)
        alloc = of.divide_online(pol, inst, pred)
        assert pol.max_distance <= eps + 1e-12  # every good matched inside its band
        plan_ratio = of.mms_ratio(pred.values, pol.plan)
        assert plan_ratio >= 0.5 - 1e-9
        assert of.mms_ratio(v, alloc) >= plan_ratio * (1 - eps) / (1 + eps) - 1e-9
        env = of.divide_online(of.PlanAndMatch(of.envy_cycle_elimination), inst, pred)
        assert of.ef1_ratio(v, env) >= (1 - eps) / (1 + eps) - 1e-9


def test_plan_and_match_per_type_noise_when_predictions_separate():
    eps = 0.2
    rng = np.random.default_rng(5)
    types = np.array([[1.0, 5.0, 1.0], [2.0, 2.0, 9.0]])  # (n, K) distinct good types
    factor = 1 + eps * rng.choice([-1.0, 1.0], types.shape)
    for _ in range(5):
        ids = rng.integers(0, 3, 7)
        inst = of.OnlineInstance(types[:, ids], rng.permutation(7))
        pred = of.FrequencyPrediction((types * factor)[:, rng.permutation(ids)], "joint", eps)
        assert of.predictions_separated(pred.values, eps)
        pol = of.PlanAndMatch(of.max_mms_ratio)
        alloc = of.divide_online(pol, inst, pred)
        assert pol.max_distance <= eps + 1e-12
        bound = min(1.0, of.mms_ratio(pred.values, pol.plan)) * (1 - eps) / (1 + eps)
        assert of.mms_ratio(inst.values, alloc) >= bound - 1e-9


def test_separation_check():
    assert of.predictions_separated(np.array([[1.0, 4.0], [1.0, 1.0]]), 0.2)
    assert not of.predictions_separated(np.array([[1.0, 1.1], [1.0, 1.0]]), 0.2)
    assert of.predictions_separated(np.array([[1.0, 0.0], [1.0, 1.0]]), 0.2)


# ----------------------------------------------------------------------------- bad input
def test_information_that_contradicts_the_instance_is_rejected():
    inst = of.OnlineInstance(np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]))
    with pytest.raises(ValueError, match="totals do not match the values"):
        of.divide_online(of.CappedGreedy(), inst, of.NormalizationInfo(np.array([6.0, 7.0])))
    with pytest.raises(ValueError, match="instance has 2 agents"):
        of.divide_online(of.CappedGreedy(), inst, of.NormalizationInfo(np.ones(3)))
    of.divide_online(of.CappedGreedy(), inst, of.NormalizationInfo(np.array([6.0, 6.5]), 0.1))
    with pytest.raises(ValueError, match="wrong size"):
        of.divide_online(
            of.PlanAndMatch(of.round_robin), inst, of.FrequencyPrediction(np.ones((2, 4)))
        )
    with pytest.raises(ValueError, match="not within rel_error"):
        of.divide_online(
            of.PlanAndMatch(of.round_robin), inst, of.FrequencyPrediction(np.ones((2, 3)))
        )
    with pytest.raises(ValueError, match="agent 0 is not within"):
        bad = of.FrequencyPrediction(np.array([[1.0, 2.0, 4.0], [3.0, 2.0, 1.0]]), "per_agent")
        of.divide_online(of.MMSThresholdGreedy(), inst, bad)


def test_bad_values_and_parameters_are_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        of.OnlineInstance(np.array([[1.0, -0.5]]))
    with pytest.raises(ValueError, match="permutation"):
        of.OnlineInstance(np.ones((2, 3)), order=[0, 0, 1])
    with pytest.raises(ValueError, match="rel_error must be in"):
        of.NormalizationInfo(np.ones(2), rel_error=1.5)
    with pytest.raises(ValueError, match="kind must be"):
        of.FrequencyPrediction(np.ones((2, 2)), kind="marginal")
    with pytest.raises(ValueError, match="kind must be"):
        of.random_instance(2, 3, "gaussian")
    with pytest.raises(ValueError, match="slack must be"):
        of.CappedGreedy(slack=2.0)
    with pytest.raises(TypeError, match="needs info=NormalizationInfo"):
        of.divide_online(of.CappedGreedy(), of.random_instance(2, 3, rng=0), None)
    with pytest.raises(TypeError, match="joint FrequencyPrediction"):
        inst = of.random_instance(2, 3, rng=0)
        of.divide_online(
            of.PlanAndMatch(of.round_robin), inst, of.FrequencyPrediction.exact(inst, "per_agent")
        )
    with pytest.raises(ValueError, match="1-D value vector"):
        of.GreedyPolicy().allocate(0, np.ones((2, 2)))

    class Broken:
        def reset(self, info=None):
            pass

        def allocate(self, t, values):
            return 7

    with pytest.raises(RuntimeError, match="expected an agent"):
        of.divide_online(Broken(), of.random_instance(2, 3, rng=0))
