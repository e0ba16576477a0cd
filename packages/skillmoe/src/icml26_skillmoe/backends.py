"""Generation backends behind one protocol.

A :class:`Generator` turns a batch of user prompts into a batch of completions::

    gen.generate(prompts, temperature=0.7, max_tokens=4096) -> list[str]

- :class:`OpenAIChatGenerator`: any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM's
  server, llama.cpp's ``llama-server``, Ollama, SGLang, a hosted API) over ``httpx`` (extra
  ``openai``), with retries; an endpoint that still fails raises :class:`GenerationError`
  carrying the answers already finished.
- :class:`TransformersGenerator`: a local Hugging Face causal LM (extra ``transformers``), with
  ``load()`` / ``unload()`` so that :class:`~icml26_skillmoe.BatchScheduler` holds one model
  at a time (upstream does the same with vLLM engines; ``vllm`` itself is not a dependency: it
  pins torch. Point :class:`OpenAIChatGenerator` at ``vllm serve`` instead).
- :class:`FunctionGenerator`: wraps a plain ``prompts -> texts`` callable (tests, stubs).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "FunctionGenerator",
    "GenerationError",
    "Generator",
    "OpenAIChatGenerator",
    "TransformersGenerator",
    "call_generate",
]


@runtime_checkable
class Generator(Protocol):
    """What Skill-MoE needs from a model: batched chat completion of single-turn user prompts."""

    def generate(
        self, prompts: Sequence[str], *, temperature: float = 0.7, max_tokens: int = 4096
    ) -> list[str]: ...


class GenerationError(RuntimeError):
    """A backend failed after its retries. ``partial[i]`` is the finished completion of prompt
    ``i`` or ``None``; ``failed`` lists the indices that did not finish."""

    def __init__(self, message: str, partial: list[str | None]) -> None:
        super().__init__(message)
        self.partial = partial
        self.failed = [i for i, p in enumerate(partial) if p is None]


def call_generate(
    generator: Any, prompts: Sequence[str], *, temperature: float, max_tokens: int
) -> list[str]:
    """Call a :class:`Generator` or a plain callable; check that one text comes back per prompt."""
    prompts = list(prompts)
    if hasattr(generator, "generate"):
        out = generator.generate(prompts, temperature=temperature, max_tokens=max_tokens)
    elif callable(generator):
        out = generator(prompts)
    else:
        raise TypeError(
            f"generator must have .generate(prompts, ...) or be callable, got {type(generator).__name__}"
        )
    out = list(out)
    if len(out) != len(prompts):
        raise ValueError(f"generator returned {len(out)} texts for {len(prompts)} prompts")
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"generator returned a {type(t).__name__} for prompt {i}, expected str")
    return out


class FunctionGenerator:
    """A :class:`Generator` from ``fn(prompts) -> texts`` (sampling arguments ignored)."""

    def __init__(self, fn: Callable[[list[str]], Sequence[str]]) -> None:
        self.fn = fn

    def generate(
        self, prompts: Sequence[str], *, temperature: float = 0.7, max_tokens: int = 4096
    ) -> list[str]:
        return list(self.fn(list(prompts)))


# ---------------------------------------------------------------------------- HTTP
class OpenAIChatGenerator:
    """Chat completions from an OpenAI-compatible server.

    ``base_url`` is the API root (``http://127.0.0.1:8000/v1`` for ``vllm serve``,
    ``http://127.0.0.1:11434/v1`` for Ollama, ``http://127.0.0.1:8080/v1`` for llama.cpp);
    ``model`` the served model name. Each prompt is one request (the server batches
    concurrent requests itself), ``max_concurrency`` at a time. A request that fails with a
    connection error, a timeout, 429 or 5xx is retried ``max_retries`` times with exponential
    backoff; then :class:`GenerationError` is raised with every finished completion kept.
    """

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_concurrency: int = 8,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must name the served model")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        import httpx

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._httpx = httpx
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def _one(self, prompt: str, temperature: float, max_tokens: int) -> str:
        httpx = self._httpx
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": max_tokens,
            **self.extra_body,
        }
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                resp = self._client.post(f"{self.base_url}/chat/completions", json=body)
            except httpx.TransportError as e:  # connection refused / reset, timeouts
                last = e
                continue
            if resp.status_code == 429 or resp.status_code >= 500:
                last = RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]}")
                continue
            if resp.status_code >= 400:  # a client error does not get better by retrying
                raise ValueError(
                    f"{self.base_url} rejected the request: HTTP {resp.status_code}: {resp.text[:500]}"
                )
            try:
                content = resp.json()["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise ValueError(
                    f"{self.base_url} returned no chat completion: {resp.text[:500]}"
                ) from e
            return content if isinstance(content, str) else ""
        raise RuntimeError(f"{self.max_retries + 1} attempts failed: {last}")

    def generate(
        self, prompts: Sequence[str], *, temperature: float = 0.7, max_tokens: int = 4096
    ) -> list[str]:
        prompts = list(prompts)
        out: list[str | None] = [None] * len(prompts)
        errors: dict[int, Exception] = {}
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futs = {
                i: pool.submit(self._one, p, temperature, max_tokens) for i, p in enumerate(prompts)
            }
            for i, fut in futs.items():
                try:
                    out[i] = fut.result()
                except Exception as exc:
                    errors[i] = exc
        if errors:
            first, err = next(iter(errors.items()))
            raise GenerationError(
                f"{self.base_url} (model {self.model!r}) failed on {len(errors)} of {len(prompts)} "
                f"prompts after {self.max_retries} retries; first (prompt {first}): {err}",
                out,
            )
        return [o for o in out if o is not None]

    def close(self) -> None:
        self._client.close()


# ---------------------------------------------------------------------------- local
class TransformersGenerator:
    """A local causal LM from a path or hub id, loaded on :meth:`load` and freed on
    :meth:`unload` (the scheduler calls both; :meth:`generate` loads lazily if needed).

    Prompts are wrapped with the tokenizer's chat template when it has one (as upstream),
    left-padded and decoded in batches of ``batch_size``; ``temperature == 0`` is greedy.
    ``seed`` makes sampling repeatable per call.
    """

    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        device: str | None = None,
        dtype: Any = None,
        batch_size: int = 16,
        seed: int | None = 0,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_name = model
        self.tokenizer_name = tokenizer or model
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self.seed = seed
        self.model_kwargs = dict(model_kwargs or {})
        self.model: Any = None
        self.tokenizer: Any = None

    @property
    def loaded(self) -> bool:
        return self.model is not None

    def load(self) -> TransformersGenerator:
        if self.model is not None:
            return self
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tok = AutoTokenizer.from_pretrained(self.tokenizer_name)
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        kwargs = dict(self.model_kwargs)
        if self.dtype is not None:
            kwargs["dtype"] = self.dtype
        model: Any = AutoModelForCausalLM.from_pretrained(self.model_name, **kwargs)
        model = model.to(device).eval()
        self.model, self.tokenizer, self._device = model, tok, device
        return self

    def unload(self) -> None:
        """Drop the weights and return the memory (gc, then the CUDA cache)."""
        if self.model is None:
            return
        self.model = None
        self.tokenizer = None
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def memory_bytes(self) -> int:
        """Bytes held by the loaded weights and buffers (0 when unloaded)."""
        if self.model is None:
            return 0
        params = sum(p.numel() * p.element_size() for p in self.model.parameters())
        bufs = sum(b.numel() * b.element_size() for b in self.model.buffers())
        return int(params + bufs)

    def _format(self, prompt: str) -> str:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            return str(
                tok.apply_chat_template(
                    [{"role": "user", "content": prompt}],
                    tokenize=False,
                    add_generation_prompt=True,
                )
            )
        return prompt

    def generate(
        self, prompts: Sequence[str], *, temperature: float = 0.7, max_tokens: int = 4096
    ) -> list[str]:
        import torch

        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.load()
        tok, model = self.tokenizer, self.model
        if self.seed is not None:
            torch.manual_seed(self.seed)
        out: list[str] = []
        prompts = list(prompts)
        for start in range(0, len(prompts), self.batch_size):
            texts = [self._format(p) for p in prompts[start : start + self.batch_size]]
            enc = tok(texts, return_tensors="pt", padding=True).to(self._device)
            sample = temperature > 0
            kw: dict[str, Any] = {"do_sample": sample, "max_new_tokens": max_tokens}
            if sample:
                kw["temperature"] = temperature
            with torch.inference_mode():
                # ids and mask only: a BERT-style tokenizer also returns token_type_ids, which a
                # decoder's generate refuses in transformers 4.46 (nox lowest; later ones drop it)
                ids = model.generate(
                    input_ids=enc["input_ids"],
                    attention_mask=enc["attention_mask"],
                    pad_token_id=tok.pad_token_id,
                    **kw,
                )  # (B, T + new)
            new = ids[:, enc["input_ids"].shape[1] :]
            out.extend(tok.batch_decode(new, skip_special_tokens=True))
        return out
