"""Model profiles from validation correctness (Skill-MoE, Sec. 3.2).

For model m and keyword w, over the validation questions q that carry w:

    profile[m][w] = sum_q (+1 if m answered q correctly else -1)

Global strength s_m = sum_w profile[m][w], normalised as upstream's
``normalize_to_probability(s, T=0.5)``:

    x = s - min(s) + 1   if min(s) < 0   else s
    p_m = x_m^(1/T) / sum_j x_j^(1/T)

Local relevance of model m to a question with (mapped) keywords w_1..w_n, summed with
multiplicity over the keywords m has a profile entry for (a model with no entry for any of the
question's keywords is not a candidate at all, as upstream):

    r_m = sum_i profile[m][w_i]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

__all__ = ["ProfileBank", "normalize_to_probability"]


def normalize_to_probability(scores: Sequence[float], temperature: float = 1.0) -> np.ndarray:
    """Upstream's ``normalize_to_probability``: shift by ``-min + 1`` only when the minimum is
    negative, then ``p ∝ x**(1/temperature)``.

    If every shifted score is 0 (all models at exactly zero), upstream divides by zero; this
    returns the uniform distribution instead.
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D sequence, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("scores must be finite")
    if not (temperature > 0 and np.isfinite(temperature)):
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    if x.min() < 0:
        x = x - x.min() + 1.0
    scaled = x ** (1.0 / temperature)
    total = scaled.sum()
    if total <= 0:
        return np.full_like(x, 1.0 / x.size)
    return scaled / total


class ProfileBank:
    """Per-model keyword profiles: ``profiles[model][keyword] -> score`` (insertion order kept:
    it fixes the candidate order and so the exact draws of :func:`recruit` for a seed)."""

    def __init__(self, profiles: Mapping[str, Mapping[str, float]]) -> None:
        if not isinstance(profiles, Mapping):
            raise TypeError(
                f"profiles must be a mapping model -> {{keyword: score}}, got {type(profiles).__name__}"
            )
        if not profiles:
            raise ValueError("profiles is empty: the bank needs at least one model")
        bank: dict[str, dict[str, float]] = {}
        for model, prof in profiles.items():
            if not isinstance(model, str) or not model:
                raise ValueError(f"model names must be non-empty str, got {model!r}")
            if not isinstance(prof, Mapping):
                raise TypeError(f"profiles[{model!r}] must be a mapping keyword -> score")
            clean: dict[str, float] = {}
            for kw, s in prof.items():
                s = float(s)
                if not np.isfinite(s):
                    raise ValueError(f"profiles[{model!r}][{kw!r}] is not finite: {s}")
                clean[str(kw)] = s
            bank[model] = clean
        self.profiles = bank
        self._rankings: dict[str, list[tuple[str, float]]] | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_validation(
        cls,
        keywords: Sequence[Sequence[str]],
        correctness: Mapping[str, Sequence[bool]],
    ) -> ProfileBank:
        """Build profiles from validation keywords (one list per question) and each model's
        per-question correctness (``correctness[model][q]``): +1 / -1 per keyword occurrence."""
        if not correctness:
            raise ValueError("correctness is empty: the bank needs at least one model")
        n = len(keywords)
        profiles: dict[str, dict[str, float]] = {}
        for model, corr in correctness.items():
            if len(corr) != n:
                raise ValueError(
                    f"correctness[{model!r}] has {len(corr)} entries for {n} questions in keywords"
                )
            prof: dict[str, float] = {}
            for kws, ok in zip(keywords, corr):
                delta = 1.0 if bool(ok) else -1.0
                for kw in kws:
                    prof[kw] = prof.get(kw, 0.0) + delta
            profiles[model] = prof
        return cls(profiles)

    @classmethod
    def load(cls, path: str | Path) -> ProfileBank:
        return cls(json.loads(Path(path).read_text()))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.profiles, indent=1))

    # ------------------------------------------------------------------ queries
    @property
    def models(self) -> list[str]:
        return list(self.profiles)

    @property
    def vocabulary(self) -> list[str]:
        """Every keyword any profile holds (first-seen order)."""
        return list(dict.fromkeys(kw for p in self.profiles.values() for kw in p))

    def raw_strength(self) -> dict[str, float]:
        """s_m = sum_w profile[m][w] (upstream: ``sum(profile.values())``)."""
        return {m: float(sum(p.values())) for m, p in self.profiles.items()}

    def global_strength(self, temperature: float = 0.5) -> dict[str, float]:
        """p_m = normalize_to_probability(s, T) (upstream: T = 0.5, i.e. p ∝ x**2)."""
        raw = self.raw_strength()
        p = normalize_to_probability(list(raw.values()), temperature)
        return dict(zip(raw, (float(v) for v in p)))

    def _skill_rankings(self) -> dict[str, list[tuple[str, float]]]:
        """keyword -> [(model, score)] sorted by score, descending (stable in model order)."""
        if self._rankings is None:
            ranks: dict[str, list[tuple[str, float]]] = {}
            for model, prof in self.profiles.items():
                for kw, s in prof.items():
                    ranks.setdefault(kw, []).append((model, s))
            for lst in ranks.values():
                lst.sort(key=lambda t: t[1], reverse=True)
            self._rankings = ranks
        return self._rankings

    def relevance(self, keywords: Sequence[str]) -> dict[str, float]:
        """r_m = sum over the question's keywords (with multiplicity) of profile[m][w], for the
        models holding at least one of them; ordered by r descending, ties in upstream's order.

        Raises ``ValueError`` naming a keyword no profile holds: map test keywords onto the
        bank's vocabulary first (:class:`~icml26_skillmoe.KeywordMapper`)."""
        if isinstance(keywords, str):
            raise TypeError("keywords must be a sequence of str, not one str")
        ranks = self._skill_rankings()
        rel: dict[str, float] = {}
        for kw in keywords:
            if kw not in ranks:
                raise ValueError(
                    f"keyword {kw!r} is in no profile; map keywords onto bank.vocabulary first"
                )
            for model, s in ranks[kw]:
                rel[model] = rel.get(model, 0.0) + s
        return dict(sorted(rel.items(), key=lambda t: t[1], reverse=True))

    def __len__(self) -> int:
        return len(self.profiles)

    def __repr__(self) -> str:
        return f"ProfileBank({len(self.profiles)} models, {len(self.vocabulary)} keywords)"
