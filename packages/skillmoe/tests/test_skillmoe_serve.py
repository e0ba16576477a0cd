"""The batching facade: concurrent requests over loopback, one solve, loads = distinct experts."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest
from icml26_skillmoe import (
    LLMSkillAnnotator,
    OpenAIChatGenerator,
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
    with pytest.raises(ValueError, match="max_wait_ms"):
        make_server(moe, port=0, max_wait_ms=float("inf"))
    with pytest.raises(ValueError, match="request_timeout_s"):
        make_server(moe, port=0, request_timeout_s=0)
    with pytest.raises(TypeError, match="moe"):
        make_server(object(), port=0)


# ---- limits, auth, health, timeouts, shutdown, CLI (issue 68) -------------------------------

CHAT = "/v1/chat/completions"


def ask(n: int) -> dict:
    return {
        "model": "skillmoe",
        "messages": [{"role": "user", "content": f"Compute the residue of {n}"}],
    }


def raw_exchange(url: str, head: str, timeout: float = 10.0) -> bytes:
    """Send ``head`` (request line + headers) on a fresh socket and read the reply to EOF."""
    import socket

    host, port = url.split("://")[1].split("/")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(head.encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


class Gate:
    """An expert that blocks until ``release()`` (a batch held in flight)."""

    def __init__(self, moe: SkillMoE) -> None:
        self.entered, self.go = threading.Event(), threading.Event()
        for m, gen in moe.experts.items():
            real = gen.generate

            def generate(prompts, _real=real, **kw):
                self.entered.set()
                assert self.go.wait(30), "the gate was never released"
                return _real(prompts, **kw)

            gen.generate = generate

    def release(self) -> None:
        self.go.set()


@pytest.mark.timeout(60)
def test_body_limits_413_before_reading_and_message_limits_400():
    moe = local_moe(Counter())
    facade, t, url = serve(moe, max_body_bytes=4096, max_messages=3, max_message_chars=200)
    base = url.removesuffix(CHAT)
    try:
        # the operator's 64 MB body: 413, not read (the default limit is 1 MiB)
        big = b'{"messages": [{"role": "user", "content": "' + b"x" * (64 << 20) + b'"}]}'
        try:
            r = httpx.post(
                url, content=big, headers={"content-type": "application/json"}, timeout=30
            )
            assert r.status_code == 413 and "max_body_bytes=4096" in r.json()["error"]["message"]
        except (httpx.RemoteProtocolError, httpx.WriteError, httpx.ReadError):
            # the server closes without reading the 64 MB still in flight, so the kernel may
            # reset the connection and drop the 413 before this client reads it (CI saw it once:
            # headers read, body lost); no lingering close by design. The answer itself is
            # checked exactly below, where no body is in flight
            pass
        # decided from Content-Length alone: the answer comes without one byte of the body sent
        reply = raw_exchange(
            url,
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {64 << 20}\r\n\r\n",
        )
        assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
        assert b"max_body_bytes=4096" in reply and b"request_too_large" in reply, reply[-300:]
        # and the server does not drain the 64 MB either: it closes after the answer
        assert b"\r\nconnection: close\r\n" in reply.lower(), reply[:300]
        # a chunked body (no Content-Length) is cut off once it passes the limit
        chunks = (b'{"messages": [{"role": "user", "content": "' + b"y" * 1000 for _ in range(10))
        r = httpx.post(url, content=chunks, timeout=30)
        assert r.status_code == 413, r.text
        # too many messages, a too long message: 400 naming the limit
        four = [{"role": "user", "content": "Compute the residue of 1"}] * 4
        r = httpx.post(url, json={"messages": four}, timeout=30)
        assert r.status_code == 400 and "max_messages=3" in r.json()["error"]["message"]
        long = [{"role": "system", "content": "z" * 201}, ask(1)["messages"][0]]
        r = httpx.post(url, json={"messages": long}, timeout=30)
        assert r.status_code == 400 and "max_message_chars=200" in r.json()["error"]["message"]
        parts = [{"role": "user", "content": [{"type": "text", "text": "w" * 150}] * 2}]
        r = httpx.post(url, json={"messages": parts}, timeout=30)
        assert r.status_code == 400 and "message 0 is too long" in r.text
        # within every limit: answered
        r = httpx.post(url, json=ask(9), timeout=30)
        assert r.status_code == 200
        assert extract_choice(r.json()["choices"][0]["message"]["content"]) == gold(9)
        # unknown routes and methods
        assert httpx.get(f"{base}/v2/nothing").status_code == 404
        r = httpx.get(url)
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        assert httpx.post(url, content=b"{not json", timeout=30).status_code == 400
    finally:
        stop(facade, t)


@pytest.mark.timeout(60)
def test_api_key_bearer_on_v1_and_health_open():
    moe = local_moe(Counter())
    facade, t, url = serve(moe, api_key="s3cret")
    base = url.removesuffix(CHAT)
    try:
        assert httpx.get(f"{base}/health").json() == {"status": "ok"}  # no key for probes
        for hdrs in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            r = httpx.post(url, json=ask(3), headers=hdrs, timeout=30)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", hdrs
            assert r.json()["error"]["type"] == "authentication_error"
            assert httpx.get(f"{base}/v1/models", headers=hdrs).status_code == 401
        key = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{base}/v1/models", headers=key).json()["data"][0]["id"] == "skillmoe"
        r = httpx.post(url, json=ask(3), headers=key, timeout=30)
        assert r.status_code == 200 and r.json()["skillmoe"]["answer"] == gold(3)
        # our own OpenAI client, with the key, uses it as one more model
        gen = OpenAIChatGenerator("skillmoe", f"{base}/v1", api_key="s3cret")
        assert extract_choice(gen.generate(["Compute the residue of 6"])[0]) == gold(6)
    finally:
        stop(facade, t)


@pytest.mark.timeout(60)
def test_request_timeout_504_and_the_timed_out_request_leaves_the_queue():
    moe = local_moe(Counter())
    gate = Gate(moe)
    facade, t, url = serve(moe, max_batch=1, max_wait_ms=0, request_timeout_s=0.5)
    try:
        first: list = []
        th = threading.Thread(target=lambda: first.append(httpx.post(url, json=ask(1), timeout=30)))
        th.start()
        assert gate.entered.wait(20)
        r = httpx.post(url, json=ask(2), timeout=30)  # queued behind the held batch
        assert r.status_code == 504 and "within 0.5 s" in r.json()["error"]["message"]
        assert facade.app.batcher.pending == 1  # only the held one: the 504 left the queue
        th.join(20)
        assert first and first[0].status_code == 504  # the held one timed out as well
        gate.release()
        deadline = time.monotonic() + 20
        while facade.app.batcher.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert facade.app.batcher.pending == 0
        assert [size for size, _ in facade.batches] == [1]  # the 504'd queued one never ran
        r = httpx.post(url, json=ask(5), timeout=30)
        assert r.status_code == 200 and r.json()["skillmoe"]["answer"] == gold(5)
    finally:
        gate.release()
        stop(facade, t)


@pytest.mark.timeout(60)
def test_graceful_shutdown_answers_the_batch_in_flight_and_the_queue():
    moe = local_moe(Counter())
    gate = Gate(moe)
    facade, t, url = serve(moe, max_batch=2, max_wait_ms=0)
    base = url.removesuffix(CHAT)
    replies: dict = {}

    def post(n):
        replies[n] = httpx.post(url, json=ask(n), timeout=30)

    posts = [threading.Thread(target=post, args=(n,)) for n in (11, 12, 13)]
    try:
        posts[0].start()
        assert gate.entered.wait(20)  # batch [11] in flight
        for p in posts[1:]:
            p.start()
        deadline = time.monotonic() + 20
        while facade.app.batcher.pending < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert facade.app.batcher.pending == 3  # 12 and 13 queued behind it
        down = threading.Thread(target=facade.shutdown)
        down.start()
        deadline = time.monotonic() + 20
        while not facade.app.draining and time.monotonic() < deadline:
            time.sleep(0.02)
        assert facade.app.draining
        time.sleep(1.0)  # the batch stays in flight for a while: shutdown keeps waiting
        assert down.is_alive()  # waiting for the batch in flight
        assert facade.app.batcher.alive
        gate.release()
        down.join(30)
        assert not down.is_alive()
        for p in posts:
            p.join(30)
        assert {n: r.status_code for n, r in replies.items()} == {11: 200, 12: 200, 13: 200}
        assert all(r.json()["skillmoe"]["answer"] == gold(n) for n, r in replies.items())
        assert sorted(size for size, _ in facade.batches) == [1, 2]
        with pytest.raises(httpx.ConnectError):  # no longer listening
            httpx.get(f"{base}/health", timeout=5)
    finally:
        gate.release()
        facade.server_close()
        t.join(10)
    assert not t.is_alive() and not facade.app.batcher.thread.is_alive()


def test_health_loopback_default_and_over_capacity_headers():
    moe = local_moe(Counter())
    facade = make_server(moe, port=0, max_queue=1)
    try:
        assert facade.server_address[0] == "127.0.0.1"  # loopback unless told otherwise
        assert facade._server.config.backlog == 2048  # not http.server's 5
    finally:
        facade.server_close()
    assert not facade.app.batcher.alive


def test_make_server_bad_limits():
    moe = local_moe(Counter())
    for kw, match in [
        ({"max_queue": 0}, "max_queue"),
        ({"max_body_bytes": -1}, "max_body_bytes"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_message_chars": 1.5}, "max_message_chars"),
        ({"api_key": ""}, "api_key"),
        ({"backlog": 0}, "backlog"),
        ({"shutdown_timeout_s": 0}, "shutdown_timeout_s"),
        ({"request_timeout_s": float("inf")}, "request_timeout_s"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_server(moe, port=0, **kw)


def moe_for_cli() -> SkillMoE:
    """``--moe tests.test_skillmoe_serve:moe_for_cli`` (the CLI test's pipeline): keywords
    mapped by letter counts, so the subprocess does not import scikit-learn (seconds)."""
    import numpy as np

    def letters(texts):
        return np.array([[t.count(c) + 0.1 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts])

    moe = local_moe(Counter())
    return SkillMoE(
        moe.bank, moe.experts, aggregator="weak", annotator=moe.annotator, embed=letters
    )


@pytest.mark.timeout(90)
def test_cli_help_and_serve_until_sigterm(capsys):
    import os
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # tests/ is importable from here
    from icml26_skillmoe.serve import main

    with pytest.raises(SystemExit) as exit_:  # what `python -m icml26_skillmoe.serve --help` does
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: python -m icml26_skillmoe.serve")
    for opt in ("--api-key", "--max-body-bytes", "--max-queue", "--request-timeout", "--moe"):
        assert opt in text, opt
    cmd = [sys.executable, "-m", "icml26_skillmoe.serve"]
    env = {**os.environ, "SKILLMOE_API_KEY": "k"}
    args = ["--moe", "tests.test_skillmoe_serve:moe_for_cli", "--port", "0", "--max-batch", "4"]
    proc = subprocess.Popen(
        [*cmd, *args],
        cwd=root,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        port = None
        deadline = time.monotonic() + 60
        seen = []
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)/v1", line)
            port = m and int(m.group(1))
        assert port, "".join(seen)
        url = f"http://127.0.0.1:{port}"
        r = httpx.post(
            f"{url}{CHAT}", json=ask(7), headers={"Authorization": "Bearer k"}, timeout=30
        )
        assert r.status_code == 200 and r.json()["skillmoe"]["answer"] == gold(7)
        assert httpx.post(f"{url}{CHAT}", json=ask(7), timeout=30).status_code == 401
        proc.send_signal(signal.SIGTERM)
        # graceful, then the signal's own exit status (uvicorn re-raises it, as vllm serve)
        assert proc.wait(30) in (0, -signal.SIGTERM)
        rest = proc.stderr.read()
        assert "Shutting down" in rest and "Finished server process" in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()


def test_cli_defaults_are_make_servers():
    import inspect

    from icml26_skillmoe.serve import _parser

    cli = vars(_parser().parse_args([]))
    names = {"request_timeout_s": "request_timeout", "shutdown_timeout_s": "shutdown_timeout"}
    params = inspect.signature(make_server).parameters
    for name, p in params.items():
        if name in ("moe", "log_level"):
            continue
        assert cli[names.get(name, name)] == p.default, name
    assert cli["host"] == "127.0.0.1"  # loopback by default


@pytest.mark.timeout(60)
def test_a_client_that_leaves_while_queued_leaves_the_queue():
    import json
    import socket

    moe = local_moe(Counter())
    gate = Gate(moe)
    facade, t, url = serve(moe, max_batch=1, max_wait_ms=0)
    try:
        first: list = []
        th = threading.Thread(target=lambda: first.append(httpx.post(url, json=ask(1), timeout=30)))
        th.start()
        assert gate.entered.wait(20)
        body = json.dumps(ask(2)).encode()
        port = facade.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            deadline = time.monotonic() + 20
            while facade.app.batcher.pending < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert facade.app.batcher.pending == 2
        deadline = time.monotonic() + 20  # the socket is closed: its request is withdrawn
        while facade.app.batcher.pending > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert facade.app.batcher.pending == 1
        gate.release()
        th.join(20)
        assert first[0].status_code == 200
        assert [size for size, _ in facade.batches] == [1]  # the withdrawn one never ran
    finally:
        gate.release()
        stop(facade, t)
