import icml26_robust_satisficing

EXPECTED_ALL = [
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


def test_public_api_is_pinned():
    assert sorted(icml26_robust_satisficing.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_robust_satisficing, name), name
