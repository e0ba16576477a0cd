"""Online teacher: an OpenAI-compatible ``chat/completions`` client (stdlib only).

OnePO's teacher output is usually cached in the dataset (``teacher_response``); the official
manager can instead ask an OpenAI-compatible endpoint for the prompts that have no cached
output (OnePO.sh ``ONLINE_TEACHER_ENABLED``, ``TEACHER_MODEL``, ``TEACHER_MAX_TOKENS=8192``,
``TEACHER_MAX_CONCURRENCY=64``, ``TEACHER_TIMEOUT=180``, ``max_retries=3``). Semantics
reimplemented from that description:

- POST ``{"model", "messages", "max_tokens"}`` to ``api_url`` (``/chat/completions`` is
  appended unless the URL already ends with it), ``Authorization: Bearer <key>``;
- the text is ``choices[0].message.content``; a ``reasoning_content`` is prepended as
  ``<think>\\n…\\n</think>\\n\\n``;
- any HTTP, network, timeout or format error is retried up to ``max_retries`` attempts in all
  (backoff ``min(2**attempt, 8) · backoff_s`` plus jitter), then the teacher is *missing* for
  that prompt (None): the group has no teacher candidate this step, training goes on.

Deviation: the official client returns None when no API key is set; here the key is optional
(``api_key`` or ``$ONEPO_TEACHER_API_KEY``) so that local servers (vLLM, SGLang) work without
one. Uses threads (``max_concurrency``) instead of asyncio/aiohttp.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["OpenAITeacher"]

Messages = list[dict[str, Any]]


class OpenAITeacher:
    """Teacher completions from an OpenAI-compatible server; thread-safe, bounded concurrency.

    ``generate(prompt)`` takes a string (sent as one user message) or a message list and
    returns the teacher text, or None once every attempt failed. ``generate_many`` runs up to
    ``max_concurrency`` requests at a time and keeps the input order.
    """

    def __init__(
        self,
        api_url: str,
        model: str = "gpt-5.4",
        *,
        api_key: str | None = None,
        max_tokens: int = 8192,
        timeout: float = 180.0,
        max_retries: int = 3,
        max_concurrency: int = 64,
        backoff_s: float = 1.0,
    ) -> None:
        if not isinstance(api_url, str) or not api_url.startswith(("http://", "https://")):
            raise ValueError(f"`api_url` must be an http(s) URL, got {api_url!r}")
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"`timeout` must be a finite number of seconds > 0, got {timeout!r}")
        if not isinstance(max_retries, int) or max_retries < 1:
            raise ValueError(f"`max_retries` must be an int >= 1 (attempts), got {max_retries!r}")
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"`max_concurrency` must be an int >= 1, got {max_concurrency!r}")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"`max_tokens` must be an int >= 1, got {max_tokens!r}")
        if not (math.isfinite(backoff_s) and backoff_s >= 0):
            raise ValueError(f"`backoff_s` must be finite and >= 0, got {backoff_s!r}")
        url = api_url.rstrip("/")
        self.endpoint = url if url.endswith("chat/completions") else url + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("ONEPO_TEACHER_API_KEY")
        self.max_tokens = max_tokens
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.backoff_s = float(backoff_s)
        self.failures = 0  # prompts whose every attempt failed

    @staticmethod
    def messages(prompt: str | Messages) -> Messages:
        if isinstance(prompt, str):
            return [{"role": "user", "content": prompt}]
        if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
            return prompt
        raise TypeError(f"`prompt` must be a str or a message list, got {type(prompt).__name__}")

    def _request(self, messages: Messages) -> str:
        body = json.dumps(
            {"model": self.model, "messages": messages, "max_tokens": self.max_tokens}
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            payload = json.loads(resp.read().decode())
        message = payload["choices"][0]["message"]
        content = message.get("content") or ""
        reasoning = message.get("reasoning_content")
        if not isinstance(content, str):
            raise TypeError("message content is not a string")
        return f"<think>\n{reasoning}\n</think>\n\n{content}" if reasoning else content

    def generate(self, prompt: str | Messages) -> str | None:
        """The teacher's text for one prompt, or None after ``max_retries`` failed attempts."""
        messages = self.messages(prompt)
        for attempt in range(self.max_retries):
            try:
                return self._request(messages)
            except (
                urllib.error.URLError,  # includes HTTPError (4xx/5xx)
                OSError,  # connection reset, socket timeout
                TimeoutError,
                ValueError,  # bad JSON
                KeyError,
                IndexError,
                TypeError,
            ):
                if attempt + 1 < self.max_retries and self.backoff_s > 0:
                    time.sleep(self.backoff_s * (min(2**attempt, 8) + random.random()))
        self.failures += 1
        return None

    def generate_many(self, prompts: Sequence[str | Messages]) -> list[str | None]:
        """`generate` for each prompt, ``max_concurrency`` at a time, in input order."""
        if not prompts:
            return []
        workers = min(self.max_concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self.generate, prompts))
