"""A policy backed by any OpenAI-compatible chat server (extra ``[openai]``).

vLLM (``vllm serve MODEL``), llama.cpp (``llama-server``), Ollama (``/v1``) and hosted APIs
all speak ``POST /v1/chat/completions``. Two modes:

- text (default): the model writes the action in the reply text (XML tags or JSON), the
  official environment's format;
- ``use_tools=True``: the environment's ``tool_schemas()`` are sent as function tools (with
  ``parallel_tool_calls=False``); a reply with tool calls comes back as the assistant message
  ``{"role": "assistant", "content": ..., "tool_calls": [{"id", "type", "function"}]}``, which
  ``run_episode`` keeps in the history and answers with ``role: "tool"`` messages by
  ``tool_call_id`` (several calls in one turn are refused with an error, see ``agent``).
"""

from __future__ import annotations

import os
from typing import Any

from openai import OpenAI

from .env import tool_schemas


class OpenAIChatPolicy:
    """``policy(messages) -> str`` through ``client.chat.completions.create``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        use_tools: bool = False,
        timeout: float = 600.0,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise ValueError("model: name the served model (e.g. 'Qwen/Qwen3-8B')")
        self.model, self.temperature, self.max_tokens, self.use_tools = (
            model,
            temperature,
            max_tokens,
            use_tools,
        )
        key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"  # local servers ignore it
        self.client = OpenAI(
            base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries
        )

    def __call__(self, messages: list[dict[str, Any]]) -> str | dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.use_tools:
            kwargs["tools"] = tool_schemas()
            kwargs["parallel_tool_calls"] = False
        resp = self.client.chat.completions.create(
            model=self.model,
            messages=messages,  # type: ignore[arg-type]
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **kwargs,
        )
        msg = resp.choices[0].message
        calls = getattr(msg, "tool_calls", None) or []
        if calls:
            return {
                "role": "assistant",
                "content": msg.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in calls
                ],
            }
        return msg.content or ""
