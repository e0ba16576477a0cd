"""Diagnostics: factors, Spearman, distance buckets, dataset statistics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from icml26_normbt import (
    accuracy_by_distance,
    factor_correlations,
    head_gradient_factors,
    normbt_loss,
    pair_statistics,
    spearman,
)
from scipy.stats import spearmanr


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 40).astype(float)  # many ties
    y = x + rng.normal(size=40)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert spearman(torch.arange(5.0), -torch.arange(5.0)) == pytest.approx(-1.0)
    assert np.isnan(spearman(np.ones(4), np.arange(4.0)))
    with pytest.raises(ValueError, match="equal length"):
        spearman(np.ones(3), np.ones(4))


def test_bt_update_norm_tracks_distance_normbt_does_not():
    g = torch.Generator().manual_seed(0)
    b, h = 400, 8
    h_c = torch.randn(b, h, generator=g)
    d_target = torch.exp(torch.randn(b, generator=g))  # log-normal distances
    h_r = h_c + d_target[:, None] * torch.nn.functional.normalize(
        torch.randn(b, h, generator=g), dim=-1
    )
    r_c, r_r = torch.randn(b, generator=g), torch.randn(b, generator=g)  # error independent of d
    bt = factor_correlations(head_gradient_factors(r_c, r_r, h_c, h_r))
    _, w = normbt_loss(r_c, r_r, h_c, h_r, state=None, eps=0.0)
    nb = factor_correlations(head_gradient_factors(r_c, r_r, h_c, h_r, weights=w))
    assert bt["norm_vs_distance"] > 0.5
    assert abs(nb["norm_vs_distance"]) < 0.15
    assert nb["norm_vs_error"] == pytest.approx(1.0)  # under NormBT the norm is m·error: same ranks


def test_accuracy_by_distance_brute_force():
    g = torch.Generator().manual_seed(1)
    r_c, r_r = torch.randn(50, generator=g), torch.randn(50, generator=g)
    d = torch.rand(50, generator=g)
    buckets = accuracy_by_distance(r_c, r_r, d, n_buckets=5)
    assert sum(bk.count for bk in buckets) == 50
    for bk in buckets:
        sel = (d >= bk.lo) & (d <= bk.hi)
        assert bk.accuracy == pytest.approx((r_c[sel] > r_r[sel]).float().mean().item(), abs=0.05)
    edges = [0.0, 0.5, 1.0]
    b2 = accuracy_by_distance(r_c, r_r, d, edges=edges)
    lo = d < 0.5
    assert b2[0].count == int(lo.sum())
    assert b2[0].accuracy == pytest.approx((r_c[lo] > r_r[lo]).float().mean().item())
    with pytest.raises(ValueError, match="edges"):
        accuracy_by_distance(r_c, r_r, d, edges=[1.0, 0.5])
    with pytest.raises(ValueError, match="distance"):
        accuracy_by_distance(r_c, r_r, d[:3])


def test_weights_shape_is_checked():
    with pytest.raises(ValueError, match="weights"):
        head_gradient_factors(
            torch.zeros(3),
            torch.zeros(3),
            torch.zeros(3, 2),
            torch.ones(3, 2),
            weights=torch.ones(2),
        )


def test_pair_statistics_over_batches(tiny_llama):
    model = tiny_llama.eval()
    g = torch.Generator().manual_seed(2)
    batches = []
    for _ in range(2):
        ids = torch.randint(3, 40, (6, 7), generator=g)
        ids[1, 5:] = 0
        ids[4, 3:] = 0
        batches.append({"input_ids": ids, "attention_mask": (ids != 0).long()})
    stats = pair_statistics(model, batches)
    assert stats["r_chosen"].shape == (6,) and stats["h_rejected"].shape == (6, 32)
    with torch.no_grad():
        logits = torch.cat([model(**b).logits.squeeze(-1) for b in batches])
    expect_c = torch.cat([logits[:3], logits[6:9]])
    torch.testing.assert_close(stats["r_chosen"], expect_c)
    # the head applied to the pooled states gives the rewards back
    torch.testing.assert_close(model.score(stats["h_chosen"]).squeeze(-1), expect_c)
    with pytest.raises(ValueError, match="batches"):
        pair_statistics(model, [])
