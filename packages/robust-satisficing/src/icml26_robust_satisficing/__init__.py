"""icml26-robust-satisficing: Iterative Robust Satisficing (IRS), ICML 2026.

Minimise fragility κ, the rate at which the loss deteriorates as the data distribution departs
from training (KL), at a target loss τ; one forward and one backward pass per step.
`icml26_robust_satisficing.hf.IRSTrainer` (extra `[hf]`) is the transformers.Trainer adapter.
"""

from .baselines import (
    GroupDRO,
    cvar_loss,
    erm_loss,
    kl_dro_loss,
    klrs_feasibility_loss,
    klrs_lambda_search,
)
from .irs import KL_FLOOR, Fragility, IRSLoss, IRSStats, fragility, group_means, tilt

__version__ = "0.1.0"

__all__ = [
    "KL_FLOOR",
    "Fragility",
    "GroupDRO",
    "IRSLoss",
    "IRSStats",
    "__version__",
    "cvar_loss",
    "erm_loss",
    "fragility",
    "group_means",
    "kl_dro_loss",
    "klrs_feasibility_loss",
    "klrs_lambda_search",
    "tilt",
]
