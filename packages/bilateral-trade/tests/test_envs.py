import subprocess
import sys

import icml26_bilateral_trade as bt
import numpy as np
import pytest

# z = 5: a correct implementation fails one of these checks with probability < 6e-7 per check
Z = 5.0


def test_independent_uniform_closed_forms():
    # GFT(p, q) = p (1 - q^2) / 2 - (1 - q) p^2 / 2 and PRO = (q - p) p (1 - q) (paper notes' algebra)
    p = np.linspace(0, 1, 11)[:, None]
    q = np.linspace(0, 1, 13)[None, :]
    gft, pro, left, right = bt.IndependentUniform().expectations(p, q)
    np.testing.assert_allclose(gft, p * (1 - q**2) / 2 - (1 - q) * p**2 / 2, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pro, (q - p) * p * (1 - q), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        left, p**2 / 2 * (1 - q), rtol=1e-12, atol=1e-15
    )  # E[(p-s)^+] P(b>=q)
    np.testing.assert_allclose(right, (1 - q) ** 2 / 2 * p, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "env", [bt.separated_markets(), bt.correlated_four_rectangles(), bt.IndependentUniform()]
)
def test_expectations_match_monte_carlo(env):
    rng = np.random.default_rng(7)
    s, b = env.sample(rng, 400_000)
    for p, q in [(0.5, 0.35), (0.5, 0.9), (0.3, 0.6), (0.8, 0.2), (0.45, 0.45)]:
        trade = (s <= p) & (b >= q)
        samples = {
            "gft": (b - s) * trade,
            "pro": (q - p) * trade,
            "L": np.maximum(p - s, 0) * (b >= q),
            "R": np.maximum(b - q, 0) * (s <= p),
        }
        exact = dict(zip(("gft", "pro", "L", "R"), env.expectations(p, q)))
        for k, x in samples.items():
            se = x.std() / np.sqrt(x.size) + 1e-12
            assert abs(x.mean() - exact[k]) <= Z * se, (env.name, p, q, k)


def test_decomposition_gft_equals_l_plus_r_plus_profit():
    # GFT is computed by its own formula (E[b 1{b>=q}] P(s<=p) - E[s 1{s<=p}] P(b>=q) per component)
    g = np.linspace(0, 1, 21)
    for env in (bt.separated_markets(), bt.correlated_four_rectangles()):
        gft, pro, left, right = env.expectations(g[:, None], g[None, :])
        np.testing.assert_allclose(gft, left + right + pro, rtol=1e-10, atol=1e-14)


def test_bad_input():
    env = bt.IndependentUniform()
    with pytest.raises(ValueError, match="p:"):
        env.expectations(np.array([1.2]), np.array([0.5]))
    with pytest.raises(ValueError, match="q:"):
        env.expectations(np.array([0.2]), np.array([-0.1]))
    with pytest.raises(ValueError, match="q:"):
        env.expectations(0.2, np.nan)
    with pytest.raises(ValueError, match="rects"):
        bt.RectangleMixture(((0.5, 0.2, 0.0, 1.0),), (1.0,))
    with pytest.raises(ValueError, match="weights"):
        bt.RectangleMixture(((0.0, 0.2, 0.0, 1.0),), (0.5,))
    custom = bt.CustomEnv(lambda rng, n: (rng.random(n), rng.random(n)))
    with pytest.raises(ValueError, match="env: .* expectations"):
        bt.opt_gbb(custom, 9)
    with pytest.raises(ValueError, match="env: .* expectations"):
        bt.simulate(bt.GBBTrader(), custom, 100, 0)
    bad = bt.CustomEnv(lambda rng, n: (rng.random(n) + 1, rng.random(n)))
    with pytest.raises(ValueError, match="sampler"):
        bad.sample(np.random.default_rng(0), 5)
    pytest.importorskip("gymnasium")
    with pytest.raises(ValueError, match="p:"):
        bt.BilateralTradeEnv(env).step((1.5, 0.5))


def test_custom_env_with_expectations_gives_same_benchmark():
    uni = bt.IndependentUniform()
    custom = bt.CustomEnv(lambda rng, n: (rng.random(n), rng.random(n)), uni.expectations)
    assert bt.opt_gbb(custom, 33).value == pytest.approx(bt.opt_gbb(uni, 33).value, rel=1e-12)


def test_gymnasium_env_passes_check_env_and_declares_its_spaces():
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    env = bt.BilateralTradeEnv(bt.separated_markets(), horizon=50)
    assert isinstance(env, gymnasium.Env)
    assert env.observation_space == gymnasium.spaces.Discrete(2)
    box = env.action_space
    assert isinstance(box, gymnasium.spaces.Box) and box.shape == (2,)
    assert np.all(box.low == 0.0) and np.all(box.high == 1.0) and box.dtype == np.float64
    check_env(env, skip_render_check=True)  # API, spaces, seeding determinism
    # equal seeds, equal episodes; another seed, another episode
    runs = []
    for seed in (5, 5, 6):
        env.reset(seed=seed)
        runs.append([env.step(np.array([0.5, 0.4]))[0] for _ in range(200)])
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_gymnasium_env_one_bit_profit_and_horizon():
    pytest.importorskip("gymnasium")
    env = bt.BilateralTradeEnv(bt.separated_markets(), horizon=500)
    obs, info = env.reset(seed=3)
    assert obs == 0 and info == {}
    total, trades = 0.0, 0
    for t in range(500):
        trade, reward, done, trunc, info = env.step((0.5, 0.9))
        assert trade in (0, 1) and reward == pytest.approx(0.4 * trade)
        assert info["gft"] >= 0 and (info["gft"] > 0) == bool(trade)
        total += reward
        trades += trade
        assert done == (t == 499) and not trunc
    assert info["cum_profit"] == pytest.approx(total)
    # P(trade at (0.5, 0.9)) = 0.45 (the rich market only): 5-sigma band
    assert abs(trades / 500 - 0.45) < Z * np.sqrt(0.45 * 0.55 / 500)
    # a subsidised pair (p, q) = (0.5, 0.4): cheap market trades iff b >= 0.4 (prob 2/3), rich
    # market always (s <= 0.5, b >= 0.9): P = 0.55 * 2/3 + 0.45 = 0.8167, reward -0.1 per trade
    bits = []
    for _ in range(500):
        trade, reward, *_ = env.step(np.array([0.5, 0.4]))
        assert reward == pytest.approx(-0.1 * trade)
        bits.append(trade)
    pt = 0.55 * 2 / 3 + 0.45
    assert abs(np.mean(bits) - pt) < Z * np.sqrt(pt * (1 - pt) / 500)
    with pytest.raises(ValueError, match="action"):
        env.step(np.array([0.5, 0.4, 0.3]))
    with pytest.raises(ValueError, match="horizon"):
        bt.BilateralTradeEnv(bt.separated_markets(), horizon=0)
    with pytest.raises(TypeError, match="env"):
        bt.BilateralTradeEnv("separated_markets")


def test_learner_plays_through_the_gymnasium_env():
    # the plain act/update path driven by env.step: GBB holds on the realised path (guard)
    pytest.importorskip("gymnasium")
    T = 3000
    env = bt.BilateralTradeEnv(bt.separated_markets(), horizon=T)
    env.reset(seed=0)
    pol = bt.GBBTrader(K=5, N=40)
    pol.reset(T, np.random.default_rng(0))
    low = 0.0
    for _ in range(T):
        trade, _, done, _, info = env.step(pol.act())
        pol.update(trade)
        low = min(low, info["cum_profit"])
    assert done and pol.phase == 3 and low >= -1e-9
    assert info["cum_profit"] == pytest.approx(pol.bank, abs=1e-9)


@pytest.mark.timeout(180)
def test_gymnasium_env_without_gymnasium_says_what_to_install():
    # a bare install imports the class; constructing it names the extra
    code = (
        "import sys; sys.modules['gymnasium'] = None\n"
        "import icml26_bilateral_trade as bt\n"
        "try:\n    bt.BilateralTradeEnv(bt.separated_markets())\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=150)
    assert "icml26-bilateral-trade[gym]" in out.stdout, out.stderr
