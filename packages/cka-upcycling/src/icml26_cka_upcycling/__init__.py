"""CKA-guided selective MoE upcycling for continual learning (ICML 2026 poster 64571).

Reconstructed from the abstract; see the README for what is faithful and what is reconstructed.
The ``transformers.Trainer`` integration lives in :mod:`icml26_cka_upcycling.hf` (extra ``hf``).
"""

from .analysis import (
    cka_drift,
    collect_features,
    diagnostic_plan,
    expert_sensitivity,
    hessian_trace,
    rho_sharpness,
)
from .bilevel import (
    BilevelUpcycler,
    ReservoirBuffer,
    UpcyclePlan,
    apply_plan,
    find_moe_layers,
    hypergradient,
)
from .cka import (
    MinibatchCKA,
    cka_loss,
    gram_linear,
    gram_rbf,
    hsic,
    kernel_cka,
    linear_cka,
    rbf_cka,
)
from .mask import GumbelMask, constant_tau, cosine_tau, exponential_tau, linear_tau
from .metrics import cl_metrics
from .upcycle import UpcycledMoE, moe_ref, upcycle_ffn, upcycle_moe

__version__ = "0.1.0"

__all__ = [
    "BilevelUpcycler",
    "GumbelMask",
    "MinibatchCKA",
    "ReservoirBuffer",
    "UpcyclePlan",
    "UpcycledMoE",
    "__version__",
    "apply_plan",
    "cka_drift",
    "cka_loss",
    "cl_metrics",
    "collect_features",
    "constant_tau",
    "cosine_tau",
    "diagnostic_plan",
    "expert_sensitivity",
    "exponential_tau",
    "find_moe_layers",
    "gram_linear",
    "gram_rbf",
    "hessian_trace",
    "hsic",
    "hypergradient",
    "kernel_cka",
    "linear_cka",
    "linear_tau",
    "moe_ref",
    "rbf_cka",
    "rho_sharpness",
    "upcycle_ffn",
    "upcycle_moe",
]
