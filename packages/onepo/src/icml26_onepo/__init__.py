"""OnePO: One-stage Policy Optimization, SFT-free RL with transient teacher guidance.

Chen, Xie, Li and Wang, "OnePO: Direct One-stage Policy Optimization for SFT-free Domain
Adaptation", ICML 2026 (HuatuoGPT-3). `onepo_policy_loss` is Adaptive Objective
Evolution on verl's dual-clip PPO; `inject_teacher` / `RetirementController` are Teacher
Retirement; `OpenAITeacher` asks an OpenAI-compatible endpoint for teacher outputs. The TRL names live in `icml26_onepo.trl` (`OnePOConfig`, `OnePOGRPOTrainer`, the
`[trl]` extra); they are also reachable lazily as attributes here, outside `__all__` so that
a bare install imports every public name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .groups import (
    InjectionResult,
    RetirementController,
    dapo_keep_groups,
    grpo_advantages,
    inject_teacher,
    overlong_penalty,
    retained_teacher_indices,
    reward_at_last_token,
)
from .loss import (
    AGG_MODES,
    OnePOTokenLoss,
    aggregate_loss,
    compute_onepo_policy_loss,
    onepo_per_token_loss,
    onepo_policy_loss,
    ppo_per_token_loss,
    teacher_mask_context,
)
from .teacher import OpenAITeacher

if TYPE_CHECKING:
    from .trl import OnePOConfig as OnePOConfig
    from .trl import OnePOGRPOTrainer as OnePOGRPOTrainer

__version__ = "0.1.0"

__all__ = [
    "AGG_MODES",
    "InjectionResult",
    "OnePOTokenLoss",
    "OpenAITeacher",
    "RetirementController",
    "__version__",
    "aggregate_loss",
    "compute_onepo_policy_loss",
    "dapo_keep_groups",
    "grpo_advantages",
    "inject_teacher",
    "onepo_per_token_loss",
    "onepo_policy_loss",
    "overlong_penalty",
    "ppo_per_token_loss",
    "retained_teacher_indices",
    "reward_at_last_token",
    "teacher_mask_context",
]

_LAZY = {"OnePOConfig", "OnePOGRPOTrainer"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        try:
            from . import trl as _trl
        except ImportError as err:
            raise ImportError(f"{name} needs TRL: pip install 'icml26-onepo[trl]'") from err
        return getattr(_trl, name)
    raise AttributeError(f"module 'icml26_onepo' has no attribute {name!r}")
