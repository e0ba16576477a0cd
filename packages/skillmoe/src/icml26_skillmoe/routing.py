"""Instance-level expert recruitment (Skill-MoE, Sec. 3.3).

For a question with relevance r (over the candidate models, see ``ProfileBank.relevance``)
and global strength p (``ProfileBank.global_strength(T=0.5)``), upstream draws k experts
**with replacement** (``random.choices``) from

    P(m) ∝ r_m * p_m              over the models with r_m > 0, if there is any;
    P(m) ∝ (r_m - min r + 1) p_m  over every candidate, otherwise;

and, when the question has no keywords, k uniform draws over the whole pool. With the same
``random.Random`` seed and candidate order, :func:`recruit` reproduces upstream's draws.

``mode="topk"`` (an option upstream does not have; the default stays ``"sample"``) is the
deterministic variant: the k candidates of highest relevance,

    a = top-k over the candidates above of  (r_m, p_m)   (lexicographic; ties: candidate order)

so no draw is spent on a weak expert when the profiles are flat. It takes the candidates
with r_m > 0 (else every candidate), distinct while there are k of them, and repeats the
ranking from its top when there are fewer; with no keywords, the k strongest by p_m.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from .profiles import ProfileBank

__all__ = ["recruit", "recruit_batch", "recruitment_distribution"]


def _as_rng(rng: random.Random | int | None) -> random.Random:
    if rng is None or isinstance(rng, int):
        return random.Random(rng)
    if isinstance(rng, random.Random):
        return rng
    raise TypeError(f"rng must be a random.Random, an int seed or None, got {type(rng).__name__}")


def recruitment_distribution(
    keywords: Sequence[str], bank: ProfileBank, *, temperature: float = 0.5
) -> dict[str, float] | None:
    """The sampling distribution over models for one question, or ``None`` when the question has
    no keywords (then the draw is uniform over ``bank.models``).

    If every weight is zero (possible when the positive-relevance models all have zero global
    strength, since the strength is shifted only when its minimum is negative), upstream divides
    by zero; here the weights fall back to the relevance alone (a named deviation)."""
    if not isinstance(bank, ProfileBank):
        raise TypeError(f"bank must be a ProfileBank, got {type(bank).__name__}")
    if isinstance(keywords, str):
        raise TypeError("keywords must be a sequence of str, not one str")
    if len(keywords) == 0:
        return None
    rel = bank.relevance(keywords)  # ordered as upstream's model_rank
    strength = bank.global_strength(temperature)
    positive = {m: r for m, r in rel.items() if r > 0}
    if positive:
        cand = positive
    else:
        lo = min(rel.values())
        cand = {m: r - lo + 1.0 for m, r in rel.items()}
    w = {m: r * strength[m] for m, r in cand.items()}
    total = sum(w.values())
    if total <= 0:
        w, total = dict(cand), sum(cand.values())
    return {m: v / total for m, v in w.items()}


def recruit(
    keywords: Sequence[str],
    bank: ProfileBank,
    k: int = 3,
    rng: random.Random | int | None = None,
    *,
    temperature: float = 0.5,
    replacement: bool = True,
    mode: str = "sample",
) -> list[str]:
    """Recruit ``k`` experts for one question (upstream: k = 3, with replacement, so an expert
    can be drawn more than once and then answers more than once).

    ``replacement=False`` draws distinct experts (sequential weighted sampling, an option
    upstream does not have); then ``k`` may not exceed the number of candidates.
    ``mode="topk"``: the k most relevant candidates, no randomness (see the module docstring;
    ``rng`` and ``replacement`` are not used).
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if mode not in ("sample", "topk"):
        raise ValueError(f"mode must be 'sample' (upstream) or 'topk', got {mode!r}")
    if mode == "topk":
        return _topk(keywords, bank, k, temperature)
    r = _as_rng(rng)
    dist = recruitment_distribution(keywords, bank, temperature=temperature)
    if dist is None:  # no keywords: uniform over the pool, as upstream
        pool = bank.models
        if not replacement:
            if k > len(pool):
                raise ValueError(
                    f"k={k} exceeds the pool of {len(pool)} models (replacement=False)"
                )
            return r.sample(pool, k)
        return r.choices(pool, k=k)
    models, weights = list(dist), list(dist.values())
    if replacement:
        return r.choices(models, weights=weights, k=k)
    support = [m for m, w in zip(models, weights) if w > 0]
    if k > len(support):
        raise ValueError(
            f"k={k} exceeds the {len(support)} candidates with positive weight (replacement=False)"
        )
    chosen: list[str] = []
    for _ in range(k):
        m = r.choices(models, weights=weights, k=1)[0]
        chosen.append(m)
        weights[models.index(m)] = 0.0
    return chosen


def _topk(keywords: Sequence[str], bank: ProfileBank, k: int, temperature: float) -> list[str]:
    dist = recruitment_distribution(keywords, bank, temperature=temperature)  # checks the input
    strength = bank.global_strength(temperature)
    if dist is None:  # no keywords: the globally strongest
        cands = bank.models
        rel = dict.fromkeys(cands, 0.0)
    else:
        rel = bank.relevance(keywords)
        cands = list(dist)  # r > 0 if any, else every candidate (upstream's fallback set)
    # descending relevance, then descending strength, then candidate order
    order = sorted(range(len(cands)), key=lambda i: (-rel[cands[i]], -strength[cands[i]], i))
    ranked = [cands[i] for i in order]
    return [ranked[j % len(ranked)] for j in range(k)]


def recruit_batch(
    keyword_lists: Sequence[Sequence[str]],
    bank: ProfileBank,
    k: int = 3,
    rng: random.Random | int | None = None,
    *,
    temperature: float = 0.5,
    replacement: bool = True,
    mode: str = "sample",
) -> list[list[str]]:
    """:func:`recruit` for each question in turn, sharing one generator (as upstream's loop)."""
    r = _as_rng(rng)
    return [
        recruit(kws, bank, k, r, temperature=temperature, replacement=replacement, mode=mode)
        for kws in keyword_lists
    ]
