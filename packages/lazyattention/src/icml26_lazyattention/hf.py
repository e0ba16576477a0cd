"""transformers integration: a RAG pipeline for Llama-family models over cached documents.

:class:`LazyRAGPipeline` drives a ``LlamaForCausalLM`` with its own forward (no monkey-patching
of the library): it reads the model's modules (embeddings, per-layer norms, q/k/v/o projections,
MLP, final norm, LM head) and routes attention through :mod:`icml26_kernels.attention`:
documents are prefilled once at local positions into a :class:`~.cache.BlockPool`, queries are
prefilled with :func:`~icml26_kernels.attention.paged_prefill` and tokens decoded with
:func:`~icml26_kernels.attention.paged_decode`, the query de-rotated per document block.

``transformers`` is imported lazily (extra ``icml26-lazyattention[hf]``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from icml26_kernels.attention import (
    Llama3Scaling,
    RopeConfig,
    apply_rope,
    paged_decode,
    paged_prefill,
    rope_table,
)

from .cache import BlockPool, DocumentKVCache, document_key
from .layout import blocks_for
from .lazy import POLICIES, RequestPlan, _filler, block_diagonal_mask, plan_documents, release_plan

__all__ = ["Generation", "LazyRAGPipeline", "rope_config_from_hf"]

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")


def rope_config_from_hf(config: Any) -> RopeConfig:
    """:class:`RopeConfig` of a Llama-family ``transformers`` config (default or llama3 RoPE)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    params = dict(getattr(config, "rope_parameters", None) or {})
    legacy = dict(getattr(config, "rope_scaling", None) or {})  # transformers 4.x
    params = {**legacy, **params}
    theta = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    partial = (
        params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)) or 1.0
    )
    if partial != 1.0:
        raise ValueError(
            f"partial_rotary_factor={partial} is not supported for Llama-family models"
        )
    llama3 = None
    if rope_type == "llama3":
        llama3 = Llama3Scaling(
            factor=float(params["factor"]),
            low_freq_factor=float(params["low_freq_factor"]),
            high_freq_factor=float(params["high_freq_factor"]),
            original_max_position_embeddings=int(params["original_max_position_embeddings"]),
        )
    elif rope_type != "default":
        raise ValueError(
            f"rope_type {rope_type!r} is not supported; expected 'default' or 'llama3'"
        )
    return RopeConfig(head_dim=head_dim, base=float(theta), llama3=llama3)


@dataclass
class Generation:
    """Output of :meth:`LazyRAGPipeline.generate`."""

    tokens: list[int]  # generated token ids
    text: str | None  # decoded with the tokenizer, when one was given
    query_logits: torch.Tensor  # (Tq, vocab) at the query positions; the first token uses row -1
    step_logits: torch.Tensor  # (n_new, vocab) the logits each generated token was chosen from
    ttft_s: float  # request start → first token chosen (document KV + query prefill)
    total_s: float
    doc_hits: int
    doc_misses: int


class LazyRAGPipeline:
    """Prefill documents once, answer ``generate(query, documents=[...])`` over any order.

    Args:
        model: a ``transformers`` Llama-family causal LM (``model_type`` in
            ``("llama", "mistral", "qwen2")``; no sliding window).
        tokenizer: optional, for ``str`` inputs (``encode(text, add_special_tokens=False)``/``decode``).
        block_size: tokens per KV block (power of two for the Triton kernels).
        n_blocks: KV pool budget in blocks (cache + per-request blocks share it).
        policy: ``"lazy"`` (the paper) or a baseline ``"reencode"``, ``"prefix"``, ``"recompute"``
            (see :mod:`icml26_lazyattention.lazy`).
        backend: kernel backend request for :func:`icml26_kernels.backend.select_backend`.
        rope: override the RoPE read from the config (e.g. interleaved / partial, for tests).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        block_size: int = 16,
        n_blocks: int = 1024,
        policy: str = "lazy",
        backend: str | None = None,
        rope: RopeConfig | None = None,
    ) -> None:
        from transformers import PreTrainedModel

        if not isinstance(model, PreTrainedModel):
            raise TypeError(
                f"model must be a transformers PreTrainedModel; got {type(model).__name__}"
            )
        cfg = model.config
        if cfg.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type must be one of {SUPPORTED_MODEL_TYPES}; got {cfg.model_type!r}"
            )
        if getattr(cfg, "use_sliding_window", False) or (
            cfg.model_type == "mistral" and getattr(cfg, "sliding_window", None)
        ):
            raise ValueError("sliding-window attention is not supported; set sliding_window=None")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}; got {policy!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.policy = policy
        self.prefer = backend
        self.rope = rope if rope is not None else rope_config_from_hf(cfg)
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        if self.rope.head_dim != (
            getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        ):
            raise ValueError("rope.head_dim must equal the model's head_dim")
        p = next(model.parameters())
        self.dtype, self.device = p.dtype, p.device
        self.layers = model.model.layers
        self.pool = BlockPool(
            n_layers=len(self.layers),
            n_blocks=n_blocks,
            block_size=block_size,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.rope.head_dim,
            dtype=self.dtype,
            device=self.device,
        )
        self.cache = DocumentKVCache(self.pool)
        self._table = rope_table(self.rope, 1024, dtype=self.dtype, device=self.device)

    # ------------------------------------------------------------------ model forward pieces

    def _cos_sin(self, n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._table[0].shape[0] < n_positions:
            n = max(n_positions, 2 * self._table[0].shape[0])
            self._table = rope_table(self.rope, n, dtype=self.dtype, device=self.device)
        return self._table

    def _qkv(self, layer: Any, h: torch.Tensor, positions: torch.Tensor):
        """h (T, hidden) → q (T, H, D), k, v (T, H_kv, D); q and k rotated at ``positions``."""
        t, d = h.shape[0], self.rope.head_dim
        x = layer.input_layernorm(h)
        attn = layer.self_attn
        q = attn.q_proj(x).view(t, self.n_heads, d)
        k = attn.k_proj(x).view(t, self.n_kv_heads, d)
        v = attn.v_proj(x).view(t, self.n_kv_heads, d)
        table = self._cos_sin(int(positions.max()) + 1)
        q = apply_rope(q[None], positions[None], self.rope, table=table, prefer=self.prefer)[0]
        k = apply_rope(k[None], positions[None], self.rope, table=table, prefer=self.prefer)[0]
        return q, k, v

    def _finish(self, layer: Any, h: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        """Residual + o_proj, then the MLP block. attn_out (T, H, D) → h (T, hidden)."""
        h = h + layer.self_attn.o_proj(attn_out.reshape(h.shape[0], -1))
        return h + layer.mlp(layer.post_attention_layernorm(h))

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.model.lm_head(self.model.model.norm(h))

    def _ids(self, x: Any, name: str) -> list[int]:
        if isinstance(x, str):
            if self.tokenizer is None:
                raise TypeError(
                    f"{name} is a string but the pipeline has no tokenizer; pass token ids"
                )
            ids = [int(t) for t in self.tokenizer.encode(x, add_special_tokens=False)]
        else:
            ids = [int(t) for t in (x.tolist() if isinstance(x, torch.Tensor) else x)]
        if not ids:  # also a string the tokenizer maps to no tokens
            raise ValueError(f"{name} must contain at least one token")
        vocab = self.model.config.vocab_size
        if min(ids) < 0 or max(ids) >= vocab:
            raise ValueError(f"{name} has token ids outside [0, {vocab})")
        return ids

    @torch.no_grad()
    def _prefill_tokens(
        self,
        tokens: Sequence[int],
        start: int,
        ctx_table: torch.Tensor,
        write_blocks: Sequence[int],
        kind: str,
    ) -> torch.Tensor:
        """Run ``tokens`` at positions start.. through every layer: attention over the paged
        context ``ctx_table (1, M)`` plus causal self-attention; their KV goes to ``write_blocks``.
        Returns the final hidden states (T, hidden)."""
        ids = torch.as_tensor(list(tokens), device=self.device)
        pos = torch.arange(start, start + len(ids), device=self.device)
        max_off = int(((ctx_table >> 32) & 0xFFFF).max()) if ctx_table.numel() else 0
        table = self._cos_sin(max(int(pos.max()) + 1, max_off))
        h = self.model.model.embed_tokens(ids)
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, h, pos)
            o = paged_prefill(
                q[None], k[None], v[None], self.pool.k[li], self.pool.v[li], ctx_table, self.rope,
                table=table, prefer=self.prefer,
            )[0]  # fmt: skip
            self.pool.write(li, write_blocks, 0, k, v, kind=kind)
            h = self._finish(layer, h, o)
        return h

    def _prefill_document(
        self, tokens: Sequence[int], blocks: list[int], start: int, kind: str
    ) -> None:
        empty = torch.zeros(1, 0, dtype=torch.int64, device=self.device)
        self._prefill_tokens(tokens, start, empty, blocks, kind)

    @torch.no_grad()
    def _decode_step(
        self, token: int, position: int, slot: int, plan: RequestPlan, private: list[int]
    ) -> torch.Tensor:
        """One new token at ``position``: append its KV at private ``slot``, attend, return logits."""
        ids = torch.tensor([token], device=self.device)
        pos = torch.tensor([position], device=self.device)
        row = plan.table(private[: blocks_for(slot + 1, self.pool.block_size)], slot + 1)[None].to(
            self.device
        )
        table = self._cos_sin(position + 1)
        h = self.model.model.embed_tokens(ids)
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, h, pos)
            self.pool.write(li, private, slot, k, v, kind="private")
            o = paged_decode(
                q, self.pool.k[li], self.pool.v[li], row, self.rope, table=table, prefer=self.prefer
            )
            h = self._finish(layer, h, o)
        return self._logits(h)[0]

    # ------------------------------------------------------------------ public API

    def add_documents(self, documents: Sequence[Any]) -> list[str]:
        """Prefill and cache documents ahead of requests (position-independent policies only).
        Returns their cache keys."""
        if self.policy not in ("lazy", "reencode"):
            raise ValueError(
                f"add_documents needs a position-independent policy; this pipeline is {self.policy!r}"
            )
        keys = []
        for i, doc in enumerate(documents):
            toks = self._ids(doc, f"documents[{i}]")
            key = document_key(toks, self.pool.block_size)
            entry, _ = self.cache.acquire(key, len(toks), _filler(self._prefill_document, toks, 0))
            self.cache.release(entry)
            keys.append(key)
        return keys

    @torch.no_grad()
    def generate(
        self,
        query: Any,
        documents: Sequence[Any],
        *,
        max_new_tokens: int = 16,
        eos_token_id: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> Generation:
        """Answer ``query`` after ``documents`` (token ids or strings), in the given order.

        Document KV comes from the cache (prefilled on a miss) according to the policy; the query
        is prefilled through the paged prefill kernel, then up to ``max_new_tokens`` tokens are
        decoded one at a time (greedy unless ``do_sample``)."""
        if not isinstance(documents, (list, tuple)) or not documents:
            raise ValueError("documents must be a non-empty list of documents")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
        if do_sample and not temperature > 0:
            raise ValueError(f"temperature must be > 0 when sampling; got {temperature}")
        q_ids = self._ids(query, "query")
        docs = [self._ids(d, f"documents[{i}]") for i, d in enumerate(documents)]
        t0 = time.perf_counter()
        plan = plan_documents(
            self.policy, self.cache, docs, self._prefill_document, self.rope, prefer=self.prefer
        )
        private: list[int] = []
        try:
            n_priv = len(q_ids) + max_new_tokens
            private = self.cache.allocate(blocks_for(n_priv, self.pool.block_size))
            start = plan.layout.total_length
            ctx = plan.table()[None].to(self.device)
            h = self._prefill_tokens(q_ids, start, ctx, private, "private")
            query_logits = self._logits(h)
            steps = [query_logits[-1]]
            out = [self._pick(steps[-1], do_sample, temperature, top_k, generator)]
            ttft = time.perf_counter() - t0
            while len(out) < max_new_tokens and out[-1] != eos_token_id:
                slot = len(q_ids) + len(out) - 1
                logits = self._decode_step(out[-1], start + slot, slot, plan, private)
                steps.append(logits)
                out.append(self._pick(logits, do_sample, temperature, top_k, generator))
        finally:
            self.pool.free(private)
            release_plan(self.cache, plan)
        text = self.tokenizer.decode(out) if self.tokenizer is not None else None
        return Generation(
            out,
            text,
            query_logits,
            torch.stack(steps),
            ttft,
            time.perf_counter() - t0,
            plan.hits,
            plan.misses,
        )

    @staticmethod
    def _pick(
        logits: torch.Tensor, do_sample: bool, temperature: float, top_k: int | None, generator: Any
    ) -> int:
        if not do_sample:
            return int(logits.argmax())
        z = logits.double() / temperature
        if top_k is not None:
            kth = torch.topk(z, min(top_k, z.numel())).values[-1]
            z = z.masked_fill(z < kth, float("-inf"))
        return int(torch.multinomial(z.softmax(-1), 1, generator=generator))

    @torch.no_grad()
    def dense_block_diagonal_logits(self, query: Any, documents: Sequence[Any]) -> torch.Tensor:
        """Reference for tests: one dense forward over ``[docs][query]`` at contiguous unpadded
        positions with :func:`~.lazy.block_diagonal_mask` (no pool, no blocks, no deferred RoPE).
        Returns the query positions' logits ``(Tq, vocab)``."""
        q_ids = self._ids(query, "query")
        docs = [self._ids(d, f"documents[{i}]") for i, d in enumerate(documents)]
        ids = torch.as_tensor([t for d in docs for t in d] + q_ids, device=self.device)
        pos = torch.arange(len(ids), device=self.device)
        allowed = block_diagonal_mask([len(d) for d in docs], len(q_ids), device=self.device)
        g = self.n_heads // self.n_kv_heads
        h = self.model.model.embed_tokens(ids)
        for layer in self.layers:
            x = layer.input_layernorm(h)
            attn = layer.self_attn
            t, d = len(ids), self.rope.head_dim
            q = attn.q_proj(x).view(t, self.n_heads, d)
            k = attn.k_proj(x).view(t, self.n_kv_heads, d)
            v = attn.v_proj(x).view(t, self.n_kv_heads, d)
            q = apply_rope(q[None], pos[None], self.rope, prefer="torch")[0]
            k = apply_rope(k[None], pos[None], self.rope, prefer="torch")[0]
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            s = torch.einsum("thd,shd->hts", q, k) / d**0.5
            p = s.masked_fill(~allowed, float("-inf")).softmax(-1)
            h = self._finish(layer, h, torch.einsum("hts,shd->thd", p, v))
        return self._logits(h[-len(q_ids) :])
