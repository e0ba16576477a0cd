"""Keyword parsing, the official filter thresholds, the annotator loop, the keyword mapper."""

from __future__ import annotations

import numpy as np
import pytest
from icml26_skillmoe import (
    KeywordMapper,
    LLMSkillAnnotator,
    filter_keywords,
    keyword_prompt,
    parse_keywords,
)


def test_parse_keywords_takes_text_after_last_marker_lowercases_and_strips_periods():
    text = "Sure. Keywords: wrong\nKeywords: Linear Algebra, Eigen.values , , Calculus."
    assert parse_keywords(text) == ["linear algebra", "eigenvalues", "calculus"]
    assert parse_keywords("no marker, just two") == ["no marker", "just two"]


def test_filter_keeps_length_at_most_20_and_count_at_least_2_in_first_seen_order():
    k20, k21 = "a" * 20, "b" * 21
    samples = [
        ["algebra", k20, k21, "once"],
        [k21, "geometry", k20],
        ["geometry", k21, "algebra"],
        [k21],
    ]
    # k21 appears 4 times but is 21 chars: dropped; "once" appears once: dropped
    assert filter_keywords(samples) == ["algebra", k20, "geometry"]
    assert filter_keywords(samples, min_count=3) == []
    assert filter_keywords(samples, min_count=1, max_len=21) == [
        "algebra",
        k20,
        k21,
        "once",
        "geometry",
    ]
    # a keyword repeated inside one sample counts twice (upstream pools the lists)
    assert filter_keywords([["x", "x"]]) == ["x"]


def test_filter_bad_thresholds():
    with pytest.raises(ValueError, match="min_count"):
        filter_keywords([["a"]], min_count=0)
    with pytest.raises(ValueError, match="max_len"):
        filter_keywords([["a"]], max_len=0)


class Scripted:
    """Returns scripted keyword lines per call; records the sampling arguments."""

    def __init__(self, script):
        self.script = script
        self.calls = []

    def generate(self, prompts, *, temperature=0.7, max_tokens=4096):
        self.calls.append((list(prompts), temperature, max_tokens))
        return [self.script[len(self.calls) - 1][i] for i in range(len(prompts))]


def test_annotator_samples_n_times_at_temperature_and_filters():
    script = [
        ["Keywords: algebra, calculus", "Keywords: virology"],
        ["Keywords: algebra, geometry", "Keywords: virology, law"],
        ["Keywords: Algebra., calculus", "Keywords: finance"],
        ["Keywords: topology", "Keywords: law"],
        ["Keywords: x", "Keywords: diplomacy"],
    ]
    gen = Scripted(script)
    ann = LLMSkillAnnotator(gen)
    out = ann.annotate(["What is 2+2?", "Which virus?"])
    assert out == [["algebra", "calculus"], ["virology", "law"]]
    assert len(gen.calls) == 5
    assert all(t == 0.7 for _, t, _ in gen.calls)
    assert gen.calls[0][0][0] == keyword_prompt("What is 2+2?")
    assert "List 2-5 keywords" in gen.calls[0][0][0]


def test_annotator_bad_input():
    with pytest.raises(ValueError, match="min_count"):
        LLMSkillAnnotator(lambda p: p, n_samples=1, min_count=2)
    with pytest.raises(TypeError, match="questions"):
        LLMSkillAnnotator(lambda p: ["Keywords: a"] * len(p)).annotate("one string")
    with pytest.raises(ValueError, match="returned 1 texts for 2 prompts"):
        LLMSkillAnnotator(lambda p: ["Keywords: a"]).annotate(["q1", "q2"])


def test_mapper_uses_cosine_not_distance_or_dot():
    # "q" is closest to "far-same-direction" by cosine, to "near" by euclidean distance,
    # and to "big" by dot product
    table = {
        "far-same-direction": [10.0, 0.1],
        "near": [0.7, 0.7],
        "big": [30.0, 30.0],
        "q": [1.0, 0.0],
    }

    def embed(texts):
        return np.array([table[t] for t in texts])

    m = KeywordMapper(["near", "big", "far-same-direction"], embed=embed)
    assert m.map(["q"]) == ["far-same-direction"]
    # in-vocabulary keywords map to themselves; duplicates are kept
    assert m.map(["near", "q", "near"]) == ["near", "far-same-direction", "near"]


def test_tfidf_mapper_maps_by_shared_character_ngrams():
    m = KeywordMapper(["linear algebra", "microbiology", "property law", "finance"])
    assert m.map(["algebra", "biology", "law", "financial markets"]) == [
        "linear algebra",
        "microbiology",
        "property law",
        "finance",
    ]


def test_mapper_bad_input():
    with pytest.raises(ValueError, match="vocabulary"):
        KeywordMapper([])
    with pytest.raises(ValueError, match="embed"):
        KeywordMapper(["a"], embed="minilm")
    with pytest.raises(ValueError, match="shape"):
        KeywordMapper(["a", "b"], embed=lambda t: np.zeros(3))
    with pytest.raises(ValueError, match="non-finite"):
        KeywordMapper(["a"], embed=lambda t: np.full((len(t), 2), np.nan))


class _LoadableAnnotatorModel:
    """A local annotator model: generate() loads it lazily, unload() frees it; events logged."""

    def __init__(self, events):
        self.events, self.loaded = events, False

    def generate(self, prompts, *, temperature=0.7, max_tokens=4096):
        if not self.loaded:
            self.loaded = True
            self.events.append("annotator load")
        return ["Keywords: algebra"] * len(prompts)

    def unload(self):
        self.loaded = False
        self.events.append("annotator unload")


class _Expert:
    def __init__(self, name, events):
        self.name, self.events = name, events

    def load(self):
        self.events.append(f"{self.name} load")

    def unload(self):
        self.events.append(f"{self.name} unload")

    def generate(self, prompts, *, temperature=0.7, max_tokens=4096):
        return ["(A)"] * len(prompts)


def test_annotator_model_is_unloaded_before_any_expert_loads_and_mapper_fitted_once(monkeypatch):
    import icml26_skillmoe.pipeline as pipeline
    from icml26_skillmoe import ProfileBank, SkillMoE

    events = []
    bank = ProfileBank({"m1": {"algebra": 2}, "m2": {"algebra": 1, "law": 1}})
    experts = {m: _Expert(m, events) for m in bank.models}
    fitted = []
    real = pipeline.KeywordMapper

    def counting(*args, **kwargs):
        fitted.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "KeywordMapper", counting)
    ann = LLMSkillAnnotator(_LoadableAnnotatorModel(events), n_samples=1, min_count=1)
    moe = SkillMoE(bank, experts, annotator=ann, seed=0)
    for _ in range(2):
        moe.solve(["What is 2+2?", "Solve x^2 = 4."])
    first_expert = next(i for i, e in enumerate(events) if e.startswith("m"))
    assert events[:2] == ["annotator load", "annotator unload"]  # freed before the experts
    assert "annotator load" not in events[2:first_expert]
    assert moe.annotator_unloads == 2 and not ann.generator.loaded
    assert len(fitted) == 1  # the default TF-IDF mapper is built once, not per call


# ------------------------------------------------ semantic mapping: the pluggable embed=
VOCAB = ["linear algebra", "macroeconomics", "genetics", "probability", "optimization"]
# hand-built topic vectors (axes: algebra, economics, biology, probability, optimization),
# standing in for a sentence encoder: synonyms share a topic, not their spelling
TOPICS = {
    "linear algebra": [1, 0, 0, 0, 0],
    "macroeconomics": [0, 1, 0, 0, 0],
    "genetics": [0, 0, 1, 0, 0],
    "probability": [0, 0, 0, 1, 0],
    "optimization": [0, 0, 0, 0, 1],
    "matrices": [0.9, 0.1, 0, 0, 0],
    "statistics": [0, 0.2, 0.1, 0.9, 0],
    "genetic algorithms": [0, 0, 0.3, 0, 0.9],
}
SYNONYMS = {
    "matrices": "linear algebra",
    "statistics": "probability",
    "genetic algorithms": "optimization",
}


def fake_encoder(texts):
    return np.array([TOPICS[t] for t in texts], dtype=float)


def test_semantic_embed_maps_synonyms_the_lexical_default_gets_wrong():
    queries = list(SYNONYMS)
    # the lexical default maps by shared character n-grams (its documented limit)
    assert KeywordMapper(VOCAB).map(queries) == ["macroeconomics", "genetics", "genetics"]
    assert KeywordMapper(VOCAB, embed=fake_encoder).map(queries) == list(SYNONYMS.values())


def test_skillmoe_embed_builds_the_semantic_mapper():
    from icml26_skillmoe import ProfileBank, SkillMoE

    bank = ProfileBank({"m1": {v: 1 for v in VOCAB}, "m2": {v: -1 for v in VOCAB}})
    experts = {m: (lambda p: ["The answer is (A)"] * len(p)) for m in bank.models}

    def annotator(prompts):  # every question is annotated "matrices, statistics"
        return ["Keywords: matrices, statistics"] * len(prompts)

    ann = LLMSkillAnnotator(annotator, n_samples=2)
    semantic = SkillMoE(bank, experts, annotator=ann, embed=fake_encoder)
    lexical = SkillMoE(bank, experts, annotator=ann)
    assert semantic.solve(["q"])[0].keywords == ["linear algebra", "probability"]
    assert lexical.solve(["q"])[0].keywords == ["macroeconomics", "genetics"]
    with pytest.raises(ValueError, match="either mapper= or embed="):
        SkillMoE(bank, experts, mapper=KeywordMapper(VOCAB), embed=fake_encoder)
    with pytest.raises(ValueError, match="embed"):
        SkillMoE(bank, experts, embed="minilm")
