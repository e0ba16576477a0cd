import icml26_extramerge

EXPECTED_ALL = [
    "DEFAULT_ALPHA",
    "DEFAULT_ALPHAS",
    "ExtraMergeResult",
    "Rank1Report",
    "__version__",
    "ema",
    "ema_trajectory",
    "ema_weights",
    "extra_merge",
    "extrapolate",
    "load_checkpoint",
    "merged_trajectory",
    "rank1_report",
    "save_checkpoint",
    "sma",
    "trajectory_gram",
    "weighted_merge",
]


def test_public_api_is_pinned():
    assert sorted(icml26_extramerge.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_extramerge, name), name
