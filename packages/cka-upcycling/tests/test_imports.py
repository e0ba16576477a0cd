import icml26_cka_upcycling
import pytest

EXPECTED_ALL = [
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


def test_public_api_is_pinned():
    assert sorted(icml26_cka_upcycling.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_cka_upcycling, name), name


def test_hf_module_api():
    pytest.importorskip("transformers")
    import icml26_cka_upcycling.hf as hf

    assert sorted(hf.__all__) == ["SelectiveUpcyclingCallback", "causal_lm_loss", "replace_mlp"]
