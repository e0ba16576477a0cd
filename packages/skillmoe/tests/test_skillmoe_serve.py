"""The batching facade: concurrent requests over loopback, one solve, loads = distinct experts."""

from __future__ import annotations

import threading
from collections import Counter

import httpx
import pytest
from icml26_skillmoe import (
    LLMSkillAnnotator,
    ProfileBank,
    SkillMoE,
    expert_prompt,
    extract_choice,
    make_server,
)

from .test_skillmoe_http import MODELS, gold, respond


class LocalModel:
    """A local model with a real load/unload life cycle (what TransformersGenerator does):
    ``generate`` loads it lazily; every load and unload is logged."""

    def __init__(self, name: str, log: Counter) -> None:
        self.name, self.log, self.loaded = name, log, False
        self.lock = threading.Lock()

    def load(self) -> None:
        with self.lock:
            if not self.loaded:
                self.loaded = True
                self.log[f"{self.name} load"] += 1

    def unload(self) -> None:
        with self.lock:
            if self.loaded:
                self.loaded = False
                self.log[f"{self.name} unload"] += 1

    def generate(self, prompts, *, temperature=0.7, max_tokens=4096):
        self.load()
        self.log[f"{self.name} calls"] += 1
        return [respond(self.name, p) for p in prompts]


def local_moe(log: Counter) -> SkillMoE:
    ann = LLMSkillAnnotator(LocalModel("annotator", log))
    val = [f"Compute the residue of {n}" for n in range(24)]
    keywords = ann.annotate(val)
    ann.generator.unload()
    correct = {
        m: [respond(m, expert_prompt(q)).endswith(f"({gold(n)})") for n, q in enumerate(val)]
        for m in MODELS
    }
    bank = ProfileBank.from_validation(keywords, correct)
    experts = {m: LocalModel(m, log) for m in MODELS}
    log.clear()
    return SkillMoE(bank, experts, aggregator="weak", annotator=ann, seed=0)


def serve(moe, **kw):
    facade = make_server(moe, port=0, **kw)
    t = threading.Thread(target=facade.serve_forever, daemon=True)
    t.start()
    host, port = facade.server_address[:2]
    return facade, t, f"http://{host}:{port}/v1/chat/completions"


def stop(facade, t):
    facade.shutdown()
    facade.server_close()
    t.join(10)
    assert not t.is_alive(), "the facade did not shut down within 10 s"


def post_concurrently(url, questions, timeout=30.0):
    """One thread per request, released together; returns the JSON replies in order."""
    out: list = [None] * len(questions)
    go = threading.Barrier(len(questions))

    def one(i, q):
        go.wait(timeout)
        body = {"model": "skillmoe", "messages": [{"role": "user", "content": q}]}
        r = httpx.post(url, json=body, timeout=timeout)
        out[i] = (r.status_code, r.json())

    threads = [threading.Thread(target=one, args=(i, q)) for i, q in enumerate(questions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    assert not any(t.is_alive() for t in threads), f"a request hung past {timeout} s"
    return out


@pytest.mark.timeout(90)
def test_eight_concurrent_requests_are_one_batch_loading_each_expert_once():
    log: Counter = Counter()
    moe = local_moe(log)
    facade, t, url = serve(moe, max_batch=8, max_wait_ms=20_000)
    try:
        ns = list(range(100, 108))
        replies = post_concurrently(url, [f"Compute the residue of {n}" for n in ns])
    finally:
        stop(facade, t)
    # each request is answered with its own question's result
    for n, (code, r) in zip(ns, replies):
        assert code == 200, r
        assert extract_choice(r["choices"][0]["message"]["content"]) == gold(n)
        assert r["skillmoe"]["experts"] == ["even-expert" if n % 2 == 0 else "odd-expert"] * 3
    # one solve over all 8; the scheduler loaded each distinct expert once (naive: 8 x 3)
    assert [size for size, _ in facade.batches] == [8]
    stats = facade.batches[0][1]
    distinct = {e for _, r in replies for e in r["skillmoe"]["experts"]}
    assert distinct == {"even-expert", "odd-expert"}
    assert stats.loads == stats.unloads == len(distinct) == 2
    assert (stats.annotator_loads, stats.annotator_unloads, stats.aggregator_loads) == (1, 1, 1)
    assert log == {
        "annotator load": 1,
        "annotator unload": 1,
        "annotator calls": 5,  # one batched call per annotator sample, for all 8 requests
        "even-expert load": 1,
        "even-expert unload": 1,
        "even-expert calls": 1,
        "odd-expert load": 1,
        "odd-expert unload": 1,
        "odd-expert calls": 1,
        "weak load": 1,  # the aggregator
        "weak unload": 1,
        "weak calls": 1,
    }


@pytest.mark.timeout(60)
def test_batch_closes_on_the_wait_and_full_batches_split():
    log: Counter = Counter()
    moe = local_moe(log)
    facade, t, url = serve(moe, max_batch=2, max_wait_ms=1500)
    try:
        replies = post_concurrently(url, [f"Compute the residue of {n}" for n in (1, 2, 3)])
    finally:
        stop(facade, t)
    assert all(code == 200 for code, _ in replies)
    # 3 requests, at most 2 a batch: one full batch, then one closed by the 1.5 s wait
    assert sorted(size for size, _ in facade.batches) == [1, 2]


@pytest.mark.timeout(60)
def test_a_failing_batch_fails_its_requests_and_the_next_batch_works():
    log: Counter = Counter()
    moe = local_moe(log)
    real = moe.experts["odd-expert"].generate
    moe.experts["odd-expert"].generate = lambda p, **kw: (_ for _ in ()).throw(OSError("GPU"))
    facade, t, url = serve(moe, max_batch=2, max_wait_ms=20_000)
    try:
        bad = post_concurrently(url, [f"Compute the residue of {n}" for n in (1, 2)])
        assert [code for code, _ in bad] == [500, 500]
        assert all("odd-expert' failed: GPU" in r["error"]["message"] for _, r in bad), bad
        moe.experts["odd-expert"].generate = real
        good = post_concurrently(url, [f"Compute the residue of {n}" for n in (3, 4)])
        assert [code for code, _ in good] == [200, 200]
        body = {"messages": [{"role": "user", "content": "x"}], "stream": True}
        r = httpx.post(url, json=body, timeout=10)
        assert r.status_code == 400 and "stream=true is not supported" in r.text
    finally:
        stop(facade, t)


def test_make_server_bad_arguments():
    moe = local_moe(Counter())
    with pytest.raises(ValueError, match="max_batch"):
        make_server(moe, port=0, max_batch=0)
    with pytest.raises(ValueError, match="max_wait_ms"):
        make_server(moe, port=0, max_wait_ms=-1)
    with pytest.raises(ValueError, match="request_timeout_s"):
        make_server(moe, port=0, request_timeout_s=0)
    with pytest.raises(TypeError, match="moe"):
        make_server(object(), port=0)
