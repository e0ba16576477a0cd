"""TriPS: scheduling data consistency, CFG and stochasticity in flow-matching posterior sampling.

Bang, Mun, Seo, Hong, Chun, ICML 2026 (arXiv 2605.26470). The diffusers step-end callback and
the SD3-family wrapper live in ``icml26_trips.diffusers_integration`` (extra ``diffusers``).
"""

from .gaussian_mixture import GaussianMixturePrior, MixturePosterior
from .grpo import (
    BernsteinBetaPolicy,
    GRPOConfig,
    GRPOHistory,
    group_advantages,
    grpo_loss,
    grpo_update,
    train_grpo,
    trips_reward,
)
from .metrics import psnr, sliced_wasserstein, ssim
from .operators import (
    Blur,
    Inpainting,
    LinearOperator,
    MatrixOperator,
    SuperResolution,
    gaussian_kernel,
    motion_kernel,
)
from .sampler import FlowDPSSampler, flow_sigmas
from .schedules import (
    OFFICIAL_TEMPLATES,
    TEMPLATE_WARPS,
    ScheduleBounds,
    TriadicSchedule,
    bernstein_basis,
    bernstein_curve,
    bernstein_schedule,
    component_template,
    fit_bernstein,
    fit_schedule,
    make_template,
    official_template,
    phi_exp,
    phi_log,
    template,
)

__version__ = "0.1.0"

__all__ = [
    "OFFICIAL_TEMPLATES",
    "TEMPLATE_WARPS",
    "BernsteinBetaPolicy",
    "Blur",
    "FlowDPSSampler",
    "GRPOConfig",
    "GRPOHistory",
    "GaussianMixturePrior",
    "Inpainting",
    "LinearOperator",
    "MatrixOperator",
    "MixturePosterior",
    "ScheduleBounds",
    "SuperResolution",
    "TriadicSchedule",
    "__version__",
    "bernstein_basis",
    "bernstein_curve",
    "bernstein_schedule",
    "component_template",
    "fit_bernstein",
    "fit_schedule",
    "flow_sigmas",
    "gaussian_kernel",
    "group_advantages",
    "grpo_loss",
    "grpo_update",
    "make_template",
    "motion_kernel",
    "official_template",
    "phi_exp",
    "phi_log",
    "psnr",
    "sliced_wasserstein",
    "ssim",
    "template",
    "train_grpo",
    "trips_reward",
]
