"""Extra-Merge: extrapolate the latest merged checkpoint along the trajectory's rank-1 direction.

Given the merged trajectory M_1..M_K (e.g. `merged_trajectory(ckpts, window=W)`),

    theta_EM = M_K + alpha * g                                              (Extra-Merge)

with one of two descent-direction estimates [both reconstructions: the paper's code is not public]

    direction="diff":  g = M_K - M_{K-1}          (= (theta_K - theta_{K-W}) / W for an SMA)
    direction="pc1":   g = s * u_1                (u_1: PC1 of M_1..M_K, s: least-squares slope
                                                   of the projections per trajectory step)

Both are "one merged step" long, so alpha counts merged steps extrapolated. alpha is either given,
or chosen by a forward-only line search on held-out loss: `eval_fn(state_dict) -> float` is called
for alpha in {0} U `alphas` and the minimiser is kept (alpha = 0 is the plain merge M_K, so the
search never returns something worse than the merge on the data `eval_fn` sees). With neither,
alpha = DEFAULT_ALPHA. No gradient is computed anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from .merge import Checkpoint, _acc_dtype, _alias_map, _is_float
from .subspace import Rank1Report, _load_all, rank1_report

__all__ = ["DEFAULT_ALPHA", "DEFAULT_ALPHAS", "ExtraMergeResult", "extra_merge", "extrapolate"]

DEFAULT_ALPHA = 1.0  # one merged step past M_K; used only without `alpha` and `eval_fn`
# line-search grid (merged steps); geometric, so it spans "a little" to "half a window" and more
DEFAULT_ALPHAS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


@dataclass(frozen=True)
class ExtraMergeResult:
    """state_dict: theta_EM; alpha: the coefficient used; direction: g as a state dict;
    losses: {alpha: eval_fn loss} for every alpha evaluated (empty without eval_fn);
    report: the Rank1Report of the trajectory when direction="pc1", else None."""

    state_dict: dict[str, torch.Tensor]
    alpha: float
    direction: dict[str, torch.Tensor]
    losses: dict[float, float] = field(default_factory=dict)
    report: Rank1Report | None = None


def extrapolate(
    base: Mapping[str, torch.Tensor], direction: Mapping[str, torch.Tensor], alpha: float
) -> dict[str, torch.Tensor]:
    """base + alpha * direction on the keys of `direction` (float32 arithmetic, base's dtype out).

    Keys of `base` missing from `direction` (integer buffers) are copied; tied keys stay tied.
    """
    if not math.isfinite(float(alpha)):
        raise ValueError(f"alpha: must be finite, got {alpha}")
    alias = _alias_map(base)
    out: dict[str, torch.Tensor] = {}
    for k, v in base.items():
        if alias[k] != k:
            out[k] = out[alias[k]]
        elif k in direction and _is_float(v):
            d = direction[k]
            if d.shape != v.shape:
                raise ValueError(
                    f"direction, key {k!r}: shape {tuple(d.shape)} != {tuple(v.shape)}"
                )
            acc = _acc_dtype(v)
            out[k] = (v.detach().to(acc) + float(alpha) * d.detach().to(acc)).to(v.dtype)
        else:
            out[k] = v.detach().clone()
    return out


def extra_merge(
    trajectory: Sequence[Checkpoint],
    alpha: float | None = None,
    direction: str = "diff",
    eval_fn: Callable[[dict[str, torch.Tensor]], float] | None = None,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
) -> ExtraMergeResult:
    """theta_EM = M_K + alpha g for a merged trajectory M_1..M_K (see the module docstring).

    trajectory: >= 2 merged checkpoints, oldest first (state dicts or .safetensors paths).
    alpha: fixed coefficient; if None it is chosen by `eval_fn` over {0} U `alphas`, or is
        DEFAULT_ALPHA without `eval_fn`.
    direction: "diff" (last merged increment) or "pc1" (slope-scaled PC1 of the trajectory).
    eval_fn: held-out loss of a state dict (forward passes only); lower is better.
    """
    if direction not in ("diff", "pc1"):
        raise ValueError(f"direction: expected 'diff' or 'pc1', got {direction!r}")
    sds = _load_all(trajectory, "trajectory")
    base, prev = sds[-1], sds[-2]
    report: Rank1Report | None = None
    if direction == "diff":
        alias = _alias_map(base)
        g = {
            k: v.detach().to(_acc_dtype(v)) - prev[k].detach().to(_acc_dtype(v))
            for k, v in base.items()
            if _is_float(v) and alias[k] == k
        }
    else:
        report = rank1_report(sds)
        g = {k: report.slope * u for k, u in report.direction.items()}

    losses: dict[float, float] = {}
    if alpha is None and eval_fn is not None:
        grid = [0.0] + [float(a) for a in alphas]
        if len(grid) < 2 or not all(math.isfinite(a) for a in grid):
            raise ValueError(f"alphas: need at least one finite value, got {list(alphas)}")
        best_a, best_l = 0.0, math.inf
        for a in grid:
            loss = float(eval_fn(extrapolate(base, g, a)))
            if math.isnan(loss) and a == 0.0:
                raise ValueError("eval_fn: returned NaN for the plain merge (alpha=0)")
            losses[a] = loss
            if loss < best_l:  # NaN / inf (a diverged extrapolation) never wins
                best_a, best_l = a, loss
        alpha = best_a
    elif alpha is None:
        alpha = DEFAULT_ALPHA
    elif eval_fn is not None:
        losses[float(alpha)] = float(eval_fn(extrapolate(base, g, float(alpha))))
    return ExtraMergeResult(
        state_dict=extrapolate(base, g, float(alpha)),
        alpha=float(alpha),
        direction=g,
        losses=losses,
        report=report,
    )
