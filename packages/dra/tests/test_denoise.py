import numpy as np
import pytest
from icml26_dra import DRA, Denoiser, RepSim, average_precision, select_dims_leave_target_out


def _data(seed=0, n=300, d=16, m=6):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) + 3.0, rng.normal(size=(m, d)) + 3.5


@pytest.mark.parametrize("whiten", ["diag", "shrinkage", "none"])
def test_constant_shift_invariance_after_centering(whiten):
    h, t = _data()
    c = np.random.default_rng(1).normal(size=h.shape[1]) * 50.0
    a = DRA(whiten=whiten, k="auto").fit(h, t).score()
    b = DRA(whiten=whiten, k="auto").fit(h + c, t + c).score()
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # without centering the shift changes the scores (the identity is not vacuous)
    raw = DRA(center=False, whiten="none", k="all")
    assert not np.allclose(raw.fit(h, t).score(), raw.fit(h + c, t + c).score(), rtol=1e-3)


def test_per_dimension_scale_invariance_after_diag_whitening():
    h, t = _data()
    s = np.exp(np.random.default_rng(2).normal(size=h.shape[1]) * 2.0)  # (d,) positive scales
    a = DRA(whiten="diag").fit(h, t)
    b = DRA(whiten="diag").fit(h * s, t * s)
    np.testing.assert_allclose(a.score(), b.score(), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.sort(a.dims_), np.sort(b.dims_))
    unwhitened = DRA(whiten="none", k="all")
    assert not np.allclose(
        unwhitened.fit(h, t).score(), unwhitened.fit(h * s, t * s).score(), rtol=1e-3
    )


def test_full_whitening_is_invariant_to_any_invertible_linear_map():
    h, t = _data(d=8)
    a_map = np.random.default_rng(3).normal(size=(8, 8))  # invertible a.s.
    den = dict(whiten="shrinkage", shrinkage=0.0, k="all")
    np.testing.assert_allclose(
        DRA(**den).fit(h, t).score(), DRA(**den).fit(h @ a_map, t @ a_map).score(), rtol=1e-7
    )
    z = Denoiser(whiten="shrinkage", shrinkage=0.0).fit_transform(h)
    np.testing.assert_allclose(np.cov(z.T, bias=True), np.eye(8), atol=1e-8)  # whitened


def test_diag_whitening_closed_form_and_constant_dims():
    h = np.random.default_rng(4).normal(size=(50, 3)) * [1.0, 2.0, 0.0] + [1.0, -1.0, 7.0]
    den = Denoiser(whiten="diag").fit(h)
    z = den.transform(h)
    np.testing.assert_allclose(z[:, :2], (h[:, :2] - h[:, :2].mean(0)) / h[:, :2].std(0))
    np.testing.assert_array_equal(z[:, 2], 0.0)  # constant dim -> 0, not NaN


def test_planted_signal_toy_dra_recovers_dims_and_beats_raw_cosine(toy):
    h, t, y, sig = toy(seed=0)
    dra = DRA(whiten="diag", min_targets=2, margin=0.0).fit(
        h, t
    )  # the bare leave-target-out selection
    ap_dra = average_precision(dra.score(), y)
    ap_raw = average_precision(RepSim().fit(h, t).score(), y)
    assert set(sig) <= set(dra.dims_.tolist())  # every planted dim kept
    assert set(dra.dims_[:8].tolist()) == set(sig)  # ... and ranked first
    assert dra.selection_ is not None and dra.selection_.k <= 32
    assert ap_dra >= 0.85, ap_dra
    assert ap_raw <= 0.1, ap_raw


def test_leave_target_out_percentile_matches_brute_force():
    rng = np.random.default_rng(5)
    z, zt = rng.normal(size=(40, 6)), rng.normal(size=(3, 6)) + np.array([2, 0, 0, 0, 0, 1])
    sel = select_dims_leave_target_out(z, zt, ks=(1, 2, 6))
    for ki, k in enumerate((1, 2, 6)):
        pct = []
        for ti in range(3):
            rest = [zt[j] for j in range(3) if j != ti]
            mu = np.abs(np.mean(rest, axis=0))
            keep = sorted(range(6), key=lambda j: -mu[j])[:k]

            def score(x, keep=keep, rest=rest):
                xs = x[keep]
                return np.mean(
                    [xs @ r[keep] / (np.linalg.norm(xs) * np.linalg.norm(r[keep])) for r in rest]
                )

            held = score(zt[ti])
            pct.append(np.mean([score(x) < held for x in z]))
        assert sel.percentile[ki] == pytest.approx(np.mean(pct))
    best = [k for k, p in zip((1, 2, 6), sel.percentile) if p >= sel.percentile.max() - 1e-12]
    assert sel.k in best
    top = np.argsort(-np.abs(zt.mean(0)), kind="stable")[: sel.k]
    np.testing.assert_array_equal(sel.dims, top)


def test_bad_input_is_rejected_with_the_argument_named():
    h, t = _data()
    with pytest.raises(ValueError, match="target_reps must be a non-empty"):
        DRA().fit(h, t[:0])
    with pytest.raises(ValueError, match="dimension 15 but train_reps has 16"):
        DRA().fit(h, t[:, :15])
    bad = h.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="train_reps has NaN"):
        DRA().fit(bad, t)
    with pytest.raises(ValueError, match="target_reps contains NaN"):
        RepSim().fit(h, np.where(t > 100, t, np.nan))
    with pytest.raises(ValueError, match="at least 2 targets"):
        DRA(k="auto").fit(h, t[:1])
    with pytest.raises(ValueError, match="budget must lie in"):
        DRA().fit(h, t).filter(list(range(300)), 301)
    with pytest.raises(ValueError, match="whiten must be one of"):
        Denoiser(whiten="full")
    with pytest.raises(ValueError, match="k=99 exceeds"):
        DRA(k=99).fit(h, t)


def test_shrinkage_whitener_inverts_the_shrunk_covariance():
    """W = S^{-1/2} with S = (1 - a) C + a (tr C / d) I, for the configured a (not 0)."""
    h = np.random.default_rng(5).normal(size=(40, 4)) @ np.diag([3.0, 1.0, 0.5, 0.1])
    for a in (0.1, 0.5):
        den = Denoiser(whiten="shrinkage", shrinkage=a).fit(h)
        x = h - h.mean(0)
        c = x.T @ x / len(h)
        s = (1 - a) * c + a * np.trace(c) / 4 * np.eye(4)
        w = den.whitener_
        np.testing.assert_allclose(w, w.T, atol=1e-12)
        np.testing.assert_allclose(w @ s @ w, np.eye(4), atol=1e-9)
        np.testing.assert_allclose(den.transform(h), x @ w, rtol=1e-12, atol=1e-12)


def test_max_aggregation_is_the_best_target_cosine():
    h, t = _data(n=30, d=5, m=4)
    scores = DRA(center=False, whiten="none", k="all", agg="max").fit(h, t).score()
    cos = (h / np.linalg.norm(h, axis=1, keepdims=True)) @ (
        t / np.linalg.norm(t, axis=1, keepdims=True)
    ).T  # (N, M), computed here
    np.testing.assert_allclose(scores, cos.max(axis=1), rtol=1e-12)
    mean = DRA(center=False, whiten="none", k="all", agg="mean").fit(h, t).score()
    np.testing.assert_allclose(mean, cos.mean(axis=1), rtol=1e-12)
    assert not np.allclose(scores, mean)


@pytest.mark.parametrize("whiten", ["diag", "shrinkage", "none"])
def test_huge_representations_do_not_overflow(whiten):
    """Scores are scale invariant: 1e200-scale states (x² overflows) give the same scores."""
    h, t = _data(n=60, d=6)
    a = DRA(whiten=whiten, k="all").fit(h, t).score()
    b = DRA(whiten=whiten, k="all").fit(h * 1e200, t * 1e200).score()
    assert np.all(np.isfinite(b)) and np.abs(b).max() > 0
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_degenerate_pools_are_refused():
    h, t = _data(n=10, d=4)
    with pytest.raises(ValueError, match="at least 2 samples"):
        Denoiser().fit(h[:1])
    with pytest.raises(ValueError, match="constant"):
        DRA(k="all").fit(np.tile(h[:1], (10, 1)), t)
    with pytest.raises(ValueError, match="scores has NaN"):
        from icml26_dra import filter_top

        filter_top(list(range(3)), np.array([0.1, np.nan, 0.3]), 1)


def test_auto_k_falls_back_to_all_dims_with_few_targets(toy):
    """M = 10 < min_targets: k = d even where the held-out percentile prefers a small k."""
    h, t, _, _ = toy(seed=1, m=10, signal=1.0)
    dra = DRA(whiten="diag").fit(h, t)
    sel = dra.selection_
    assert sel is not None and sel.fallback == "few_targets"
    assert sel.best_k <= 32  # the percentile alone would have selected
    assert sel.k == h.shape[1] and sorted(dra.dims_.tolist()) == list(range(h.shape[1]))
    z = (h - h.mean(0)) / h.std(0)  # (N, d) center + diag, by hand
    zt = (t - h.mean(0)) / h.std(0)
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
    np.testing.assert_allclose(dra.score(), (unit(z) @ unit(zt).T).mean(1), rtol=1e-9)
    # with the threshold lowered the same data selects a small k
    low = DRA(whiten="diag", min_targets=2).fit(h, t)
    assert low.selection_.fallback is None and low.selection_.k == sel.best_k <= 32


def test_auto_k_falls_back_when_no_k_beats_all_dims_by_the_margin(toy):
    h, t, _, _ = toy(seed=1, m=24, signal=1.0)  # weak signal: selection pays on held-out targets
    sel = DRA(whiten="diag").fit(h, t).selection_
    assert sel is not None and sel.fallback is None and sel.k < h.shape[1]
    gain = sel.percentile[sel.ks.index(sel.k)] - sel.percentile[sel.ks.index(h.shape[1])]
    assert gain > 0.02  # what the planted dims buy on held-out targets
    above = DRA(whiten="diag", margin=gain + 1e-3).fit(h, t)
    assert above.selection_.fallback == "no_margin" and above.selection_.k == h.shape[1]
    below = DRA(whiten="diag", margin=gain - 1e-3).fit(h, t)
    assert below.selection_.fallback is None and below.selection_.k == sel.k
    # a dense shift (every dim equally informative): nothing to select, k = d
    rng = np.random.default_rng(2)
    dense, dt = rng.normal(size=(400, 32)), rng.normal(size=(24, 32)) + 0.4
    ds = DRA().fit(dense, dt).selection_
    assert ds.k == 32 and ds.fallback in (None, "no_margin")


def test_default_whitening_follows_the_benchmark_evidence():
    """Hidden states: shrinkage full whitening (a = 0.1) by default when N > d; else diag."""
    h, t = _data(n=80, d=6)
    hid = DRA().fit(h, t)
    x = h - h.mean(0)
    c = x.T @ x / len(h)
    s = 0.9 * c + 0.1 * np.trace(c) / 6 * np.eye(6)
    w = hid.denoiser_.whitener_
    assert w is not None and hid.denoiser_.scale_ is None
    np.testing.assert_allclose(w @ s @ w, np.eye(6), atol=1e-9)
    grad = DRA("gradient").fit(h, t)
    np.testing.assert_allclose(grad.denoiser_.scale_, h.std(0), rtol=1e-12)
    small = DRA().fit(h[:6], t)  # N = 6 <= d = 6: full whitening would be rank-deficient
    assert small.denoiser_.whiten == "diag" and small.denoiser_.whitener_ is None


def test_full_whitening_warns_when_the_pool_is_smaller_than_the_dimension():
    h, t = _data(n=10, d=16)
    with pytest.warns(UserWarning, match="N=10 <= d=16"):
        DRA(whiten="shrinkage", k="all").fit(h, t)
