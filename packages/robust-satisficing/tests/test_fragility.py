"""κ over the tilt path against brute force over the simplex, the optimality and DV identities."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from icml26_robust_satisficing import fragility, kl_dro_loss, tilt
from refs import brute_kappa, kl, random_instance, root_h, simplex_grid

T = torch.float64


@pytest.mark.parametrize("k,n", [(2, 200_000), (3, 1500)])
@pytest.mark.parametrize("seed", range(4))
def test_kappa_matches_brute_force_over_the_simplex(k, n, seed):
    L, pi, tau = random_instance(np.random.default_rng(seed), k)
    fr = fragility(torch.tensor(L), torch.tensor(pi), tau)
    brute = brute_kappa(L, pi, tau, n)
    assert fr.status == "ok"
    # the simplex grid is a lower bound on the sup; the tilt search must reach it
    assert float(fr.kappa) >= brute * (1 - 1e-7)  # search resolution: 139 points
    assert float(fr.kappa) == pytest.approx(brute, rel=2e-3 if k == 3 else 1e-6)
    # and the worst case found over the simplex is the tilt point p*
    P = simplex_grid(k, n)
    d = kl(P, pi)
    ok = d > 1e-10
    best = P[ok][np.argmax((P @ L - tau)[ok] / d[ok])]
    np.testing.assert_allclose(fr.p_star.numpy(), best, atol=2e-3 if k == 3 else 1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_gibbs_tilt_optimality_identity(seed):
    """At the maximiser: κ = 1/h* and (1/h*) log Σ π e^{h* L} = τ (h* from an independent root)."""
    rng = np.random.default_rng(100 + seed)
    L, pi, tau = random_instance(rng, int(rng.integers(2, 9)))
    fr = fragility(torch.tensor(L), torch.tensor(pi), tau)
    h_root = root_h(L, pi, tau)
    assert float(fr.h_star) == pytest.approx(h_root, rel=1e-3)
    assert float(fr.kappa) == pytest.approx(1.0 / h_root, rel=1e-6)  # flat top: κ to 2nd order
    h = float(fr.h_star)
    cgf = np.log((pi * np.exp(h * L)).sum()) / h
    assert cgf == pytest.approx(tau, rel=1e-3)
    # p* is the Gibbs tilt π e^{h* L}/Z and kl is its KL to π
    p = pi * np.exp(h * L)
    p /= p.sum()
    np.testing.assert_allclose(fr.p_star.numpy(), p, rtol=1e-9)
    assert float(fr.kl) == pytest.approx(kl(p, pi), rel=1e-9)


@pytest.mark.parametrize("lam", [0.1, 0.5, 2.0])
def test_donsker_varadhan_identity(lam):
    """sup_P E_P L − λ KL(P‖π) = λ log Σ π e^{L/λ}, attained at the tilt with h = 1/λ."""
    rng = np.random.default_rng(7)
    L, pi = rng.uniform(0, 2, 3), rng.dirichlet(np.ones(3))
    closed = lam * np.log((pi * np.exp(L / lam)).sum())
    P = simplex_grid(3, 1500)
    brute = (P @ L - lam * kl(P, pi)).max()
    assert brute <= closed + 1e-12
    assert brute == pytest.approx(closed, rel=1e-5)
    p, d = tilt(torch.tensor(L), torch.tensor(pi), torch.tensor([1.0 / lam], dtype=T))
    at_tilt = float(p[0] @ torch.tensor(L) - lam * d[0])
    assert at_tilt == pytest.approx(closed, rel=1e-12)
    assert float(kl_dro_loss(torch.tensor(L), lam, torch.tensor(pi))) == pytest.approx(
        closed, rel=1e-12
    )


def test_tilt_beats_every_distribution_at_equal_kl():
    """At a fixed KL radius the tilt p_h has the largest expected loss (why (1) searches only h)."""
    rng = np.random.default_rng(3)
    L, pi = rng.uniform(0, 1, 3), rng.dirichlet(np.ones(3))
    P = simplex_grid(3, 800)
    d = kl(P, pi)
    for h in [1.0, 3.0, 10.0]:
        p, r = tilt(torch.tensor(L), torch.tensor(pi), torch.tensor([h], dtype=T))
        rad = float(r[0])
        shell = np.abs(d - rad) < 5e-3 * rad
        assert shell.sum() > 10
        # dE/dKL along the tilt is 1/h: the shell's width allows at most 5e-3·rad/h more
        assert (P[shell] @ L).max() <= float(p[0] @ torch.tensor(L)) + 5e-3 * rad / h


def test_absent_groups_are_excluded():
    """Zero prior mass = group absent: same κ as the search on the present groups alone."""
    L = torch.tensor([0.3, 9.0, 1.2, 0.7], dtype=T)
    pi = torch.tensor([0.5, 0.0, 0.2, 0.3], dtype=T)
    fr = fragility(L, pi, 0.8)
    sub = fragility(L[[0, 2, 3]], pi[[0, 2, 3]], 0.8)
    assert float(fr.kappa) == pytest.approx(float(sub.kappa), rel=1e-12)
    assert float(fr.p_star[1]) == 0.0
    assert float(fr.kappa) == pytest.approx(
        1 / root_h(L[[0, 2, 3]].numpy(), pi[[0, 2, 3]].numpy(), 0.8), rel=1e-6
    )


def test_large_losses_stay_finite():
    """h·L up to 50·1e3: log-softmax keeps p* and κ finite (no exp overflow)."""
    L = torch.tensor([1000.0, 1001.0, 1003.0], dtype=T)
    pi = torch.tensor([0.5, 0.3, 0.2], dtype=T)
    fr = fragility(L, pi, 1002.0)
    assert torch.isfinite(fr.kappa) and torch.isfinite(fr.p_star).all()
    assert float(fr.kappa) == pytest.approx(1 / root_h(L.numpy() - 1000, pi.numpy(), 2.0), rel=1e-5)


def test_runs_in_float32_input_and_reports_boundary():
    L = torch.tensor([0.0, 1.0])
    pi = torch.tensor([0.5, 0.5])
    # τ barely above the mean: h* → 0, κ → ∞ beyond the search range
    fr = fragility(L, pi, 0.5 + 1e-7)
    assert bool(fr.at_boundary) and "edge" in fr.status
    assert torch.isfinite(fr.kappa)


@pytest.mark.parametrize("scale", [1e-8, 1e8])
@pytest.mark.parametrize("k,n,seed", [(2, 200_000, 0), (2, 200_000, 1), (3, 1500, 2)])
def test_kappa_scales_with_the_losses_against_brute_force(scale, k, n, seed):
    """Losses and τ at scale s: κ from a brute-force simplex search at that scale (numpy, no
    closed form), p* unchanged. An h range in absolute loss units fails both ways: at 1e-8 every
    tilt has KL ≤ 1e-12 ("all losses equal"), at 1e8 every grid point is the worst vertex."""
    L, pi, tau = random_instance(np.random.default_rng(seed), k)
    Ls, taus = L * scale, tau * scale
    fr = fragility(torch.tensor(Ls), torch.tensor(pi), taus)
    assert fr.status == "ok"
    brute = brute_kappa(Ls, pi, taus, n)  # scales with s by itself: P·(sL) − sτ over KL(P‖π)
    assert float(fr.kappa) == pytest.approx(brute, rel=2e-3 if k == 3 else 1e-6)
    P = simplex_grid(k, n)
    d = kl(P, pi)
    ok = d > 1e-10
    best = P[ok][np.argmax((P @ Ls - taus)[ok] / d[ok])]
    np.testing.assert_allclose(fr.p_star.numpy(), best, atol=2e-3 if k == 3 else 1e-4)
    assert float(fr.kappa) * float(fr.h_star) == pytest.approx(1.0, rel=1e-3)  # κ = 1/h*


def test_too_small_h_range_is_reported_not_called_equal_losses():
    L = torch.tensor([0.2, 1.0, 0.5], dtype=T) * 1e-8
    pi = torch.tensor([0.6, 0.1, 0.3], dtype=T)
    tau = 0.4e-8
    # the official absolute range at this scale: every KL(p_h‖π) ≤ 1e-12
    with pytest.raises(ValueError, match="h range too small.*h_max"):
        fragility(L, pi, tau, relative_h=False)
    fr = fragility(L, pi, tau, relative_h=False, validate=False)
    assert bool(fr.range_too_small) and bool(fr.degenerate)
    assert fr.status.startswith("h range too small")
    # a relative range can be too small as well
    with pytest.raises(ValueError, match="h range too small"):
        fragility(L, pi, tau, h_min=1e-9, h_max=1e-7)
    # equal losses are still degenerate, and not "too small"
    eq = fragility(torch.full((3,), 1e-8, dtype=T), pi, 2e-8)
    assert bool(eq.degenerate) and not bool(eq.range_too_small)
    assert eq.status.startswith("degenerate")
    # absolute units at scale 1 agree with relative units (the same tilts, rescaled grid)
    L1 = torch.tensor([0.2, 1.0, 0.5], dtype=T)
    a = fragility(L1, pi, 0.4, relative_h=False)
    r = fragility(L1, pi, 0.4)
    assert float(a.kappa) == pytest.approx(float(r.kappa), rel=1e-6)
