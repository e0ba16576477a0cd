import icml26_normbt

EXPECTED_ALL = [
    "REWARDBENCH_EXAMPLE_COUNTS",
    "REWARDBENCH_SECTIONS",
    "DistanceBucket",
    "GradientFactors",
    "NormBTConfig",
    "NormBTRewardTrainer",
    "NormBTState",
    "RewardBenchResult",
    "accuracy_by_distance",
    "bt_loss",
    "evaluate_rewardbench",
    "factor_correlations",
    "head_gradient_factors",
    "head_gradient_norms_autograd",
    "last_token_pool",
    "load_preference_pairs",
    "normbt_loss",
    "normbt_weights",
    "pair_distance",
    "pair_statistics",
    "pairwise_accuracy",
    "rewardbench_scores",
    "score_pairs",
    "spearman",
]


def test_public_api_is_pinned():
    assert sorted(icml26_normbt.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_normbt, name), name


def test_unknown_attribute_raises():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        icml26_normbt.nope
