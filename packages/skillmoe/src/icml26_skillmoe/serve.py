"""An OpenAI-compatible facade: Skill-MoE as one virtual model (``skillmoe``).

Any OpenAI client (``openai``, LangChain, curl) can then call the whole pipeline::

    server = make_server(moe, port=8001)      # http://127.0.0.1:8001/v1
    server.serve_forever()

``POST /v1/chat/completions`` takes the last user message as the question and returns the
aggregated answer as the assistant message, with the routing in a ``skillmoe`` field
(keywords, experts, votes, answer); ``GET /v1/models`` lists the virtual model. Streaming and
``n > 1`` are refused with HTTP 400.

Standard library only (``http.server.ThreadingHTTPServer``): the facade has two routes and no
streaming, so an ASGI stack (starlette + uvicorn) would add dependencies without adding
anything; the pipeline call itself is serialised by a lock (one batch resident at a time,
which is what the one-GPU batch scheduler needs anyway).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .pipeline import SkillMoE

__all__ = ["make_server"]


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
    moe: SkillMoE, host: str = "127.0.0.1", port: int = 8001, *, model_name: str = "skillmoe"
) -> ThreadingHTTPServer:
    """A ready (not yet serving) HTTP server; ``port=0`` picks a free port
    (``server.server_address``). Call ``serve_forever()`` (or run it in a thread)."""
    if not isinstance(moe, SkillMoE):
        raise TypeError(f"moe must be a SkillMoE, got {type(moe).__name__}")
    lock = threading.Lock()

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
                    raise ValueError("stream=true is not supported")
                if body.get("n", 1) != 1:
                    raise ValueError("only n=1 is supported")
                question = _question(body)
            except (ValueError, json.JSONDecodeError) as e:
                self._error(400, str(e))
                return
            try:
                with lock:
                    res = moe.solve([question])[0]
            except Exception as e:  # the pipeline's own error, reported to the client
                self._error(500, f"{type(e).__name__}: {e}")
                return
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

    return ThreadingHTTPServer((host, port), Handler)
