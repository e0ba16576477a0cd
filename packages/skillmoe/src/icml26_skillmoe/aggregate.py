"""Aggregation: synthesis prompts, aggregator selection, majority vote (Skill-MoE, Sec. 3.3).

The k expert outputs are synthesised by one aggregator model per task, chosen on a synthetic
test built from the validation outputs: for each validation question, one correct output and
two incorrect ones (drawn at random, shuffled; a slot is empty when the pool lacks them:
no correct output -> empty correct slot, fewer than two incorrect -> both incorrect slots
empty). The candidate that answers this test best is the aggregator:

    A* = argmax_A  mean_q  1[ extract(A(q, shuffle(c_q, w_q1, w_q2))) == gold_q ]

The 3-expert majority vote (ties: first answer in slot order) is reported beside it upstream.

:func:`build_routed_aggregator_benchmark` is an option upstream does not have: the test items
are the teams routing would actually recruit for the validation questions (cross-fitted: a
question is routed with profiles built from the other folds), so the aggregator is chosen on
the response mix it will see at test time, not on a fixed 1-correct / 2-incorrect mix.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .backends import call_generate
from .eval import INVALID, extract_answer, math_equiv
from .profiles import ProfileBank
from .routing import recruit

__all__ = [
    "ANSWER_FORMATS",
    "AggregatorItem",
    "LLMAggregator",
    "build_aggregator_benchmark",
    "build_routed_aggregator_benchmark",
    "expert_prompt",
    "majority_vote",
    "select_aggregator",
    "synthesis_prompt",
]

# Answer-format instructions of the official prompts, word for word.
ANSWER_FORMATS = {
    "choice": (
        'Provide your step-by-step reasoning first, and then print "The answer is (X)", '
        "where X is the answer choice (one capital letter), at the end of your response."
    ),
    "math": (
        'Provide your step-by-step reasoning first, and then print "The answer is \\boxed{X}", '
        "where X is the final answer, at the end of your response."
    ),
}

_SYNTHESIS_HEADER = (
    "You have been provided with a set of responses from various open-source models to the "
    "latest user query. Your task is to synthesize these responses into a single, high-quality "
    "response. It is crucial to critically evaluate the information provided in these "
    "responses, recognizing that some of it may be biased or incorrect. Your response should "
    "not simply replicate the given answers but should offer a refined, accurate, and "
    "comprehensive reply to the instruction. Ensure your response is well-structured, "
    "coherent, and adheres to the highest standards of accuracy and reliability. "
    "Responses from models:\n\n"
)


def _format(task: str) -> str:
    if task not in ANSWER_FORMATS:
        raise ValueError(f"task must be one of {sorted(ANSWER_FORMATS)}, got {task!r}")
    return ANSWER_FORMATS[task]


def expert_prompt(question: str, task: str = "choice") -> str:
    """The chain-of-thought prompt every expert answers (upstream's expert / profile prompt)."""
    return f"Question: {question}\n{_format(task)}"


def synthesis_prompt(question: str, responses: Sequence[str], task: str = "choice") -> str:
    """The aggregator prompt: the synthesis instruction, the responses (text after the last
    ``</think>``, so reasoning models' traces are dropped), then the question."""
    if isinstance(responses, str):
        raise TypeError("responses must be a sequence of str, not one str")
    parts = [_SYNTHESIS_HEADER]
    for idx, res in enumerate(responses, 1):
        res = res.split("</think>")[-1]
        parts.append(f"### Model {idx}'s response:\n{res}\n\n")
    parts.append(expert_prompt(question, task))
    return "".join(parts)


def majority_vote(answers: Sequence[Hashable], *, drop_invalid: bool = False) -> Hashable:
    """The most common answer, ties to the earliest (``Counter.most_common``). Upstream counts
    ``"N/A"`` as a vote; ``drop_invalid=True`` ignores it (``"N/A"`` if nothing else is left)."""
    votes = [a for a in answers if not (drop_invalid and a == INVALID)]
    if not votes:
        if answers:
            return INVALID
        raise ValueError("answers is empty")
    return Counter(votes).most_common(1)[0][0]


@dataclass
class AggregatorItem:
    """One synthetic-test item: the question, three shuffled responses (one correct, two
    incorrect, or empty slots), the gold answer, and where the correct response went."""

    question: Any
    responses: list[Any]
    gold: Any
    correct_slot: int | None  # None when no model answered correctly (empty slot instead)


def build_aggregator_benchmark(
    questions: Sequence[Any],
    outputs: Mapping[str, Sequence[Any]],
    correct: Mapping[str, Sequence[bool]],
    golds: Sequence[Any],
    rng: random.Random | int | None = 0,
    *,
    empty: Any = "",
) -> list[AggregatorItem]:
    """The synthetic 1-correct / 2-incorrect test from validation outputs (upstream
    ``bench_aggr.py``): per question, one correct output (uniform over the models that were
    right, ``empty`` if none), two distinct incorrect ones (``empty`` twice if fewer than two
    models were wrong), shuffled. ``outputs[model][q]`` is any response (a CoT text, a
    probability vector...)."""
    r = rng if isinstance(rng, random.Random) else random.Random(rng)
    n = len(questions)
    if len(golds) != n:
        raise ValueError(f"golds ({len(golds)}) and questions ({n}) differ in length")
    if not outputs:
        raise ValueError("outputs is empty: need the validation outputs of at least one model")
    if set(outputs) != set(correct):
        raise ValueError("outputs and correct must name the same models")
    for m in outputs:
        if len(outputs[m]) != n or len(correct[m]) != n:
            raise ValueError(f"outputs/correct of model {m!r} do not have {n} entries")
    items = []
    for q in range(n):
        right = [outputs[m][q] for m in outputs if correct[m][q]]
        wrong = [outputs[m][q] for m in outputs if not correct[m][q]]
        c = r.choice(right) if right else empty
        ws = r.sample(wrong, k=2) if len(wrong) >= 2 else [empty, empty]
        slots = [(c, bool(right))] + [(w, False) for w in ws]
        r.shuffle(slots)
        where = next((s for s, (_, is_c) in enumerate(slots) if is_c), None)
        items.append(AggregatorItem(questions[q], [x for x, _ in slots], golds[q], where))
    return items


def build_routed_aggregator_benchmark(
    questions: Sequence[Any],
    keywords: Sequence[Sequence[str]],
    outputs: Mapping[str, Sequence[Any]],
    correct: Mapping[str, Sequence[bool]],
    golds: Sequence[Any],
    *,
    k: int = 3,
    rng: random.Random | int | None = 0,
    mode: str = "sample",
    folds: int = 2,
    temperature: float = 0.5,
) -> list[AggregatorItem]:
    """An aggregator test made of routed teams (an option; upstream uses the synthetic test).

    The validation questions are split at random into ``folds`` folds; each question q of
    fold f is routed with :func:`~icml26_skillmoe.recruit` (``k``, ``mode``, ``temperature``)
    on ``ProfileBank.from_validation`` of the other folds, and its item holds the recruited
    experts' outputs ``outputs[m][q]`` in slot order (``correct_slot``: the first slot whose
    expert was right, ``None`` if none). Cross-fitting keeps q's own correctness out of the
    profiles that pick its team; in-sample routing would recruit the experts known to be
    right on q. Keywords the other folds never saw are dropped (no keyword left: uniform
    draw / strongest experts, as :func:`recruit`)."""
    r = rng if isinstance(rng, random.Random) else random.Random(rng)
    n = len(questions)
    if len(keywords) != n or len(golds) != n:
        raise ValueError(
            f"keywords ({len(keywords)}), golds ({len(golds)}) and questions ({n}) differ in length"
        )
    if not outputs or set(outputs) != set(correct):
        raise ValueError("outputs and correct must name the same, non-empty set of models")
    for m in outputs:
        if len(outputs[m]) != n or len(correct[m]) != n:
            raise ValueError(f"outputs/correct of model {m!r} do not have {n} entries")
    if not isinstance(folds, int) or folds < 2 or folds > n:
        raise ValueError(
            f"folds must be an int in [2, {n}] (the number of questions), got {folds!r}"
        )
    perm = list(range(n))
    r.shuffle(perm)
    fold_of = {q: i % folds for i, q in enumerate(perm)}
    models = list(outputs)
    items: list[AggregatorItem | None] = [None] * n
    for f in range(folds):
        train = [q for q in range(n) if fold_of[q] != f]
        bank = ProfileBank.from_validation(
            [keywords[q] for q in train], {m: [correct[m][q] for q in train] for m in models}
        )
        vocab = set(bank.vocabulary)
        for q in range(n):
            if fold_of[q] != f:
                continue
            team = recruit(
                [w for w in keywords[q] if w in vocab],
                bank,
                k,
                r,
                temperature=temperature,
                mode=mode,
            )
            slot = next((j for j, m in enumerate(team) if correct[m][q]), None)
            items[q] = AggregatorItem(questions[q], [outputs[m][q] for m in team], golds[q], slot)
    return [it for it in items if it is not None]


# An aggregator maps a batch of (question, responses) to a batch of final answers / texts.
Aggregator = Callable[[Sequence[Any], Sequence[Sequence[Any]]], Sequence[Any]]


class LLMAggregator:
    """An LLM as aggregator: one batched call over :func:`synthesis_prompt` s; returns texts."""

    def __init__(
        self,
        generator: Any,
        *,
        task: str = "choice",
        temperature: float = 0.7,  # upstream: 0.7
        max_tokens: int = 4096,
    ) -> None:
        _format(task)
        self.generator = generator
        self.task = task
        self.temperature = temperature
        self.max_tokens = max_tokens

    def __call__(self, questions: Sequence[str], responses: Sequence[Sequence[str]]) -> list[str]:
        if len(questions) != len(responses):
            raise ValueError("questions and responses differ in length")
        prompts = [synthesis_prompt(q, r, self.task) for q, r in zip(questions, responses)]
        return call_generate(
            self.generator, prompts, temperature=self.temperature, max_tokens=self.max_tokens
        )


def select_aggregator(
    candidates: Mapping[str, Aggregator],
    bench: Sequence[AggregatorItem],
    *,
    is_correct: Callable[[Any, Any], bool] | None = None,
    task: str = "choice",
    num_choices: int = 4,
) -> tuple[str, dict[str, float]]:
    """Run every candidate on the synthetic test; return the best name (ties: first) and every
    candidate's accuracy. ``is_correct(output, gold)`` defaults to extracting the answer from a
    text output (``task``, ``num_choices``), then letter equality (``"choice"``) or
    :func:`~icml26_skillmoe.math_equiv` (``"math"``)."""
    if not candidates:
        raise ValueError("candidates is empty")
    if not bench:
        raise ValueError("bench is empty")
    if is_correct is None:

        def is_correct(out: Any, gold: Any) -> bool:
            pred = extract_answer(out, task, num_choices)
            if task == "choice":  # a letter: no need for math-verify's parser
                return pred != INVALID and pred == str(gold).strip().strip("()")
            return math_equiv(pred, gold)

    qs = [it.question for it in bench]
    rs = [it.responses for it in bench]
    scores: dict[str, float] = {}
    for name, agg in candidates.items():
        outs = list(agg(qs, rs))
        if len(outs) != len(bench):
            raise ValueError(
                f"aggregator {name!r} returned {len(outs)} outputs for {len(bench)} items"
            )
        scores[name] = sum(bool(is_correct(o, it.gold)) for o, it in zip(outs, bench)) / len(bench)
    best = max(scores, key=lambda n: scores[n])
    return best, scores
