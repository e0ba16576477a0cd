"""Fixtures: a fake OpenAI-compatible server on loopback, tiny random-init causal LMs on disk."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class FakeOpenAI:
    """A chat-completions server whose models are Python functions ``(model, prompt) -> text``.

    ``fail[model] = n`` makes the next n requests to that model return HTTP 500;
    ``fail_always`` holds models (or prompt substrings) that always fail. ``requests`` logs
    every (model, prompt)."""

    def __init__(self, respond: Callable[[str, str], str]) -> None:
        self.respond = respond
        self.fail: dict[str, int] = {}
        self.fail_always: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                if not self.path.endswith("/v1/chat/completions"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                    with outer.lock:
                        outer.requests.append(("404", self.path))
                    self._send(404, {"error": "no route"})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model = body["model"]
                prompt = body["messages"][-1]["content"]
                with outer.lock:
                    outer.requests.append((model, prompt))
                    if outer.fail.get(model, 0) > 0:
                        outer.fail[model] -= 1
                        self._send(500, {"error": "transient"})
                        return
                    if model in outer.fail_always or any(s in prompt for s in outer.fail_always):
                        self._send(503, {"error": "down"})
                        return
                text = outer.respond(model, prompt)
                self._send(
                    200,
                    {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]},
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        host, port = self.server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def digit_in(prompt: str) -> int:
    """The first integer after 'Question:' in a prompt (the fake experts' 'question')."""
    m = re.search(r"Question: .*?(\d+)", prompt)
    return int(m.group(1)) if m else -1


@pytest.fixture()
def fake_openai() -> Iterator[Callable[[Callable[[str, str], str]], FakeOpenAI]]:
    servers: list[FakeOpenAI] = []

    def start(respond: Callable[[str, str], str]) -> FakeOpenAI:
        s = FakeOpenAI(respond)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'()-+=\n"


def save_tiny_lm(path: Any, arch: str, seed: int) -> None:
    """A random-init causal LM built from a config, and a char tokenizer, saved to ``path``."""
    import torch
    from tokenizers import Tokenizer, models
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
    )
    torch.manual_seed(seed)
    common = dict(vocab_size=len(vocab), pad_token_id=0, eos_token_id=1, bos_token_id=1)
    if arch == "llama":
        cfg = LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            **common,
        )
        model = LlamaForCausalLM(cfg)
    else:
        cfg = GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=1024, **common)
        model = GPT2LMHeadModel(cfg)
    model.save_pretrained(path)
    tok.save_pretrained(path)
