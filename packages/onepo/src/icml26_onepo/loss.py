"""OnePO policy loss: Adaptive Objective Evolution on top of verl's dual-clip PPO (torch only).

One-stage Policy Optimization (Chen, Xie, Li and Wang, ICML 2026) injects teacher completions
into GRPO groups. For a teacher token whose old probability is below the floor ``f``
(``low = T ∧ p_old < f``):

    old'  = log max(p_old, f)            on teacher tokens, old_logp elsewhere
    Â     = A · f / sg(π_θ)              on low ∧ A > 0, A elsewhere
    loss  = dual-clip PPO(r = π_θ / exp(old'), Â; ε_low, ε_high, c)

so on a low-support positive teacher token ``Â·r = A·π_θ/sg(π_θ)``: the gradient is the
SFT-like ``−A·∇log π_θ`` and the token is clipped only once ``π_θ > f(1 + ε_high)`` (an absolute
trust region). Every other token gets verl's ``vanilla`` dual-clip PPO bit for bit.

`ppo_per_token_loss` is verl's vanilla objective (the reference the OnePO path reduces to),
`onepo_per_token_loss` the OnePO transform in front of it, `onepo_policy_loss` both plus the
aggregation, and `compute_onepo_policy_loss` the same thing with verl's policy-loss signature
so that a verl user registers it in one line::

    from verl.trainer.ppo.core_algos import register_policy_loss
    from icml26_onepo import compute_onepo_policy_loss
    register_policy_loss("onepo")(compute_onepo_policy_loss)

Shapes: ``(B, T)`` everywhere (B responses, T response tokens); ``advantages`` may be ``(B,)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "AGG_MODES",
    "OnePOTokenLoss",
    "aggregate_loss",
    "compute_onepo_policy_loss",
    "onepo_per_token_loss",
    "onepo_policy_loss",
    "ppo_per_token_loss",
    "teacher_mask_context",
]

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
LOG_RATIO_CLAMP = 20.0  # verl clamps log(π/π_old) to [-20, 20] before exp


@dataclass
class OnePOTokenLoss:
    """Per-token OnePO loss and the masks that define it; all ``(B, T)``."""

    loss: torch.Tensor  # per-token dual-clip PPO loss on (old', Â)
    ratio: torch.Tensor  # π_θ / exp(old'), after verl's log-ratio clamp
    log_ratio: torch.Tensor  # log π_θ − old' (clamped)
    clipped: torch.Tensor  # bool: the ε clip is active (pg_losses2 > pg_losses1)
    dual_clipped: torch.Tensor  # bool: A < 0 and the c bound is active
    low_support: torch.Tensor  # bool: T ∧ p_old < f
    rescaled: torch.Tensor  # bool: low_support ∧ A > 0
    rescale: torch.Tensor  # f / sg(π_θ) on rescaled tokens, 1 elsewhere


def _check_mask(name: str, mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(mask).__name__}")
    if mask.shape != shape:
        raise ValueError(
            f"`{name}` must have shape {tuple(shape)} like `logp`, got {tuple(mask.shape)}"
        )
    if mask.dtype == torch.bool:
        return mask
    if mask.is_complex():
        raise TypeError(
            f"`{name}` must be a bool, integer or 0/1 float mask, got dtype {mask.dtype}"
        )
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(
            f"`{name}` must hold only 0 and 1 (a mask), got other values (dtype {mask.dtype})"
        )
    return mask.bool()


def _check_finite(name: str, x: torch.Tensor, where: torch.Tensor) -> None:
    if not bool(torch.isfinite(x[where]).all()):
        raise ValueError(f"`{name}` has NaN or infinite values inside `response_mask`")


LOGP_SLACK = 1e-6  # log-probabilities are <= 0; rounding in a log-softmax may leave a hair above


def _check_log_probs(name: str, x: torch.Tensor, where: torch.Tensor) -> None:
    """log π <= 0 on every response token; logits passed by mistake are caught here."""
    above = x[where] > LOGP_SLACK
    if bool(above.any()):
        worst = float(x[where][above].max())
        raise ValueError(
            f"`{name}` must hold log-probabilities (<= 0); got values up to {worst:.4g} inside "
            "`response_mask` (were logits passed instead of log-softmax outputs?)"
        )


def _check_inputs(
    old_logp: torch.Tensor,
    logp: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    teacher_mask: torch.Tensor | None,
    floor: float,
    clip_low: float,
    clip_high: float,
    clip_c: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if not isinstance(logp, torch.Tensor) or logp.dim() != 2 or not logp.is_floating_point():
        raise ValueError("`logp` must be a floating (B, T) tensor of per-token log-probabilities")
    if not isinstance(old_logp, torch.Tensor) or old_logp.shape != logp.shape:
        got = (
            tuple(old_logp.shape) if isinstance(old_logp, torch.Tensor) else type(old_logp).__name__
        )
        raise ValueError(f"`old_logp` must have shape {tuple(logp.shape)} like `logp`, got {got}")
    if not isinstance(advantages, torch.Tensor):
        raise TypeError(f"`advantages` must be a torch.Tensor, got {type(advantages).__name__}")
    if advantages.dim() == 1 and advantages.shape[0] == logp.shape[0]:
        advantages = advantages.unsqueeze(1).expand_as(logp)
    if advantages.shape != logp.shape:
        raise ValueError(
            f"`advantages` must have shape {tuple(logp.shape)} or ({logp.shape[0]},), "
            f"got {tuple(advantages.shape)}"
        )
    if not (isinstance(floor, (int, float)) and 0.0 < floor < 1.0):
        raise ValueError(f"`floor` must be in (0, 1), got {floor!r}")
    if not 0.0 <= clip_low < 1.0:
        raise ValueError(f"`clip_low` must be in [0, 1), got {clip_low!r}")
    if not clip_high >= 0.0:
        raise ValueError(f"`clip_high` must be >= 0, got {clip_high!r}")
    if not clip_c > 1.0:
        raise ValueError(f"`clip_c` (dual-clip bound) must be > 1, got {clip_c!r}")
    resp = _check_mask("response_mask", response_mask, logp.shape)
    if teacher_mask is None:
        teacher = torch.zeros_like(resp)
    else:
        teacher = _check_mask("teacher_mask", teacher_mask, logp.shape)
        if bool((teacher & ~resp).any()):
            raise ValueError("`teacher_mask` marks tokens outside `response_mask`")
    if not old_logp.is_floating_point():  # an integer tensor would truncate log-probabilities
        raise ValueError(f"`old_logp` must be a floating tensor, got dtype {old_logp.dtype}")
    _check_finite("logp", logp.detach(), resp)
    _check_finite("old_logp", old_logp.detach(), resp)
    _check_finite("advantages", advantages.detach(), resp)
    _check_log_probs("logp", logp.detach(), resp)
    _check_log_probs("old_logp", old_logp.detach(), resp)
    return advantages, resp, teacher, old_logp


def ppo_per_token_loss(
    old_logp: torch.Tensor,
    logp: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float = 10.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """verl's ``vanilla`` dual-clip PPO, per token (no masking, no aggregation).

        r = exp(clamp(logp − old_logp, −20, 20))
        L = max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high))      (A ≥ 0)
        L = min(−A·c, max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high)))   (A < 0)

    Returns ``(loss, ratio, log_ratio, clipped, dual_clipped)``, all ``(B, T)``.
    """
    log_ratio = torch.clamp(logp - old_logp, min=-LOG_RATIO_CLAMP, max=LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clip_loss1 = torch.maximum(loss1, loss2)
    loss3 = -advantages * clip_c
    clip_loss2 = torch.minimum(loss3, clip_loss1)
    negative = advantages < 0
    loss = torch.where(negative, clip_loss2, clip_loss1)
    clipped = loss2 > loss1
    dual_clipped = (clip_loss1 > loss3) & negative
    return loss, ratio, log_ratio, clipped, dual_clipped


def onepo_per_token_loss(
    old_logp: torch.Tensor,
    logp: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    teacher_mask: torch.Tensor | None,
    *,
    floor: float = 0.1,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float = 10.0,
    validate: bool = True,
) -> OnePOTokenLoss:
    """The OnePO transform (old' and Â) followed by `ppo_per_token_loss`; no aggregation.

    ``validate=False`` skips the input checks (each costs a device sync) for a hot loop whose
    inputs are already known to be well formed.
    """
    if validate:
        advantages, resp, teacher, old_logp = _check_inputs(
            old_logp,
            logp,
            advantages,
            response_mask,
            teacher_mask,
            floor,
            clip_low,
            clip_high,
            clip_c,
        )
    else:
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1).expand_as(logp)
        resp = response_mask.bool()
        teacher = torch.zeros_like(resp) if teacher_mask is None else teacher_mask.bool() & resp
    log_floor = math.log(floor)
    low_support = teacher & (old_logp < log_floor)  # (B, T)
    effective_old = torch.where(teacher, old_logp.clamp_min(log_floor), old_logp)
    rescaled = low_support & (advantages > 0)
    tiny = torch.finfo(logp.dtype).tiny
    rescale = torch.where(rescaled, floor / torch.exp(logp.detach()).clamp_min(tiny), 1.0)
    effective_adv = advantages * rescale
    loss, ratio, log_ratio, clipped, dual = ppo_per_token_loss(
        effective_old, logp, effective_adv, clip_low=clip_low, clip_high=clip_high, clip_c=clip_c
    )
    return OnePOTokenLoss(loss, ratio, log_ratio, clipped, dual, low_support, rescaled, rescale)


def aggregate_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    agg: str = "token-mean",
    *,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """verl's ``agg_loss`` on one data-parallel rank.

    - ``token-mean``: Σ L·m / Σ m (the OnePO / DAPO default)
    - ``seq-mean-token-sum``: mean over responses of Σ_t L·m
    - ``seq-mean-token-mean``: mean over responses of Σ_t L·m / Σ_t m
    - ``seq-mean-token-sum-norm``: Σ_b Σ_t L·m / ``loss_scale_factor`` (default T; Dr. GRPO)

    Responses with no valid token are left out of the sequence means.
    """
    if agg not in AGG_MODES:
        raise ValueError(f"`agg` must be one of {AGG_MODES}, got {agg!r}")
    m = loss_mask.to(loss_mat.dtype)
    masked = torch.where(loss_mask.bool(), loss_mat, 0.0)  # padding may hold NaN: never multiply it
    if agg == "token-mean":
        return masked.sum() / m.sum().clamp_min(1.0)
    seq_sum = masked.sum(-1)  # (B,)
    n_tok = m.sum(-1)  # (B,)
    valid = (n_tok > 0).to(loss_mat.dtype)
    if agg == "seq-mean-token-sum":
        return (seq_sum * valid).sum() / valid.sum().clamp_min(1.0)
    if agg == "seq-mean-token-mean":
        return (seq_sum / n_tok.clamp_min(1.0) * valid).sum() / valid.sum().clamp_min(1.0)
    scale = float(loss_mat.shape[-1]) if loss_scale_factor is None else float(loss_scale_factor)
    if not scale > 0:
        raise ValueError(f"`loss_scale_factor` must be > 0, got {loss_scale_factor!r}")
    return seq_sum.sum() / scale


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.to(torch.float64)
    return float((x.to(torch.float64) * m).sum() / m.sum().clamp_min(1.0))


def _metrics(tok: OnePOTokenLoss, resp: torch.Tensor, teacher: torch.Tensor) -> dict[str, float]:
    n_resp = max(int(resp.sum()), 1)
    n_low = int(tok.low_support.sum())
    n_pos = int(tok.rescaled.sum())
    with torch.no_grad():
        return {
            "pg_clipfrac": _masked_mean(tok.clipped.float(), resp),
            "pg_clipfrac_lower": _masked_mean(tok.dual_clipped.float(), resp),
            "ppo_kl": _masked_mean(-tok.log_ratio.detach(), resp),
            "onepo/rescaled_token_fraction": n_pos / n_resp,
            "onepo/rescaled_low_support_fraction": n_pos / max(n_low, 1),
            "onepo/low_support_tokens": float(n_low),
            "onepo/positive_advantage_teacher_tokens": float(n_pos),
            "onepo/negative_advantage_teacher_tokens": float(n_low - n_pos),
            "onepo/rescale_mean": _masked_mean(tok.rescale, tok.rescaled),
            "onepo/teacher_token_fraction": float(teacher.sum()) / n_resp,
            "onepo/teacher_clipfrac": _masked_mean(tok.clipped.float(), teacher),
        }


def onepo_policy_loss(
    old_logp: torch.Tensor,
    logp: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    teacher_mask: torch.Tensor | None,
    *,
    floor: float = 0.1,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float = 10.0,
    agg: str = "token-mean",
    loss_scale_factor: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """OnePO policy loss (scalar) and its metrics; defaults are the official OnePO.sh values.

    Args:
        old_logp: ``(B, T)`` log π_old of the response tokens (the rollout policy).
        logp: ``(B, T)`` log π_θ, differentiable.
        advantages: ``(B, T)`` or ``(B,)`` (GRPO: one advantage per response).
        response_mask: ``(B, T)`` 1 on response tokens (bool, integer or 0/1 float).
        teacher_mask: ``(B, T)`` 1 on tokens of injected teacher responses (⊆ response_mask),
            or None (then the loss is verl's vanilla dual-clip PPO).
        floor: the probability floor f ∈ (0, 1).
        clip_low, clip_high: ε_low, ε_high (DAPO clip-higher); clip_c: dual-clip bound c > 1.
        agg: one of `AGG_MODES` (verl's ``loss_agg_mode``).
        rollout_is_weights: optional ``(B, T)`` detached truncated-IS weights (verl multiplies
            the per-token loss by them).

    Returns ``(loss, metrics)``; metrics are verl's (``pg_clipfrac``, ``pg_clipfrac_lower``,
    ``ppo_kl``) and OnePO's (``onepo/rescaled_token_fraction`` ...), as Python floats.
    """
    advantages, resp, teacher, old_logp = _check_inputs(
        old_logp, logp, advantages, response_mask, teacher_mask, floor, clip_low, clip_high, clip_c
    )
    tok = onepo_per_token_loss(
        old_logp,
        logp,
        advantages,
        resp,
        teacher,
        floor=floor,
        clip_low=clip_low,
        clip_high=clip_high,
        clip_c=clip_c,
        validate=False,
    )
    loss_mat = tok.loss
    if rollout_is_weights is not None:
        if rollout_is_weights.shape != logp.shape:
            raise ValueError(
                f"`rollout_is_weights` must have shape {tuple(logp.shape)}, "
                f"got {tuple(rollout_is_weights.shape)}"
            )
        loss_mat = loss_mat * rollout_is_weights.detach()
    loss = aggregate_loss(loss_mat, resp, agg, loss_scale_factor=loss_scale_factor)
    return loss, _metrics(tok, resp, teacher)


# verl's policy-loss registry passes no extra batch field, so the teacher mask travels in a
# context variable for the duration of one loss call (as the official verl integration does).
_TEACHER_MASK: ContextVar[torch.Tensor | None] = ContextVar(
    "icml26_onepo_teacher_mask", default=None
)


@contextmanager
def teacher_mask_context(teacher_mask: torch.Tensor) -> Iterator[None]:
    """Make ``teacher_mask`` visible to `compute_onepo_policy_loss` inside the ``with`` block."""
    token = _TEACHER_MASK.set(teacher_mask)
    try:
        yield
    finally:
        _TEACHER_MASK.reset(token)


def _cfg(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    if isinstance(config, Mapping):
        value = config.get(key, default)
    elif hasattr(config, "get") and not hasattr(config, key):
        value = config.get(key, default)
    else:
        value = getattr(config, key, default)
    return default if value is None else value


def compute_onepo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    teacher_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """`onepo_policy_loss` with verl's policy-loss signature (register it as ``"onepo"``).

    Reads ``clip_ratio``, ``clip_ratio_low``, ``clip_ratio_high``, ``clip_ratio_c`` from verl's
    ``ActorConfig`` (or a dict) and the floor from ``onepo_floor`` (default 0.1). The teacher
    mask comes from the argument or from `teacher_mask_context`; without either it raises,
    as the official loss does, rather than silently run plain PPO.
    """
    if teacher_mask is None:
        teacher_mask = _TEACHER_MASK.get()
    if teacher_mask is None:
        raise RuntimeError(
            "compute_onepo_policy_loss needs `teacher_mask` (pass it, or call inside "
            "`teacher_mask_context(mask)`)"
        )
    clip = float(_cfg(config, "clip_ratio", 0.2))
    loss, metrics = onepo_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        teacher_mask.to(device=log_prob.device),
        floor=float(_cfg(config, "onepo_floor", 0.1)),
        clip_low=float(_cfg(config, "clip_ratio_low", clip)),
        clip_high=float(_cfg(config, "clip_ratio_high", clip)),
        clip_c=float(_cfg(config, "clip_ratio_c", 3.0)),
        agg=loss_agg_mode,
        rollout_is_weights=rollout_is_weights,
    )
    renamed = {("actor/" + k if "/" not in k else k): v for k, v in metrics.items()}
    return loss, renamed
