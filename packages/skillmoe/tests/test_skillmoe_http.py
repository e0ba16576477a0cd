"""End to end against a fake OpenAI-compatible server on loopback; the facade served back."""

from __future__ import annotations

import re
import threading
from collections import Counter

import httpx
import pytest
from icml26_skillmoe import (
    FunctionGenerator,
    GenerationError,
    LLMSkillAnnotator,
    OpenAIChatGenerator,
    ProfileBank,
    ScheduleError,
    SkillMoE,
    expert_prompt,
    extract_choice,
    make_server,
    synthesis_prompt,
)

from .conftest import digit_in


def gold(n: int) -> str:
    return "ABCD"[n % 4]


def wrong(n: int) -> str:
    return "ABCD"[(n + 1) % 4]


def respond(model: str, prompt: str) -> str:
    if prompt.startswith("You have been provided"):  # the aggregator: majority of the responses
        letters = [extract_choice(r) for r in re.findall(r"response:\n(.*?)\n\n", prompt, re.S)]
        return f"Synthesis. The answer is ({Counter(letters).most_common(1)[0][0]})"
    n = digit_in(prompt)
    if model == "annotator":
        return f"Keywords: {'even numbers' if n % 2 == 0 else 'odd numbers'}, arithmetic"
    good = {"even-expert": n % 2 == 0, "odd-expert": n % 2 == 1, "weak": False}[model]
    return f"Reasoning about {n}. The answer is ({gold(n) if good else wrong(n)})"


MODELS = ["even-expert", "odd-expert", "weak"]


def build(server, **kw):
    annotator = LLMSkillAnnotator(OpenAIChatGenerator("annotator", server.base_url, backoff=0.0))
    experts = {m: OpenAIChatGenerator(m, server.base_url, backoff=0.0, **kw) for m in MODELS}
    val = [f"Compute the residue of {n}" for n in range(24)]
    keywords = annotator.annotate(val)
    correct = {
        m: [respond(m, expert_prompt(q)).endswith(f"({gold(n)})") for n, q in enumerate(val)]
        for m in MODELS
    }
    bank = ProfileBank.from_validation(keywords, correct)
    return SkillMoE(bank, experts, aggregator="weak", annotator=annotator, seed=0), experts


def test_end_to_end_routes_each_question_to_its_skill(fake_openai):
    server = fake_openai(respond)
    moe, _ = build(server)
    assert moe.bank.profiles["even-expert"] == {
        "even numbers": 12,
        "arithmetic": 0,
        "odd numbers": -12,
    }
    server.requests.clear()
    test = [f"Compute the residue of {n}" for n in range(100, 112)]
    res = moe.solve(test)
    for n, r in zip(range(100, 112), res):
        want = "even-expert" if n % 2 == 0 else "odd-expert"
        assert r.experts == [want] * 3  # only the positive-relevance model is a candidate
        assert r.votes == [gold(n)] * 3 and r.answer == gold(n) and r.majority == gold(n)
        assert r.output.startswith("Synthesis")
    expert_calls = Counter(
        m for m, p in server.requests if p.startswith("Question:") and m != "annotator"
    )
    assert expert_calls == {"even-expert": 18, "odd-expert": 18}
    assert sum(m == "weak" for m, _ in server.requests) == 12  # the aggregator, once per question
    assert moe.last_stats is not None and moe.last_stats.loads == 2


def test_transient_failures_are_retried(fake_openai):
    server = fake_openai(respond)
    gen = OpenAIChatGenerator("weak", server.base_url, backoff=0.0, max_retries=3)
    server.fail["weak"] = 3
    assert gen.generate(["Question: 5"]) == [respond("weak", "Question: 5")]
    server.fail["weak"] = 4
    with pytest.raises(GenerationError, match="failed on 1 of 1 prompts"):
        gen.generate(["Question: 5"])


def test_endpoint_failing_mid_batch_keeps_finished_answers(fake_openai):
    server = fake_openai(respond)
    moe, _ = build(server, max_retries=1)
    server.fail_always.add("residue of 103\nProvide your")  # expert prompts of one question
    with pytest.raises(ScheduleError) as info:
        moe.solve([f"Compute the residue of {n}" for n in range(100, 106)])
    partial = info.value.partial
    # the even questions were done by even-expert before odd-expert failed on question 103
    assert all(
        p is not None and p.endswith(f"({gold(n)})")
        for n, row in zip(range(100, 106), partial)
        if n % 2 == 0
        for p in row
    )
    assert partial[3] == [None, None, None]
    assert all(
        p is not None for p in partial[1] + partial[5]
    )  # odd-expert's other prompts finished


def test_client_errors_are_not_retried(fake_openai):
    server = fake_openai(respond)
    gen = OpenAIChatGenerator(
        "weak", server.base_url.replace("/v1", "/nope"), max_retries=5, backoff=0.0
    )
    with pytest.raises(GenerationError, match="HTTP 404"):
        gen.generate(["Question: 1"])
    assert len(server.requests) == 1
    with pytest.raises(ValueError, match="model"):
        OpenAIChatGenerator("", server.base_url)


def test_openai_compatible_facade(fake_openai):
    server = fake_openai(respond)
    moe, _ = build(server)
    facade = make_server(moe, port=0)
    t = threading.Thread(target=facade.serve_forever, daemon=True)
    t.start()
    try:
        host, port = facade.server_address[:2]
        url = f"http://{host}:{port}/v1"
        models = httpx.get(f"{url}/models").json()
        assert models["data"][0]["id"] == "skillmoe"
        body = {
            "model": "skillmoe",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "Compute the residue of 7"},
            ],
        }
        r = httpx.post(f"{url}/chat/completions", json=body, timeout=30).json()
        assert extract_choice(r["choices"][0]["message"]["content"]) == gold(7)
        assert r["skillmoe"]["experts"] == ["odd-expert"] * 3
        # and our own client can use the facade as one more model
        assert extract_choice(
            OpenAIChatGenerator("skillmoe", url).generate(["Compute the residue of 8"])[0]
        ) == gold(8)
        bad = httpx.post(f"{url}/chat/completions", json={**body, "stream": True})
        assert bad.status_code == 400 and "stream" in bad.json()["error"]["message"]
        bad = httpx.post(f"{url}/chat/completions", json={"messages": []})
        assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
        bad = httpx.post(f"{url}/chat/completions", json={**body, "model": "gpt-4"})
        assert bad.status_code == 400
    finally:
        facade.shutdown()
        facade.server_close()


def test_pipeline_bad_input(fake_openai):
    server = fake_openai(respond)
    moe, experts = build(server)
    with pytest.raises(ValueError, match="no loader for bank models"):
        SkillMoE(moe.bank, {"weak": experts["weak"]})
    with pytest.raises(ValueError, match="aggregator 'judge'"):
        SkillMoE(moe.bank, experts, aggregator="judge")
    with pytest.raises(TypeError, match="not one str"):
        moe.solve("a question")
    nokw = SkillMoE(moe.bank, experts)
    with pytest.raises(ValueError, match="no annotator"):
        nokw.solve(["q"])
    # a query with no skills: uniform recruitment over the pool (upstream), answered by majority
    r = nokw.solve(["Compute the residue of 4"], keywords=[[]])[0]
    assert len(r.experts) == 3 and set(r.experts) <= set(MODELS) and r.output == ""


def test_the_answer_is_the_aggregators_not_the_majority(fake_openai):
    server = fake_openai(respond)
    moe, experts = build(server)
    seen = []

    def judge(prompts):  # an aggregator that disagrees with every expert
        seen.extend(prompts)
        return ["Having weighed them: The answer is (D)"] * len(prompts)

    moe = SkillMoE(
        moe.bank, {**experts, "judge": FunctionGenerator(judge)}, aggregator="judge", seed=0
    )
    res = moe.solve(["Compute the residue of 10"], keywords=[["even numbers"]])[0]
    assert res.majority == gold(10) == "C" and res.answer == "D"
    assert seen == [synthesis_prompt("Compute the residue of 10", res.responses)]
