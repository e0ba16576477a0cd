"""icml26-extramerge: Extra-Merge, extrapolation along the rank-1 subspace of merged checkpoints.

Zhou et al., "Extra-Merge: Tracing the Rank-1 Subspace of Model Merging in Language Model
Pre-Training", ICML 2026 (arXiv 2605.26484). `ExtraMergeCallback` lives in `icml26_extramerge.hf`
(extra `hf`, needs transformers).
"""

from .extrapolate import DEFAULT_ALPHA, DEFAULT_ALPHAS, ExtraMergeResult, extra_merge, extrapolate
from .merge import (
    ema,
    ema_trajectory,
    ema_weights,
    load_checkpoint,
    merged_trajectory,
    save_checkpoint,
    sma,
    weighted_merge,
)
from .subspace import Rank1Report, rank1_report, trajectory_gram

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_ALPHAS",
    "ExtraMergeResult",
    "Rank1Report",
    "__version__",
    "ema",
    "ema_trajectory",
    "ema_weights",
    "extra_merge",
    "extrapolate",
    "load_checkpoint",
    "merged_trajectory",
    "rank1_report",
    "save_checkpoint",
    "sma",
    "trajectory_gram",
    "weighted_merge",
]
