import icml26_bilateral_trade as bt
import numpy as np
import pytest


def _tables(rng, n):
    y = rng.normal(size=n)
    x = rng.normal(size=n)
    if rng.random() < 0.3:  # ties and exact zeros
        y, x = np.round(y), np.round(x)
    x[rng.integers(n)] = abs(x[rng.integers(n)])  # at least one feasible point
    return y, x


def test_two_support_equals_lp_equals_brute_force_on_random_tables():
    rng = np.random.default_rng(0)
    for _ in range(200):
        y, x = _tables(rng, int(rng.integers(2, 40)))
        v_hull, idx, w = bt.solve_two_support(y, x)
        v_lp, idx_lp, w_lp = bt.solve_lp(y, x)
        v_brute, _, _ = bt.solve_brute(y, x)
        assert v_hull == pytest.approx(v_lp, rel=1e-9, abs=1e-9)
        assert v_hull == pytest.approx(v_brute, rel=1e-9, abs=1e-9)
        # the returned distribution attains the value and is feasible
        assert len(idx) <= 2 and w.sum() == pytest.approx(1.0) and np.all(w > 0)
        assert w @ y[idx] == pytest.approx(v_hull, rel=1e-9, abs=1e-12)
        assert w @ x[idx] >= -1e-9
        assert len(idx_lp) <= 2  # HiGHS returns a basic optimum: at most two pairs
        assert w_lp @ y[idx_lp] == pytest.approx(v_lp, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize(
    "env", [bt.separated_markets(), bt.IndependentUniform(), bt.correlated_four_rectangles()]
)
def test_opt_gbb_three_ways_on_env_grid(env):
    v = {m: bt.opt_gbb(env, 9, method=m) for m in ("hull", "lp", "brute")}
    assert v["hull"].value == pytest.approx(v["lp"].value, rel=1e-9)
    assert v["hull"].value == pytest.approx(v["brute"].value, rel=1e-9)
    sol = bt.opt_gbb(env, 33)
    gft, pro, _, _ = env.expectations(sol.pairs[:, 0], sol.pairs[:, 1])
    assert sol.weights @ gft == pytest.approx(sol.value, rel=1e-12)
    assert sol.weights @ pro >= -1e-12 and len(sol.weights) <= 2
    assert sol.value >= bt.opt_wbb(env, 33)[0] - 1e-12


def test_wbb_uniform_closed_form_and_gbb_gap_on_separated_markets():
    value, p = bt.opt_wbb(bt.IndependentUniform(), 101)
    assert value == pytest.approx(1 / 8, rel=1e-12) and p == pytest.approx(0.5)
    # the separated market: a profitable pair pays for a subsidised one; one price cannot serve both
    sol = bt.opt_gbb(bt.separated_markets(), 257)
    wbb, _ = bt.opt_wbb(bt.separated_markets(), 257)
    assert sol.value / wbb > 1.45
    assert len(sol.weights) == 2
    assert (sol.pairs[:, 1] - sol.pairs[:, 0]).min() < 0 < (sol.pairs[:, 1] - sol.pairs[:, 0]).max()


def test_opt_wbb_is_best_pair_with_nonnegative_profit_margin():
    # WBB: q >= p on every round; on a grid the best such pair is on the diagonal
    env = bt.separated_markets()
    g, gft, _ = bt.pair_tables(env, 33)
    wbb_pairs = gft[g[:, None] <= g[None, :]]
    assert bt.opt_wbb(env, 33)[0] == pytest.approx(wbb_pairs.max(), rel=1e-12)


def test_bad_grid_and_method():
    env = bt.IndependentUniform()
    with pytest.raises(ValueError, match="grid"):
        bt.opt_gbb(env, np.array([]))
    with pytest.raises(ValueError, match="grid"):
        bt.opt_gbb(env, 1)
    with pytest.raises(ValueError, match="grid"):
        bt.opt_wbb(env, np.array([0.2, 1.3]))
    with pytest.raises(ValueError, match="method"):
        bt.opt_gbb(env, 9, method="simplex")
    with pytest.raises(ValueError, match="pro"):
        bt.solve_two_support(np.ones(3), -np.ones(3))
