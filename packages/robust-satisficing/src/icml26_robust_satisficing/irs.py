"""Iterative Robust Satisficing (IRS): fragility over the exponential-tilt path and its loss.

Robust satisficing (Long, Sim & Zhou, Oper. Res. 2023; KL form: Yan, Zhou & Guo 2024) asks for
parameters θ that reach a target loss τ in distribution while deteriorating as slowly as possible
when the data distribution P departs from the training distribution π:

    minimise κ  subject to  E_P[ℓ(θ)] ≤ τ + κ · KL(P ‖ π)   for every P.

Over reweightings of G groups with losses L = (L_1..L_G) and prior π the smallest such κ is the
*fragility*

    κ(θ) = sup_P (P·L − τ) / KL(P ‖ π)
         = max_{h > 0} (p_h·L − τ) / KL(p_h ‖ π),   p_h = softmax(log π + h·L),           (1)

because at a fixed KL the Gibbs tilt p_h maximises P·L (Donsker–Varadhan). At the maximiser h*

    (1/h*) · log Σ_g π_g exp(h* L_g) = τ   and   κ = 1/h*,                                  (2)

("Gibbs-tilt optimality identity"; d/dh of the ratio is ∝ h·τ − log Σ π e^{hL}, and the
cumulant-generating function over h increases from π·L to max L, so the ratio is unimodal).

IRS (ICML 2026) trains on the Danskin surrogate of (1): with p* found on detached losses,

    loss(θ) = (p*·L(θ)) / KL(p* ‖ π),      ∇loss = ∇κ(θ)  (τ held fixed),                  (3)

one forward and one backward pass per step. The h search follows the official code: 64
log-spaced h in [1e-3, 50], then 3 rounds of 25 points between the best point's neighbours
(139 G-dimensional softmaxes). It runs in float64 on the detached losses with no host sync.

The h range is in units of 1/(max L − min L) over the present groups (`relative_h=True`,
default): h·L then spans the same tilts whatever the loss scale, since p_h depends on L only
through h·(L − min L). κ scales with the losses (κ(sL, sτ) = s·κ(L, τ)) and h* with 1/s.

Deviations from the official code (named, on purpose):
  * the h range is relative to the spread of the group losses (the official range is in
    absolute loss units, `relative_h=False`): with absolute units losses at scale 1e-8 give
    KL(p_h‖π) ≤ 1e-12 at every h (reported as "all losses equal", ERM fallback) and losses at
    scale 1e8 put every grid point on the worst-group vertex. For losses with spread ≈ 1 (cross
    entropy early in training) the two ranges coincide.
  * a range in which every tilt has KL ≤ 1e-12 although the group losses differ is reported
    (`Fragility.range_too_small`, a `ValueError` when validating), not silently treated as ERM.
  * all group losses equal / one group present: the official code divides by a NaN KL; here
    κ = 0, p* = π and the loss is the ERM loss π·L (`Fragility.degenerate`).
  * κ is not clipped at 0, as in the official code (τ above every loss still tilts towards the
    worst group, GroupDRO-like); `Fragility.status` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["KL_FLOOR", "Fragility", "IRSLoss", "IRSStats", "fragility", "group_means", "tilt"]

KL_FLOOR = 1e-12  # tilts with KL(p_h‖π) at or below this are skipped (official threshold)


# --------------------------------------------------------------------------------------------
# the tilt path and the fragility search
# --------------------------------------------------------------------------------------------
def tilt(group_losses: Tensor, prior: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
    """Points p_h = softmax(log π + h·L) of the tilt path and KL(p_h ‖ π).

    group_losses (G,), prior (G,) with zeros for absent groups, h (H,) -> p (H, G), kl (H,).
    """
    log_prior = prior.log()  # (G,) -inf on absent groups
    logits = log_prior + h[:, None] * torch.where(prior > 0, group_losses, 0.0)  # (H, G)
    log_p = torch.log_softmax(logits, dim=-1)  # (H, G)
    p = log_p.exp()
    kl = torch.where(p > 0, p * (log_p - log_prior), 0.0).sum(-1)  # (H,) 0·log0 := 0
    return p, kl


def _ratio(group_losses: Tensor, prior: Tensor, tau: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
    """(p_h·L − τ)/KL(p_h‖π) on h (H,), −inf where KL ≤ KL_FLOOR; returns (ratio, kl)."""
    p, kl = tilt(group_losses, prior, h)
    num = p @ torch.where(prior > 0, group_losses, 0.0) - tau  # (H,)
    return torch.where(kl > KL_FLOOR, num / kl.clamp_min(KL_FLOOR), -math.inf), kl


@dataclass(frozen=True)
class Fragility:
    """Result of `fragility` (all 0-d tensors except `p_star`; no host sync until `status`)."""

    kappa: Tensor  # () κ = (p*·L − τ)/KL(p*‖π); 0 when degenerate
    p_star: Tensor  # (G,) worst-case reweighting p_{h*}; the prior when degenerate
    kl: Tensor  # () KL(p*‖π); 0 when degenerate
    h_star: Tensor  # () tilt of the maximum; 0 when degenerate
    tau: Tensor  # () the target τ used
    degenerate: Tensor  # () bool: every tilt has KL ≤ KL_FLOOR (loss falls back to ERM)
    range_too_small: Tensor  # () bool: degenerate although ≥ 2 present group losses differ
    tau_above_max: Tensor  # () bool: τ ≥ every present group loss (κ < 0, still tilts)
    tau_below_mean: Tensor  # () bool: τ ≤ π·L, RS infeasible at P = π (true κ = +∞)
    at_boundary: Tensor  # () bool: h* on the edge of [h_min, h_max] (true max may lie outside)

    @property
    def status(self) -> str:
        """What happened, in words (syncs with the device)."""
        if bool(self.range_too_small):
            return (
                "h range too small: group losses differ but every tilt has KL <= 1e-12; "
                "raise h_max (or use relative_h=True); loss = ERM"
            )
        if bool(self.degenerate):
            return "degenerate: all present group losses equal (or one group); loss = ERM"
        if bool(self.tau_below_mean):
            return "infeasible: tau <= prior-weighted loss, kappa is +inf; h* = h_min reported"
        if bool(self.tau_above_max):
            return "tau above every group loss: kappa < 0, p* still up-weights the worst group"
        if bool(self.at_boundary):
            return "h* at the edge of [h_min, h_max]: the maximum may lie outside the range"
        return "ok"


def _check_prior(prior: Tensor, name: str = "prior") -> None:
    if prior.ndim != 1 or prior.numel() == 0:
        raise ValueError(f"{name} must be a non-empty 1-D tensor, got shape {tuple(prior.shape)}")
    if not bool(torch.isfinite(prior).all()) or bool((prior < 0).any()):
        raise ValueError(f"{name} must be finite and non-negative, got {prior.tolist()}")
    total = float(prior.double().sum())
    if abs(total - 1.0) > 1e-5:
        raise ValueError(f"{name} must sum to one (got {total:.6g}); normalise counts first")


def fragility(
    group_losses: Tensor,
    prior: Tensor,
    tau: float | Tensor,
    *,
    h_min: float = 1e-3,
    h_max: float = 50.0,
    grid: int = 64,
    refine: int = 3,
    refine_points: int = 25,
    relative_h: bool = True,
    validate: bool = True,
) -> Fragility:
    """κ = max_h (p_h·L − τ)/KL(p_h‖π) over the tilt path, equation (1); no gradient.

    group_losses (G,), prior (G,) summing to one (zero = group absent), tau a scalar.
    Vectorised: one (grid, G) log-softmax, then `refine` rounds of `refine_points` log-spaced
    points between the neighbours of the running best. Computed in float64 on detached inputs.
    `relative_h=True`: h ∈ [h_min, h_max] / (max L − min L) over the present groups (scale
    free); False: h ∈ [h_min, h_max] in absolute 1/loss units (the official code).
    `h_star` is always in absolute units (κ = 1/h*). With `validate`, a range in which every
    tilt has KL ≤ KL_FLOOR although the present group losses differ raises `ValueError`.
    """
    if validate:
        if group_losses.ndim != 1 or group_losses.shape != prior.shape:
            raise ValueError(
                f"group_losses must be 1-D with the shape of prior {tuple(prior.shape)}, "
                f"got {tuple(group_losses.shape)}"
            )
        _check_prior(prior)
        if not bool(torch.isfinite(group_losses[prior > 0]).all()):
            raise ValueError("group_losses contains NaN or inf")
        t_check = torch.as_tensor(tau, dtype=torch.float64)
        if t_check.numel() != 1 or not bool(torch.isfinite(t_check)) or float(t_check) < 0:
            raise ValueError(
                f"tau must be a finite non-negative scalar (the target loss), got {tau!r}"
            )
        if not (0 < h_min < h_max) or grid < 2 or refine < 0 or refine_points < 3:
            raise ValueError(
                f"need 0 < h_min < h_max, grid >= 2, refine >= 0, refine_points >= 3; got "
                f"h_min={h_min}, h_max={h_max}, grid={grid}, refine={refine}, "
                f"refine_points={refine_points}"
            )
    dev = group_losses.device
    L = group_losses.detach().double()
    pi = prior.detach().to(device=dev, dtype=torch.float64)
    t = torch.as_tensor(tau, dtype=torch.float64, device=dev).detach()
    present = pi > 0
    L_hi = torch.where(present, L, -math.inf).max()
    L_lo = torch.where(present, L, math.inf).min()
    spread = L_hi - L_lo  # () 0 when the present group losses are equal
    # the tilt is shift-invariant in L: centre on the smallest present loss (digits at 1e8)
    L = torch.where(present, L - L_lo, 0.0)
    t = t - L_lo
    # h = h_rel · unit; unit = 1/spread (relative) or 1 (absolute). log-grid over h_rel.
    unit = 1.0 / torch.where(spread > 0, spread, 1.0) if relative_h else torch.ones_like(spread)
    log_lo, log_hi = math.log(h_min), math.log(h_max)

    log_h = torch.linspace(log_lo, log_hi, grid, dtype=torch.float64, device=dev)  # (H,)
    ratio, _ = _ratio(L, pi, t, log_h.exp() * unit)
    i = ratio.argmax()
    best_r, best_log_h = ratio[i], log_h[i]
    frac = torch.linspace(0.0, 1.0, refine_points, dtype=torch.float64, device=dev)
    for _ in range(refine):
        lo = log_h[(i - 1).clamp(min=0)]
        hi = log_h[(i + 1).clamp(max=log_h.numel() - 1)]
        log_h = lo + (hi - lo) * frac  # (refine_points,) brackets the running best
        ratio, _ = _ratio(L, pi, t, log_h.exp() * unit)
        i = ratio.argmax()
        better = ratio[i] > best_r
        best_r = torch.where(better, ratio[i], best_r)
        best_log_h = torch.where(better, log_h[i], best_log_h)

    degenerate = torch.isinf(best_r)  # every tilt had KL ≤ KL_FLOOR
    h_star = best_log_h.exp() * unit  # absolute units
    p, kl = tilt(L, pi, h_star[None])
    p, kl = p[0], kl[0]
    mean = pi @ L
    rel = 1e-9 * (log_hi - log_lo)
    too_small = degenerate & (spread > 0) & (present.sum() >= 2)
    if validate and bool(too_small):
        raise ValueError(
            f"h range too small: h_max={h_max} ({'relative' if relative_h else 'absolute'} "
            f"units) gives KL(p_h||prior) <= {KL_FLOOR} at every h although the group losses "
            f"differ (spread {float(spread):.3g}); raise h_max or use relative_h=True"
        )
    return Fragility(
        kappa=torch.where(degenerate, 0.0, best_r),
        p_star=torch.where(degenerate, pi, p),
        kl=torch.where(degenerate, 0.0, kl),
        h_star=torch.where(degenerate, 0.0, h_star),
        tau=t + L_lo,
        degenerate=degenerate,
        range_too_small=too_small,
        tau_above_max=t >= torch.where(present, L, -math.inf).max(),
        tau_below_mean=t <= mean,
        at_boundary=~degenerate & ((best_log_h <= log_lo + rel) | (best_log_h >= log_hi - rel)),
    )


# --------------------------------------------------------------------------------------------
# the training loss
# --------------------------------------------------------------------------------------------
def group_means(
    per_sample_loss: Tensor, group_ids: Tensor, num_groups: int
) -> tuple[Tensor, Tensor]:
    """Per-group mean loss (G,) (0 for absent groups, differentiable) and counts (G,)."""
    counts = torch.zeros(num_groups, dtype=per_sample_loss.dtype, device=per_sample_loss.device)
    counts.index_add_(0, group_ids, torch.ones_like(per_sample_loss))
    sums = torch.zeros_like(counts).index_add(0, group_ids, per_sample_loss)
    return sums / counts.clamp_min(1.0), counts


@dataclass(frozen=True)
class IRSStats:
    """What one IRS step saw: group losses (G,) as used, their prior (G,), the fragility."""

    group_losses: Tensor  # (G,) detached; per-sample losses in instance mode
    prior: Tensor  # (G,) prior restricted to the groups present in the batch
    fragility: Fragility


class IRSLoss(nn.Module):
    """Iterative Robust Satisficing loss, equation (3): (p*·L)/KL(p*‖π) with p* detached.

    Group mode: `prior` = training group frequencies (G,), forward(per_sample_loss (B,),
    group_ids (B,)). The prior is restricted to the groups present in the batch and renormalised.
    Instance mode (`prior=None`, official "IRS-Instance"): each sample is its own group with a
    uniform prior; forward(per_sample_loss (B,)).

    τ rule (official `_active_tau`): τ = max(tau_multiplier · π·L, target_tau), with π·L the
    batch's prior-weighted loss, so the RS constraint stays feasible at P = π. A fixed `tau`
    overrides the rule. With one group (or equal group losses) the tilt path is the single point
    π, KL = 0 and κ = 0: the loss is the ERM loss π·L (the official code returns NaN here).

    Returns (loss, IRSStats). Gradient: Danskin, ∇loss = ∇κ(θ) with τ held fixed.
    `scale_by_kl=False` (not in the official code) drops the 1/KL(p*‖π) factor: the same
    direction with unit scale. KL(p*‖π) spans ~6 orders of magnitude over training (tiny while
    τ = 1.01·π·L, O(1) once τ = target_tau), which inflates Adam's second moment after a
    small-KL step; benchmarks/reproduce.py measures both.
    """

    prior: Tensor | None

    def __init__(
        self,
        prior: Tensor | Sequence[float] | None = None,
        *,
        tau: float | None = None,
        tau_multiplier: float = 1.01,  # official: keeps τ just above the in-distribution loss
        target_tau: float = 0.1,  # official default (Waterbirds, CIFAR-10-LT)
        h_min: float = 1e-3,  # official search range [1e-3, 50]
        h_max: float = 50.0,
        grid: int = 64,  # official: 64 log-spaced points
        refine: int = 3,  # official: 3 rounds of 25 points
        refine_points: int = 25,
        relative_h: bool = True,  # h in units of 1/(max L − min L); official: absolute units
        scale_by_kl: bool = True,  # official (3); False: p*·L, the same direction, unit scale
        validate: bool = True,  # check NaN losses / group ids each step (one host sync)
    ) -> None:
        super().__init__()
        if prior is not None:
            pr = torch.as_tensor(prior, dtype=torch.float64)
            _check_prior(pr)
            self.register_buffer("prior", pr, persistent=False)
        else:
            self.prior = None
        if tau is not None and not (math.isfinite(tau) and tau >= 0):
            raise ValueError(f"tau must be a finite non-negative number, got {tau}")
        if not (math.isfinite(target_tau) and target_tau >= 0):
            raise ValueError(f"target_tau must be finite and >= 0, got {target_tau}")
        if not (math.isfinite(tau_multiplier) and tau_multiplier >= 1.0):
            raise ValueError(
                f"tau_multiplier must be >= 1 (tau above the mean), got {tau_multiplier}"
            )
        self.tau, self.tau_multiplier, self.target_tau = tau, tau_multiplier, target_tau
        self.search = dict(
            h_min=h_min,
            h_max=h_max,
            grid=grid,
            refine=refine,
            refine_points=refine_points,
            relative_h=relative_h,
        )
        self.scale_by_kl = scale_by_kl
        self.validate = validate

    @classmethod
    def from_counts(cls, counts: Tensor | Sequence[float], **kwargs: object) -> IRSLoss:
        """IRSLoss whose prior is the training group frequencies counts / counts.sum()."""
        c = torch.as_tensor(counts, dtype=torch.float64)
        if c.ndim != 1 or bool((c < 0).any()) or float(c.sum()) <= 0:
            raise ValueError(f"counts must be 1-D, non-negative, not all zero; got {c.tolist()}")
        return cls(c / c.sum(), **kwargs)  # type: ignore[arg-type]

    def active_tau(self, group_losses: Tensor, prior: Tensor) -> Tensor:
        """τ = max(tau_multiplier · π·L, target_tau) (detached), or the fixed tau."""
        if self.tau is not None:
            return torch.tensor(self.tau, dtype=torch.float64, device=group_losses.device)
        mean = prior.double() @ group_losses.detach().double()
        return torch.clamp(self.tau_multiplier * mean, min=self.target_tau)

    def forward(
        self, per_sample_loss: Tensor, group_ids: Tensor | None = None
    ) -> tuple[Tensor, IRSStats]:
        if per_sample_loss.ndim != 1 or per_sample_loss.numel() == 0:
            raise ValueError(
                f"per_sample_loss must be a non-empty 1-D tensor (B,), got {tuple(per_sample_loss.shape)}"
            )
        if self.validate and not bool(torch.isfinite(per_sample_loss).all()):
            raise ValueError("per_sample_loss contains NaN or inf")
        if self.prior is None:
            if group_ids is not None:
                raise ValueError("group_ids given but IRSLoss has no prior; pass prior= for groups")
            L = per_sample_loss  # (B,) instance mode
            prior = torch.full_like(L, 1.0 / L.numel(), dtype=torch.float64)
        else:
            if group_ids is None:
                raise ValueError("group_ids (B,) is required when IRSLoss has a group prior")
            if group_ids.shape != per_sample_loss.shape or group_ids.dtype.is_floating_point:
                raise ValueError(
                    f"group_ids must be an integer tensor of shape {tuple(per_sample_loss.shape)}, "
                    f"got {group_ids.dtype} {tuple(group_ids.shape)}"
                )
            G = self.prior.numel()
            if self.validate and bool(((group_ids < 0) | (group_ids >= G)).any()):
                raise ValueError(
                    f"group_ids out of range [0, {G}): got {group_ids.unique().tolist()}"
                )
            L, counts = group_means(per_sample_loss, group_ids.long(), G)  # (G,)
            pr = torch.where(counts > 0, self.prior.to(L.device), 0.0)
            prior = pr / pr.sum().clamp_min(torch.finfo(torch.float64).tiny)
        tau = self.active_tau(L, prior)
        fr = fragility(L, prior, tau, validate=False, **self.search)  # type: ignore[arg-type]
        if self.validate and bool(fr.range_too_small):
            raise ValueError(f"IRSLoss: {fr.status} (h_max={self.search['h_max']})")
        p_star = fr.p_star.to(L.dtype)
        erm = prior.to(L.dtype) @ L
        irs = p_star @ L
        if self.scale_by_kl:
            irs = irs / fr.kl.to(L.dtype).clamp_min(KL_FLOOR)
        loss = torch.where(fr.degenerate, erm, irs)
        return loss, IRSStats(group_losses=L.detach(), prior=prior, fragility=fr)
