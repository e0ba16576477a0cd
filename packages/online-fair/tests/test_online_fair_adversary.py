"""Impossibility results by minimax search, and the adversary search against policy families."""

import icml26_online_fair as of
import numpy as np
import pytest

GEOMETRIC = [0, 1, 3, 9]


@pytest.fixture(scope="module")
def ef1_game():
    return of.game_value(2, 4, GEOMETRIC, "ef1")


def _replays(pv, notion, value):
    values = np.stack([x for x, _ in pv], 1)
    owner = np.array([a for _, a in pv])
    return of.approx_ratio(values, owner, notion) == pytest.approx(value)


def test_no_information_ef1_is_not_guaranteed_by_any_algorithm(ef1_game):
    value, pv = ef1_game
    assert value < 1.0
    assert _replays(pv, "ef1", value)  # the principal variation reproduces the value


@pytest.mark.slow
def test_no_information_mms_and_propx_are_not_guaranteed_by_any_algorithm():
    for notion in ("mms", "propx"):
        value, pv = of.game_value(2, 4, GEOMETRIC, notion)
        assert value < 1.0
        assert _replays(pv, notion, value)


@pytest.mark.slow
def test_no_information_bound_shrinks_as_values_spread(ef1_game):
    # grid {0, 1, r, r^2}: the best EF1 ratio any algorithm can force drops with r
    v5, _ = of.game_value(2, 4, [0, 1, 5, 25], "ef1")
    assert v5 < ef1_game[0] < 1.0


@pytest.mark.parametrize(
    "policy", [of.GreedyPolicy(), of.RoundRobinPolicy(), of.RandomPolicy(0), of.RandomPolicy(1)]
)
def test_adversary_beats_every_no_information_policy(policy, ef1_game):
    r, values, owner = of.adversary_search(policy, 2, 4, GEOMETRIC, "ef1")
    assert r <= ef1_game[0] + 1e-12  # no policy beats the minimax value
    assert of.approx_ratio(values, owner, "ef1") == pytest.approx(r)
    # the found instance, replayed against the (reset) policy, gives the same allocation
    replay = of.divide_online(policy, of.OnlineInstance(values))
    assert np.array_equal(replay.owner, owner)


def test_optimal_grid_policy_attains_the_game_value(ef1_game):
    # both directions of the minimax computation: the adversary cannot push the solved policy
    # below the value, and (above) no policy is pushed above it
    policy = of.OptimalGridPolicy(2, 4, GEOMETRIC, "ef1")
    assert policy.value == ef1_game[0]
    r, _, _ = of.adversary_search(policy, 2, 4, GEOMETRIC, "ef1")
    assert r == pytest.approx(ef1_game[0])
    norm = of.OptimalGridPolicy(2, 4, [0, 1, 2, 3], "mms", totals=[6, 6])
    r, _, _ = of.adversary_search(norm, 2, 4, [0, 1, 2, 3], "mms", totals=[6, 6])
    assert r == pytest.approx(norm.value) and norm.value < 1.0
    with pytest.raises(ValueError, match="not on the policy's grid"):
        policy.reset()
        policy.allocate(0, np.array([2.0, 2.0]))


def test_prop1_ratio_floor_and_greedy_reaches_it():
    # v_i(A_i) + max_{g∉A_i} v_i(g) >= max_g v_i(g) >= v_i(M)/m, so no allocation has PROP1
    # ratio below n/m: "ratio 0" is impossible at fixed m; greedy is pushed to the floor n/m
    for m in (3, 4):
        r, _, _ = of.adversary_search(of.GreedyPolicy(), 2, m, [0, 1, 2], "prop1")
        assert r == pytest.approx(2 / m)
    # round robin ignores values: the adversary makes agent 1 value only agent 0's goods
    r, _, _ = of.adversary_search(of.RoundRobinPolicy(), 2, 5, [0, 1], "prop1")
    assert r == pytest.approx(2 / 3)


def test_normalization_prop1_game_value_is_one_and_capped_greedy_attains_it():
    for totals in ([2, 3], [4, 4]):
        value, _ = of.game_value(2, 4, [0, 1, 2], "prop1", totals=totals)
        assert value == 1.0
        r, _, _ = of.adversary_search(of.CappedGreedy(), 2, 4, [0, 1, 2], "prop1", totals=totals)
        assert r == 1.0


def test_normalization_does_not_rescue_mms():
    value, _ = of.game_value(2, 4, [0, 1, 2, 3], "mms", totals=[6, 6])
    assert value < 1.0
    r, _, _ = of.adversary_search(of.CappedGreedy(), 2, 4, [0, 1, 2, 3], "mms", totals=[6, 6])
    assert r <= value + 1e-12


def test_worst_order_of_threshold_greedy_with_three_agents():
    v = np.array([[30, 20, 30, 20, 0], [31, 21, 0, 0, 48], [0, 0, 31, 21, 48]], dtype=float)
    inst = of.OnlineInstance(v)
    info = of.NormalizationInfo.exact(inst)
    r, order = of.worst_order(of.ThresholdGreedy(), inst, info, "prop1")
    assert r < 1.0
    alloc = of.divide_online(of.ThresholdGreedy(), inst.with_order(order), info)
    assert of.prop1_ratio(v, alloc) == pytest.approx(r)
    assert of.worst_order(of.CappedGreedy(), inst, info, "prop1")[0] == 1.0


def test_search_arguments_are_validated():
    with pytest.raises(ValueError, match="grid must be"):
        of.game_value(2, 2, [-1, 1], "ef1")
    with pytest.raises(ValueError, match="m must be a positive integer"):
        of.adversary_search(of.GreedyPolicy(), 2, 0, [0, 1], "ef1")
    with pytest.raises(ValueError, match="totals must have shape"):
        of.game_value(2, 2, [0, 1], "prop1", totals=[1, 1, 1])
    with pytest.raises(ValueError, match="no instance on this grid"):
        of.game_value(2, 2, [0, 1], "prop1", totals=[5, 1])
    with pytest.raises(ValueError, match="m must be <= 9"):
        of.worst_order(of.GreedyPolicy(), of.random_instance(2, 10, rng=0))


# ----------------------------------------------------------------------------- certified, normalized
def _pv_instance(pv):
    return np.stack([x for x, _ in pv], 1), np.array([a for _, a in pv])


def test_remainder_game_certifies_mms_impossibility_with_normalization():
    # the last good carries exactly what is left: every play is a legal instance with totals
    # (12, 12), so 5/6 bounds every deterministic algorithm
    value, pv = of.game_value(2, 3, range(13), "mms", totals=[12, 12], remainder=True)
    assert value == pytest.approx(5 / 6)
    values, owner = _pv_instance(pv)
    assert np.array_equal(values.sum(1), [12, 12])
    assert of.mms_ratio(values, owner) == pytest.approx(value)
    # the remainder good lies off the grid in general; the solved policy attains the value
    policy = of.OptimalGridPolicy(2, 3, range(13), "mms", totals=[12, 12], remainder=True)
    assert policy.value == pytest.approx(value)


def test_remainder_game_value_falls_with_more_goods_and_finer_grids():
    # m = 4 reaches 2/3 (the known optimum, 1/2, needs more goods than this search reaches)
    v4, pv = of.game_value(2, 4, range(7), "mms", totals=[6, 6], remainder=True)
    assert v4 == pytest.approx(2 / 3)
    values, owner = _pv_instance(pv)
    assert np.array_equal(values.sum(1), [6, 6])
    assert of.mms_ratio(values, owner) == pytest.approx(v4)
    # monotone: a refinement by a factor contains the coarser game, one more good contains m
    v3_coarse = of.game_value(2, 4, range(4), "mms", totals=[3, 3], remainder=True)[0]
    v3 = of.game_value(2, 3, range(7), "mms", totals=[6, 6], remainder=True)[0]
    assert v4 <= v3_coarse and v4 <= v3
    assert v4 >= 0.5 - 1e-12  # never below the known achievable 1/2 (Zhou, Bai & Wu)


def test_remainder_game_prop1_stays_attainable():
    # CappedGreedy is PROP1 for every normalized instance, so the certified game value is 1
    assert of.game_value(2, 3, range(5), "prop1", totals=[4, 4], remainder=True)[0] == 1.0


def test_searches_refuse_sizes_they_cannot_finish():
    with pytest.raises(ValueError, match="game search too large"):
        of.game_value(3, 6, range(10), "mms")
    with pytest.raises(ValueError, match="game search too large"):
        of.OptimalGridPolicy(3, 6, range(10), "mms")
    with pytest.raises(ValueError, match="exhaustive_check too large"):
        of.exhaustive_check(of.GreedyPolicy(), 4, 8, [0, 1, 2], "prop1")
    with pytest.raises(ValueError, match="adversary_search too large"):
        of.adversary_search(of.GreedyPolicy(), 3, 9, [0, 1, 2, 3], "prop1")
    with pytest.raises(ValueError, match="remainder=True needs totals"):
        of.game_value(2, 2, [0, 1], "mms", remainder=True)
