"""Baselines IRS is compared with: ERM, GroupDRO, CVaR-DRO, KL-DRO and KL-RS with its λ search.

All take per-sample losses (B,) (and group ids where they are group methods) and return a scalar
loss to call `.backward()` on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .irs import group_means

__all__ = [
    "GroupDRO",
    "cvar_loss",
    "erm_loss",
    "kl_dro_loss",
    "klrs_feasibility_loss",
    "klrs_lambda_search",
]


def erm_loss(per_sample_loss: Tensor) -> Tensor:
    """Empirical risk: the mean of per-sample losses (B,)."""
    return per_sample_loss.mean()


class GroupDRO(nn.Module):
    """Online GroupDRO (Sagawa et al., ICLR 2020, Algorithm 1; kohpangwei/group_DRO loss.py).

    Each step, with batch group means L_g (0 for groups absent from the batch) and training
    counts n_g:  q ← q ⊙ exp(η · (L_g + C/√n_g)),  q ← q / Σq,  loss = Σ_g q_g L_g.
    q starts uniform and is a buffer (saved in the state dict). η = `step_size` (IRS's copy:
    0.01), C = `adjustment` (the paper's generalisation adjustment; 0 = plain GroupDRO).
    """

    q: Tensor
    adj: Tensor

    def __init__(
        self,
        group_counts: Tensor | Sequence[float],
        *,
        step_size: float = 0.01,
        adjustment: float | Sequence[float] = 0.0,
    ) -> None:
        super().__init__()
        n = torch.as_tensor(group_counts, dtype=torch.float32)
        if n.ndim != 1 or bool((n <= 0).any()):
            raise ValueError(f"group_counts must be 1-D and positive, got {n.tolist()}")
        if not (math.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be positive, got {step_size}")
        c = torch.as_tensor(adjustment, dtype=torch.float32).expand_as(n)
        self.register_buffer("q", torch.full_like(n, 1.0 / n.numel()))
        self.register_buffer("adj", c / n.sqrt())
        self.step_size = step_size

    def forward(self, per_sample_loss: Tensor, group_ids: Tensor) -> Tensor:
        G = self.q.numel()
        if group_ids.shape != per_sample_loss.shape:
            raise ValueError("group_ids must have the shape of per_sample_loss")
        if bool(((group_ids < 0) | (group_ids >= G)).any()):
            raise ValueError(f"group_ids out of range [0, {G})")
        L, _ = group_means(per_sample_loss, group_ids.long(), G)  # (G,)
        with torch.no_grad():
            q = self.q * torch.exp(self.step_size * (L.detach().float() + self.adj))
            self.q.copy_(q / q.sum())
        return self.q.to(L.dtype) @ L


def cvar_loss(per_sample_loss: Tensor, alpha: float) -> Tensor:
    """CVaR_α of the empirical loss distribution: the mean of the worst α-fraction.

    = min_η η + E[(ℓ − η)_+]/α (Rockafellar–Uryasev); exact with a fractional last sample:
    weights 1/(αB) on the top ⌊αB⌋ losses and the remainder on the next one.
    """
    if not (0 < alpha <= 1):
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    B = per_sample_loss.numel()
    srt, _ = torch.sort(per_sample_loss.flatten(), descending=True)
    k = alpha * B
    w = (k - torch.arange(B, device=srt.device, dtype=srt.dtype)).clamp(0.0, 1.0) / k
    return w @ srt


def kl_dro_loss(losses: Tensor, lam: float, prior: Tensor | None = None) -> Tensor:
    """Penalised KL-DRO: sup_P E_P ℓ − λ KL(P‖π) = λ log Σ π exp(ℓ/λ) (Donsker–Varadhan).

    losses (N,) per sample (uniform π) or per group with `prior` (N,).
    """
    if not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be positive, got {lam}")
    if prior is None:
        log_prior = torch.full_like(losses, -math.log(losses.numel()))
    else:
        log_prior = prior.to(losses.dtype).log()
    return lam * torch.logsumexp(log_prior + losses / lam, dim=-1)


def klrs_feasibility_loss(group_losses: Tensor, prior: Tensor, tau: float, lam: float) -> Tensor:
    """KL-RS feasibility loss Σ_g π_g exp((L_g − τ)/λ), exponent clipped at 50 (official klrs).

    ≤ 1 exactly when λ log Σ π e^{L/λ} ≤ τ, i.e. when E_P L ≤ τ + λ KL(P‖π) for every P.
    """
    if not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be positive, got {lam}")
    z = ((group_losses - tau) / lam).clamp(max=50.0)
    return prior.to(group_losses.dtype) @ torch.exp(z)


def klrs_lambda_search(
    fit: Callable[[float], Tensor],
    prior: Tensor,
    tau: float,
    *,
    lam0: float = 1.0,
    max_fits: int = 15,
) -> tuple[float, int]:
    """KL-RS outer search: the smallest λ (= κ) whose trained model is feasible.

    `fit(lam)` trains a model on `klrs_feasibility_loss(·, λ)` and returns its final group
    losses (G,). λ doubles until feasible (Σ π e^{(L−τ)/λ} ≤ 1), then bisects; every call is a
    full training run — the cost IRS avoids. Returns (λ*, number of fits).
    """
    fits = 0

    def feasible(lam: float) -> bool:
        nonlocal fits
        fits += 1
        L = fit(lam).detach().double()
        return bool(klrs_feasibility_loss(L, prior.double(), tau, lam) <= 1.0)

    hi = lam0
    while not feasible(hi):
        if fits >= max_fits:
            return math.inf, fits
        hi *= 2.0
    lo = 0.0
    while fits < max_fits:
        mid = 0.5 * (lo + hi)
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi, fits
