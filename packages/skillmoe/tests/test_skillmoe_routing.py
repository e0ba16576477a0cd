"""Recruitment: frequencies against the closed-form weights (chi-square), fallbacks, draws."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from icml26_skillmoe import ProfileBank, recruit, recruit_batch, recruitment_distribution

# chi-square critical values at p = 1e-3 (df -> value)
CHI2_CRIT = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47}


def bank4():
    # raw strength s = [-2, 1, 4, 2] -> shifted [1, 4, 7, 5] -> p ∝ [1, 16, 49, 25] (T = 0.5)
    return ProfileBank(
        {"a": {"x": 3, "y": -5}, "b": {"x": 1}, "c": {"y": 4}, "d": {"x": 2, "y": 0}}
    )


def chi2(counts: Counter, probs: dict) -> float:
    n = sum(counts.values())
    assert set(counts) <= set(probs), f"drew {set(counts) - set(probs)} with zero probability"
    return sum((counts.get(m, 0) - n * p) ** 2 / (n * p) for m, p in probs.items())


@pytest.mark.parametrize(
    "keywords,weights",
    [
        # x: r = {a: 3, d: 2, b: 1}, c holds no x -> weights r * p ∝ [3*1, 2*25, 1*16]
        (["x"], {"a": 3, "d": 50, "b": 16}),
        # x, y: r = {c: 4, d: 2, b: 1, a: -2}: only the positive ones -> [4*49, 2*25, 1*16]
        (["x", "y"], {"c": 196, "d": 50, "b": 16}),
    ],
)
def test_recruitment_frequencies_match_relevance_times_strength(keywords, weights):
    total = sum(weights.values())
    probs = {m: w / total for m, w in weights.items()}
    dist = recruitment_distribution(keywords, bank4())
    assert dist is not None
    assert dist == pytest.approx(probs, rel=1e-12)
    rng = random.Random(123)
    draws = Counter()
    for _ in range(20000):  # 60000 draws, k = 3 with replacement
        draws.update(recruit(keywords, bank4(), 3, rng))
    assert chi2(draws, probs) < CHI2_CRIT[len(probs) - 1]


def test_no_positive_relevance_shifts_relevance():
    bank = ProfileBank({"a": {"z": -1}, "b": {"z": -3, "w": 1}, "c": {"w": 5}})
    # s = [-1, -2, 5] -> shifted [2, 1, 8] -> p ∝ [4, 1, 64]; r(z) = {a: -1, b: -3}
    # no positive -> r - min + 1 = {a: 3, b: 1} -> weights [3*4, 1*1]
    probs = {"a": 12 / 13, "b": 1 / 13}
    assert recruitment_distribution(["z"], bank) == pytest.approx(probs, rel=1e-12)
    rng = random.Random(5)
    draws = Counter(recruit(["z"], bank, 40000, rng))
    assert "c" not in draws
    assert chi2(draws, probs) < CHI2_CRIT[1]


def test_zero_relevance_models_are_not_recruited_when_some_are_positive():
    """Upstream samples over r_m > 0 only: a model holding the keyword with score 0 has no mass."""
    # p ∝ shifted strength: a holds x = 2, b holds x = 0 (relevant keyword, zero score)
    bank = ProfileBank({"a": {"x": 2}, "b": {"x": 0}, "c": {"y": 3}})
    assert list(bank.relevance(["x"])) == ["a", "b"]  # b *is* in the relevance map, with r = 0
    assert recruitment_distribution(["x"], bank) == {"a": 1.0}
    draws = Counter(recruit(["x"], bank, 2000, random.Random(0)))
    assert draws == Counter({"a": 2000})


def test_no_keywords_is_uniform_over_the_pool():
    assert recruitment_distribution([], bank4()) is None
    draws = Counter(recruit([], bank4(), 40000, random.Random(0)))
    assert chi2(draws, {m: 0.25 for m in "abcd"}) < CHI2_CRIT[3]


def test_same_seed_reproduces_upstream_random_choices_order():
    # upstream: candidates in the order of the sorted model_rank (c, d, b for keywords x, y),
    # then random.choices(models, weights=probabilities, k)
    for seed in range(20):
        expected = random.Random(seed).choices(
            ["c", "d", "b"], weights=[196 / 262, 50 / 262, 16 / 262], k=7
        )
        assert recruit(["x", "y"], bank4(), 7, random.Random(seed)) == expected
    assert recruit(["x", "y"], bank4(), 7, 3) == recruit(["x", "y"], bank4(), 7, random.Random(3))


def test_zero_strength_candidates_fall_back_to_relevance():
    # s = [0, 0, 4]: min is 0, no shift -> p = [0, 0, 1]; for keyword x only a and b are
    # candidates, both with zero strength: upstream divides by zero, here relevance alone
    bank = ProfileBank({"a": {"x": 2, "y": -2}, "b": {"x": 1, "y": -1}, "c": {"y": 4}})
    assert recruitment_distribution(["x"], bank) == pytest.approx({"a": 2 / 3, "b": 1 / 3})


def test_without_replacement_draws_distinct_and_checks_k():
    rng = random.Random(0)
    for _ in range(200):
        got = recruit(["x"], bank4(), 3, rng, replacement=False)
        assert sorted(got) == ["a", "b", "d"]
    with pytest.raises(ValueError, match="k=4 exceeds the 3 candidates"):
        recruit(["x"], bank4(), 4, rng, replacement=False)
    with pytest.raises(ValueError, match="k=5 exceeds the pool of 4"):
        recruit([], bank4(), 5, rng, replacement=False)
    # with replacement (upstream), k larger than the pool is legal: repeats
    assert len(recruit(["y"], bank4(), 5, rng)) == 5
    assert recruit(["y"], bank4(), 5, rng) == ["c"] * 5


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_bad_k(k):
    with pytest.raises(ValueError, match="k must be a positive int"):
        recruit(["x"], bank4(), k)


def test_bad_inputs():
    with pytest.raises(ValueError, match="in no profile"):
        recruit(["unmapped"], bank4())
    with pytest.raises(TypeError, match="not one str"):
        recruit("x", bank4())
    with pytest.raises(TypeError, match="bank"):
        recruit(["x"], {"a": {"x": 1}})
    with pytest.raises(TypeError, match="rng"):
        recruit(["x"], bank4(), 3, rng="seed")


def test_batch_shares_one_generator():
    rng = random.Random(9)
    expected = [recruit(k, bank4(), 3, rng) for k in (["x"], ["y"], [])]
    assert recruit_batch([["x"], ["y"], []], bank4(), 3, random.Random(9)) == expected


# ----------------------------------------------------------------- mode="topk" (an option)
def test_topk_takes_the_most_relevant_not_the_most_probable():
    # x: r = {a: 3, d: 2, b: 1}; the sampling weights r * p are {d: 50, b: 16, a: 3}, so
    # ranking by weight would put a last: top-k ranks by relevance
    assert recruit(["x"], bank4(), 3, mode="topk") == ["a", "d", "b"]
    assert recruit(["x"], bank4(), 2, mode="topk") == ["a", "d"]
    # only the r > 0 candidates, cycled from the top when there are fewer than k
    assert recruit(["x", "y"], bank4(), 5, mode="topk") == ["c", "d", "b", "c", "d"]
    assert recruit(["y"], bank4(), 3, mode="topk") == ["c", "c", "c"]
    # no keywords: the globally strongest, p ∝ [1, 16, 49, 25]
    assert recruit([], bank4(), 3, mode="topk") == ["c", "d", "b"]


def test_topk_ties_go_to_global_strength_then_order_and_it_is_deterministic():
    # r(x) = 1 for both; strength a: 0, b: 3 -> b first although a comes first in the bank
    bank = ProfileBank({"a": {"x": 1, "w": -1}, "b": {"x": 1, "v": 2}})
    assert recruit(["x"], bank, 3, mode="topk") == ["b", "a", "b"]
    # every relevance negative: upstream's fallback set (all candidates), ranked by r
    neg = ProfileBank({"a": {"z": -3}, "b": {"z": -1}})
    assert recruit(["z"], neg, 3, mode="topk") == ["b", "a", "b"]
    draws = {
        tuple(recruit_batch([["x"], ["y"]], bank4(), 3, rng=s, mode="topk")[1]) for s in range(5)
    }
    assert draws == {("c", "c", "c")}
    with pytest.raises(ValueError, match="mode"):
        recruit(["x"], bank4(), 3, mode="greedy")


def test_skillmoe_recruit_mode_topk_is_used_by_solve():
    from icml26_skillmoe import SkillMoE

    experts = {m: (lambda p: ["The answer is (A)"] * len(p)) for m in "abcd"}
    moe = SkillMoE(bank4(), experts, recruit_mode="topk")
    assert moe.solve(["q"], keywords=[["x"]])[0].experts == ["a", "d", "b"]
    with pytest.raises(ValueError, match="recruit_mode"):
        SkillMoE(bank4(), experts, recruit_mode="best")
