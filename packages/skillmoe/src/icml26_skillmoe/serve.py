"""An OpenAI-compatible facade: Skill-MoE as one virtual model (``skillmoe``), batching.

Any OpenAI client (``openai``, LangChain, curl) can then call the whole pipeline::

    server = make_server(moe, port=8001)      # http://127.0.0.1:8001/v1
    server.serve_forever()

``POST /v1/chat/completions`` takes the last user message as the question and returns the
aggregated answer as the assistant message, with the routing in a ``skillmoe`` field
(keywords, experts, votes, answer); ``GET /v1/models`` lists the virtual model. Streaming and
``n > 1`` are refused with HTTP 400.

Batching. Requests are not solved one by one: a collector thread takes the first waiting
request, keeps collecting until ``max_batch`` requests are waiting or ``max_wait_ms`` have
passed since that first one, and runs ONE ``moe.solve(batch)``; each request is answered with
its own result. The batch scheduler then loads each recruited expert once per batch, so 8
concurrent requests cost (distinct experts) loads + 1 aggregator + 1 annotator load, not
8 x (3 + 1 + 1). ``server.batches`` logs ``(batch size, ScheduleStats)`` of the last 1024
batches. A
pipeline error fails every request of its batch (HTTP 500 with the error); the next batch is
unaffected. One batch runs at a time (what the one-GPU scheduler needs); requests arriving
meanwhile form the next batch.

Standard library only (``http.server.ThreadingHTTPServer``: one thread per connection, which
waits on its slot of the batch): the facade has two routes and no streaming, so an ASGI stack
(starlette + uvicorn) would add dependencies without adding anything.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .pipeline import SkillMoE, SkillMoEResult
from .scheduler import ScheduleStats

__all__ = ["SkillMoEServer", "make_server"]


class _Slot:
    """One waiting request: its question, and the result or error the collector puts there."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.done = threading.Event()
        self.result: SkillMoEResult | None = None
        self.error: BaseException | None = None


class _Batcher:
    """Collects requests for up to ``max_wait_ms`` after the first or ``max_batch`` requests,
    then runs one ``moe.solve`` over them (in a daemon thread, one batch at a time)."""

    def __init__(self, moe: SkillMoE, max_batch: int, max_wait_ms: float) -> None:
        self.moe = moe
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.cond = threading.Condition()
        self.queue: deque[_Slot] = deque()
        self.closed = False
        # the last 1024 batches (bounded: a long-running server must not grow without end)
        self.batches: deque[tuple[int, ScheduleStats | None]] = deque(maxlen=1024)
        self.thread = threading.Thread(target=self._loop, name="skillmoe-batcher", daemon=True)
        self.thread.start()

    def submit(self, question: str) -> _Slot:
        slot = _Slot(question)
        with self.cond:
            if self.closed:
                raise RuntimeError("the server is closed")
            self.queue.append(slot)
            self.cond.notify_all()
        return slot

    def _take(self) -> list[_Slot]:
        """Block for the first request, then collect until the batch is full or the wait ends."""
        with self.cond:
            while not self.queue and not self.closed:
                self.cond.wait()
            if not self.queue:
                return []
            deadline = time.monotonic() + self.max_wait
            while len(self.queue) < self.max_batch and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            n = min(self.max_batch, len(self.queue))
            return [self.queue.popleft() for _ in range(n)]

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return  # closed and drained
            try:
                results = self.moe.solve([s.question for s in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"solve returned {len(results)} results for {len(batch)}")
                for s, res in zip(batch, results):
                    s.result = res
            except BaseException as e:  # every request of the batch gets the error
                for s in batch:
                    s.error = e
            self.batches.append((len(batch), self.moe.last_stats))
            for s in batch:
                s.done.set()

    def close(self, timeout: float = 5.0) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.thread.join(timeout)


class SkillMoEServer(ThreadingHTTPServer):
    """The facade's HTTP server (:func:`make_server`); ``batches`` logs ``(size, stats)`` of
    the last 1024 ``solve`` calls. ``server_close()`` also stops the batch collector."""

    daemon_threads = True
    batcher: _Batcher

    @property
    def batches(self) -> deque[tuple[int, ScheduleStats | None]]:
        return self.batcher.batches

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()


def _question(body: dict[str, Any]) -> str:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("messages must be a non-empty list")
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # content parts: keep the text ones
                content = "".join(
                    p.get("text", "")
                    for p in content
                    if isinstance(p, dict) and p.get("type") == "text"
                )
            if not isinstance(content, str) or not content.strip():
                raise ValueError("the last user message has no text content")
            return content
    raise ValueError("messages holds no user message")


def make_server(
    moe: SkillMoE,
    host: str = "127.0.0.1",
    port: int = 8001,
    *,
    model_name: str = "skillmoe",
    max_batch: int = 32,
    max_wait_ms: float = 50.0,
    request_timeout_s: float | None = None,
) -> SkillMoEServer:
    """A ready (not yet serving) HTTP server; ``port=0`` picks a free port
    (``server.server_address``). Call ``serve_forever()`` (or run it in a thread), and
    ``shutdown()`` then ``server_close()`` to stop.

    ``max_batch`` (default 32): the most requests one ``solve`` takes; ``max_wait_ms``
    (default 50 ms): how long the collector waits after the first request of a batch for
    more (a latency cost paid only when traffic is light; 0 batches only what is already
    waiting). ``request_timeout_s``: a request whose batch has not finished by then gets
    HTTP 504 (default: wait; an LLM batch can take minutes)."""
    if not isinstance(moe, SkillMoE):
        raise TypeError(f"moe must be a SkillMoE, got {type(moe).__name__}")
    if not isinstance(max_batch, int) or isinstance(max_batch, bool) or max_batch < 1:
        raise ValueError(f"max_batch must be a positive int, got {max_batch!r}")
    if not max_wait_ms >= 0 or max_wait_ms == float("inf"):
        raise ValueError(f"max_wait_ms must be finite and >= 0, got {max_wait_ms!r}")
    if request_timeout_s is not None and not request_timeout_s > 0:
        raise ValueError(f"request_timeout_s must be > 0 or None, got {request_timeout_s!r}")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, msg: str) -> None:
            self._send(code, {"error": {"message": msg, "type": "invalid_request_error"}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": model_name, "object": "model", "owned_by": "icml26-skillmoe"}
                        ],
                    },
                )
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}")
                return
            try:
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the request body must be a JSON object")
                if body.get("model") not in (None, model_name):
                    raise ValueError(
                        f"unknown model {body.get('model')!r}; this server serves {model_name!r}"
                    )
                if body.get("stream"):
                    raise ValueError(
                        "stream=true is not supported: the answer exists only once the "
                        "aggregator has synthesised the experts' responses; send stream=false"
                    )
                if body.get("n", 1) != 1:
                    raise ValueError("only n=1 is supported")
                question = _question(body)
            except (ValueError, json.JSONDecodeError) as e:
                self._error(400, str(e))
                return
            try:
                slot = server.batcher.submit(question)
            except RuntimeError as e:
                self._error(503, str(e))
                return
            if not slot.done.wait(request_timeout_s):
                self._error(504, f"the batch did not finish within {request_timeout_s} s")
                return
            if slot.error is not None or slot.result is None:  # the pipeline's own error
                err = slot.error
                self._error(500, f"{type(err).__name__}: {err}")
                return
            res = slot.result
            content = (
                res.output
                if res.output
                else f"The answer is ({res.answer})"
                if moe.task == "choice"
                else f"The answer is \\boxed{{{res.answer}}}"
            )
            self._send(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model_name,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                    "skillmoe": {
                        "keywords": res.keywords,
                        "experts": res.experts,
                        "votes": res.votes,
                        "majority": res.majority,
                        "answer": res.answer,
                    },
                },
            )

    server = SkillMoEServer((host, port), Handler)
    server.batcher = _Batcher(moe, max_batch, max_wait_ms)
    return server
