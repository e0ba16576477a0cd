"""The aggregator test's construction, the synthesis prompt, selection and majority vote."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from icml26_skillmoe import (
    ANSWER_FORMATS,
    LLMAggregator,
    build_aggregator_benchmark,
    expert_prompt,
    majority_vote,
    select_aggregator,
    synthesis_prompt,
)


def make_pool(n_q=300, n_models=6, seed=0):
    rng = random.Random(seed)
    golds = [rng.choice("ABCD") for _ in range(n_q)]
    outputs, correct = {}, {}
    for m in range(n_models):
        outs, ok = [], []
        for g in golds:
            right = rng.random() < 0.5
            a = g if right else rng.choice([c for c in "ABCD" if c != g])
            outs.append(f"model{m} says ... The answer is ({a})")
            ok.append(right)
        outputs[f"m{m}"], correct[f"m{m}"] = outs, ok
    return [f"q{i}" for i in range(n_q)], outputs, correct, golds


def test_each_item_has_one_correct_and_two_distinct_incorrect_outputs():
    qs, outputs, correct, golds = make_pool()
    bench = build_aggregator_benchmark(qs, outputs, correct, golds, rng=1)
    slots = Counter()
    for q, item in enumerate(bench):
        right = {outputs[m][q] for m in outputs if correct[m][q]}
        wrong = [outputs[m][q] for m in outputs if not correct[m][q]]
        assert len(item.responses) == 3
        if right:
            assert item.correct_slot is not None
            assert item.responses[item.correct_slot] in right
            others = [r for s, r in enumerate(item.responses) if s != item.correct_slot]
        else:
            assert item.correct_slot is None
            assert item.responses.count("") >= 1
            others = [r for r in item.responses if r != ""] or ["", ""]
        if len(wrong) >= 2:
            assert len(others) == 2 and all(o in wrong for o in others)
            assert (
                others[0] != others[1] or wrong.count(others[0]) > 1
            )  # sampled without replacement
        else:
            assert others == ["", ""]
        slots[item.correct_slot] += 1
        assert item.gold == golds[q]
    # shuffled: the correct output lands in each of the 3 slots about equally often
    n = sum(v for s, v in slots.items() if s is not None)
    assert all(abs(slots[s] - n / 3) < 4 * (n * 2 / 9) ** 0.5 for s in range(3))


def test_empty_slots_when_the_pool_lacks_correct_or_incorrect():
    outputs = {"a": ["A1", "A2"], "b": ["B1", "B2"], "c": ["C1", "C2"]}
    correct = {"a": [False, True], "b": [False, True], "c": [False, False]}
    bench = build_aggregator_benchmark(
        ["q0", "q1"], outputs, correct, ["X", "Y"], rng=0, empty=None
    )
    # q0: nobody right -> empty correct slot, two of the three wrong ones
    assert bench[0].correct_slot is None
    assert sorted(r for r in bench[0].responses if r is not None) in (
        ["A1", "B1"],
        ["A1", "C1"],
        ["B1", "C1"],
    )
    # q1: only one wrong -> both incorrect slots empty
    assert bench[1].responses.count(None) == 2
    assert bench[1].responses[bench[1].correct_slot] in ("A2", "B2")


def test_benchmark_bad_input():
    with pytest.raises(ValueError, match="golds"):
        build_aggregator_benchmark(["q"], {"a": ["x"]}, {"a": [True]}, [])
    with pytest.raises(ValueError, match="same models"):
        build_aggregator_benchmark(["q"], {"a": ["x"]}, {"b": [True]}, ["A"])
    with pytest.raises(ValueError, match="empty"):
        build_aggregator_benchmark(["q"], {}, {}, ["A"])


def test_synthesis_prompt_strips_think_and_ends_with_the_question():
    p = synthesis_prompt("What is 2+2?", ["<think>long</think>It is (A)", "It is (B)"])
    assert "long" not in p
    assert "### Model 1's response:\nIt is (A)\n\n### Model 2's response:\nIt is (B)\n\n" in p
    assert p.startswith("You have been provided with a set of responses")
    assert p.endswith(expert_prompt("What is 2+2?"))
    assert expert_prompt("q", "math").endswith(ANSWER_FORMATS["math"])
    with pytest.raises(ValueError, match="task"):
        expert_prompt("q", "code")


def test_select_aggregator_picks_the_one_that_finds_the_correct_answer():
    qs, outputs, correct, golds = make_pool(n_q=120)
    bench = build_aggregator_benchmark(qs, outputs, correct, golds, rng=0)
    gold_of = {q: g for q, g in zip(qs, golds)}

    def oracle(questions, responses):  # knows the gold answer
        return [f"The answer is ({gold_of[q]})" for q in questions]

    def first(questions, responses):  # copies response 1: right ~1/3 of the time
        return [r[0] for r in responses]

    def vote(questions, responses):
        from icml26_skillmoe import extract_choice

        return [f"({majority_vote([extract_choice(x) for x in r])})" for r in responses]

    best, scores = select_aggregator({"first": first, "vote": vote, "oracle": oracle}, bench)
    assert best == "oracle" and scores["oracle"] == 1.0
    assert 0.15 < scores["first"] < 0.55
    with pytest.raises(ValueError, match="returned 1 outputs"):
        select_aggregator({"bad": lambda q, r: ["x"]}, bench)
    with pytest.raises(ValueError, match="candidates is empty"):
        select_aggregator({}, bench)


def test_llm_aggregator_sends_synthesis_prompts():
    seen = []

    def gen(prompts):
        seen.extend(prompts)
        return ["The answer is (C)"] * len(prompts)

    out = LLMAggregator(gen)(["q1"], [["r1", "r2", "r3"]])
    assert out == ["The answer is (C)"]
    assert seen == [synthesis_prompt("q1", ["r1", "r2", "r3"])]


def test_majority_vote_ties_go_to_the_first_and_na_counts_as_upstream():
    assert majority_vote(["B", "A", "A"]) == "A"
    assert majority_vote(["B", "A", "C"]) == "B"
    assert majority_vote(["N/A", "N/A", "B"]) == "N/A"
    assert majority_vote(["N/A", "N/A", "B"], drop_invalid=True) == "B"
    assert majority_vote(["N/A"], drop_invalid=True) == "N/A"
    with pytest.raises(ValueError, match="empty"):
        majority_vote([])


# ------------------------------------------- the routed-team aggregator test (an option)
def test_routed_benchmark_holds_the_teams_routing_recruits_cross_fitted():
    from icml26_skillmoe import build_routed_aggregator_benchmark

    n = 8
    kws = [["even"] if q % 2 == 0 else ["odd"] for q in range(n)]
    kws[7] = ["odd", "rare"]  # "rare" is seen in no other fold: dropped, no error
    correct = {"E": [q % 2 == 0 for q in range(n)], "O": [q % 2 == 1 for q in range(n)]}
    correct["W"] = [False] * n
    outputs = {m: [f"{m}:{q}" for q in range(n)] for m in correct}
    items = build_routed_aggregator_benchmark(
        list(range(n)), kws, outputs, correct, list(range(100, 108)), mode="topk", rng=0
    )
    for q, it in enumerate(items):
        m = "E" if q % 2 == 0 else "O"  # the only positive-relevance model of q's keyword
        assert (it.question, it.gold) == (q, 100 + q)
        assert it.responses == [f"{m}:{q}"] * 3 and it.correct_slot == 0
    # sampled teams come from the positive-relevance candidates only
    items = build_routed_aggregator_benchmark(
        list(range(n)), kws, outputs, correct, list(range(n)), rng=3
    )
    assert all(
        r.split(":")[0] == ("E" if q % 2 == 0 else "O")
        for q, it in enumerate(items)
        for r in it.responses
    )


def test_routed_benchmark_keeps_a_questions_own_answer_out_of_its_routing():
    from icml26_skillmoe import build_routed_aggregator_benchmark

    # q0: A right, B wrong; q1: the reverse. In-sample profiles are A = B = 0 (no positive
    # relevance, fallback ranks A first); cross-fitted, q0 is routed on q1's profiles (B +1,
    # A -1) and gets B, the expert that is wrong on q0
    correct = {"A": [True, False], "B": [False, True]}
    outputs = {m: [f"{m}0", f"{m}1"] for m in correct}
    items = build_routed_aggregator_benchmark(
        ["q0", "q1"], [["k"], ["k"]], outputs, correct, ["g0", "g1"], mode="topk"
    )
    assert [it.responses for it in items] == [["B0"] * 3, ["A1"] * 3]
    assert [it.correct_slot for it in items] == [None, None]
    with pytest.raises(ValueError, match="folds"):
        build_routed_aggregator_benchmark(
            ["q0", "q1"], [["k"], ["k"]], outputs, correct, ["g0", "g1"], folds=3
        )
    with pytest.raises(ValueError, match="differ in length"):
        build_routed_aggregator_benchmark(["q0"], [["k"], ["k"]], outputs, correct, ["g0", "g1"])
