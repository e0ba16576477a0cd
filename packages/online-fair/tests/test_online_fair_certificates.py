"""Exact certificates beyond deterministic minimax: the per-agent reading solved exactly, and the
sequence-form LP that bounds randomised algorithms. Every expected value here is checked by a
computation written in this file (brute-force MMS, brute force over linkings and orders, a
best-response recursion), not by the package's own solver."""

import itertools

import icml26_online_fair as of
import numpy as np
import pytest
from icml26_online_fair.per_agent import (
    PerAgentOptimalPolicy,
    per_agent_game_value,
    per_agent_worst_value,
)
from icml26_online_fair.randomised import randomised_game_value

TOL = 1e-6  # HiGHS primal/dual feasibility tolerances are 1e-7 on payoffs in [0, 1]; 10x margin


def _mms(row, n):
    """Brute-force maximin share: every assignment of the goods to n bundles."""
    row = list(row)
    best = 0.0
    for lab in itertools.product(range(n), repeat=len(row)):
        best = max(best, min(sum(x for x, b in zip(row, lab) if b == k) for k in range(n)))
    return best


def _ratio(values, owner, notion):
    """min_i min(1, v_i(A_i) / share_i) with brute-force shares (agents with share 0 are happy)."""
    n = values.shape[0]
    r = 1.0
    for i in range(n):
        share = _mms(values[i], n) if notion == "mms" else values[i].sum() / n
        have = sum(values[i, g] for g in range(values.shape[1]) if owner[g] == i)
        if share > 0:
            r = min(r, have / share)
    return r


# ----------------------------------------------------------------------------- per-agent reading
def _linkings(p):
    """Every instance (n, m) whose rows are the multisets p, goods in id order."""
    n, m = p.shape
    for perms in itertools.product(itertools.permutations(range(m)), repeat=n - 1):
        yield np.stack([p[0]] + [p[j + 1][list(q)] for j, q in enumerate(perms)])


def _naive_minimax(p, notion):
    """min over the next good (one remaining value per agent) of max over its owner, over the
    ordered history, no memo: what the best deterministic online algorithm can guarantee."""
    n, m = p.shape

    def rec(rem, cols, owners):
        if len(cols) == m:
            return _ratio(np.array(cols).T, owners, notion)
        worst = 2.0
        for x in itertools.product(*(sorted(set(r)) for r in rem)):
            nrem = []
            for r, xi in zip(rem, x):
                r = list(r)
                r.remove(xi)
                nrem.append(r)
            worst = min(worst, max(rec(nrem, [*cols, x], [*owners, a]) for a in range(n)))
        return worst

    return rec([list(r) for r in p], [], [])


PER_AGENT_CASES = [
    ([[1, 1, 1, 2], [2, 2, 1, 1]], "mms"),
    ([[0, 3, 2, 3], [2, 2, 3, 2]], "mms"),
    ([[2, 2, 1], [2, 2, 1]], "prop"),
    ([[2, 1, 1], [1, 1, 1], [1, 1, 1]], "prop"),
    ([[1, 2, 1], [0, 2, 2], [2, 0, 0]], "mms"),
]


@pytest.mark.parametrize("p,notion", PER_AGENT_CASES)
def test_per_agent_policy_attains_the_game_value_by_brute_force(p, notion):
    p = np.array(p, dtype=float)
    value = per_agent_game_value(p, notion)
    pred = of.FrequencyPrediction(p, "per_agent")
    policy = PerAgentOptimalPolicy(notion)
    worst = 2.0
    for v in _linkings(p):  # every linking of the rows and every arrival order
        for order in itertools.permutations(range(p.shape[1])):
            inst = of.OnlineInstance(v, order)
            alloc = of.divide_online(policy, inst, pred)
            worst = min(worst, _ratio(v, alloc.owner, notion))
    assert policy.value == pytest.approx(value)
    assert worst == pytest.approx(value)  # guaranteed on every instance, and attained
    if p.shape[1] <= 3:  # no online algorithm does better (independent minimax)
        assert _naive_minimax(p, notion) == pytest.approx(value)


def test_per_agent_game_value_below_one_where_hand_computed():
    # PROP, both agents {2, 2, 1}: share 5/2. If the 2s are linked (goods (2,2), (2,2), (1,1)),
    # one agent ends with at most 2 (of the 2+2+1 she values), so no allocation beats 2/(5/2) = 0.8
    p = np.array([[2, 2, 1], [2, 2, 1]], dtype=float)
    assert per_agent_game_value(p, "prop") == pytest.approx(0.8)
    # one good for two agents: whoever misses it has 0
    assert per_agent_game_value(np.array([[1.0], [1.0]]), "prop") == 0.0


def test_per_agent_reading_guarantees_full_mms_at_the_sizes_solved():
    # the exact per-agent guarantee (worst over every multiset profile on the grid) is 1 here,
    # while MMSThresholdGreedy (1/n proven) drops to 1/2 on a profile of that grid
    value, _ = per_agent_worst_value(2, 4, [0, 1, 2, 3], "mms")
    assert value == pytest.approx(1.0)
    value3, _ = per_agent_worst_value(3, 3, [0, 1, 2], "mms")
    assert value3 == pytest.approx(1.0)
    p = np.array([[1, 1, 1, 2], [2, 2, 1, 1]], dtype=float)
    pred = of.FrequencyPrediction(p, "per_agent")
    greedy = min(
        of.worst_order(of.MMSThresholdGreedy(mms="exact"), of.OnlineInstance(v), pred, "mms")[0]
        for v in _linkings(p)
    )
    assert greedy == pytest.approx(0.5)


def test_per_agent_policy_rejects_a_wrong_prediction():
    p = np.array([[1.0, 2.0], [2.0, 1.0]])
    policy = PerAgentOptimalPolicy()
    policy.reset(of.FrequencyPrediction(p, "per_agent"))
    with pytest.raises(ValueError, match="not left in her predicted multiset"):
        policy.allocate(0, np.array([3.0, 1.0]))
    with pytest.raises(ValueError, match="kind='per_agent'"):
        per_agent_game_value(of.FrequencyPrediction(p, "joint"))
    with pytest.raises(ValueError, match="share-based"):
        per_agent_game_value(p, "ef1")
    with pytest.raises(ValueError, match="too large"):
        per_agent_game_value(np.ones((3, 7)))


# ----------------------------------------------------------------------------- randomised LP
def _best_response(cert, notion="mms"):
    """max over deterministic online algorithms of E_{I ~ mixture}[ratio]: at each information
    set (vectors seen, own choices) pick the owner maximising the conditional expected payoff."""
    inst, y, vecs = cert.instances, cert.mixture, cert.vectors
    m = inst.shape[1]
    payoff: dict = {}

    def rec(idx, t, owners):
        if t == m:
            total = 0.0
            for i in idx:
                key = (int(i), tuple(owners))
                if key not in payoff:
                    payoff[key] = _ratio(vecs[inst[i]].T, owners, notion)
                total += y[i] * payoff[key]
            return total
        out = 0.0
        for k in np.unique(inst[idx, t]):
            sub = idx[inst[idx, t] == k]
            out += max(rec(sub, t + 1, [*owners, a]) for a in range(vecs.shape[1]))
        return out

    return rec(np.flatnonzero(y > 1e-12), 0, [])


def _strategy_payoffs(cert, notion="mms"):
    """E[ratio] of the LP's behaviour strategy on every instance, by enumerating its coins."""
    n = cert.vectors.shape[1]
    out = []
    for seq in cert.instances.tolist():
        values = cert.vectors[seq].T
        e = 0.0
        for owners in itertools.product(range(n), repeat=len(seq)):
            prob, hist = 1.0, ()
            for k, a in zip(seq, owners):
                prob *= cert.behaviour[(hist, k)][a]
                hist = (*hist, (k, a))
            if prob > 0:
                e += prob * _ratio(values, owners, notion)
        out.append(e)
    return np.array(out)


def test_randomised_lp_value_is_certified_from_both_sides():
    # MMS, n = 2, normalization (totals (10, 10)), 3 goods, the last one the remainder
    cert = randomised_game_value(2, 3, range(11), "mms", totals=[10, 10], remainder=True)
    det, _ = of.game_value(2, 3, range(11), "mms", totals=[10, 10], remainder=True)
    assert det == pytest.approx(0.8)
    assert cert.value == pytest.approx(0.9, abs=TOL)
    # lower side: the behaviour strategy gets >= value in expectation on every instance
    pay = _strategy_payoffs(cert)
    assert pay.min() >= cert.value - TOL
    # upper side (Yao): against the adversary's mixture no deterministic algorithm, hence no
    # randomised one, gets more than the value in expectation
    assert cert.mixture.sum() == pytest.approx(1.0)
    assert _best_response(cert) <= cert.value + TOL
    # randomisation helps against the oblivious adversary: strictly above the deterministic 0.8
    assert cert.value > det + 0.05


def test_randomised_lp_instances_are_legal_normalized_instances():
    cert = randomised_game_value(2, 3, range(7), "mms", totals=[6, 6], remainder=True)
    for seq in cert.instances:
        values = cert.vectors[seq].T  # (n, m)
        assert np.all(values >= 0)
        np.testing.assert_allclose(values.sum(1), [6, 6], rtol=0, atol=1e-12)
    assert len({tuple(s) for s in cert.instances.tolist()}) == len(cert.instances)
    assert cert.value == pytest.approx(1.0, abs=TOL)  # too small a game for any impossibility


def test_randomised_lp_without_information_reproduces_a_hand_value():
    # no information, EF1-free toy: n = 2, m = 2, values {0, 1}, MMS. With m = 2 = n, MMS_i > 0
    # only if both goods are worth 1 to i; then i needs one of them. The adversary's best mixture
    # cannot beat an algorithm that gives the first good to agent 0 and the second to agent 1
    # (each ends with one good), so the value is 1 for randomised and deterministic alike.
    cert = randomised_game_value(2, 2, [0, 1], "mms")
    assert cert.value == pytest.approx(1.0, abs=TOL)
    assert _best_response(cert) <= 1.0 + TOL


def test_randomised_lp_refuses_oversized_games():
    with pytest.raises(ValueError, match="randomised LP too large"):
        randomised_game_value(
            2, 5, range(13), "mms", totals=[12, 12], remainder=True, max_variables=10_000
        )
    with pytest.raises(ValueError, match="remainder=True needs totals"):
        randomised_game_value(2, 3, range(3), "mms", remainder=True)


def test_randomised_lp_reproduces_the_readme_headline_bound():
    # the README's randomised bound for MMS with normalization at n = 2: 0.8 at m = 4, values
    # {0..6}, totals (6, 6), beside the deterministic 2/3 of the same game; both sides re-checked
    cert = of.randomised_game_value(2, 4, range(7), "mms", totals=[6, 6], remainder=True)
    assert cert.value == pytest.approx(0.8, abs=TOL)
    det, _ = of.game_value(2, 4, range(7), "mms", totals=[6, 6], remainder=True)
    assert det == pytest.approx(2 / 3)
    assert _strategy_payoffs(cert).min() >= cert.value - TOL
    assert cert.mixture.sum() == pytest.approx(1.0)
    assert _best_response(cert) <= cert.value + TOL
