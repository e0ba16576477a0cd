import icml26_bilateral_trade as bt
import numpy as np
import pytest

Z = 5.0  # per-check false-failure probability < 6e-7


def _same(a, b):
    for k in ("p", "q", "trade", "profit", "regret"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)
    assert a.phase_marks == b.phase_marks


@pytest.mark.parametrize(
    "make, env, T",
    [
        (lambda: bt.GBBTrader(), bt.separated_markets(), 5000),  # all three phases
        (
            lambda: bt.GBBTrader(K=5, N=40),
            bt.separated_markets(),
            6000,
        ),  # long phase 3, guard fires
        (lambda: bt.GBBTrader(K=5, N=40), bt.IndependentUniform(), 6000),
        (lambda: bt.GBBTrader(K=4, N=30, guard=False), bt.IndependentUniform(), 4000),
        (lambda: bt.GBBTrader(beta="paper"), bt.separated_markets(), 4096),  # stops in phase 2
        (lambda: bt.GBBTrader(phase1="exp3"), bt.separated_markets(), 5000),  # the paper's EXP3
        (lambda: bt.GBBTrader(), bt.correlated_four_rectangles(), 1500),  # phase 1 only
        (lambda: bt.FixedPriceWBB(), bt.separated_markets(), 3000),
        (lambda: bt.FixedPriceWBB(K=3, N=200), bt.IndependentUniform(), 700),  # ends exploring
    ],
)
def test_vectorised_simulate_matches_plain_round_by_round_transcription(make, env, T):
    for seed in (0, 1):
        _same(bt.simulate(make(), env, T, seed), bt.simulate(make(), env, T, seed, fast=False))


def test_phases_in_order_and_exploration_takes_exactly_2KN_rounds():
    pol = bt.GBBTrader()
    tr = bt.simulate(pol, bt.separated_markets(), 2**14, 0)
    e1, e2 = tr.phase_marks["explore_start"], tr.phase_marks["exploit_start"]
    assert e1 is not None and e2 is not None and 0 < e1 < e2 < 2**14
    assert e2 - e1 == 2 * pol.k_ * pol.n_
    # phase 1 stops on the round that banks beta (profit before it is < beta)
    assert tr.cum_profit[e1 - 1] >= pol.beta_ > tr.cum_profit[e1 - 2]
    # phase 1 only posts pairs with q > p; phase 3 only grid pairs
    assert np.all(tr.q[:e1] > tr.p[:e1])
    g = set(np.round(pol.grid, 12))
    assert set(np.round(tr.p[e2:], 12)) <= g and set(np.round(tr.q[e2:], 12)) <= g


def test_exp3_phase_one_learns_the_most_profitable_arm():
    # separated markets: profit-max arms earn up to ~0.18/round; uniform play earns far less
    pol = bt.GBBTrader(phase1="exp3")
    tr = bt.simulate(pol, bt.separated_markets(), 2**16, 0)
    e1 = tr.phase_marks["explore_start"]
    assert e1 is not None and tr.cum_profit[e1 - 1] >= pol.beta_
    spread = pol.arm_q - pol.arm_p
    _, pro, _, _ = bt.separated_markets().expectations(pol.arm_p, pol.arm_q)
    uniform_rate = pro.mean()
    late = slice(e1 // 2, e1)  # second half of phase 1 beats uniform play (1.66x measured)
    assert tr.profit[late].mean() > 1.3 * uniform_rate
    assert np.all(spread > 0)


def test_sharp_beta_is_the_exact_worst_case_of_exploration():
    pol = bt.GBBTrader()
    pol.reset(10_000, np.random.default_rng(0))
    worst = sum(max(p - q, 0.0) for p, q in zip(pol.ex_p, pol.ex_q))
    assert pol.beta_ == pytest.approx(worst, rel=1e-12)
    assert 0.1 < worst / (2 * pol.k_ * pol.n_) < 0.25  # E[(U - q)^+] averaged over the grid: 1/6
    paper = bt.GBBTrader(beta="paper")
    paper.reset(10_000, np.random.default_rng(0))
    assert paper.beta_ == 2 * paper.k_ * paper.n_


def test_one_bit_estimators_are_unbiased():
    # 2K = 10 lines of N = 10000 rounds: L^, R^ against the closed forms, 5-sigma per cell
    env = bt.separated_markets()
    pol = bt.GBBTrader(K=5, N=10_000)
    T = 300_000
    tr = bt.simulate(pol, env, T, 11)
    assert tr.phase_marks["exploit_start"] is not None
    lhat, rhat = pol.estimates()
    g = pol.grid
    _, _, left, right = env.expectations(g[:, None], g[None, :])
    se = np.sqrt(0.25 / pol.n_)
    assert np.all(np.abs(lhat - left) <= Z * se), lhat - left
    assert np.all(np.abs(rhat - right) <= Z * se), rhat - right
    # and the decomposition they feed: GFT^ - PRO = L^ + R^ within the same band
    gft, pro, _, _ = env.expectations(g[:, None], g[None, :])
    assert np.all(np.abs(lhat + rhat + pro - gft) <= 2 * Z * se)


def test_realised_profit_never_negative_with_guard():
    # with the sharp beta and the guard, GBB holds on every path (probability 1), and each
    # running total stays >= 0, not only the final one
    for env in (bt.separated_markets(), bt.IndependentUniform()):
        for seed in range(6):
            tr = bt.simulate(bt.GBBTrader(K=5, N=40), env, 6000, seed)
            assert tr.phase_marks["exploit_start"] is not None
            assert tr.min_cum_profit >= -1e-9 and tr.budget_balanced


def test_without_guard_phase_three_can_overspend():
    # the paper's optimistic constraint alone: the bank is spent below zero on this small instance
    trs = [
        bt.simulate(bt.GBBTrader(K=5, N=20, guard=False), bt.separated_markets(), 4096, s)
        for s in range(3)
    ]
    assert min(t.min_cum_profit for t in trs) < 0


def test_wbb_learner_balances_every_round_and_finds_best_price():
    tr = bt.simulate(bt.FixedPriceWBB(), bt.IndependentUniform(), 2**16, 0)
    assert np.all(tr.q >= tr.p) and np.all(tr.profit >= 0)
    # its one-bit estimates of GFT(p, p) = L(p, p) + R(p, p) are unbiased (5-sigma per price)
    env = bt.separated_markets()
    pol = bt.FixedPriceWBB(K=9, N=20_000)
    bt.simulate(pol, env, 2 * 9 * 20_000 + 10, 1)
    g = pol.grid
    est = (g * pol.hits[0::2] + (1 - g) * pol.hits[1::2]) / pol.n_  # GFT^(p, p), one bit
    se = np.sqrt(0.5 / (4 * pol.n_))
    assert np.all(np.abs(est - env.expectations(g, g)[0]) <= Z * se)
    assert pol.choice == int(np.argmax(est))


def test_gbb_beats_wbb_where_the_benchmarks_differ():
    env = bt.separated_markets()
    T = 2**18
    ours = bt.simulate(bt.GBBTrader(), env, T, 0).final_regret
    wbb = bt.simulate(bt.FixedPriceWBB(), env, T, 0).final_regret
    assert ours < 0.7 * wbb
    assert wbb > 0.8 * (bt.opt_gbb(env, 1025).value - bt.opt_wbb(env, 1025)[0]) * T


def test_bad_input():
    with pytest.raises(ValueError, match="T:"):
        bt.simulate(bt.GBBTrader(), bt.IndependentUniform(), 0, 0)
    with pytest.raises(ValueError, match="K:"):
        bt.GBBTrader(K=1)
    with pytest.raises(ValueError, match="delta:"):
        bt.GBBTrader(delta=0.0)
    with pytest.raises(ValueError, match="phase1:"):
        bt.GBBTrader(phase1="thompson")
    with pytest.raises(ValueError, match="beta:"):
        bt.GBBTrader(beta="huge")
    pol = bt.GBBTrader()
    pol.reset(3, np.random.default_rng(0))
    for _ in range(3):
        pol.act()
        pol.update(False)
    with pytest.raises(RuntimeError, match="horizon"):
        pol.act()


@pytest.mark.slow
def test_regret_slope_on_separated_markets():
    env = bt.separated_markets()
    Ts = np.array([2**12, 2**14, 2**16, 2**18])
    reg = [
        np.mean([bt.simulate(bt.GBBTrader(), env, int(T), s).final_regret for s in range(2)])
        for T in Ts
    ]
    slope = np.polyfit(np.log(Ts), np.log(reg), 1)[0]
    assert slope < 0.85


def test_policy_is_an_interface_with_abstract_round_methods():
    from icml26_bilateral_trade import Policy

    with pytest.raises(TypeError, match="abstract"):
        Policy()
