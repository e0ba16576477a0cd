"""extra_merge: two-point closed form, the line search, and a river-valley toy with noisy SGD
whose merged PC1 is the valley floor and whose extrapolation gain matches the closed form."""

import math

import numpy as np
import pytest
import torch
from icml26_extramerge import (
    DEFAULT_ALPHA,
    extra_merge,
    merged_trajectory,
    rank1_report,
    weighted_merge,
)


def _two(seed=0):
    g = torch.Generator().manual_seed(seed)
    m0 = {
        "w": torch.randn(3, 5, generator=g),
        "b": torch.randn(5, generator=g),
        "n": torch.tensor(3),
    }
    m1 = {
        "w": torch.randn(3, 5, generator=g),
        "b": torch.randn(5, generator=g),
        "n": torch.tensor(4),
    }
    return m0, m1


@pytest.mark.parametrize("alpha", [0.0, 0.5, 3.0, -1.0])
def test_two_point_extrapolation_is_linear_merge(alpha):
    m0, m1 = _two()
    out = extra_merge([m0, m1], alpha=alpha, direction="diff").state_dict
    for k in ("w", "b"):
        torch.testing.assert_close(out[k], m1[k] + alpha * (m1[k] - m0[k]))  # by hand
    # mergekit-style linear merge with weights [-alpha, 1 + alpha], normalize: false
    lin = weighted_merge([m0, m1], [-alpha, 1.0 + alpha])
    for k in ("w", "b"):
        torch.testing.assert_close(out[k], lin[k], rtol=1e-6, atol=1e-6)
    assert out["n"].item() == 4


def test_default_alpha_without_eval_fn():
    m0, m1 = _two()
    r = extra_merge([m0, m1])
    assert r.alpha == DEFAULT_ALPHA
    torch.testing.assert_close(r.state_dict["b"], m1["b"] + DEFAULT_ALPHA * (m1["b"] - m0["b"]))


def test_line_search_finds_the_held_out_minimiser():
    m0, m1 = _two(1)
    target = {k: m1[k] + 4.0 * (m1[k] - m0[k]) for k in ("w", "b")}  # loss minimised at alpha=4

    def eval_fn(sd):
        return sum(float(((sd[k] - target[k]) ** 2).sum()) for k in target)

    r = extra_merge([m0, m1], eval_fn=eval_fn, alphas=(1.0, 2.0, 4.0, 8.0))
    assert r.alpha == 4.0
    assert sorted(r.losses) == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert r.losses[4.0] == pytest.approx(0.0, abs=1e-8)
    # every extrapolation hurts -> alpha = 0, the plain merge M_K
    r0 = extra_merge(
        [m0, m1],
        eval_fn=lambda sd: eval_fn(sd) if False else float((sd["b"] - m1["b"]).abs().sum()),
    )
    assert r0.alpha == 0.0
    assert torch.equal(r0.state_dict["w"], m1["w"])


def test_line_search_skips_diverged_candidates():
    m0, m1 = _two(2)

    def eval_fn(sd):
        d = float((sd["b"] - m1["b"]).norm() / (m1["b"] - m0["b"]).norm())  # = alpha
        return math.nan if d > 1.5 else -d

    r = extra_merge([m0, m1], eval_fn=eval_fn, alphas=(1.0, 2.0, 4.0))
    assert r.alpha == 1.0


# ---------------------------------------------------------------------------------------------
# river valley: f(x, y) = sum_i (a_i / 2) x_i^2 - b y  (x: hills, y: river), noisy SGD, eta = 1
# ---------------------------------------------------------------------------------------------
A = np.array([0.5, 1.0, 1.5, 1.8, 1.9] * 4)  # curvatures; eta * a up to 1.9 -> violent oscillation
SIGMA = 1.0  # gradient noise on the hills (0.1 * SIGMA along the river)
DELTA = 5  # steps between checkpoints
W = 16  # SMA window


def _f(sd, b):
    x, y = sd["hills"].double().reshape(-1).numpy(), float(sd["river"].double())
    return float((A / 2 * x * x).sum() - b * y)


def _river_run(seed, b, n_ckpt=60):
    rng = np.random.default_rng(seed)
    x = np.zeros(A.size)
    y = 0.0
    ckpts = []
    for t in range(1, n_ckpt * DELTA + 1):
        x = x - (A * x + SIGMA * rng.normal(size=A.size))  # eta = 1
        y = y - (-b + 0.1 * SIGMA * rng.normal())
        if t % DELTA == 0:
            ckpts.append(
                {
                    "hills": torch.tensor(x.reshape(4, 5), dtype=torch.float64),
                    "river": torch.tensor([y], dtype=torch.float64),
                }
            )
    return ckpts


@pytest.mark.parametrize("seed", [0, 1])
def test_river_valley_pc1_is_the_river_and_merging_raises_evr(seed):
    raw = _river_run(seed, b=0.2)
    merged = merged_trajectory(raw, window=W)
    rm, rr = rank1_report(merged), rank1_report(raw)
    cos = float(rm.direction["river"].abs().sum())  # |<u1, y_hat>|, u1 unit norm
    assert cos > 0.995
    assert rm.explained_variance_ratio > 0.99
    # averaging is a low-pass filter: the off-river variance share shrinks > 5x
    assert 1 - rr.explained_variance_ratio > 5 * (1 - rm.explained_variance_ratio)
    # and the raw trajectory does oscillate off the river
    assert rr.explained_variance_ratio < 0.95


@pytest.mark.parametrize("direction", ["diff", "pc1"])
def test_river_valley_direction_is_one_merged_step_of_drift(direction):
    # y drifts eta * b per step, so eta * b * DELTA per checkpoint = per merged step
    b = 0.4
    g = extra_merge(merged_trajectory(_river_run(3, b), window=W), direction=direction).direction
    assert float(g["river"]) == pytest.approx(b * DELTA, rel=0.05)


@pytest.mark.parametrize("alpha", [2.0, 4.0])
def test_river_valley_extrapolation_gain_matches_closed_form(alpha):
    # a step of alpha merged steps along the river lowers f by alpha * b * (eta * b * DELTA);
    # the hill term is second order once merging has removed the oscillation
    b = 0.4
    gains = []
    for seed in range(4):
        merged = merged_trajectory(_river_run(seed, b), window=W)
        em = extra_merge(merged, alpha=alpha, direction="pc1").state_dict
        gains.append(_f(merged[-1], b) - _f(em, b))
    closed = alpha * b * (b * DELTA)
    assert np.mean(gains) == pytest.approx(closed, rel=0.1)
