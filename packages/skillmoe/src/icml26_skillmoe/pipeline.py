"""The whole Skill-MoE inference pipeline for a batch of questions.

    keywords_i = map(annotate(x_i))                  (skills.py)
    a_i        = recruit(keywords_i, bank, k)         (routing.py)
    y_ij       = expert a_ij (CoT prompt of x_i)      (scheduler.py: each expert loaded once)
    z_i        = aggregator(synthesis(x_i, y_i1..y_ik))  (aggregate.py; loaded once)
    answer_i   = extract(z_i)                         (eval.py)

Experts are given as loaders ``name -> Generator`` (a :class:`TransformersGenerator` to be
loaded, an :class:`OpenAIChatGenerator` already served, any callable), so the same pipeline
runs 16 local models on one GPU or a pool of running servers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .aggregate import LLMAggregator, expert_prompt, majority_vote
from .eval import extract_answer
from .profiles import ProfileBank
from .routing import recruit_batch
from .scheduler import BatchScheduler, ScheduleStats
from .skills import KeywordMapper, LLMSkillAnnotator

__all__ = ["SkillMoE", "SkillMoEResult"]


@dataclass
class SkillMoEResult:
    question: str
    keywords: list[str]  # mapped onto the bank's vocabulary
    experts: list[str]  # recruited, repeats possible
    responses: list[str]  # one per recruited slot
    votes: list[str]  # answers extracted from the responses
    majority: str  # majority vote over votes
    output: str  # the aggregator's text ("" when aggregating by majority vote)
    answer: str  # extracted from output (or the majority when there is no aggregator)
    extra: dict[str, Any] = field(default_factory=dict)


class SkillMoE:
    """Skill-based instance-level routing over a pool of models.

    ``experts``: name -> generator, for every ``bank.models`` name. One with ``load()`` /
    ``unload()`` (:class:`~icml26_skillmoe.TransformersGenerator`) is loaded once per batch and
    freed after its slots; one without (:class:`~icml26_skillmoe.OpenAIChatGenerator`, a
    ``prompts -> texts`` callable) is used as it is.
    ``aggregator``: the name of the expert that synthesises (upstream: one per task, picked
    by :func:`~icml26_skillmoe.select_aggregator`), or ``None`` for the majority vote.
    ``annotator`` / ``mapper``: skill inference; omit both and pass ``keywords=`` to
    :meth:`solve` when they are precomputed. Without ``mapper``, annotated keywords are mapped
    by ``KeywordMapper(bank.vocabulary, embed=embed)``, built once: pass a sentence encoder
    (``embed=SentenceTransformer("all-MiniLM-L6-v2").encode``, upstream's model) for the
    semantic mapping of the paper; the default ``"tfidf"`` is lexical (character n-grams) and
    maps by spelling, not meaning (see :class:`~icml26_skillmoe.KeywordMapper`).
    """

    def __init__(
        self,
        bank: ProfileBank,
        experts: Mapping[str, Any],
        *,
        aggregator: str | None = None,
        annotator: LLMSkillAnnotator | None = None,
        mapper: KeywordMapper | None = None,
        embed: str | Callable[[list[str]], Any] = "tfidf",
        k: int = 3,  # upstream: 3
        recruit_mode: str = "sample",  # upstream: sampled; "topk" is the deterministic option
        task: str = "choice",
        num_choices: int = 4,  # upstream: 10 for MMLU-Pro, 4 otherwise
        temperature: float = 0.7,  # upstream: 0.7 for experts and aggregator
        max_tokens: int = 4096,  # upstream: 4096 (32768 for R1 models)
        strength_temperature: float = 0.5,  # upstream: normalize_to_probability(T=0.5)
        seed: int | None = 0,
    ) -> None:
        if not isinstance(bank, ProfileBank):
            raise TypeError(f"bank must be a ProfileBank, got {type(bank).__name__}")
        missing = [m for m in bank.models if m not in experts]
        if missing:
            raise ValueError(f"experts has no loader for bank models {missing}")
        if aggregator is not None and aggregator not in experts:
            raise ValueError(f"aggregator {aggregator!r} is not in experts")
        if task not in ("choice", "math"):
            raise ValueError(f"task must be 'choice' or 'math', got {task!r}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self.bank = bank
        self.experts = dict(experts)
        self.aggregator = aggregator
        self.annotator = annotator
        if mapper is not None and not (isinstance(embed, str) and embed == "tfidf"):
            raise ValueError("pass either mapper= or embed=, not both (embed builds the mapper)")
        if not (embed == "tfidf" or callable(embed)):
            raise ValueError(f"embed must be 'tfidf' or a callable texts -> (n, d), got {embed!r}")
        self.mapper = mapper
        self.embed = embed
        if recruit_mode not in ("sample", "topk"):
            raise ValueError(f"recruit_mode must be 'sample' or 'topk', got {recruit_mode!r}")
        self.k = k
        self.recruit_mode = recruit_mode
        self.task = task
        self.num_choices = num_choices
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.strength_temperature = strength_temperature
        self.rng = random.Random(seed)
        self.last_stats: ScheduleStats | None = None
        self.annotator_unloads = 0  # loadable annotator models freed after keyword inference
        self._default_mapper: KeywordMapper | None = None

    def _load(self, name: str) -> Any:
        obj = self.experts[name]
        if callable(getattr(obj, "load", None)):
            loaded = obj.load()
            return obj if loaded is None else loaded
        if hasattr(obj, "generate") or callable(obj):
            return obj
        raise TypeError(f"experts[{name!r}] must be a Generator or a prompts -> texts callable")

    def _unload(self, name: str, gen: Any) -> None:
        """Free a loadable expert; a served endpoint or a plain callable is left as it is."""
        obj = self.experts[name]
        if callable(getattr(obj, "unload", None)):
            obj.unload()

    def _keyword_mapper(self) -> KeywordMapper:
        """The user's mapper, else ``KeywordMapper(bank.vocabulary, embed=self.embed)``, built
        once and reused (the vocabulary is embedded once)."""
        if self.mapper is not None:
            return self.mapper
        if self._default_mapper is None:
            self._default_mapper = KeywordMapper(self.bank.vocabulary, embed=self.embed)
        return self._default_mapper

    def infer_keywords(
        self, questions: Sequence[str], stats: ScheduleStats | None = None
    ) -> list[list[str]]:
        """Annotate, then map onto the bank's vocabulary. A loadable annotator model (one with
        ``unload``, e.g. :class:`TransformersGenerator`) is unloaded right after, so it is not
        resident while the experts run; ``annotator_unloads`` counts those unloads, and
        ``stats`` (when given) gets ``annotator_loads`` (the model was not loaded before and was
        after) and ``annotator_unloads``."""
        if self.annotator is None:
            raise ValueError("no annotator: pass keywords= to solve(), or build with annotator=")
        gen = getattr(self.annotator, "generator", None)
        was_loaded = bool(getattr(gen, "loaded", False))
        try:
            raw = self.annotator.annotate(questions)
        finally:
            unload = getattr(gen, "unload", None)
            loaded = getattr(gen, "loaded", True)
            if stats is not None and callable(unload) and loaded and not was_loaded:
                stats.annotator_loads += 1
            if callable(unload) and loaded:
                unload()
                self.annotator_unloads += 1
                if stats is not None:
                    stats.annotator_unloads += 1
        return self._keyword_mapper().map_many(raw)

    def solve(
        self,
        questions: Sequence[str],
        *,
        keywords: Sequence[Sequence[str]] | None = None,
        on_load: Callable[[str], None] | None = None,
    ) -> list[SkillMoEResult]:
        if isinstance(questions, str):
            raise TypeError("questions must be a sequence of str, not one str")
        questions = list(questions)
        if not questions:
            return []
        pre = ScheduleStats()  # the annotator's load / unload, merged into the run's stats
        if keywords is None:
            kws = self.infer_keywords(questions, pre)
        else:
            if len(keywords) != len(questions):
                raise ValueError("keywords and questions differ in length")
            kws = [list(k) for k in keywords]
            if self.mapper is not None:
                kws = self.mapper.map_many(kws)
        assignments = recruit_batch(
            kws,
            self.bank,
            self.k,
            self.rng,
            temperature=self.strength_temperature,
            mode=self.recruit_mode,
        )
        sched = BatchScheduler(
            self._load,
            self._unload,
            on_load=on_load,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        prompts = [expert_prompt(q, self.task) for q in questions]
        responses = sched.run(assignments, prompts)
        stats = sched.stats
        stats.annotator_loads, stats.annotator_unloads = pre.annotator_loads, pre.annotator_unloads
        self.last_stats = stats
        votes = [[extract_answer(r, self.task, self.num_choices) for r in rs] for rs in responses]
        majority = [str(majority_vote(v)) for v in votes]
        if self.aggregator is None:
            outputs = [""] * len(questions)
            answers = majority
        else:
            gen = self._load(self.aggregator)
            stats.aggregator_loads += 1
            if on_load is not None:
                on_load(self.aggregator)
            try:
                agg = LLMAggregator(
                    gen, task=self.task, temperature=self.temperature, max_tokens=self.max_tokens
                )
                outputs = agg(questions, responses)
            finally:
                self._unload(self.aggregator, gen)
            answers = [extract_answer(o, self.task, self.num_choices) for o in outputs]
        return [
            SkillMoEResult(q, kw, list(a), list(r), v, m, o, ans)
            for q, kw, a, r, v, m, o, ans in zip(
                questions, kws, assignments, responses, votes, majority, outputs, answers
            )
        ]
