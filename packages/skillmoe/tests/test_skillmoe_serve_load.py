"""The facade under load: hundreds of concurrent loopback clients, none lost, every answer right.

``fire`` is the load generator (also used by ``benchmarks/serve_load.py``): one asyncio task
per client, all released in the same event-loop turn, each one TCP connection and one POST
(``Connection: close``), read to EOF under a deadline. Every outcome is classified: an HTTP
status, or ``reset`` / ``closed`` (EOF before a full response) / ``refused`` / ``timeout``.
A *lost* request is any outcome that is not an HTTP response: what a client sees as a network
error instead of an answer or a retryable status.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from icml26_skillmoe import extract_choice

from .test_skillmoe_http import gold
from .test_skillmoe_serve import local_moe, serve, stop

LOST = ("reset", "closed", "refused", "timeout", "error")


@dataclass
class Outcome:
    status: int | str  # an HTTP status, or one of LOST
    latency_s: float
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def lost(self) -> bool:
        return not isinstance(self.status, int)

    def json(self):
        return json.loads(self.body)


def chat_body(question: str) -> bytes:
    return json.dumps(
        {"model": "skillmoe", "messages": [{"role": "user", "content": question}]}
    ).encode()


async def _one(host: str, port: int, body: bytes, headers: dict[str, str], timeout: float):
    t0 = time.perf_counter()
    head = [
        "POST /v1/chat/completions HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    conn: list = []

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        conn.append(writer)
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        return await reader.read()  # to EOF: the server closes after its response

    try:
        raw = await asyncio.wait_for(exchange(), timeout)
    except ConnectionResetError:
        return Outcome("reset", time.perf_counter() - t0)
    except ConnectionRefusedError:
        return Outcome("refused", time.perf_counter() - t0)
    except asyncio.TimeoutError:
        return Outcome("timeout", time.perf_counter() - t0)
    except OSError:
        return Outcome("error", time.perf_counter() - t0)
    finally:
        for w in conn:
            w.close()
    dt = time.perf_counter() - t0
    head_raw, sep, payload = raw.partition(b"\r\n\r\n")
    lines = head_raw.decode("latin-1").split("\r\n")
    if not sep or not lines[0].startswith("HTTP/1."):
        return Outcome("closed", dt)
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if len(payload) < int(hdrs.get("content-length", len(payload))):
        return Outcome("closed", dt)  # EOF inside the body
    return Outcome(int(lines[0].split()[1]), dt, hdrs, payload)


async def _fire(host, port, bodies, headers, timeout):
    return await asyncio.gather(*(_one(host, port, b, headers, timeout) for b in bodies))


def fire(
    url: str, bodies: list[bytes], *, headers: dict[str, str] | None = None, timeout: float = 30.0
) -> list[Outcome]:
    """POST every body at once, each on its own connection; outcomes in order (bounded by
    ``timeout`` per request, so it returns, never hangs)."""
    hostport = url.split("://", 1)[1].split("/", 1)[0]
    host, port = hostport.rsplit(":", 1)
    return asyncio.run(_fire(host, int(port), bodies, headers or {}, timeout))


def check_answers(questions: list[int], outs: list[Outcome]) -> Counter:
    """Every 200 carries its own question's right answer; returns the status counts."""
    for n, o in zip(questions, outs):
        if o.status == 200:
            r = o.json()
            assert extract_choice(r["choices"][0]["message"]["content"]) == gold(n), (n, r)
            assert (
                r["skillmoe"]["experts"] == ["even-expert" if n % 2 == 0 else "odd-expert"] * 3
            ), (n, r)
    return Counter(o.status for o in outs)


@pytest.mark.timeout(120)
def test_400_concurrent_clients_twice_none_lost_every_answer_right():
    moe = local_moe(Counter())
    facade, t, url = serve(moe, max_batch=64, max_wait_ms=20)
    try:
        for rnd in range(2):  # twice in a row, on the same server
            ns = list(range(1000 * rnd, 1000 * rnd + 400))
            outs = fire(url, [chat_body(f"Compute the residue of {n}") for n in ns], timeout=60)
            counts = check_answers(ns, outs)
            assert counts == {200: 400}, (rnd, counts)
    finally:
        stop(facade, t)
    sizes = [size for size, _ in facade.batches]
    assert sum(sizes) == 800 and max(sizes) <= 64, sizes
    assert len(sizes) < 800 / 4, f"hardly batched: {sizes}"  # batching did happen


@pytest.mark.timeout(120)
def test_over_capacity_answers_503_with_retry_after_never_a_reset():
    moe = local_moe(Counter())
    facade, t, url = serve(moe, max_batch=16, max_wait_ms=20, max_queue=48)
    try:
        ns = list(range(300))
        outs = fire(url, [chat_body(f"Compute the residue of {n}") for n in ns], timeout=60)
        counts = check_answers(ns, outs)
        assert set(counts) <= {200, 503} and counts[200] >= 48, counts
        assert counts[503] > 0, counts  # 300 at once do exceed a queue of 48
        for o in outs:
            if o.status == 503:
                assert int(o.headers["retry-after"]) >= 1, o.headers
                assert "capacity" in o.json()["error"]["message"]
        # the server is still healthy afterwards: a retry is answered
        again = fire(url, [chat_body("Compute the residue of 5")], timeout=30)
        assert check_answers([5], again) == {200: 1}
    finally:
        stop(facade, t)


def test_fire_classifies_a_reset_as_lost():
    """The load generator itself: a server that resets every connection counts as lost."""
    import socket
    import struct

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]

    def rst():
        for _ in range(3):
            c, _ = srv.accept()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.recv(65536)
            c.close()  # linger 0: RST

    th = threading.Thread(target=rst, daemon=True)
    th.start()
    try:
        outs = fire(f"http://127.0.0.1:{port}/v1", [b"{}"] * 3, timeout=10)
    finally:
        th.join(10)
        srv.close()
    assert all(o.lost for o in outs) and {o.status for o in outs} <= {"reset", "closed"}, outs


def test_readme_load_table_is_the_committed_benchmark_json():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme, bench = root / "README.md", root / "benchmarks" / "serve_load.py"
    if not (readme.exists() and bench.exists()):
        pytest.skip("README.md / benchmarks not next to the tests (installed wheel)")
    spec = importlib.util.spec_from_file_location("skillmoe_serve_load", bench)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    data = json.loads((root / "benchmarks" / "serve_load.json").read_text())
    text = readme.read_text()
    missing = [line for line in mod.table(data).splitlines() if line not in text]
    assert not missing, f"README rows not from serve_load.json: {missing}"
    assert all(r["lost"] == 0 for r in data["after"] + data["overload"]), "after: lost requests"
