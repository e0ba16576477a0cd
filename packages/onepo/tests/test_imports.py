import importlib.util

import icml26_onepo
import pytest

EXPECTED_ALL = [
    "AGG_MODES",
    "InjectionResult",
    "OnePOConfig",
    "OnePOGRPOTrainer",
    "OnePOTokenLoss",
    "RetirementController",
    "__version__",
    "aggregate_loss",
    "compute_onepo_policy_loss",
    "dapo_keep_groups",
    "grpo_advantages",
    "inject_teacher",
    "onepo_per_token_loss",
    "onepo_policy_loss",
    "overlong_penalty",
    "ppo_per_token_loss",
    "retained_teacher_indices",
    "reward_at_last_token",
    "teacher_mask_context",
]
TRL_NAMES = {"OnePOConfig", "OnePOGRPOTrainer"}  # lazy, need the [trl] extra


def test_public_api_is_pinned():
    assert sorted(icml26_onepo.__all__) == sorted(EXPECTED_ALL)
    for name in set(EXPECTED_ALL) - TRL_NAMES:
        assert hasattr(icml26_onepo, name), name


def test_trl_names_load_lazily():
    if importlib.util.find_spec("trl") is None:
        with pytest.raises(ImportError, match=r"icml26-onepo\[trl\]"):
            icml26_onepo.OnePOGRPOTrainer
    else:
        from trl import GRPOTrainer

        assert issubclass(icml26_onepo.OnePOGRPOTrainer, GRPOTrainer)


def test_unknown_attribute_raises():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        icml26_onepo.nope
