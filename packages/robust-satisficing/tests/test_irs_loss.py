"""IRSLoss: Danskin gradient vs finite differences of κ(θ), degenerate batches, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from icml26_robust_satisficing import IRSLoss, fragility, tilt
from refs import root_h

T = torch.float64


def _problem(seed=0, n=60, d=5, groups=3):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=T)
    y = torch.randn(n, generator=g, dtype=T)
    gid = torch.arange(n) % groups
    X[gid == 2] *= 2.0  # groups differ, so group losses differ
    w = 0.3 * torch.randn(d, generator=g, dtype=T)
    return X, y, gid, w


def _group_losses(w, X, y, gid, groups=3):
    per = (X @ w - y) ** 2  # (n,)
    return torch.stack([per[gid == k].mean() for k in range(groups)]), per


def _kappa_ref(w, X, y, gid, pi, tau):
    """κ(θ) = 1/h*(θ) from the independent root of (1/h) log Σ π e^{hL} = τ (numpy)."""
    L, _ = _group_losses(w, X, y, gid)
    return 1.0 / root_h(L.numpy(), pi, tau, iters=400)


def test_danskin_gradient_matches_finite_differences_of_kappa():
    X, y, gid, w = _problem()
    pi = np.array([0.5, 0.3, 0.2])
    L0, _ = _group_losses(w, X, y, gid)
    tau = float(pi @ L0.numpy()) + 0.4 * float(L0.max() - pi @ L0.numpy())
    wg = w.clone().requires_grad_(True)
    _L, per = _group_losses(wg, X, y, gid)
    loss, stats = IRSLoss(torch.tensor(pi), tau=tau)(per, gid)
    assert stats.fragility.status == "ok"
    (grad,) = torch.autograd.grad(loss, wg)
    eps = 1e-5
    fd = torch.zeros_like(w)
    for i in range(len(w)):
        e = torch.zeros_like(w)
        e[i] = eps
        fd[i] = (_kappa_ref(w + e, X, y, gid, pi, tau) - _kappa_ref(w - e, X, y, gid, pi, tau)) / (
            2 * eps
        )
    torch.testing.assert_close(grad, fd, rtol=2e-3, atol=1e-6 * float(fd.abs().max()))
    # and the reported κ is κ(θ)
    assert float(stats.fragility.kappa) == pytest.approx(
        _kappa_ref(w, X, y, gid, pi, tau), rel=1e-6
    )


def test_autograd_through_the_inner_max_equals_danskin():
    """Differentiating (p_h·L − τ)/KL(p_h‖π) at h = h* with p_h depending on L (envelope
    theorem: p* is an interior maximiser over the simplex) gives p*/KL, the IRS weights."""
    L = torch.tensor([0.4, 1.3, 0.9, 0.2], dtype=T)
    pi = torch.tensor([0.4, 0.1, 0.2, 0.3], dtype=T)
    tau = 0.75
    fr = fragility(L, pi, tau)
    Lg = L.clone().requires_grad_(True)
    p, d = tilt(Lg, pi, fr.h_star[None])
    ratio = (p[0] @ Lg - tau) / d[0]
    (through,) = torch.autograd.grad(ratio, Lg)
    loss, _ = IRSLoss(pi, tau=tau)(Lg, torch.arange(4))  # one sample per group: L_g = L
    (danskin,) = torch.autograd.grad(loss, Lg)
    torch.testing.assert_close(danskin, fr.p_star / fr.kl, rtol=1e-12, atol=0)
    torch.testing.assert_close(through, danskin, rtol=2e-4, atol=0)
    # away from h* the two differ (the test can fail)
    p, d = tilt(Lg, pi, 2 * fr.h_star[None])
    (off,) = torch.autograd.grad((p[0] @ Lg - tau) / d[0], Lg)
    assert (off - danskin).abs().max() > 0.05 * danskin.abs().max()


def test_official_tau_rule():
    pi = torch.tensor([0.7, 0.3], dtype=T)
    per = torch.tensor([0.01, 0.02, 0.5], dtype=T)
    gid = torch.tensor([0, 0, 1])
    _, st = IRSLoss(pi)(per, gid)  # π·L = 0.7·0.015 + 0.3·0.5 = 0.1605 → 1.01·π·L
    assert float(st.fragility.tau) == pytest.approx(1.01 * 0.1605, rel=1e-12)
    _, st = IRSLoss(pi)(per / 10, gid)  # 1.01·π·L = 0.0162 < target_tau 0.1
    assert float(st.fragility.tau) == pytest.approx(0.1, rel=1e-12)


def test_absent_groups_renormalise_the_prior():
    pi = torch.tensor([0.5, 0.2, 0.3], dtype=T)
    per = torch.tensor([0.1, 0.3, 1.5, 0.9], dtype=T, requires_grad=True)
    gid = torch.tensor([0, 0, 2, 2])  # group 1 absent
    loss, st = IRSLoss(pi, tau=0.9)(per, gid)
    np.testing.assert_allclose(st.prior.numpy(), [0.625, 0.0, 0.375])
    L = np.array([0.2, 1.2])
    h = root_h(L, np.array([0.625, 0.375]), 0.9)
    assert float(st.fragility.kappa) == pytest.approx(1 / h, rel=1e-6)
    p = np.array([0.625, 0.375]) * np.exp(h * L)
    p /= p.sum()
    klv = (p * np.log(p / [0.625, 0.375])).sum()
    assert float(loss.detach()) == pytest.approx((p @ L) / klv, rel=1e-3)


def test_tau_rule_uses_the_prior_restricted_to_present_groups():
    """Official `_active_tau`: π restricted to the batch's groups and renormalised, then π·L."""
    pi = torch.tensor([0.5, 0.2, 0.3], dtype=T)
    per = torch.tensor([0.1, 0.3, 1.5, 0.9], dtype=T)
    gid = torch.tensor([0, 0, 2, 2])  # group 1 absent: L = [0.2, -, 1.2]
    _, st = IRSLoss(pi)(per, gid)
    restricted = 0.625 * 0.2 + 0.375 * 1.2  # 0.575; the full prior would give 0.46
    assert float(st.fragility.tau) == pytest.approx(1.01 * restricted, rel=1e-12)


def test_single_group_reduces_to_erm():
    """One group: the only reweighting of one group is π itself, KL ≡ 0, κ = 0 — IRS's step is
    the ERM step on that group (the official code divides by a NaN KL here)."""
    per = torch.tensor([0.3, 1.7, 0.2], dtype=T, requires_grad=True)
    loss, st = IRSLoss(torch.tensor([0.25, 0.75], dtype=T))(per, torch.tensor([1, 1, 1]))
    assert bool(st.fragility.degenerate) and float(st.fragility.kappa) == 0.0
    assert "degenerate" in st.fragility.status
    (g,) = torch.autograd.grad(loss, per)
    assert float(loss.detach()) == pytest.approx(float(per.detach().mean()), rel=1e-12)
    torch.testing.assert_close(g, torch.full_like(per, 1 / 3))


def test_equal_group_losses_are_finite():
    per = torch.tensor([0.5, 0.5, 0.5, 0.5], requires_grad=True)
    loss, st = IRSLoss.from_counts([3, 1])(per, torch.tensor([0, 0, 1, 1]))
    assert torch.isfinite(loss) and bool(st.fragility.degenerate)
    (g,) = torch.autograd.grad(loss, per)
    assert torch.isfinite(g).all()
    # ERM with the prior: π·L = 0.75·0.5 + 0.25·0.5
    assert float(loss.detach()) == pytest.approx(0.5, rel=1e-6)


def test_tau_above_every_loss_still_tilts_to_the_worst_group():
    """Official semantics: κ is not clipped at 0; p* still up-weights the worst group."""
    pi = torch.tensor([0.6, 0.4], dtype=T)
    per = torch.tensor([0.01, 0.05], dtype=T, requires_grad=True)
    loss, st = IRSLoss(pi, target_tau=1.0)(per, torch.tensor([0, 1]))
    fr = st.fragility
    assert torch.isfinite(loss) and float(fr.kappa) < 0 and "above every" in fr.status
    assert float(fr.p_star[1]) > 0.4
    (g,) = torch.autograd.grad(loss, per)
    assert torch.isfinite(g).all() and g[1] / g[0] > 0.4 / 0.6


def test_instance_mode_equals_one_group_per_sample():
    per = torch.tensor([0.2, 0.9, 0.4, 1.4, 0.1], dtype=T, requires_grad=True)
    a, sa = IRSLoss()(per)
    b, _sb = IRSLoss(torch.full((5,), 0.2, dtype=T))(per, torch.arange(5))
    assert float(a.detach()) == pytest.approx(float(b.detach()), rel=1e-12)
    ga, gb = torch.autograd.grad(a, per)[0], torch.autograd.grad(b, per)[0]
    torch.testing.assert_close(ga, gb)
    assert float(sa.fragility.kappa) == pytest.approx(
        1 / root_h(per.detach().numpy(), np.full(5, 0.2), float(sa.fragility.tau)), rel=1e-6
    )


def test_irs_loss_has_no_host_sync_free_path_when_not_validating():
    """validate=False runs without .item(); the result equals the validated one."""
    per = torch.rand(16, dtype=T)
    gid = torch.randint(0, 4, (16,), generator=torch.Generator().manual_seed(0))
    a, _ = IRSLoss.from_counts([4, 3, 2, 1])(per, gid)
    b, _ = IRSLoss.from_counts([4, 3, 2, 1], validate=False)(per, gid)
    assert float(a) == float(b)


@pytest.mark.parametrize(
    "make,call,match",
    [
        (lambda: IRSLoss([0.5, 0.6]), None, "sum to one"),
        (lambda: IRSLoss([1.2, -0.2]), None, "non-negative"),
        (lambda: IRSLoss([0.5, 0.5], tau=-0.1), None, "tau"),
        (lambda: IRSLoss([0.5, 0.5], target_tau=-1.0), None, "target_tau"),
        (lambda: IRSLoss([0.5, 0.5], tau_multiplier=0.9), None, "tau_multiplier"),
        (lambda: IRSLoss.from_counts([0, 0]), None, "counts"),
        (
            lambda: IRSLoss([0.5, 0.5]),
            (torch.rand(3), torch.tensor([0, 1, 2])),
            "group_ids out of range",
        ),
        (
            lambda: IRSLoss([0.5, 0.5]),
            (torch.rand(3), torch.tensor([0, -1, 1])),
            "group_ids out of range",
        ),
        (
            lambda: IRSLoss([0.5, 0.5]),
            (torch.tensor([0.1, math.nan, 0.2]), torch.tensor([0, 1, 1])),
            "NaN",
        ),
        (lambda: IRSLoss([0.5, 0.5]), (torch.rand(3), None), "group_ids"),
        (lambda: IRSLoss([0.5, 0.5]), (torch.rand(3), torch.tensor([0.0, 1.0, 1.0])), "integer"),
        (
            lambda: IRSLoss([0.5, 0.5]),
            (torch.rand(3, 2), torch.tensor([0, 1, 1])),
            "per_sample_loss",
        ),
        (lambda: IRSLoss(), (torch.rand(3), torch.tensor([0, 1, 1])), "no prior"),
    ],
)
def test_bad_input_names_the_argument(make, call, match):
    with pytest.raises(ValueError, match=match):
        m = make()
        assert call is not None
        m(*call)


def test_fragility_bad_input():
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(ValueError, match="tau must be a finite non-negative"):
            fragility(torch.tensor([0.1, 0.4]), torch.tensor([0.5, 0.5]), bad)
    with pytest.raises(ValueError, match="NaN"):
        fragility(torch.tensor([0.1, math.nan]), torch.tensor([0.5, 0.5]), 0.2)
    with pytest.raises(ValueError, match="shape"):
        fragility(torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0.5, 0.5]), 0.2)
    with pytest.raises(ValueError, match="sum to one"):
        fragility(torch.tensor([0.1, 0.2]), torch.tensor([0.5, 0.4]), 0.2)


def test_tau_below_mean_is_reported():
    fr = fragility(torch.tensor([0.2, 1.0]), torch.tensor([0.5, 0.5]), 0.5)
    assert bool(fr.tau_below_mean) and "infeasible" in fr.status and torch.isfinite(fr.kappa)


def test_unscaled_variant_is_the_same_direction_at_unit_scale():
    per = torch.tensor([0.2, 0.9, 0.4, 1.4, 0.1, 0.3], dtype=T, requires_grad=True)
    gid = torch.tensor([0, 1, 1, 2, 0, 2])
    pi = torch.tensor([0.5, 0.3, 0.2], dtype=T)
    a, st = IRSLoss(pi, tau=0.8)(per, gid)
    b, _ = IRSLoss(pi, tau=0.8, scale_by_kl=False)(per, gid)
    fr = st.fragility
    assert float(b.detach()) == pytest.approx(float(fr.p_star @ st.group_losses), rel=1e-12)
    ga, gb = torch.autograd.grad(a, per)[0], torch.autograd.grad(b, per)[0]
    torch.testing.assert_close(ga * fr.kl, gb, rtol=1e-10, atol=0)


@pytest.mark.parametrize("scale", [1e-8, 1e8])
def test_irs_loss_tilts_at_any_loss_scale(scale):
    """Per-sample losses at 1e-8 / 1e8: p* is the tilt of the rescaled problem, not π (ERM)."""
    per = torch.tensor([0.2, 0.3, 1.0, 1.2, 0.5, 0.4], dtype=T) * scale
    gid = torch.tensor([0, 0, 1, 1, 2, 2])
    pi = torch.tensor([0.6, 0.1, 0.3], dtype=T)
    L = np.array([0.25, 1.1, 0.45])
    tau = 0.6
    loss, st = IRSLoss(pi, tau=tau * scale)(per, gid)
    assert st.fragility.status == "ok"
    pL = float(st.fragility.p_star @ torch.tensor(L * scale))
    assert float(loss) == pytest.approx(pL / float(st.fragility.kl), rel=1e-9)
    h = root_h(L, pi.numpy(), tau)  # the scale-1 problem, independent bisection
    p = pi.numpy() * np.exp(h * L)
    p /= p.sum()
    np.testing.assert_allclose(st.fragility.p_star.numpy(), p, rtol=1e-3)
    assert float(st.fragility.kappa) == pytest.approx(scale / h, rel=1e-5)
    with pytest.raises(ValueError, match="h range too small"):
        IRSLoss(pi, tau=tau * 1e-8, relative_h=False)(per / scale * 1e-8, gid)
