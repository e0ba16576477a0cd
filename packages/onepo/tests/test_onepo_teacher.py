"""OpenAITeacher against a loopback OpenAI-compatible server (no network)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from icml26_onepo import OpenAITeacher


class _Server:
    """A loopback ``/v1/chat/completions``; ``script`` is a list of actions, one per request:
    ("ok", content[, reasoning]), ("status", code), ("sleep", seconds), ("garbage",)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "json": json.loads(body)}
                )
                action = outer.script.pop(0) if outer.script else ("ok", "default")
                if action[0] == "sleep":
                    time.sleep(action[1])
                    action = ("ok", "late")
                if action[0] == "status":
                    self.send_response(action[1])
                    self.end_headers()
                    return
                if action[0] == "garbage":
                    data = b"not json"
                else:
                    msg = {"role": "assistant", "content": action[1]}
                    if len(action) > 2:
                        msg["reasoning_content"] = action[2]
                    data = json.dumps({"choices": [{"message": msg}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client timed out and closed the socket
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive(), "loopback server did not stop within 5 s"


@pytest.mark.timeout(30)
def test_request_format_and_reply():
    with _Server([("ok", "91"), ("ok", "answer", "two steps")]) as srv:
        t = OpenAITeacher(srv.url, "teach-1", api_key="k3y", max_tokens=16, timeout=5)
        assert t.generate("12+7=") == "91"
        assert t.generate([{"role": "user", "content": "x"}]) == (
            "<think>\ntwo steps\n</think>\n\nanswer"
        )
    first = srv.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["Authorization"] == "Bearer k3y"
    assert first["json"] == {
        "model": "teach-1",
        "messages": [{"role": "user", "content": "12+7="}],
        "max_tokens": 16,
    }
    # a URL that already names the route is used as is
    assert OpenAITeacher(srv.url + "/chat/completions/").endpoint == srv.url + "/chat/completions"


@pytest.mark.timeout(30)
def test_retries_then_succeeds_or_gives_up():
    with _Server([("status", 500), ("garbage",), ("ok", "7")]) as srv:
        t = OpenAITeacher(srv.url, max_retries=3, timeout=5, backoff_s=0.0)
        assert t.generate("3+4=") == "7"
        assert len(srv.requests) == 3 and t.failures == 0
    with _Server([("status", 503)] * 2) as srv:
        t = OpenAITeacher(srv.url, max_retries=2, timeout=5, backoff_s=0.0)
        assert t.generate("3+4=") is None  # the group has no teacher this step
        assert len(srv.requests) == 2 and t.failures == 1


@pytest.mark.timeout(30)
def test_timeout_is_bounded():
    with _Server([("sleep", 3.0), ("sleep", 3.0)]) as srv:
        t = OpenAITeacher(srv.url, max_retries=2, timeout=0.3, backoff_s=0.0)
        start = time.monotonic()
        assert t.generate("slow") is None
        elapsed = time.monotonic() - start
    assert elapsed < 2.5, f"two 0.3 s attempts took {elapsed:.1f} s"


@pytest.mark.timeout(30)
def test_generate_many_keeps_order_and_concurrency():
    script = [("ok", str(i)) for i in range(6)]
    with _Server(script) as srv:
        t = OpenAITeacher(srv.url, max_concurrency=1, timeout=5)  # 1 worker: script order
        assert t.generate_many([f"p{i}" for i in range(6)]) == [str(i) for i in range(6)]
        assert [r["json"]["messages"][0]["content"] for r in srv.requests] == [
            f"p{i}" for i in range(6)
        ]
        assert t.generate_many([]) == []


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="api_url"):
        OpenAITeacher("ftp://x")
    with pytest.raises(ValueError, match="timeout"):
        OpenAITeacher("http://127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        OpenAITeacher("http://127.0.0.1:1", max_retries=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAITeacher("http://127.0.0.1:1", max_concurrency=0)
    with pytest.raises(TypeError, match="prompt"):
        OpenAITeacher("http://127.0.0.1:1").generate(3)  # type: ignore[arg-type]
