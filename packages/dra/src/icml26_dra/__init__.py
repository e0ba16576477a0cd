"""icml26-dra: Denoised Representation Attribution for detecting unsafe training data.

Pan, Shi, Zhao, Ma, "Detecting and Filtering Unsafe Training Data via Data Attribution with
Denoised Representation" (arXiv 2502.11411).
"""

from .attribution import DRA, LESS, GradDot, GradSim, RepSim, TracIn, filter_top
from .dattri import DRAAttributor
from .denoise import Denoiser, DimSelection, default_ks, select_dims_leave_target_out
from .filter import DRAFilter
from .metrics import auprc, average_precision, precision_recall_points
from .representations import (
    RandomProjector,
    causal_lm_response_loss,
    extract_hidden_states,
    extract_token_states,
    per_sample_grads,
    select_parameters,
    tokenize_pairs,
)
from .token_denoise import TokenDenoiser, TokenDRA

__version__ = "0.1.0"

__all__ = [
    "DRA",
    "LESS",
    "DRAAttributor",
    "DRAFilter",
    "Denoiser",
    "DimSelection",
    "GradDot",
    "GradSim",
    "RandomProjector",
    "RepSim",
    "TokenDRA",
    "TokenDenoiser",
    "TracIn",
    "__version__",
    "auprc",
    "average_precision",
    "causal_lm_response_loss",
    "default_ks",
    "extract_hidden_states",
    "extract_token_states",
    "filter_top",
    "per_sample_grads",
    "precision_recall_points",
    "select_dims_leave_target_out",
    "select_parameters",
    "tokenize_pairs",
]
