import subprocess
import sys

import icml26_trips

EXPECTED_ALL = [
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
    "OFFICIAL_TEMPLATES",
    "ScheduleBounds",
    "SuperResolution",
    "TEMPLATE_WARPS",
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


def test_public_api_is_pinned():
    assert sorted(icml26_trips.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_trips, name), name


def test_diffusers_is_not_imported_eagerly():
    code = "import sys, icml26_trips; print('diffusers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
