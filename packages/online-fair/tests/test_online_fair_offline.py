"""Offline algorithms lifted by PlanAndMatch: each meets its guarantee."""

import itertools

import icml26_online_fair as of
import numpy as np
import pytest
from icml26_online_fair import notions as N


def _instances(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 4))
        m = int(rng.integers(1, 8))
        if rng.random() < 0.5:
            yield rng.integers(0, 5, (n, m)).astype(float)
        else:
            yield rng.uniform(0, 1, (n, m))


@pytest.mark.parametrize("alg", [of.round_robin, of.envy_cycle_elimination])
def test_ef1_algorithms_are_ef1(alg):
    for v in _instances(80, seed=1):
        owner = alg(v)
        assert N.is_fair_ref(v, owner, "ef1")
        assert N.is_fair_ref(v, owner, "prop1")


def test_bag_filling_is_half_mms():
    for v in _instances(60, seed=2):
        assert of.mms_ratio(v, of.mms_bag_filling(v)) >= 0.5 - 1e-9


def test_max_mms_ratio_is_optimal_by_brute_force():
    for v in _instances(25, seed=3):
        n, m = v.shape
        if n**m > 3000:
            continue
        mms = of.mms_values(v)
        best = max(of.mms_ratio(v, o, mms) for o in N.all_allocations(n, m))
        assert abs(of.mms_ratio(v, of.max_mms_ratio(v, mms), mms) - best) < 1e-7


def test_fairpyx_adapter_matches_our_round_robin():
    fairpyx = pytest.importorskip("fairpyx")
    from fairpyx.algorithms import round_robin as fairpyx_round_robin

    rng = np.random.default_rng(4)
    wrapped = of.fairpyx_offline(fairpyx_round_robin)
    for _ in range(5):
        v = rng.uniform(0, 1, (3, 9))
        assert np.array_equal(wrapped(v), of.round_robin(v))
    assert fairpyx is not None


def test_fairpyx_adapter_rejects_non_callable():
    with pytest.raises(TypeError, match="algorithm must be"):
        of.fairpyx_offline("round_robin")


def test_share_based_lift_reaches_the_offline_optimum_in_every_order():
    # joint frequency predictions: PlanAndMatch(max_mms_ratio) attains, online and in every
    # arrival order, the best MMS ratio any allocation of the instance has (brute force over all
    # n^m allocations), so every offline α-MMS bound (1/2, 3/4, ...) transfers
    rng = np.random.default_rng(9)
    for _ in range(4):
        n, m = 3, 4
        v = rng.integers(0, 4, (n, m)).astype(float)
        mms = of.mms_values(v)
        best = max(of.mms_ratio(v, o, mms) for o in N.all_allocations(n, m))
        pred = of.FrequencyPrediction.exact(of.OnlineInstance(v), "joint", rng)
        policy = of.PlanAndMatch(lambda x: of.max_mms_ratio(x))
        for order in itertools.permutations(range(m)):
            alloc = of.divide_online(policy, of.OnlineInstance(v, order), pred)
            assert of.mms_ratio(v, alloc, mms) == pytest.approx(best)
