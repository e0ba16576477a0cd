"""Profiles from validation correctness and upstream's normalisations, against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from icml26_skillmoe import ProfileBank, normalize_to_probability


def test_normalize_shifts_only_when_min_negative_then_powers():
    # min < 0: x - min + 1 = [1, 3, 6]; T = 0.5 -> squares [1, 9, 36] / 46
    np.testing.assert_allclose(normalize_to_probability([-2, 0, 3], 0.5), np.array([1, 9, 36]) / 46)
    # min == 0: no shift, so the zero stays a zero probability
    np.testing.assert_allclose(normalize_to_probability([0, 1, 2], 0.5), np.array([0, 1, 4]) / 5)
    # T = 1: proportional; T = 2: square roots
    np.testing.assert_allclose(normalize_to_probability([1, 3], 1.0), [0.25, 0.75])
    np.testing.assert_allclose(
        normalize_to_probability([4, 9], 2.0), np.array([2, 3]) / 5, rtol=1e-12
    )
    # all zero: uniform (upstream divides by zero)
    np.testing.assert_allclose(normalize_to_probability([0, 0], 0.5), [0.5, 0.5])


@pytest.mark.parametrize(
    "scores,t,match",
    [
        ([], 0.5, "non-empty"),
        ([1, np.nan], 0.5, "finite"),
        ([1, 2], 0.0, "temperature"),
        ([1], -1, "temperature"),
    ],
)
def test_normalize_bad_input(scores, t, match):
    with pytest.raises(ValueError, match=match):
        normalize_to_probability(scores, t)


def small_bank():
    keywords = [["algebra", "calculus"], ["algebra"], ["virology"], ["virology", "law"]]
    correctness = {
        "math": [True, True, False, False],
        "bio": [False, False, True, True],
        "gen": [True, False, True, False],
    }
    return ProfileBank.from_validation(keywords, correctness)


def test_profiles_are_signed_counts():
    bank = small_bank()
    assert bank.profiles["math"] == {"algebra": 2, "calculus": 1, "virology": -2, "law": -1}
    assert bank.profiles["bio"] == {"algebra": -2, "calculus": -1, "virology": 2, "law": 1}
    assert bank.profiles["gen"] == {"algebra": 0, "calculus": 1, "virology": 0, "law": -1}
    assert bank.raw_strength() == {"math": 0, "bio": 0, "gen": 0}
    assert bank.vocabulary == ["algebra", "calculus", "virology", "law"]


def test_global_strength_closed_form():
    bank = ProfileBank({"a": {"x": 3, "y": -5}, "b": {"x": 1}, "c": {"y": 4}})
    # s = [-2, 1, 4] -> shift 3 -> [1, 4, 7] -> squares [1, 16, 49] / 66
    g = bank.global_strength()
    np.testing.assert_allclose([g["a"], g["b"], g["c"]], np.array([1, 16, 49]) / 66)


def test_relevance_sums_with_multiplicity_over_models_holding_the_keyword():
    bank = ProfileBank({"a": {"x": 3, "y": -5}, "b": {"x": 1}, "c": {"y": 4}})
    assert bank.relevance(["x"]) == {"a": 3, "b": 1}  # c holds no "x": not a candidate
    assert bank.relevance(["x", "y"]) == {"c": 4, "b": 1, "a": -2}  # sorted, descending
    assert bank.relevance(["y", "y"]) == {"c": 8, "a": -10}
    assert bank.relevance([]) == {}
    with pytest.raises(ValueError, match="'zzz' is in no profile"):
        bank.relevance(["x", "zzz"])


def test_bank_bad_input(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        ProfileBank({})
    with pytest.raises(ValueError, match="empty"):
        ProfileBank.from_validation([["a"]], {})
    with pytest.raises(ValueError, match="has 1 entries for 2 questions"):
        ProfileBank.from_validation([["a"], ["b"]], {"m": [True]})
    with pytest.raises(ValueError, match="not finite"):
        ProfileBank({"m": {"a": float("inf")}})
    bank = small_bank()
    bank.save(tmp_path / "bank.json")
    assert ProfileBank.load(tmp_path / "bank.json").profiles == bank.profiles
