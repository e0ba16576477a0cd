"""Rollout groups for OnePO: GRPO advantages, Teacher Retirement, DAPO filter, overlong penalty.

Teacher Retirement (per prompt group, per step): the teacher response is scored by the same
reward; it replaces a uniformly random member of the group only if its reward is *strictly*
greater than every student reward, otherwise it is retired for that group at this step (a tie
retires). The group size is unchanged, the teacher row's reward sits at its last valid token
and its tokens form the teacher mask of `icml26_onepo.onepo_policy_loss`. Retirement is
re-decided at every step; `RetirementController` optionally stops injection for good.

Rows are laid out group-major: group g holds rows ``g*n … g*n + n − 1`` (``n`` = group size),
as verl and TRL lay out repeated prompts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = [
    "InjectionResult",
    "RetirementController",
    "dapo_keep_groups",
    "grpo_advantages",
    "inject_teacher",
    "overlong_penalty",
    "retained_teacher_indices",
    "reward_at_last_token",
]


def _check_group(n_rows: int, group_size: int, name: str = "rewards") -> int:
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"`group_size` must be a positive int, got {group_size!r}")
    if n_rows % group_size:
        raise ValueError(f"`{name}` has {n_rows} rows, not a multiple of `group_size`={group_size}")
    return n_rows // group_size


def grpo_advantages(
    rewards: torch.Tensor, group_size: int, *, norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO outcome advantages, verl's ``grpo`` estimator: ``(R − mean_g) / (std_g + eps)``.

    ``rewards``: ``(B,)`` one scalar per response. std is the unbiased (n − 1) std of the group,
    as verl's ``torch.std``; a group of one gets mean 0 and std 1 (verl's convention).
    ``norm_by_std=False`` gives Dr. GRPO's ``R − mean_g``. Returns ``(B,)``.
    """
    if rewards.dim() != 1:
        raise ValueError(f"`rewards` must be 1-D (B,), got shape {tuple(rewards.shape)}")
    n_groups = _check_group(rewards.shape[0], group_size)
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("`rewards` has NaN or infinite values")
    r = rewards.view(n_groups, group_size)  # (G, n)
    if group_size == 1:
        mean = torch.zeros_like(r)
        std = torch.ones_like(r)
    else:
        mean = r.mean(dim=1, keepdim=True)
        std = r.std(dim=1, keepdim=True)
    adv = r - mean
    if norm_by_std:
        adv = adv / (std + eps)
    return adv.reshape(-1)


def reward_at_last_token(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``(B,)`` scores → ``(B, T)`` token rewards, the score at each row's last valid token.

    A row with an empty mask keeps its score at position 0 (as verl's ``max(valid − 1, 0)``).
    """
    if response_mask.dim() != 2 or scores.shape != response_mask.shape[:1]:
        raise ValueError(
            f"`scores` must be (B,) and `response_mask` (B, T), got {tuple(scores.shape)} and "
            f"{tuple(response_mask.shape)}"
        )
    length = response_mask.to(torch.long).sum(-1)  # (B,)
    last = (length - 1).clamp_min(0)
    out = torch.zeros(response_mask.shape, dtype=scores.dtype, device=scores.device)
    out[torch.arange(out.shape[0], device=out.device), last] = scores
    return out


def retained_teacher_indices(
    teacher_rewards: Iterable[float], on_policy_rewards: Iterable[float]
) -> list[int]:
    """Indices of teacher candidates whose reward strictly beats every on-policy reward.

    A NaN teacher reward is never retained; on-policy rewards must be finite and non-empty.
    """
    teacher = np.asarray(list(teacher_rewards), dtype=np.float64)
    students = np.asarray(list(on_policy_rewards), dtype=np.float64)
    if students.size == 0:
        raise ValueError(
            "`on_policy_rewards` is empty: Teacher Retirement needs the group's rewards"
        )
    if not np.all(np.isfinite(students)):
        raise ValueError("`on_policy_rewards` has NaN or infinite values")
    frontier = float(students.max())
    return [int(i) for i in np.flatnonzero(np.isfinite(teacher) & (teacher > frontier))]


@dataclass
class InjectionResult:
    """Outcome of `inject_teacher` for one generation batch.

    ``rows``: for each group, the row the teacher replaced, or -1 if it retired (or had no
    candidate). ``rewards``: ``(B,)`` student rewards with the teacher reward written into the
    replaced rows. ``teacher_rows``: ``(B,)`` bool.
    """

    rows: list[int]
    rewards: torch.Tensor
    teacher_rows: torch.Tensor
    candidates: int
    replaced: int

    @property
    def retired(self) -> int:
        return self.candidates - self.replaced

    @property
    def retirement_rate(self) -> float:
        """Retired / candidates (1.0 when there was no candidate, as the official metric)."""
        return self.retired / self.candidates if self.candidates else 1.0


def inject_teacher(
    student_rewards: torch.Tensor,
    teacher_rewards: Sequence[float | None] | torch.Tensor,
    group_size: int,
    *,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
) -> InjectionResult:
    """Teacher Retirement for one batch: decide, per group, whether the teacher replaces a row.

    ``student_rewards``: ``(B,)``, group-major. ``teacher_rewards``: one per group (None / NaN:
    no teacher for that group; a NaN still counts as a retired candidate, as in the official
    manager). Replacement rows are drawn with ``rng.integers(g*n, g*n + n)`` in group order,
    only for retained groups, from ``numpy.random.default_rng(seed)`` (the official code seeds
    it with ``seed + global_step``), or from ``rng``.
    """
    if student_rewards.dim() != 1:
        raise ValueError(f"`student_rewards` must be 1-D (B,), got {tuple(student_rewards.shape)}")
    n_groups = _check_group(student_rewards.shape[0], group_size, "student_rewards")
    teacher = [
        None if t is None else float(t)
        for t in (
            teacher_rewards.tolist()
            if isinstance(teacher_rewards, torch.Tensor)
            else teacher_rewards
        )
    ]
    if len(teacher) != n_groups:
        raise ValueError(
            f"`teacher_rewards` must have one entry per group ({n_groups}), got {len(teacher)}"
        )
    infinite = [g for g, t in enumerate(teacher) if t is not None and math.isinf(t)]
    if infinite:  # +inf would always win, -inf never: both are a broken reward function
        raise ValueError(
            f"`teacher_rewards` has infinite values for groups {infinite}; rewards must be "
            "finite (None or NaN marks a group without a usable teacher)"
        )
    if (seed is None) == (rng is None):
        raise ValueError("pass exactly one of `seed` and `rng`")
    gen = np.random.default_rng(seed) if rng is None else rng
    rewards = student_rewards.clone()
    teacher_rows = torch.zeros(rewards.shape, dtype=torch.bool, device=rewards.device)
    rows: list[int] = []
    candidates = replaced = 0
    for g, t in enumerate(teacher):
        start = g * group_size
        if t is None:
            rows.append(-1)
            continue
        candidates += 1
        group = student_rewards[start : start + group_size].tolist()
        if not retained_teacher_indices([t], group):
            rows.append(-1)
            continue
        idx = int(gen.integers(start, start + group_size))
        rewards[idx] = t
        teacher_rows[idx] = True
        rows.append(idx)
        replaced += 1
    return InjectionResult(rows, rewards, teacher_rows, candidates, replaced)


@dataclass
class RetirementController:
    """Optional global stop of teacher injection (both conditions off, -1, by default).

    ``max_teacher_steps``: injection is off for ``step > max_teacher_steps`` (0: never on).
    ``plateau_window``: after each step `observe` records retired/candidates; once a full
    window of rates are all ≥ ``plateau_min_retirement_rate`` with spread (max − min) ≤
    ``plateau_tolerance``, injection stops for good. A step with no candidates is not recorded.
    """

    max_teacher_steps: int = -1
    plateau_window: int = -1
    plateau_tolerance: float = 0.01
    plateau_min_retirement_rate: float = 0.9
    history: deque[float] = field(init=False, repr=False)
    disabled_reason: str | None = None

    def __post_init__(self) -> None:
        if self.max_teacher_steps < -1:
            raise ValueError(
                f"`max_teacher_steps` must be -1 or >= 0, got {self.max_teacher_steps}"
            )
        if self.plateau_window != -1 and self.plateau_window < 1:
            raise ValueError(f"`plateau_window` must be -1 or >= 1, got {self.plateau_window}")
        if not (math.isfinite(self.plateau_tolerance) and self.plateau_tolerance >= 0):
            raise ValueError(
                f"`plateau_tolerance` must be finite and >= 0, got {self.plateau_tolerance}"
            )
        if not 0.0 <= self.plateau_min_retirement_rate <= 1.0:
            raise ValueError(
                f"`plateau_min_retirement_rate` must be in [0, 1], got {self.plateau_min_retirement_rate}"
            )
        self.history = deque(maxlen=max(self.plateau_window, 0))

    def teacher_enabled(self, step: int) -> bool:
        """Whether to inject at ``step``; a step cap, once hit, disables for good."""
        if self.disabled_reason is not None:
            return False
        if self.max_teacher_steps >= 0 and (
            self.max_teacher_steps == 0 or step > self.max_teacher_steps
        ):
            self.disabled_reason = f"max_teacher_steps={self.max_teacher_steps}"
            return False
        return True

    def observe(self, retired: int, total: int) -> bool:
        """Record one step's retirement; returns whether injection stays enabled."""
        if self.disabled_reason is not None:
            return False
        if retired < 0 or total < 0 or retired > total:
            raise ValueError(f"need 0 <= retired <= total, got retired={retired}, total={total}")
        if self.plateau_window == -1 or total == 0:
            return True
        self.history.append(retired / total)
        if len(self.history) < self.plateau_window:
            return True
        spread = max(self.history) - min(self.history)
        if (
            min(self.history) >= self.plateau_min_retirement_rate
            and spread <= self.plateau_tolerance
        ):
            self.disabled_reason = (
                f"retirement plateau: window={self.plateau_window}, all rates >= "
                f"{self.plateau_min_retirement_rate}, spread={spread:.6f}"
            )
            return False
        return True


def dapo_keep_groups(metric: torch.Tensor, group_size: int) -> torch.Tensor:
    """DAPO dynamic sampling (``filter_groups``): keep groups whose metric is not constant.

    ``metric``: ``(B,)`` (OnePO.sh filters on ``acc``). Returns a ``(G,)`` bool, True for a
    group with nonzero std, or of size one (verl's rule). Expand to rows with
    ``keep.repeat_interleave(group_size)``.
    """
    if metric.dim() != 1:
        raise ValueError(f"`metric` must be 1-D (B,), got {tuple(metric.shape)}")
    n_groups = _check_group(metric.shape[0], group_size, "metric")
    if group_size == 1:
        return torch.ones(n_groups, dtype=torch.bool, device=metric.device)
    g = metric.view(n_groups, group_size).to(torch.float64)
    return (g.max(dim=1).values - g.min(dim=1).values) > 0


def overlong_penalty(
    response_lengths: torch.Tensor,
    max_response_length: int,
    *,
    buffer_length: int = 4000,
    penalty_factor: float = 0.6,
) -> torch.Tensor:
    """DAPO soft overlong punishment, added to the reward (OnePO.sh: buffer 4000, factor 0.6).

    expected = max_response_length − buffer_length
    penalty  = min(−(L − expected) / buffer_length · penalty_factor, 0)
    """
    if buffer_length <= 0 or buffer_length > max_response_length:
        raise ValueError(
            f"`buffer_length` must be in (0, max_response_length={max_response_length}], got {buffer_length}"
        )
    if penalty_factor < 0:
        raise ValueError(f"`penalty_factor` must be >= 0, got {penalty_factor}")
    expected = max_response_length - buffer_length
    exceed = response_lengths.to(torch.float64) - expected
    return torch.clamp(-exceed / buffer_length * penalty_factor, max=0.0).to(torch.float32)
