"""The paper's gradient analysis, made usable on a batch or a dataset.

The per-pair gradient of the (weighted) BT loss on a linear reward head r = vᵀh + b is

    ∇_v (w_i ℓ_i) = −w_i · σ(−(Δr_i − margin_i)) · (h_c,i − h_r,i)
    ‖∇_v (w_i ℓ_i)‖ = w_i · e_i · d_i,   e_i = σ(−(Δr_i − margin_i)) (prediction error),
                                           d_i = ‖h_c,i − h_r,i‖ (representation distance).

`head_gradient_factors` returns the three factors in closed form; `head_gradient_norms_autograd`
is the per-sample autograd reference (torch.func) that the closed form is tested against.
`factor_correlations` gives Spearman correlations between them (the paper's diagnosis: under BT
the update norm tracks d; under NormBT it should not). `accuracy_by_distance` buckets pairwise
accuracy by d (fine-grained pairs are the small-d buckets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .head import capture_head_input, find_reward_head, pooled_head_input
from .loss import _check_hidden, _check_margin, _check_rewards, pair_distance

__all__ = [
    "DistanceBucket",
    "GradientFactors",
    "accuracy_by_distance",
    "factor_correlations",
    "head_gradient_factors",
    "head_gradient_norms_autograd",
    "pair_statistics",
    "spearman",
]


@dataclass(frozen=True)
class GradientFactors:
    """Per-pair head-gradient norm and its factors, all (B,) float32 tensors."""

    grad_norm: Tensor  # w_i · e_i · d_i
    prediction_error: Tensor  # e_i = σ(−(Δr_i − margin_i))
    distance: Tensor  # d_i = ‖h_c,i − h_r,i‖
    weight: Tensor  # w_i (ones for BT)


def head_gradient_factors(
    r_chosen: Tensor,
    r_rejected: Tensor,
    h_chosen: Tensor,
    h_rejected: Tensor,
    *,
    margin: Tensor | float | None = None,
    weights: Tensor | None = None,
) -> GradientFactors:
    """Closed-form per-pair ‖∇_v (w_i ℓ_i)‖ = w_i σ(−(Δr_i − margin_i)) d_i and its factors.

    r_*: (B,) rewards, h_*: (B, H) pooled states the head consumes, weights: (B,) or None (BT).
    """
    r_c, r_r = _check_rewards(r_chosen, r_rejected)
    _check_hidden(h_chosen, h_rejected, r_c.shape[0])
    mg = _check_margin(margin, r_c)
    with torch.no_grad():
        e = torch.sigmoid(-(r_c - r_r - mg)).float()  # (B,)
        d = pair_distance(h_chosen, h_rejected)  # (B,)
        if weights is None:
            w = torch.ones_like(d)
        else:
            if weights.shape != d.shape:
                raise ValueError(
                    f"`weights` must have shape {tuple(d.shape)}, got {tuple(weights.shape)}"
                )
            w = weights.detach().float()
        return GradientFactors(grad_norm=w * e * d, prediction_error=e, distance=d, weight=w)


def head_gradient_norms_autograd(
    head_weight: Tensor,
    h_chosen: Tensor,
    h_rejected: Tensor,
    *,
    head_bias: Tensor | None = None,
    margin: Tensor | float | None = None,
    weights: Tensor | None = None,
) -> Tensor:
    """Reference: per-pair ‖∂(w_i ℓ_i)/∂v‖ by per-sample autograd (torch.func.vmap(grad)).

    head_weight: (H,) or (1, H) (an `nn.Linear(H, 1)` weight); h_*: (B, H). Returns (B,).
    """
    _check_hidden(h_chosen, h_rejected, None)
    v = head_weight.detach().reshape(-1)  # (H,)
    if v.shape[0] != h_chosen.shape[1]:
        raise ValueError(
            f"`head_weight` has {v.shape[0]} inputs, but the hidden states have H={h_chosen.shape[1]}"
        )
    b = torch.zeros((), dtype=v.dtype) if head_bias is None else head_bias.detach().reshape(())
    bsz = h_chosen.shape[0]
    mg = _check_margin(margin, torch.empty(bsz, dtype=v.dtype))
    mg = torch.as_tensor(mg, dtype=v.dtype).expand(bsz)
    w = torch.ones(bsz, dtype=v.dtype) if weights is None else weights.detach().to(v.dtype)

    def pair_loss(v_: Tensor, hc: Tensor, hr: Tensor, m: Tensor, wi: Tensor) -> Tensor:
        dr = (hc @ v_ + b) - (hr @ v_ + b)
        return -wi * torch.nn.functional.logsigmoid(dr - m)

    grads = torch.func.vmap(torch.func.grad(pair_loss), in_dims=(None, 0, 0, 0, 0))(
        v, h_chosen.detach().to(v.dtype), h_rejected.detach().to(v.dtype), mg, w
    )  # (B, H)
    return torch.linalg.vector_norm(grads, dim=-1)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), 0-based."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i : j + 1]] = 0.5 * (i + j)
        i = j + 1
    return ranks


def spearman(x: Tensor | np.ndarray, y: Tensor | np.ndarray) -> float:
    """Spearman rank correlation (Pearson correlation of average ranks); nan if a side is constant."""
    xa = np.asarray(x.detach().cpu() if isinstance(x, Tensor) else x, dtype=np.float64).ravel()
    ya = np.asarray(y.detach().cpu() if isinstance(y, Tensor) else y, dtype=np.float64).ravel()
    if xa.shape != ya.shape or xa.size < 2:
        raise ValueError(
            f"`x` and `y` must be 1-D of equal length >= 2, got {xa.shape}, {ya.shape}"
        )
    rx, ry = _ranks(xa), _ranks(ya)
    rx -= rx.mean()
    ry -= ry.mean()
    denom = np.sqrt((rx**2).sum() * (ry**2).sum())
    return float("nan") if denom == 0 else float((rx * ry).sum() / denom)


def factor_correlations(factors: GradientFactors) -> dict[str, float]:
    """Spearman correlations among update norm, prediction error and distance."""
    return {
        "norm_vs_distance": spearman(factors.grad_norm, factors.distance),
        "norm_vs_error": spearman(factors.grad_norm, factors.prediction_error),
        "error_vs_distance": spearman(factors.prediction_error, factors.distance),
    }


@dataclass(frozen=True)
class DistanceBucket:
    """Pairs with lo <= d < hi (the last bucket includes hi)."""

    lo: float
    hi: float
    count: int
    accuracy: float  # fraction with r_chosen > r_rejected (nan if empty)


def accuracy_by_distance(
    r_chosen: Tensor,
    r_rejected: Tensor,
    distance: Tensor,
    *,
    n_buckets: int = 4,
    edges: Iterable[float] | None = None,
) -> list[DistanceBucket]:
    """Pairwise accuracy (r_c > r_r) per distance bucket: equal-count quantiles or given edges."""
    r_c, r_r = _check_rewards(r_chosen, r_rejected)
    d = distance.detach().float().cpu().numpy().ravel()
    if d.shape[0] != r_c.shape[0]:
        raise ValueError(
            f"`distance` must have shape ({r_c.shape[0]},), got {tuple(distance.shape)}"
        )
    if edges is None:
        if not isinstance(n_buckets, int) or n_buckets < 1:
            raise ValueError(f"`n_buckets` must be a positive int, got {n_buckets!r}")
        e = np.quantile(d, np.linspace(0.0, 1.0, n_buckets + 1))
    else:
        e = np.asarray(list(edges), dtype=np.float64)
        if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) <= 0):
            raise ValueError(f"`edges` must be >= 2 strictly increasing values, got {e.tolist()}")
    correct = (r_c > r_r).detach().cpu().numpy()
    out = []
    for k in range(len(e) - 1):
        lo, hi = float(e[k]), float(e[k + 1])
        sel = (d >= lo) & ((d <= hi) if k == len(e) - 2 else (d < hi))
        n = int(sel.sum())
        out.append(DistanceBucket(lo, hi, n, float(correct[sel].mean()) if n else float("nan")))
    return out


@torch.no_grad()
def pair_statistics(
    model: torch.nn.Module,
    batches: Iterable[Mapping[str, Tensor]],
    *,
    head: str | None = None,
    pad_token_id: int | None = None,
) -> dict[str, Tensor]:
    """Rewards and the pooled states the reward head reads, over a dataset.

    Each batch is in TRL's RewardTrainer layout: `input_ids` (2B, T) and `attention_mask`, the
    first B rows chosen and the last B rejected (`DataCollatorForPreference`). The states are
    the head's input, captured with a forward pre-hook (`find_reward_head(model, head)`), so
    decoder (`score`) and encoder (`classifier`) reward models alike give the h of r = vᵀh + b.
    Returns concatenated `r_chosen`, `r_rejected` (N,), `h_chosen`, `h_rejected` (N, H) on the CPU.
    """
    if pad_token_id is None:
        cfg = getattr(model, "config", None)
        pad_token_id = getattr(cfg, "pad_token_id", None) if cfg is not None else None
    head_module = find_reward_head(model, head)
    cols: dict[str, list[Tensor]] = {
        "r_chosen": [],
        "r_rejected": [],
        "h_chosen": [],
        "h_rejected": [],
    }
    for batch in batches:
        ids = batch["input_ids"]
        with capture_head_input(head_module) as captured:
            out = model(input_ids=ids, attention_mask=batch.get("attention_mask"))
        r_c, r_r = torch.chunk(out.logits.squeeze(-1), 2)
        h_c, h_r = torch.chunk(pooled_head_input(captured, ids, pad_token_id), 2)  # (B, H) each
        for k, t in zip(cols, (r_c, r_r, h_c, h_r)):
            cols[k].append(t.float().cpu())
    if not cols["r_chosen"]:
        raise ValueError("`batches` is empty")
    return {k: torch.cat(v) for k, v in cols.items()}
