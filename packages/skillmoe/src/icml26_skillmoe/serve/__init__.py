"""An OpenAI-compatible facade: Skill-MoE as one virtual model (``skillmoe``), batching.

Any OpenAI client (``openai``, LangChain, curl) can then call the whole pipeline::

    server = make_server(moe, port=8001)      # http://127.0.0.1:8001/v1 (needs the [serve] extra)
    server.serve_forever()

or from the command line: ``python -m icml26_skillmoe.serve --help``.

Routes. ``POST /v1/chat/completions`` takes the last user message as the question and returns
the aggregated answer as the assistant message, with the routing in a ``skillmoe`` field
(keywords, experts, votes, answer); ``GET /v1/models`` lists the virtual model; ``GET /health``
is 200 while the server takes requests (503 while it drains). Streaming and ``n > 1`` are
refused with HTTP 400.

Batching. Requests are not solved one by one: a collector thread takes the first waiting
request, keeps collecting until ``max_batch`` requests are waiting or ``max_wait_ms`` have
passed since that first one, and runs ONE ``moe.solve(batch)``; each request is answered with
its own result. The batch scheduler then loads each recruited expert once per batch, so 8
concurrent requests cost (distinct experts) loads + 1 aggregator + 1 annotator load, not
8 x (3 + 1 + 1). ``server.batches`` logs ``(batch size, ScheduleStats)`` of the last 1024
batches. A pipeline error fails every request of its batch (HTTP 500 with the error); the next
batch is unaffected. One batch runs at a time (what the one-GPU scheduler needs); requests
arriving meanwhile form the next batch.

Limits (each an argument of :func:`make_app` / :func:`make_server` and a CLI option):
``max_queue`` requests admitted and not yet answered (beyond: 503 with ``Retry-After``, an
estimate from the recent batch times); ``max_body_bytes`` (413, decided from
``Content-Length`` before the body is read, or while reading a chunked one; the server then
closes without draining the rest, so a client still streaming a large body may see a reset
instead of the 413: put a proxy with a lingering close, such as nginx, in front if it must);
``max_messages`` and ``max_message_chars`` (400); ``request_timeout_s`` (504; a request
still queued then leaves the queue); ``api_key`` (``Authorization: Bearer <key>`` on
``/v1/*``, 401 otherwise, as ``vllm serve --api-key``). Error bodies are OpenAI-shaped
(``{"error": {"message", "type", "code"}}``).

Stack. The HTTP layer is uvicorn (the ``[serve]`` extra), the server ``vllm serve`` and
SGLang run: a listen backlog of ``backlog`` (2048) connections instead of ``http.server``'s 5,
one event loop instead of a thread per connection, keep-alive timeouts, and a graceful
shutdown (stop accepting, answer every admitted request, bounded by ``shutdown_timeout_s``,
then stop the batcher). The app itself (:class:`SkillMoEApp`, from :func:`make_app`) is a
plain ASGI callable with no dependency, so it can also be mounted in another ASGI app or
served by another ASGI server. The batcher behind it is the same thread as before; the event
loop only awaits its results.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import importlib
import ipaddress
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..pipeline import SkillMoE, SkillMoEResult
from ..scheduler import ScheduleStats

__all__ = ["SkillMoEApp", "SkillMoEServer", "main", "make_app", "make_server"]

log = logging.getLogger("icml26_skillmoe.serve")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

BODY_TIMEOUT_S = 30.0  # a request body must arrive within this (else 408)


class _Full(Exception):
    """The batcher holds ``max_queue`` unanswered requests."""


class _Slot:
    """One waiting request: its question, and the result or error the collector puts there."""

    def __init__(self, question: str, on_done: Callable[[], None] | None = None) -> None:
        self.question = question
        self.done = threading.Event()
        self.result: SkillMoEResult | None = None
        self.error: BaseException | None = None
        self.on_done = on_done

    def finish(self) -> None:
        self.done.set()
        if self.on_done is not None:
            self.on_done()


class _Batcher:
    """Collects requests for up to ``max_wait_ms`` after the first or ``max_batch`` requests,
    then runs one ``moe.solve`` over them (in a daemon thread, one batch at a time).
    ``max_queue`` bounds the requests admitted and not yet answered (queued + in the batch)."""

    def __init__(
        self, moe: SkillMoE, max_batch: int, max_wait_ms: float, max_queue: int | None = None
    ) -> None:
        self.moe = moe
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.cond = threading.Condition()
        self.queue: deque[_Slot] = deque()
        self.pending = 0  # admitted, not yet answered
        self.closed = False
        # the last 1024 batches (bounded: a long-running server must not grow without end)
        self.batches: deque[tuple[int, ScheduleStats | None]] = deque(maxlen=1024)
        self.seconds: deque[float] = deque(maxlen=32)  # recent batch durations (Retry-After)
        self.thread = threading.Thread(target=self._loop, name="skillmoe-batcher", daemon=True)
        self.thread.start()

    def submit(self, question: str, on_done: Callable[[], None] | None = None) -> _Slot:
        slot = _Slot(question, on_done)
        with self.cond:
            if self.closed:
                raise RuntimeError("the server is closed")
            if self.max_queue is not None and self.pending >= self.max_queue:
                raise _Full
            self.queue.append(slot)
            self.pending += 1
            self.cond.notify_all()
        return slot

    def cancel(self, slot: _Slot) -> bool:
        """Take a request that has not joined a batch yet out of the queue (True if it was)."""
        with self.cond:
            try:
                self.queue.remove(slot)
            except ValueError:
                return False  # already in the running batch: it finishes with the batch
            self.pending -= 1
            return True

    def retry_after(self) -> int:
        """Seconds until a retry has a fair chance: the batches ahead of it, at the recent
        mean batch time (1 s before any batch has run)."""
        with self.cond:
            ahead = self.pending / self.max_batch
            mean = sum(self.seconds) / len(self.seconds) if self.seconds else 1.0
        return max(1, min(3600, math.ceil(ahead * mean)))

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and not self.closed

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
            t0 = time.perf_counter()
            try:
                results = self.moe.solve([s.question for s in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"solve returned {len(results)} results for {len(batch)}")
                for s, res in zip(batch, results):
                    s.result = res
            except BaseException as e:  # every request of the batch gets the error
                for s in batch:
                    s.error = e
            self.seconds.append(time.perf_counter() - t0)
            self.batches.append((len(batch), self.moe.last_stats))
            with self.cond:
                self.pending -= len(batch)
            for s in batch:
                s.finish()

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking requests; the collector answers what is queued, then ends."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout)


class _HTTPError(Exception):
    def __init__(
        self, status: int, message: str, kind: str = "invalid_request_error", **headers: str
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.headers = status, message, kind, headers


def _text(content: Any) -> str | None:
    """A message's text: a string, or the text parts of a content-part list."""
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p.get("text", ""), str) else ""
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return content if isinstance(content, str) else None


def _question(body: dict[str, Any], max_messages: int, max_chars: int) -> str:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("messages must be a non-empty list")
    if len(msgs) > max_messages:
        raise ValueError(f"too many messages: {len(msgs)} > max_messages={max_messages}")
    for i, m in enumerate(msgs):
        text = _text(m.get("content")) if isinstance(m, dict) else None
        if text is not None and len(text) > max_chars:
            raise ValueError(
                f"message {i} is too long: {len(text)} characters > max_message_chars={max_chars}"
            )
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            content = _text(m.get("content"))
            if not isinstance(content, str) or not content.strip():
                raise ValueError("the last user message has no text content")
            return content
    raise ValueError("messages holds no user message")


def _positive_int(name: str, v: Any, *, none: bool = False) -> None:
    if v is None and none:
        return
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be a positive int{' or None' if none else ''}, got {v!r}")


def _positive_seconds(name: str, v: Any) -> None:
    if v is not None and not (isinstance(v, (int, float)) and 0 < v < float("inf")):
        raise ValueError(f"{name} must be > 0 (seconds) or None, got {v!r}")


class SkillMoEApp:
    """The facade as an ASGI 3 application (:func:`make_app`). ``batches`` logs
    ``(size, stats)`` of the last 1024 ``solve`` calls; ``close()`` stops the batcher
    (also done by the ASGI lifespan shutdown)."""

    def __init__(
        self,
        moe: SkillMoE,
        *,
        model_name: str = "skillmoe",
        max_batch: int = 32,
        max_wait_ms: float = 50.0,
        request_timeout_s: float | None = None,
        max_queue: int = 1024,
        max_body_bytes: int = 1 << 20,
        max_messages: int = 128,
        max_message_chars: int = 32_768,
        api_key: str | None = None,
    ) -> None:
        if not isinstance(moe, SkillMoE):
            raise TypeError(f"moe must be a SkillMoE, got {type(moe).__name__}")
        _positive_int("max_batch", max_batch)
        if not isinstance(max_wait_ms, (int, float)) or not 0 <= max_wait_ms < float("inf"):
            raise ValueError(f"max_wait_ms must be finite and >= 0, got {max_wait_ms!r}")
        _positive_seconds("request_timeout_s", request_timeout_s)
        _positive_int("max_queue", max_queue)
        _positive_int("max_body_bytes", max_body_bytes)
        _positive_int("max_messages", max_messages)
        _positive_int("max_message_chars", max_message_chars)
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ValueError("api_key must be a non-empty string or None")
        self.moe = moe
        self.model_name = model_name
        self.request_timeout_s = request_timeout_s
        self.max_body_bytes = max_body_bytes
        self.max_messages = max_messages
        self.max_message_chars = max_message_chars
        self._key = None if api_key is None else f"Bearer {api_key}".encode()
        self.draining = False  # set when a graceful shutdown begins: no new requests
        self.batcher = _Batcher(moe, max_batch, max_wait_ms, max_queue)

    @property
    def batches(self) -> deque[tuple[int, ScheduleStats | None]]:
        return self.batcher.batches

    def close(self, timeout: float = 5.0) -> None:
        self.draining = True
        self.batcher.close(timeout)

    # ---- ASGI ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # websockets: refuse the handshake
            await send({"type": "websocket.close", "code": 1003})
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        extra: dict[str, str] = {}
        # a body still unread when the answer goes (413, 401, 404 on a POST) is not drained:
        # the answer says Connection: close and the server closes after it
        unread = [headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers]

        async def tracked() -> dict[str, Any]:
            msg = await receive()
            if msg["type"] != "http.request" or not msg.get("more_body", False):
                unread[0] = False
            return msg

        try:
            status, obj = await self._route(scope, headers, tracked)
        except _HTTPError as e:
            code = {400: None, 401: "invalid_api_key", 404: None, 413: "request_too_large"}
            status, extra = e.status, e.headers
            obj = {"error": {"message": e.message, "type": e.kind, "code": code.get(e.status)}}
        if self.draining or unread[0]:
            extra = {**extra, "connection": "close"}
        data = json.dumps(obj).encode()
        hdrs = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        hdrs += [(k.encode(), v.encode()) for k, v in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": hdrs})
        await send({"type": "http.response.body", "body": data})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await asyncio.get_running_loop().run_in_executor(None, self.close)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _auth(self, headers: dict[bytes, bytes]) -> None:
        if self._key is not None and not hmac.compare_digest(
            headers.get(b"authorization", b""), self._key
        ):
            raise _HTTPError(
                401,
                "missing or wrong API key: send 'Authorization: Bearer <key>'",
                "authentication_error",
                **{"www-authenticate": "Bearer"},
            )

    async def _route(
        self, scope: Scope, headers: dict[bytes, bytes], receive: Receive
    ) -> tuple[int, dict[str, Any]]:
        path = scope["path"].rstrip("/")
        method = scope["method"]
        routes = {
            "/health": "GET",
            "/v1/models": "GET",
            "/models": "GET",
            "/v1/chat/completions": "POST",
            "/chat/completions": "POST",
        }
        if path not in routes:
            raise _HTTPError(404, f"no route {scope['path']}", "not_found_error")
        if method != routes[path] and not (method == "HEAD" and routes[path] == "GET"):
            raise _HTTPError(405, f"{method} not allowed on {path}", allow=routes[path])
        if path == "/health":  # no key needed (as vLLM's /health): load balancers probe it
            if self.draining or not self.batcher.alive:
                raise _HTTPError(503, "shutting down", "service_unavailable")
            return 200, {"status": "ok"}
        self._auth(headers)
        if routes[path] == "GET":
            data = [{"id": self.model_name, "object": "model", "owned_by": "icml26-skillmoe"}]
            return 200, {"object": "list", "data": data}
        question = self._parse(await self._body(headers, receive))
        return await self._solve(question, receive)

    async def _body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes:
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                n = int(declared)
            except ValueError:
                raise _HTTPError(400, "Content-Length is not an integer") from None
            if n > self.max_body_bytes:  # refused before one byte of the body is read
                raise _HTTPError(
                    413, f"request body of {n} bytes > max_body_bytes={self.max_body_bytes}"
                )
        chunks: list[bytes] = []
        size = 0

        async def read() -> None:
            nonlocal size
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    raise _HTTPError(400, "the client disconnected")
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > self.max_body_bytes:  # chunked, or more than its Content-Length
                    raise _HTTPError(413, f"request body > max_body_bytes={self.max_body_bytes}")
                chunks.append(chunk)
                if not msg.get("more_body", False):
                    return

        try:
            await asyncio.wait_for(read(), BODY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise _HTTPError(
                408, f"the request body did not arrive within {BODY_TIMEOUT_S} s"
            ) from None
        return b"".join(chunks)

    def _parse(self, raw: bytes) -> str:
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
            if body.get("model") not in (None, self.model_name):
                raise ValueError(
                    f"unknown model {body.get('model')!r}; this server serves {self.model_name!r}"
                )
            if body.get("stream"):
                raise ValueError(
                    "stream=true is not supported: the answer exists only once the "
                    "aggregator has synthesised the experts' responses; send stream=false"
                )
            if body.get("n", 1) != 1:
                raise ValueError("only n=1 is supported")
            return _question(body, self.max_messages, self.max_message_chars)
        except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
            raise _HTTPError(400, str(e)) from None

    async def _solve(self, question: str, receive: Receive) -> tuple[int, dict[str, Any]]:
        if self.draining:
            raise _HTTPError(
                503, "the server is shutting down", "service_unavailable", **{"retry-after": "1"}
            )
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:  # from the batcher thread
            def resolve() -> None:
                if not fut.done():
                    fut.set_result(None)

            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop is gone (server stopped): nobody is waiting
                pass

        try:
            slot = self.batcher.submit(question, wake)
        except _Full:
            raise _HTTPError(
                503,
                f"over capacity: {self.batcher.max_queue} requests are waiting; retry later",
                "service_unavailable",
                **{"retry-after": str(self.batcher.retry_after())},
            ) from None
        except RuntimeError as e:
            raise _HTTPError(503, str(e), "service_unavailable", **{"retry-after": "1"}) from None

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        gone = asyncio.ensure_future(disconnected())  # completes when the client leaves
        try:
            done, _ = await asyncio.wait(
                {fut, gone}, timeout=self.request_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            gone.cancel()
        if fut not in done:
            self.batcher.cancel(slot)  # still queued: it leaves the queue
            if gone in done and not gone.cancelled():
                raise _HTTPError(400, "the client disconnected")
            raise _HTTPError(
                504, f"the batch did not finish within {self.request_timeout_s} s", "timeout"
            )
        if slot.error is not None or slot.result is None:  # the pipeline's own error
            err = slot.error
            raise _HTTPError(500, f"{type(err).__name__}: {err}", "server_error")
        return 200, self._completion(slot.result)

    def _completion(self, res: SkillMoEResult) -> dict[str, Any]:
        content = (
            res.output
            if res.output
            else f"The answer is ({res.answer})"
            if self.moe.task == "choice"
            else f"The answer is \\boxed{{{res.answer}}}"
        )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
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
        }


def make_app(moe: SkillMoE, **limits: Any) -> SkillMoEApp:
    """The facade as an ASGI app, for any ASGI server (``uvicorn``, ``hypercorn``) or to mount
    in another app; keyword arguments as :class:`SkillMoEApp` (and :func:`make_server`)."""
    return SkillMoEApp(moe, **limits)


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as e:
        raise ImportError(
            'the facade\'s server needs uvicorn: pip install "icml26-skillmoe[serve]" '
            "(or serve make_app(moe) with another ASGI server)"
        ) from e
    return uvicorn


class SkillMoEServer:
    """The facade on uvicorn (:func:`make_server`), bound and listening from construction.

    ``serve_forever()`` runs it in the calling thread (from the main thread, SIGINT/SIGTERM
    shut it down gracefully); ``shutdown()`` from another thread shuts it down gracefully and
    returns once ``serve_forever`` has returned; ``server_close()`` releases the socket and
    stops the batcher. ``server_address`` is the bound ``(host, port)``; ``batches`` logs
    ``(size, stats)`` of the last 1024 ``solve`` calls; ``app`` is the ASGI app."""

    def __init__(
        self,
        app: SkillMoEApp,
        host: str,
        port: int,
        *,
        backlog: int = 2048,
        shutdown_timeout_s: float | None = 60.0,
        log_level: str = "warning",
        log_config: Any = None,
    ) -> None:
        uvicorn = _uvicorn()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(backlog)  # connections queue from now on, before serve_forever
        except BaseException:
            sock.close()
            raise
        self.app = app
        self.socket = sock
        self.server_address = sock.getsockname()[:2]
        config = uvicorn.Config(
            app,
            backlog=backlog,
            timeout_graceful_shutdown=shutdown_timeout_s,
            lifespan="on",
            log_level=log_level,
            log_config=log_config,
            access_log=False,
            server_header=False,
        )

        class _Server(uvicorn.Server):  # type: ignore[misc, name-defined]
            async def shutdown(self, sockets: Any = None) -> None:
                app.draining = True  # /health 503, new requests 503 while the queue drains
                await super().shutdown(sockets)

        self._server = _Server(config)
        self._serving = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._shutdown_timeout = shutdown_timeout_s

    @property
    def batches(self) -> deque[tuple[int, ScheduleStats | None]]:
        return self.app.batches

    def serve_forever(self) -> None:
        self._stopped.clear()
        self._serving.set()
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._serving.clear()
            self._stopped.set()

    def shutdown(self, timeout: float | None = None) -> None:
        """Graceful: stop accepting, answer the admitted requests (at most
        ``shutdown_timeout_s``), then return (also when ``serve_forever`` never ran)."""
        self._server.should_exit = True
        if timeout is None and self._shutdown_timeout is not None:
            timeout = self._shutdown_timeout + 10.0
        self._stopped.wait(timeout)

    def server_close(self) -> None:
        self.socket.close()
        self.app.close()

    def __enter__(self) -> SkillMoEServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server_close()


def make_server(
    moe: SkillMoE,
    host: str = "127.0.0.1",
    port: int = 8001,
    *,
    model_name: str = "skillmoe",
    max_batch: int = 32,
    max_wait_ms: float = 50.0,
    request_timeout_s: float | None = None,
    max_queue: int = 1024,
    max_body_bytes: int = 1 << 20,
    max_messages: int = 128,
    max_message_chars: int = 32_768,
    api_key: str | None = None,
    backlog: int = 2048,
    shutdown_timeout_s: float | None = 60.0,
    log_level: str = "warning",
) -> SkillMoEServer:
    """A bound, listening (not yet serving) server on ``host:port`` (loopback by default;
    ``port=0`` picks a free port: ``server.server_address``). Call ``serve_forever()`` (or run
    it in a thread), and ``shutdown()`` then ``server_close()`` to stop. Needs uvicorn
    (``pip install "icml26-skillmoe[serve]"``).

    ``max_batch`` (default 32): the most requests one ``solve`` takes; ``max_wait_ms``
    (default 50 ms): how long the collector waits after the first request of a batch for
    more (a latency cost paid only when traffic is light; 0 batches only what is already
    waiting). ``request_timeout_s``: a request whose batch has not finished by then gets
    HTTP 504 (default: wait; an LLM batch can take minutes). ``max_queue`` (1024): requests
    admitted and unanswered, beyond which a request gets 503 with ``Retry-After``;
    ``max_body_bytes`` (1 MiB, 413), ``max_messages`` (128) and ``max_message_chars``
    (32768, 400) bound one request; ``api_key``: require ``Authorization: Bearer <key>`` on
    ``/v1/*``; ``backlog`` (2048): the listen queue; ``shutdown_timeout_s`` (60): the most a
    graceful shutdown waits for admitted requests (None: until they are answered)."""
    _positive_int("backlog", backlog)
    _positive_seconds("shutdown_timeout_s", shutdown_timeout_s)
    app = SkillMoEApp(
        moe,
        model_name=model_name,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        request_timeout_s=request_timeout_s,
        max_queue=max_queue,
        max_body_bytes=max_body_bytes,
        max_messages=max_messages,
        max_message_chars=max_message_chars,
        api_key=api_key,
    )
    try:
        return SkillMoEServer(
            app,
            host,
            port,
            backlog=backlog,
            shutdown_timeout_s=shutdown_timeout_s,
            log_level=log_level,
        )
    except BaseException:
        app.close()
        raise


# ---- command line ---------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _load_moe(spec: str) -> SkillMoE:
    mod, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"--moe {spec!r}: expected MODULE:CALLABLE")
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    moe = obj() if callable(obj) and not isinstance(obj, SkillMoE) else obj
    if not isinstance(moe, SkillMoE):
        raise SystemExit(f"--moe {spec!r} gave a {type(moe).__name__}, not a SkillMoE")
    return moe


def _moe_from_args(a: argparse.Namespace) -> SkillMoE:
    if a.moe:
        return _load_moe(a.moe)
    from ..backends import OpenAIChatGenerator
    from ..profiles import ProfileBank
    from ..skills import LLMSkillAnnotator

    experts: dict[str, Any] = {}
    for spec in a.expert:
        name, sep, url = spec.partition("=")
        if not sep or not name or not url:
            raise SystemExit(f"--expert {spec!r}: expected NAME=URL (URL: the API root, .../v1)")
        experts[name] = OpenAIChatGenerator(name, url, api_key=a.expert_api_key)
    annotator = None
    if a.annotator:
        name, sep, url = a.annotator.partition("=")
        gen = OpenAIChatGenerator(name, url, api_key=a.expert_api_key) if sep else None
        if gen is None and name not in experts:
            raise SystemExit(f"--annotator {name!r} is neither an --expert nor NAME=URL")
        annotator = LLMSkillAnnotator(gen or experts[name])
    return SkillMoE(
        ProfileBank.load(a.profiles),
        experts,
        aggregator=a.aggregator,
        annotator=annotator,
        task=a.task,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m icml26_skillmoe.serve",
        description="Serve a Skill-MoE pipeline as one OpenAI-compatible model "
        "(POST /v1/chat/completions, GET /v1/models, GET /health) on uvicorn.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    src = p.add_argument_group("the pipeline (either --moe, or --profiles with --expert)")
    src.add_argument("--moe", help="MODULE:CALLABLE returning a SkillMoE (or a SkillMoE object)")
    src.add_argument("--profiles", help="a ProfileBank JSON (ProfileBank.save)")
    src.add_argument(
        "--expert",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="an expert behind an OpenAI-compatible API root (vllm serve: http://HOST:8000/v1); "
        "NAME is the served model and the profile's name; repeat for each",
    )
    src.add_argument("--aggregator", help="the expert that synthesises (default: majority vote)")
    src.add_argument("--annotator", help="the keyword annotator: an expert's NAME, or NAME=URL")
    src.add_argument("--task", default="choice", choices=["choice", "math"])
    src.add_argument("--expert-api-key", default=None, help="API key sent to the experts")
    net = p.add_argument_group("serving")
    net.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    net.add_argument("--port", type=int, default=8001)
    net.add_argument(
        "--api-key",
        default=os.environ.get("SKILLMOE_API_KEY"),
        help="require 'Authorization: Bearer KEY' on /v1/* (default: $SKILLMOE_API_KEY)",
    )
    net.add_argument("--model-name", default="skillmoe", help="the served model's id")
    net.add_argument("--max-batch", type=int, default=32, help="most requests per solve")
    net.add_argument(
        "--max-wait-ms", type=float, default=50.0, help="collect a batch this long after its first"
    )
    net.add_argument(
        "--request-timeout", type=float, default=None, help="seconds before a request gets 504"
    )
    net.add_argument("--max-queue", type=int, default=1024, help="unanswered requests before 503")
    net.add_argument("--max-body-bytes", type=int, default=1 << 20, help="413 above")
    net.add_argument("--max-messages", type=int, default=128, help="400 above")
    net.add_argument("--max-message-chars", type=int, default=32_768, help="400 above")
    net.add_argument("--backlog", type=int, default=2048, help="listen queue length")
    net.add_argument(
        "--shutdown-timeout",
        type=float,
        default=60.0,
        help="on SIGINT/SIGTERM, wait at most this for admitted requests",
    )
    net.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def main(argv: Sequence[str] | None = None) -> None:
    p = _parser()
    a = p.parse_args(argv)
    if not a.moe and not (a.profiles and a.expert):
        p.error("give --moe MODULE:CALLABLE, or --profiles and at least one --expert")
    if not _is_loopback(a.host) and not a.api_key:
        log.warning("serving on %s without --api-key: anyone who reaches it can use it", a.host)
    moe = _moe_from_args(a)
    log_config = _uvicorn().config.LOGGING_CONFIG

    app = SkillMoEApp(
        moe,
        model_name=a.model_name,
        max_batch=a.max_batch,
        max_wait_ms=a.max_wait_ms,
        request_timeout_s=a.request_timeout,
        max_queue=a.max_queue,
        max_body_bytes=a.max_body_bytes,
        max_messages=a.max_messages,
        max_message_chars=a.max_message_chars,
        api_key=a.api_key,
    )
    server = SkillMoEServer(
        app,
        a.host,
        a.port,
        backlog=a.backlog,
        shutdown_timeout_s=a.shutdown_timeout,
        log_level=a.log_level,
        log_config=log_config,
    )
    host, port = server.server_address
    log.warning("skillmoe: serving %r on http://%s:%s/v1", a.model_name, host, port)
    try:
        server.serve_forever()
    finally:
        server.server_close()
