"""The transformers backend on two tiny random-init models built from configs, scheduled."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from icml26_skillmoe import BatchScheduler, ProfileBank, SkillMoE, TransformersGenerator, run_naive

from .conftest import save_tiny_lm


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("lms")
    paths = {}
    for name, arch, seed in (("llama", "llama", 0), ("gpt2", "gpt2", 1)):
        save_tiny_lm(root / name, arch, seed)
        paths[name] = str(root / name)
    return paths


def test_load_generate_unload(tiny_models):
    gen = TransformersGenerator(tiny_models["llama"], device="cpu")
    assert not gen.loaded and gen.memory_bytes() == 0
    out = gen.generate(
        ["Question: 1+1?", "Question: a much longer prompt here"], temperature=0.0, max_tokens=6
    )
    assert gen.loaded and gen.memory_bytes() > 0
    assert len(out) == 2 and all(isinstance(o, str) for o in out)
    # left padding: the short prompt decodes as it does alone (greedy)
    alone = gen.generate(["Question: 1+1?"], temperature=0.0, max_tokens=6)
    assert alone[0] == out[0]
    gen.unload()
    assert not gen.loaded and gen.model is None
    # sampling is seeded per call
    a = gen.generate(["Question: x"], temperature=1.0, max_tokens=8)
    b = gen.generate(["Question: x"], temperature=1.0, max_tokens=8)
    assert a == b
    with pytest.raises(ValueError, match="temperature"):
        gen.generate(["x"], temperature=-1.0)


def test_scheduler_over_real_models_loads_each_once_and_matches_naive(tiny_models):
    gens = {n: TransformersGenerator(p, device="cpu") for n, p in tiny_models.items()}
    loads = []

    def load(name):
        loads.append(name)
        return gens[name].load()

    def unload(name, gen):
        gen.unload()

    assign = [["llama", "gpt2"], ["gpt2", "gpt2"], ["llama", "llama"]]
    prompts = ["Question: 3*4", "Question: capital of France", "Question: 7"]
    sched = BatchScheduler(
        load, unload, memory_fn=lambda n, g: g.memory_bytes(), temperature=0.0, max_tokens=5
    )
    out = sched.run(assign, prompts)
    assert loads == ["llama", "gpt2"] and sched.stats.loads == 2
    assert all(not g.loaded for g in gens.values())
    assert sched.stats.memory["llama"] > 0 and sched.stats.memory["gpt2"] > 0
    ref, stats = run_naive(assign, prompts, load, unload, temperature=0.0, max_tokens=5)
    assert stats.loads == 6
    assert out == ref


def test_pipeline_with_local_models(tiny_models):
    gens = {n: TransformersGenerator(p, device="cpu") for n, p in tiny_models.items()}
    bank = ProfileBank({"llama": {"math": 2}, "gpt2": {"math": -1, "geo": 3}})
    moe = SkillMoE(bank, gens, aggregator="gpt2", temperature=0.0, max_tokens=4)
    loaded = []
    res = moe.solve(
        ["Question: 3*4", "Question: where"], keywords=[["math"], ["geo"]], on_load=loaded.append
    )
    assert [r.experts for r in res] == [["llama"] * 3, ["gpt2"] * 3]
    assert loaded == ["llama", "gpt2", "gpt2"]  # two experts, then the aggregator
    assert all(not g.loaded for g in gens.values())
    assert all(isinstance(r.output, str) for r in res)
