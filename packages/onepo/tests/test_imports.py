import importlib.util

import icml26_onepo
import pytest

EXPECTED_ALL = [
    "AGG_MODES",
    "InjectionResult",
    "OnePOTokenLoss",
    "OpenAITeacher",
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
TRL_NAMES = [
    "OnePOConfig",
    "OnePOGRPOTrainer",
    "soft_overlong_punishment",
]  # icml26_onepo.trl, need the [trl] extra


def test_public_api_is_pinned():
    assert sorted(icml26_onepo.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_onepo, name), name


def test_trl_module_api_is_pinned():
    trl_mod = pytest.importorskip("icml26_onepo.trl")
    assert sorted(trl_mod.__all__) == TRL_NAMES


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
