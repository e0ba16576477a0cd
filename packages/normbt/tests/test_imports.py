import icml26_normbt

EXPECTED_ALL = [
    "HEAD_NAMES",
    "capture_head_input",
    "find_reward_head",
    "pooled_head_input",
    "REWARDBENCH_EXAMPLE_COUNTS",
    "REWARDBENCH_SECTIONS",
    "DistanceBucket",
    "GradientFactors",
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


TRL_NAMES = {"NormBTConfig", "NormBTRewardTrainer"}  # lazy, need the [trl] extra


def test_public_api_is_pinned():
    assert sorted(icml26_normbt.__all__) == sorted(EXPECTED_ALL)
    assert not TRL_NAMES & set(icml26_normbt.__all__)  # __all__ imports without extras
    for name in EXPECTED_ALL:
        assert hasattr(icml26_normbt, name), name


def test_trl_names_load_lazily():
    import importlib.util

    import pytest

    if importlib.util.find_spec("trl") is None:
        with pytest.raises(ImportError, match=r"icml26-normbt\[trl\]"):
            icml26_normbt.NormBTRewardTrainer
    else:
        from trl import RewardTrainer

        assert issubclass(icml26_normbt.NormBTRewardTrainer, RewardTrainer)


def test_unknown_attribute_raises():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        icml26_normbt.nope
