"""Baselines against their published rules / closed forms, computed independently in numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from icml26_robust_satisficing import (
    GroupDRO,
    cvar_loss,
    erm_loss,
    fragility,
    klrs_feasibility_loss,
    klrs_lambda_search,
)
from refs import root_h

T = torch.float64


def test_groupdro_follows_the_published_update_step_by_step():
    """Sagawa et al. 2020 / group_DRO loss.py: group means (0 if absent), q ← q·exp(η(L+C/√n)),
    normalise, loss = q·L; checked over 6 steps with an absent group and an adjustment."""
    counts = np.array([50.0, 20.0, 5.0])
    eta, C = 0.3, 0.7
    dro = GroupDRO(torch.tensor(counts), step_size=eta, adjustment=C)
    q = np.full(3, 1 / 3)
    rng = np.random.default_rng(0)
    for step in range(6):
        per = rng.uniform(0, 2, 8)
        gid = rng.integers(0, 3 if step % 2 else 2, 8)  # odd steps miss group 2
        L = np.array([per[gid == g].mean() if (gid == g).any() else 0.0 for g in range(3)])
        q = q * np.exp(eta * (L + C / np.sqrt(counts)))
        q = q / q.sum()
        per_t = torch.tensor(per, dtype=T, requires_grad=True)
        loss = dro(per_t, torch.tensor(gid))
        np.testing.assert_allclose(dro.q.numpy(), q, rtol=1e-5)
        assert float(loss.detach()) == pytest.approx(q @ L, rel=1e-5)
        (g,) = torch.autograd.grad(loss, per_t)
        cnt = np.bincount(gid, minlength=3)
        np.testing.assert_allclose(g.numpy(), q[gid] / cnt[gid], rtol=1e-5)
    assert "q" in dro.state_dict()


def test_cvar_is_the_rockafellar_uryasev_minimum():
    rng = np.random.default_rng(1)
    x = rng.exponential(size=37)
    for alpha in [0.05, 0.2, 0.5, 1.0]:
        # min_η η + E(x−η)_+/α is attained at a sample point (piecewise linear in η)
        ru = min(e + np.maximum(x - e, 0).mean() / alpha for e in x)
        assert float(cvar_loss(torch.tensor(x), alpha)) == pytest.approx(ru, rel=1e-12)
    assert float(cvar_loss(torch.tensor(x), 1.0)) == pytest.approx(
        float(erm_loss(torch.tensor(x))), rel=1e-12
    )
    with pytest.raises(ValueError, match="alpha"):
        cvar_loss(torch.tensor(x), 0.0)


def test_klrs_feasibility_is_the_rs_constraint_and_lambda_search_finds_kappa():
    """Σ π e^{(L−τ)/λ} ≤ 1 ⟺ λ log E_π e^{L/λ} ≤ τ, whose smallest λ is κ = 1/h*: with a model
    that does not move, KL-RS's doubling/bisection search (one fit per λ) lands on IRS's κ."""
    L = torch.tensor([0.3, 1.1, 0.6], dtype=T)
    pi = torch.tensor([0.5, 0.2, 0.3], dtype=T)
    tau = 0.7
    kappa = 1 / root_h(L.numpy(), pi.numpy(), tau)
    assert float(klrs_feasibility_loss(L, pi, tau, kappa)) == pytest.approx(1.0, rel=1e-9)
    assert float(klrs_feasibility_loss(L, pi, tau, 1.05 * kappa)) < 1.0
    assert float(klrs_feasibility_loss(L, pi, tau, 0.95 * kappa)) > 1.0
    lam, fits = klrs_lambda_search(lambda lam: L, pi, tau, lam0=0.01, max_fits=40)
    assert lam == pytest.approx(kappa, rel=1e-6)
    assert lam == pytest.approx(float(fragility(L, pi, tau).kappa), rel=1e-6)
    assert fits == 40  # every probe of λ is a full training run
    # with few fits the answer is the smallest λ *known* feasible: an upper bound on κ
    lam8, _ = klrs_lambda_search(lambda lam: L, pi, tau, lam0=0.01, max_fits=8)
    assert lam8 >= kappa and float(klrs_feasibility_loss(L, pi, tau, lam8)) <= 1.0
