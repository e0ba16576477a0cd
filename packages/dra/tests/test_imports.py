import icml26_dra

EXPECTED_ALL = [
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


def test_public_api_is_pinned():
    assert sorted(icml26_dra.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_dra, name), name


def test_public_api_needs_no_extra():
    """DRAFilter and DRAAttributor are duck-typed: datasets / dattri are never imported."""
    import importlib

    for mod in (
        "attribution",
        "dattri",
        "denoise",
        "filter",
        "metrics",
        "representations",
        "token_denoise",
    ):
        src = importlib.import_module(f"icml26_dra.{mod}").__file__
        text = open(src).read()
        assert "import datasets" not in text and "from dattri" not in text, mod
