import icml26_rcfcl

EXPECTED_ALL = [
    "METHODS",
    "AsyncDriftScenario",
    "CVAEConfig",
    "ClassConditionalDriftDetector",
    "ConditionalVAE",
    "DriftReport",
    "LogisticDiscriminator",
    "RCFCLConfig",
    "RoundResult",
    "SimulationResult",
    "StreamDriftScenario",
    "__version__",
    "aggregation_weights",
    "auc",
    "auc_null_pvalue",
    "detection_scores",
    "discriminator_weights",
    "drift_weighted_average",
    "init_params",
    "load_digits_xy",
    "local_update",
    "robust_drift_average",
    "simulate",
    "validate_update",
]


def test_public_api_is_pinned():
    assert sorted(icml26_rcfcl.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_rcfcl, name), name


def test_flower_names_live_in_the_flower_module():
    # the top-level API imports without the [flower] extra; Flower names are not in __all__
    assert not {"RCFCLStrategy", "RCFCLClient"} & set(icml26_rcfcl.__all__)
