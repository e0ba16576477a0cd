import numpy as np
import pytest
from icml26_dra import DRA, LESS, GradDot, GradSim, RepSim, TracIn, filter_top


def _g(seed=0, c=2, n=20, m=3, d=7):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(c, n, d)), rng.normal(size=(c, m, d))


def test_gradient_baselines_closed_forms():
    g, gt = _g()
    eta = np.array([0.1, 0.03])
    n, m = g.shape[1], gt.shape[1]
    dot = np.array(
        [[sum(eta[c] * g[c, i] @ gt[c, t] for c in range(2)) for t in range(m)] for i in range(n)]
    )
    cos = np.array(
        [
            [
                sum(
                    eta[c] * g[c, i] @ gt[c, t] / np.linalg.norm(g[c, i]) / np.linalg.norm(gt[c, t])
                    for c in range(2)
                )
                for t in range(m)
            ]
            for i in range(n)
        ]
    )
    np.testing.assert_allclose(TracIn().fit(g, gt, weights=eta).score(), dot.mean(1))
    np.testing.assert_allclose(TracIn(agg="max").fit(g, gt, weights=eta).score(), dot.max(1))
    np.testing.assert_allclose(LESS().fit(g, gt, weights=eta).score(), cos.mean(1))
    np.testing.assert_allclose(GradDot().fit(g[0], gt[0]).score(), (g[0] @ gt[0].T).mean(1))
    gs = GradSim().fit(g[0], gt[0]).score()
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
    np.testing.assert_allclose(gs, (unit(g[0]) @ unit(gt[0]).T).mean(1))
    np.testing.assert_allclose(RepSim().fit(g[0], gt[0]).score(), gs)


def test_dra_without_denoising_is_repsim_and_k_all_keeps_every_dim():
    g, gt = _g(d=12)
    plain = DRA(center=False, whiten="none", k="all").fit(g[0], gt[0])
    np.testing.assert_allclose(plain.score(), RepSim().fit(g[0], gt[0]).score())
    fixed = DRA(whiten="diag", k=3).fit(g[0], gt[0])
    z = (gt[0] - g[0].mean(0)) / g[0].std(0)
    dims = np.argsort(-np.abs(z.mean(0)))[:3]
    assert set(fixed.dims_.tolist()) == set(dims.tolist())
    zs = ((g[0] - g[0].mean(0)) / g[0].std(0))[:, dims]  # (N, 3) denoised pool, kept dims
    zt = z[:, dims]  # (M, 3)
    want = [
        np.mean([a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for b in zt]) for a in zs
    ]  # s_i = mean_t cos(z_i[S], z_t[S])
    np.testing.assert_allclose(fixed.score(), want, rtol=1e-10)


def test_filter_removes_the_top_budget_and_keeps_order():
    scores = np.array([0.1, 0.9, 0.3, 0.8, 0.2])
    assert filter_top(["a", "b", "c", "d", "e"], scores, 2) == ["a", "c", "e"]
    np.testing.assert_array_equal(filter_top(np.arange(5), scores, 0), np.arange(5))
    assert filter_top(list("abcde"), scores, 5) == []
    with pytest.raises(ValueError, match=r"budget must lie in \[0, 5\]"):
        filter_top(list("abcde"), scores, 6)
    with pytest.raises(TypeError, match="budget must be an int"):
        filter_top(list("abcde"), scores, 0.5)
    with pytest.raises(ValueError, match="dataset has 4 samples but 5"):
        filter_top(list("abcd"), scores, 1)


def test_filter_returns_a_datasets_dataset():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": list("abcde"), "y": [0, 1, 0, 1, 0]})
    out = filter_top(ds, np.array([0.1, 0.9, 0.3, 0.8, 0.2]), 2)
    assert isinstance(out, datasets.Dataset)
    assert out["text"] == ["a", "c", "e"] and out.column_names == ["text", "y"]


def test_checkpoint_shape_errors():
    g, gt = _g()
    with pytest.raises(ValueError, match="2 checkpoints but target_reps has 1"):
        TracIn().fit(g, gt[:1])
    with pytest.raises(ValueError, match="one value per checkpoint"):
        TracIn().fit(g, gt, weights=[1.0])
    with pytest.raises(RuntimeError, match="before fit"):
        GradDot().score()
