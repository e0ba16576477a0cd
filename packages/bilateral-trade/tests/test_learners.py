import icml26_bilateral_trade as bt
import numpy as np
import pytest
from scipy.optimize import linprog

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
        (
            lambda: bt.GBBTrader(K=5, N=30, beta="paper", phase1="exp3", guard=False),
            bt.separated_markets(),
            7500,
        ),  # the paper's configuration through all three phases
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


def test_exp3_sampler_draws_its_stated_law_before_and_after_a_rebuild():
    from icml26_bilateral_trade.learners import _Exp3

    M, gamma = 7, 0.2
    ex = _Exp3(M, gamma)
    rng = np.random.default_rng(0)
    coins = (np.arange(100_000) + 0.5) / 100_000  # a uniform grid of coins: frequencies = law
    for step in range(2):
        for k, r in zip(rng.integers(M, size=30), rng.random(30)):
            ex.update(int(k), float(r), 0.3)
        if step == 1:  # gamma r / (prob M) = 286 per update: the tree is rebuilt (shifted)
            for _ in range(3):
                ex.update(2, 1.0, 1e-4)
            assert ex.shift > 0
        lw = np.array(ex.logw)
        w = np.exp(lw - lw.max())
        law = (1 - gamma) * w / w.sum() + gamma / M  # EXP3: (1 - gamma) w / sum w + gamma / M
        draws = [ex.draw(float(c)) for c in coins]
        freq = np.bincount([k for k, _ in draws], minlength=M) / coins.size
        np.testing.assert_allclose(freq, law, atol=2 * M / coins.size)
        for k, prob in draws[::997]:
            assert prob == pytest.approx(law[k], rel=1e-12)


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


def _gft_diagonal_independent(g, a, c):
    """GFT(p, p) for s ~ U[0, a], b ~ U[c, 1] independent, written out (not the package's code):
    P(s <= p) E[b 1{b >= p}] - E[s 1{s <= p}] P(b >= p)."""
    fs, es = np.clip(g / a, 0, 1), np.minimum(g, a) ** 2 / (2 * a)
    qb = np.clip(g, c, 1)
    return fs * (1 - qb**2) / (2 * (1 - c)) - es * (1 - qb) / (1 - c)


@pytest.mark.parametrize(
    "a, c, K, N",
    [
        # s, b ~ U[0, 1]: GFT(p, p) = p (1 - p) / 2 peaks at 1/2 (gap to the next grid price 0.031);
        # the seller side L(p, p) = p^2 (1 - p) / 2 alone peaks at 3/4, the buyer side at 1/4
        (1.0, 0.0, 5, 20_000),
        # s ~ U[0, 0.6], b ~ U[0.3, 1]: peak 0.2976 at 1/2, next 0.2790 at 3/8; L alone -> 5/8,
        # R alone -> 3/8
        (0.6, 0.3, 9, 40_000),
    ],
)
def test_wbb_commits_to_the_argmax_of_exact_gft_on_its_grid(a, c, K, N):
    # N large enough that 6 standard errors of GFT^(p*) - GFT^(p) sit inside the gap: the
    # committed price is the exact argmax, and a learner that commits on one side's estimate
    # (L^ or R^ alone) or on a mis-weighted sum picks another price
    env = bt.RectangleMixture(((0.0, a, c, 1.0),), (1.0,))
    g = np.linspace(0.0, 1.0, K)
    exact = _gft_diagonal_independent(g, a, c)
    best = int(np.argmax(exact))
    gap = exact[best] - np.sort(exact)[-2]
    assert 6 * np.sqrt(2 * 0.625 / (4 * N)) < gap  # the test can resolve the gap
    for seed in (0, 1):
        pol = bt.FixedPriceWBB(K=K, N=N)
        tr = bt.simulate(pol, env, 2 * K * N + 10, seed)
        assert pol.choice == best, (seed, pol.choice, best)
        assert np.all(tr.p[2 * K * N :] == g[best]) and np.all(tr.q[2 * K * N :] == g[best])


def _phase_three_state(env, K, T, t, n_cell):
    """A GBBTrader put in phase 3 at round t with exact L, R (N = 4000 lines) and n_cell plays
    of every cell whose empirical trade rate is the exact P(trade)."""
    pol = bt.GBBTrader(K=K, N=4000)
    pol.reset(T, np.random.default_rng(0))
    g = pol.grid
    _, pro, left, right = env.expectations(g[:, None], g[None, :])
    sp = g[None, :] - g[:, None]
    ptrade = np.where(sp != 0, pro / np.where(sp != 0, sp, 1), 0.5)
    pol.L_cnt[:] = np.round(left * pol.n_).astype(np.int64)
    pol.R_cnt[:] = np.round(right * pol.n_).astype(np.int64)
    pol.c_n[:] = n_cell
    pol.c_tr[:] = np.round(ptrade * n_cell).astype(np.int64)
    pol.phase, pol.t, pol.e = 3, t, 2 * K * pol.n_
    return pol, sp


def test_guard_pacing_lets_phase_three_spend_a_positive_bank():
    # guard=True constrains the pessimistic profit to E_gamma[PRO-] >= -bank / (T - t). With an
    # empty bank the solution earns >= 0 pessimistically; with bank = 0.05 (T - t) the constraint
    # binds at exactly -0.05 (separated markets: the unconstrained best pair loses ~0.2/round)
    env = bt.separated_markets()
    K, T, t, n_cell = 9, 2_000_000, 1_000_000, 200_000
    pol, sp = _phase_three_state(env, K, T, t, n_cell)
    rad = np.abs(sp) * np.sqrt(pol.log3 / (2 * n_cell))
    lcb = np.maximum(sp * pol.c_tr / n_cell - rad, np.minimum(sp, 0)).ravel()  # PRO-, (K*K,)
    plans = {}
    for bank in (0.0, 0.05 * (T - t)):
        pol.bank = bank
        pol._solve_epoch()
        plans[bank] = (pol._sup.copy(), pol._w.copy())
    (s0, w0), (s1, w1) = plans.values()
    assert w0 @ lcb[s0] >= -1e-12
    assert w1 @ lcb[s1] == pytest.approx(-0.05, abs=1e-9)  # pacing: spends the bank evenly
    assert not (np.array_equal(s0, s1) and np.allclose(w0, w1))
    # and it is the optimum of the paced LP (HiGHS, not the package's two-support solver)
    lhat, rhat = pol.estimates()
    ucb = np.minimum(sp * pol.c_tr / n_cell + rad, np.maximum(sp, 0))
    u = (lhat + rhat + ucb).ravel()
    res = linprog(
        -u,
        A_ub=-(lcb + 0.05)[None, :],
        b_ub=[0.0],
        A_eq=np.ones((1, u.size)),
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    assert w1 @ u[s1] == pytest.approx(-res.fun, rel=1e-9)


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
    # rate constants: K = ceil(c_K T^{1/4}) and N = ceil(c_N T^{1/2}) would be clamped silently
    for cls in (bt.GBBTrader, bt.FixedPriceWBB):
        for bad in (0, -1, 0.0, float("nan"), float("inf"), "2"):
            with pytest.raises(ValueError, match="c_K:"):
                cls(c_K=bad)
            with pytest.raises(ValueError, match="c_N:"):
                cls(c_N=bad)
        with pytest.raises(ValueError, match="K:"):
            cls(K=1)
        with pytest.raises(ValueError, match="N:"):
            cls(N=0)
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
