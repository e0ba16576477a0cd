"""NormBT: representation-distance-normalized Bradley-Terry loss for reward models.

Xie et al., "When Distance Distracts: Representation Distance Bias in BT-Loss for Reward
Models" (arXiv 2512.06343). The TRL names (`NormBTConfig`, `NormBTRewardTrainer`) live in
`icml26_normbt.trl` and need the `[trl]` extra; they are also reachable lazily as attributes of
this package, but are not in `__all__` (which must import with the base dependencies alone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .diagnostics import (
    DistanceBucket,
    GradientFactors,
    accuracy_by_distance,
    factor_correlations,
    head_gradient_factors,
    head_gradient_norms_autograd,
    pair_statistics,
    spearman,
)
from .evaluate import (
    REWARDBENCH_EXAMPLE_COUNTS,
    REWARDBENCH_SECTIONS,
    RewardBenchResult,
    evaluate_rewardbench,
    load_preference_pairs,
    pairwise_accuracy,
    rewardbench_scores,
    score_pairs,
)
from .head import HEAD_NAMES, capture_head_input, find_reward_head, pooled_head_input
from .loss import (
    NormBTState,
    bt_loss,
    last_token_pool,
    normbt_loss,
    normbt_weights,
    pair_distance,
)

if TYPE_CHECKING:
    from .trl import NormBTConfig as NormBTConfig
    from .trl import NormBTRewardTrainer as NormBTRewardTrainer

__version__ = "0.1.0"

__all__ = [
    "HEAD_NAMES",
    "REWARDBENCH_EXAMPLE_COUNTS",
    "REWARDBENCH_SECTIONS",
    "DistanceBucket",
    "GradientFactors",
    "NormBTState",
    "RewardBenchResult",
    "accuracy_by_distance",
    "bt_loss",
    "capture_head_input",
    "evaluate_rewardbench",
    "factor_correlations",
    "find_reward_head",
    "head_gradient_factors",
    "head_gradient_norms_autograd",
    "last_token_pool",
    "load_preference_pairs",
    "normbt_loss",
    "normbt_weights",
    "pair_distance",
    "pair_statistics",
    "pairwise_accuracy",
    "pooled_head_input",
    "rewardbench_scores",
    "score_pairs",
    "spearman",
]

_LAZY = {"NormBTConfig", "NormBTRewardTrainer"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        try:
            from . import trl as _trl
        except ImportError as err:
            raise ImportError(f"{name} needs TRL: pip install 'icml26-normbt[trl]'") from err
        return getattr(_trl, name)
    raise AttributeError(f"module 'icml26_normbt' has no attribute {name!r}")
