"""Differentiable SMC resampling with a training-free diffusion surrogate (Andersson & Zhao, ICML 2026).

The torch port lives in `icml26_diffusion_resampling.torch` ([torch] extra) and the blackjax
adapter in `icml26_diffusion_resampling.blackjax` ([blackjax] extra); neither is imported here.
"""

from .resampling import (
    INTEGRATORS,
    GaussianReference,
    diffusion_resample,
    diffusion_resample_from_noise,
    diffusion_resample_generic,
    diffusion_resample_ref,
    empirical_reference,
    gumbel_softmax_resample,
    multinomial_resample,
    ot_marginal_error,
    ot_resample,
    sinkhorn_plan_ref,
    soft_resample,
    stop_gradient_resample,
    stratified_resample,
    systematic_resample,
)
from .smc import (
    FilterOutput,
    KalmanOutput,
    LGSSMParams,
    LinearGaussianSSM,
    Proposal,
    StateSpaceModel,
    estimate_parameters,
    gaussian_marginal_distances,
    kalman_filter,
    particle_filter,
)

__version__ = "0.1.0"

__all__ = [
    "INTEGRATORS",
    "FilterOutput",
    "GaussianReference",
    "KalmanOutput",
    "LGSSMParams",
    "LinearGaussianSSM",
    "Proposal",
    "StateSpaceModel",
    "__version__",
    "diffusion_resample",
    "diffusion_resample_from_noise",
    "diffusion_resample_generic",
    "diffusion_resample_ref",
    "empirical_reference",
    "estimate_parameters",
    "gaussian_marginal_distances",
    "gumbel_softmax_resample",
    "kalman_filter",
    "multinomial_resample",
    "ot_marginal_error",
    "ot_resample",
    "particle_filter",
    "sinkhorn_plan_ref",
    "soft_resample",
    "stop_gradient_resample",
    "stratified_resample",
    "systematic_resample",
]
