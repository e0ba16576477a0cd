import icml26_diffusion_resampling

EXPECTED_ALL = [
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


def test_all_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_diffusion_resampling.__all__)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_diffusion_resampling, name), name


def test_optional_frameworks_are_not_imported_eagerly():
    import subprocess
    import sys

    code = (
        "import sys, icml26_diffusion_resampling; "
        "print(sorted(m for m in ('torch', 'blackjax', 'ott') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
