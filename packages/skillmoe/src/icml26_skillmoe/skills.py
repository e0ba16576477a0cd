"""Skill inference: the keyword annotator and the keyword mapper (Skill-MoE, Sec. 3.1).

The annotator asks one model for 2-5 keywords per question, ``n_samples`` times at temperature
0.7, and keeps a keyword iff it is at most ``max_len`` characters long and appears in at least
``min_count`` of the samples (official thresholds: 20 characters, more than once). Test
keywords are then mapped to their cosine-nearest keyword of the validation vocabulary, the
vocabulary the model profiles are keyed by:

    map(kw) = argmax_{v in V} cos(e(kw), e(v))

with ``e`` a user-supplied embedding function (the official code uses all-MiniLM-L6-v2) or,
with no model at all, TF-IDF over character n-grams (scikit-learn).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .backends import call_generate

__all__ = [
    "KEYWORD_PROMPT",
    "KeywordMapper",
    "LLMSkillAnnotator",
    "filter_keywords",
    "keyword_prompt",
    "parse_keywords",
]

# The annotation prompt of the paper / official code (Symbolic-MoE, MIT), word for word.
KEYWORD_PROMPT = (
    "Question: {question}\n"
    "What are the core knowledge, subjects or skills needed to solve this problem? "
    "List 2-5 keywords separated in comma. "
    "Example keywords: psychology, virology, behavioral theory, microbiology, "
    "diplomacy, political science, property law, finance, business. "
    "Give ONLY the keywords, no other words or explanation. "
    "Follow this format: Keywords: <keyword1>, <keyword2>..."
)


def keyword_prompt(question: str) -> str:
    """The annotator prompt for one question."""
    return KEYWORD_PROMPT.format(question=question)


def parse_keywords(text: str) -> list[str]:
    """Keywords of one annotator output: the text after the last ``Keywords:``, split on commas,
    stripped, lower-cased, periods removed (as upstream). Empty items are dropped (upstream keeps
    them, so a trailing comma in two samples made ``""`` a keyword)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    items = text.split("Keywords:")[-1].split(",")
    out = [item.strip().lower().replace(".", "") for item in items]
    return [kw for kw in out if kw]


def filter_keywords(
    samples: Sequence[Sequence[str]], *, min_count: int = 2, max_len: int = 20
) -> list[str]:
    """Keep keywords of at most ``max_len`` characters that occur in at least ``min_count`` of the
    pooled samples (upstream: ``len(k) <= 20`` then ``count > 1``), in order of first appearance.

    ``samples``: one list of keywords per annotator sample for a single question.
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    pooled = [kw for sample in samples for kw in sample if len(kw) <= max_len]
    return [kw for kw, c in Counter(pooled).items() if c >= min_count]


class LLMSkillAnnotator:
    """Infer skills (keywords) for questions with one annotator model.

    ``generator``: a :class:`~icml26_skillmoe.Generator` (``.generate(prompts, temperature=,
    max_tokens=)``) or a plain callable ``prompts -> texts``. Upstream fixes the annotator to
    Qwen2.5-7B-Instruct and samples ``n_samples=5`` times at temperature 0.7.
    """

    def __init__(
        self,
        generator: Any,
        *,
        n_samples: int = 5,  # upstream: 5 samples
        temperature: float = 0.7,  # upstream: 0.7
        max_tokens: int = 256,  # a keyword list is short (upstream: the model's 4096 default)
        min_count: int = 2,  # upstream: count > 1
        max_len: int = 20,  # upstream: len(k) <= 20
    ) -> None:
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        if min_count > n_samples:
            raise ValueError(
                f"min_count={min_count} > n_samples={n_samples}: no keyword could ever be kept"
            )
        self.generator = generator
        self.n_samples = n_samples
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.min_count = min_count
        self.max_len = max_len

    def annotate(self, questions: Sequence[str]) -> list[list[str]]:
        """Keywords for each question; a question can come back with none (then recruitment
        falls back to uniform sampling, as upstream)."""
        if isinstance(questions, str):
            raise TypeError("questions must be a sequence of str, not one str")
        prompts = [keyword_prompt(q) for q in questions]
        samples: list[list[list[str]]] = [[] for _ in prompts]
        for _ in range(self.n_samples):  # one batched call per sample, as upstream
            texts = call_generate(
                self.generator, prompts, temperature=self.temperature, max_tokens=self.max_tokens
            )
            for i, text in enumerate(texts):
                samples[i].append(parse_keywords(text))
        return [filter_keywords(s, min_count=self.min_count, max_len=self.max_len) for s in samples]


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)  # zero rows stay zero: similarity 0 to everything


class KeywordMapper:
    """Map free keywords to the nearest keyword of a fixed vocabulary (upstream: top-1 cosine).

    ``embed``: ``"tfidf"`` (scikit-learn TF-IDF over character 2-4-grams, fitted on the
    vocabulary; no model needed) or a callable ``list[str] -> array (n, d)`` (e.g. a
    sentence-transformers ``encode``). A keyword already in the vocabulary maps to itself.
    Ties go to the earliest vocabulary entry.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        embed: str | Callable[[list[str]], Any] = "tfidf",
    ) -> None:
        vocab = list(dict.fromkeys(vocabulary))
        if not vocab:
            raise ValueError("vocabulary must hold at least one keyword")
        self.vocabulary = vocab
        self._index = {v: i for i, v in enumerate(vocab)}
        if isinstance(embed, str):
            if embed != "tfidf":
                raise ValueError(f"embed must be 'tfidf' or a callable, got {embed!r}")
            from sklearn.feature_extraction.text import TfidfVectorizer

            vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=True)
            vec.fit(vocab)

            def embed_fn(texts: list[str]) -> np.ndarray:
                return np.asarray(vec.transform(texts).toarray(), dtype=np.float64)

            self._embed: Callable[[list[str]], Any] = embed_fn
        elif callable(embed):
            self._embed = embed
        else:
            raise TypeError(f"embed must be 'tfidf' or a callable, got {type(embed).__name__}")
        self._vocab_emb = self._embeddings(vocab)  # (V, d), unit rows

    def _embeddings(self, texts: list[str]) -> np.ndarray:
        e = np.asarray(self._embed(list(texts)), dtype=np.float64)
        if e.ndim != 2 or e.shape[0] != len(texts):
            raise ValueError(
                f"embed must return an array of shape ({len(texts)}, d); got {e.shape}"
            )
        if not np.all(np.isfinite(e)):
            raise ValueError("embed returned non-finite values")
        return _unit_rows(e)

    def map(self, keywords: Sequence[str]) -> list[str]:
        """The nearest vocabulary keyword for each keyword (duplicates are kept, as upstream)."""
        if isinstance(keywords, str):
            raise TypeError("keywords must be a sequence of str, not one str")
        kws = list(keywords)
        if not kws:
            return []
        out: list[str | None] = [kw if kw in self._index else None for kw in kws]
        todo = [i for i, o in enumerate(out) if o is None]
        if todo:
            q = self._embeddings([kws[i] for i in todo])  # (n, d)
            sims = q @ self._vocab_emb.T  # (n, V) cosine similarities
            for row, i in enumerate(todo):
                out[i] = self.vocabulary[int(np.argmax(sims[row]))]
        return [o for o in out if o is not None]

    def map_many(self, keyword_lists: Sequence[Sequence[str]]) -> list[list[str]]:
        return [self.map(kws) for kws in keyword_lists]
