"""The phase-3 optimistic profit bound PRO+ is capped at max(0, q - p) (issue 67, finding 1).

GBBTrader's docstring states PRO+ = min(mean + |q-p| sqrt(log(4 K^2 T / delta) / (2n)),
max(0, q-p)). Without the cap, a pair that can only lose money (q < p) that was played a few
times looks profitable to the phase-3 LP (its Hoeffding bonus is positive), and with the guard
off the LP posts it. These tests read the LP's inputs directly (``solve_two_support`` wrapped):
with ``guard=False`` its profit argument is PRO+ itself.
"""

import icml26_bilateral_trade as bt
import icml26_bilateral_trade.learners as learners
import numpy as np
import pytest


def _phase3_trader(K, T, seed, guard=False):
    tr = bt.GBBTrader(K=K, N=10, guard=guard)
    tr.reset(T, np.random.default_rng(seed))
    tr.phase, tr.t, tr.bank = 3, T // 2, 0.0
    return tr


def _captured_lp(monkeypatch):
    seen = []
    real = learners.solve_two_support

    def spy(u, x, *args, **kwargs):
        seen.append((np.array(u, copy=True), np.array(x, copy=True)))
        return real(u, x, *args, **kwargs)

    monkeypatch.setattr(learners, "solve_two_support", spy)
    return seen


@pytest.mark.parametrize("seed", range(5))
def test_pro_ucb_is_capped_at_the_spread_on_random_counts(monkeypatch, seed):
    """For every cell: PRO+ <= max(0, q - p); PRO+ <= the Hoeffding upper bound where played;
    PRO+ = max(0, q - p) where never played. In particular no losing pair (q < p) has PRO+ > 0."""
    rng = np.random.default_rng(100 + seed)
    tr = _phase3_trader(K=6, T=20_000, seed=seed)
    n = rng.integers(0, 6, size=(6, 6))  # few plays: the Hoeffding bonus exceeds the spread
    tr.c_n, tr.c_tr = n, rng.binomial(n, rng.random((6, 6)))
    seen = _captured_lp(monkeypatch)
    tr._solve_epoch()
    (_, x), = seen  # fmt: skip
    pro = x.reshape(6, 6)
    sp = tr.spread
    cap = np.maximum(sp, 0.0)
    assert np.all(pro <= cap + 1e-15), "PRO+ above max(0, q - p)"
    assert np.all(pro[sp < 0] <= 0.0), "a losing pair looks profitable"
    with np.errstate(divide="ignore", invalid="ignore"):
        ucb = sp * tr.c_tr / n + np.abs(sp) * np.sqrt(tr.log3 / (2 * n))
    played = n > 0
    np.testing.assert_allclose(pro[played], np.minimum(ucb, cap)[played], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(pro[~played], cap[~played])
    # the instance is one where the cap binds: some losing pair's bound is positive
    assert np.any((ucb > 0) & (sp < 0) & played)


def test_phase3_support_has_no_losing_cell_with_the_guard_off(monkeypatch):
    """Hand-built counts: every losing pair played once and never traded (Hoeffding bound
    |q-p| sqrt(log3 / 2) ~ 2.7 |q-p| > 0), every profitable pair played 1000 times and never
    traded (bound ~0.09 (q-p)). Exploration estimates zero. The LP maximises GFT+ = 2r + PRO+
    subject to PRO+ >= 0: with the cap it picks a profitable pair, without it the
    (p, q) = (1, 0) pair, which loses 1 on every trade."""
    K = 5
    tr = _phase3_trader(K=K, T=50_000, seed=0)
    sp = tr.spread
    tr.c_n = np.where(sp < 0, 1, 1000)
    tr.c_tr = np.zeros((K, K), dtype=np.int64)
    tr.L_cnt[:] = 0
    tr.R_cnt[:] = 0
    seen = _captured_lp(monkeypatch)
    tr._solve_epoch()
    support = np.asarray(tr._sup)
    w = np.asarray(tr._w)
    losing = sp.ravel()[support] < 0
    assert not np.any(losing & (w > 0)), f"phase 3 posts a losing pair: {support}, {w}"
    (_, x), = seen  # fmt: skip
    assert x.reshape(K, K)[sp < 0].max() <= 0.0
    # the cell it posts has q > p
    i, j = divmod(int(support[np.argmax(w)]), K)
    assert tr.grid[j] > tr.grid[i]


def test_phase3_epochs_end_when_a_support_count_doubles(monkeypatch):
    """Phase-3 epochs (guard off, so nothing else ends them): the LP is re-solved exactly when a
    support pair's count reaches max(1, 2 n) of its count at the solve, so there are several
    epochs but at most 2 log2(T) + 1 per grid pair."""
    solves = []
    real = learners.GBBTrader._solve_epoch

    def spy(self):
        if solves:  # the epoch that just ended: some support pair reached its target
            sup, tgt = solves[-1]
            assert np.any(self.c_n.ravel()[sup] >= tgt) or self.t >= self.T
        real(self)
        np.testing.assert_array_equal(self._tgt, np.maximum(1, 2 * self.c_n.ravel()[self._sup]))
        solves.append((np.array(self._sup), np.array(self._tgt)))

    monkeypatch.setattr(learners.GBBTrader, "_solve_epoch", spy)
    T = 6000
    pol = bt.GBBTrader(K=5, N=40, guard=False)
    tr = bt.simulate(pol, bt.IndependentUniform(), T, 0)
    assert tr.phase_marks["exploit_start"] is not None
    assert 3 <= len(solves) <= 25 * (2 * np.log2(T) + 1)
    for sup, tgt in solves:
        assert np.all(tgt >= 1)
