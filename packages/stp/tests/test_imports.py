import icml26_stp

EXPECTED_ALL = [
    "LENGTH_ADJUSTMENTS",
    "SAMPLERS",
    "LinearPredictor",
    "__version__",
    "curvature_loss",
    "message_spans",
    "sample_span",
    "sample_spans",
    "span_decompose",
    "span_weight",
    "stp_loss",
    "stp_loss_ref",
    "tokenize_messages",
    "two_view_loss",
]


def test_public_api_is_pinned():
    assert sorted(icml26_stp.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_stp, name), name
