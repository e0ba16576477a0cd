"""transformers integration: a position-free document KV :class:`~transformers.Cache` and a
registered attention function, so that ``model.generate(...)`` runs LazyAttention.

How the pieces fit (nothing in the model is copied or monkey-patched):

- :func:`register` adds ``"icml26_lazyattention"`` to transformers' ``AttentionInterface``
  (and a no-op mask builder to ``AttentionMaskInterface``: the block table *is* the mask).
  The model's own forward runs: embeddings, norms, projections, the model's own rotary
  embedding (every static RoPE type it supports), MLP, LM head.
- :class:`LazyDocumentCache` is the ``Cache`` passed to ``generate``. Each request (batch row)
  is an ordered list of documents already in the :class:`~.cache.BlockPool` (stored once at
  local positions 0..L−1) plus private blocks for its own tokens. ``update`` writes the new
  tokens' K/V into the private blocks and, once per forward (at layer 0), makes the step's
  plan: the packed block table of every row and :func:`~icml26_kernels.attention.plan_paged`,
  built from host-side bookkeeping, so no layer reads anything back from the device.
- The attention function runs :func:`~icml26_kernels.attention.paged_prefill` (several new
  tokens; left padding excluded through ``new_start``) or
  :func:`~icml26_kernels.attention.paged_decode` (one token), the query de-rotated per document
  block by the document's offset Δ_d.

Positions: ``generate`` derives ``position_ids`` from ``attention_mask`` (cumsum). The inputs
that :meth:`LazyRAGPipeline.request` builds hold each row's documents as a *virtual* past (their
tokens, with mask 1) followed by its left-padded query, so the query of a row whose documents
total D_b tokens sits at positions D_b, D_b + 1, ...: the contiguous unpadded positions of
:mod:`.layout`. RoPE is the model's (``rotary_emb``, ``attention_scaling`` included); the
de-rotation table is built from the same ``inv_freq``. ``rope_type`` ``"dynamic"`` and
``"longrope"`` change θ with the sequence length, so a stored key's rotation would depend on
the request: they are refused with an error naming the type.

``transformers`` comes with the extra ``icml26-lazyattention[hf]``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import operator
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from icml26_kernels.attention import (
    PAD_MAX,
    RopeConfig,
    paged_decode,
    paged_prefill,
    plan_paged,
    rope_table,
)
from icml26_kernels.backend import select_backend

from .cache import BlockPool, DocumentKVCache, document_key
from .layout import blocks_for
from .lazy import POLICIES, RequestPlan, _filler, block_diagonal_mask, plan_documents, release_plan

# the oldest transformers this module works with: 4.45-4.50 lack AttentionInterface, 4.56-5.10
# make CacheLayerMixin.get_max_cache_shape abstract differently (issue 66); pyproject [hf] says so
MIN_TRANSFORMERS = "5.18"


def transformers_problem(found: str | None, minimum: str = MIN_TRANSFORMERS) -> str | None:
    """Why the installed transformers (version ``found``, None: absent) cannot be used, or None."""
    if found is None:
        return (
            f"transformers is not installed; >= {minimum} required: "
            f"pip install 'icml26-lazyattention[hf]'"
        )

    def key(v: str) -> tuple[int, ...]:
        parts = []
        for piece in v.split(".")[:3]:
            digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
            parts.append(int(digits) if digits else 0)
        return tuple(parts)

    if key(found) < key(minimum):
        return (
            f"transformers {found} found, >= {minimum} required: "
            f"pip install -U 'transformers>={minimum}'"
        )
    return None


try:  # the [hf] extra; without it the pipeline and the cache refuse to be built
    import transformers as _transformers

    _TRANSFORMERS_PROBLEM = transformers_problem(_transformers.__version__)
except ImportError:  # pragma: no cover
    _TRANSFORMERS_PROBLEM = transformers_problem(None)
try:
    if _TRANSFORMERS_PROBLEM is not None:
        raise ImportError(_TRANSFORMERS_PROBLEM)
    from transformers import Cache as _CacheBase
    from transformers.cache_utils import CacheLayerMixin as _LayerBase
except ImportError:  # pragma: no cover
    _CacheBase = object  # type: ignore[misc,assignment]
    _LayerBase = object  # type: ignore[misc,assignment]


__all__ = [
    "ATTN_IMPLEMENTATION",
    "Generation",
    "LazyBatch",
    "LazyDocumentCache",
    "LazyRAGPipeline",
    "register",
    "rope_config_from_hf",
]

ATTN_IMPLEMENTATION = "icml26_lazyattention"
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")


# ----------------------------------------------------------------------------- RoPE


def _rotary(model: Any) -> Any:
    base = getattr(model, "model", model)
    rot = getattr(base, "rotary_emb", None)
    if rot is None or not hasattr(rot, "inv_freq"):
        raise ValueError(
            f"{type(model).__name__} has no rotary embedding with inv_freq (model.model.rotary_emb)"
        )
    return rot


def rope_config_from_hf(model: Any) -> RopeConfig:
    """:class:`RopeConfig` of a ``transformers`` causal LM, read from its own rotary embedding.

    θᵢ are the model's ``rotary_emb.inv_freq`` (default, linear, llama3, yarn, ... scaling
    already applied by transformers); ``attention_scaling`` multiplies HF's cos/sin and needs no
    counterpart here (the stored keys carry it, the de-rotation is a pure rotation).
    """
    rot = _rotary(model)
    rope_type = getattr(rot, "rope_type", "default")
    if rope_type in LENGTH_DEPENDENT_ROPE:
        raise ValueError(
            f"rope_type {rope_type!r} is not supported: its frequencies change with the sequence "
            "length, so a document's stored keys would depend on the request; use a static "
            "type (default, linear, llama3, yarn, ...)"
        )
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    inv = rot.inv_freq.detach().to("cpu", torch.float64)
    return RopeConfig(
        head_dim=head_dim,
        rotary_dim=2 * inv.numel(),
        inv_freq=tuple(float(x) for x in inv.tolist()),
    )


# ----------------------------------------------------------------------------- the Cache


@dataclass
class _Row:
    doc_entries: list[int]  # packed table entries of the request's documents (Δ_d, pads)
    private: list[int]  # pool blocks holding the request's own tokens
    n_private: int = 0  # tokens written there
    pad: int = 0  # left padding of the row's first forward


@dataclass
class _Step:
    plan: Any  # PagedPlan of this forward
    new_start: torch.Tensor | None  # (B,) left padding per row (prefill), None for decode
    src: torch.Tensor  # (n_new,) rows of the flattened (B*T) new K/V to store
    dest: torch.Tensor  # (n_new,) flat pool slots (block * block_size + slot)
    decode: bool


@dataclass
class _Active:
    cache: LazyDocumentCache
    layer: int
    key: torch.Tensor


_ACTIVE: contextvars.ContextVar[_Active | None] = contextvars.ContextVar(
    "icml26_lazyattention_active", default=None
)


def _entry(block: int, offset: int, pad: int) -> int:
    """One packed table entry (see ``icml26_kernels.attention.block_table``), host int."""
    return block | ((offset + 1) << 32) | (pad << 48)


class _LazyLayer(_LayerBase):  # type: ignore[misc,valid-type]
    """One model layer's view of a :class:`LazyDocumentCache` (the pool holds the K/V)."""

    is_compileable = False
    is_sliding = False
    is_croppable = False

    def __init__(self, owner: LazyDocumentCache) -> None:
        super().__init__()
        self.owner = owner
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        return None

    def update(self, key_states, value_states, *args, **kwargs):  # pragma: no cover
        raise RuntimeError("LazyDocumentCache.update dispatches per layer itself")

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.owner.seq_length + query_length, 0

    def get_seq_length(self) -> int:
        return self.owner.seq_length

    def get_max_length(self) -> int:
        return -1

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        raise NotImplementedError("LazyDocumentCache does not support beam search")

    def batch_repeat_interleave(self, repeats: int) -> None:
        if repeats != 1:
            raise NotImplementedError(
                "LazyDocumentCache cannot expand a batch (num_return_sequences/num_beams > 1)"
            )


class LazyDocumentCache(_CacheBase):  # type: ignore[misc,valid-type]
    """Position-free document KV for ``model.generate``: one row per request.

    Built by :meth:`LazyRAGPipeline.request` (not by hand). Row b attends to its documents'
    pool blocks (read in place, the query de-rotated by Δ_d) and to its own tokens, which
    ``update`` writes into private blocks (allocated from the pool as the row grows).
    ``get_seq_length()`` counts the virtual past (the longest row's documents) plus every
    token fed since, as ``generate`` expects.
    """

    def __init__(
        self,
        pipeline: LazyRAGPipeline,
        rows: list[_Row],
        past_length: int,
        *,
        kind: str = "private",
        grow: bool = True,
    ) -> None:
        if _CacheBase is object:
            raise ImportError(f"LazyDocumentCache: {_TRANSFORMERS_PROBLEM}")
        super().__init__(layers=[_LazyLayer(self) for _ in range(pipeline.n_layers)])
        self.pipeline = pipeline
        self.rows = rows
        self.seq_length = past_length
        self.kind = kind
        self.grow = grow
        self.step: _Step | None = None
        self.n_forwards = 0
        self.released = False

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Store the new tokens' K/V ``(B, H_kv, T, D)`` in the rows' private blocks.

        At layer 0 the step is planned (tables, checks: host bookkeeping only); every layer
        then scatters its K/V with index tensors built there (no device→host reads)."""
        if self.released:
            raise RuntimeError("this LazyDocumentCache was released (request finished)")
        if layer_idx == 0:
            self._plan_step(key_states)
        step = self.step
        if step is None:
            raise RuntimeError("LazyDocumentCache.update must see layer 0 first")
        b, h_kv, t, d = key_states.shape
        k = key_states.transpose(1, 2).reshape(b * t, h_kv, d).index_select(0, step.src)
        v = value_states.transpose(1, 2).reshape(b * t, h_kv, d).index_select(0, step.src)
        self.pipeline.pool.scatter(layer_idx, step.dest, k, v, kind=self.kind)
        _ACTIVE.set(_Active(self, layer_idx, key_states))
        return key_states, value_states

    def _plan_step(self, key_states: torch.Tensor) -> None:
        pipe = self.pipeline
        b_size, _, t, _ = key_states.shape
        if b_size != len(self.rows):
            raise ValueError(
                f"the cache holds {len(self.rows)} requests but the batch has {b_size} rows"
            )
        bs = pipe.pool.block_size
        first = self.n_forwards == 0
        decode = t == 1 and not (first and any(r.pad for r in self.rows))
        src: list[int] = []
        dest: list[int] = []
        entries: list[list[int]] = []
        starts: list[int] = []
        for bi, row in enumerate(self.rows):
            pad = row.pad if first else 0
            if pad >= t:
                raise ValueError(f"row {bi} is all padding in its first forward")
            n_new = t - pad
            need = blocks_for(row.n_private + n_new, bs)
            if need > len(row.private):
                if not self.grow:
                    raise ValueError("the document's blocks cannot hold its tokens")
                row.private += pipe.cache.allocate(need - len(row.private))
            before = row.n_private
            for i in range(n_new):
                slot = before + i
                dest.append(row.private[slot // bs] * bs + slot % bs)
                src.append(bi * t + pad + i)
            row.n_private += n_new
            visible = row.n_private if decode else before  # decode: its own key is pooled
            nb = blocks_for(visible, bs)
            priv = []
            if nb:
                priv = [_entry(blk, 0, 0) for blk in row.private[: nb - 1]]
                priv.append(_entry(row.private[nb - 1], 0, nb * bs - visible))
            entries.append(row.doc_entries + priv)
            starts.append(pad)
        width = max(len(e) for e in entries)
        table = torch.zeros(b_size, width, dtype=torch.int64)
        for bi, e in enumerate(entries):
            table[bi, : len(e)] = torch.tensor(e, dtype=torch.int64)
        # validated on the host copy (no device read), then moved once
        plan = plan_paged(
            table,
            block_size=bs,
            n_pool_blocks=pipe.pool.n_blocks,
            cfg=pipe.rope,
            table=pipe.cos_sin(max(1, self.seq_length + t)),
            need_blocks=decode,
        )
        dev = pipe.device
        plan = dataclasses.replace(plan, block_table=table.to(dev), n_blocks=plan.n_blocks.to(dev))
        self.step = _Step(
            plan=plan,
            new_start=None if decode else torch.tensor(starts, dtype=torch.int32).to(dev),
            src=torch.tensor(src, dtype=torch.int64).to(dev),
            dest=torch.tensor(dest, dtype=torch.int64).to(dev),
            decode=decode,
        )
        self.seq_length += t
        self.n_forwards += 1

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seq_length

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("LazyDocumentCache does not support beam search")

    def crop(self, max_length: int) -> None:
        raise NotImplementedError("LazyDocumentCache cannot be cropped")


# ----------------------------------------------------------------------------- attention


def lazy_attention_forward(
    module: Any,
    query: torch.Tensor,  # (B, H, T, D), rotated at logical positions by the model
    key: torch.Tensor,  # (B, H_kv, T, D), the new tokens' keys (as returned by update)
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The registered attention function: paged prefill/decode over the cache's block table."""
    active = _ACTIVE.get()
    if active is None or active.key is not key:
        raise RuntimeError(
            f"attn_implementation={ATTN_IMPLEMENTATION!r} needs a LazyDocumentCache passed to "
            "generate/forward (build one with LazyRAGPipeline.request)"
        )
    if dropout:
        raise ValueError("LazyAttention is an inference path; dropout must be 0")
    cache, layer = active.cache, active.layer
    pipe, step = cache.pipeline, cache.step
    if step is None:  # pragma: no cover - update() plans before it sets _ACTIVE
        raise RuntimeError("LazyDocumentCache has no step plan")
    kp, vp = pipe.pool.k[layer], pipe.pool.v[layer]
    q = query.transpose(1, 2)  # (B, T, H, D)
    plan = step.plan
    if step.decode:
        out = paged_decode(
            q[:, 0],
            kp,
            vp,
            plan.block_table,
            pipe.rope,
            scale=scaling,
            plan=plan,
            prefer=pipe.prefer,
        )[:, None]
    else:
        out = paged_prefill(
            q, key.transpose(1, 2), value.transpose(1, 2), kp, vp, plan.block_table, pipe.rope,
            scale=scaling, new_start=step.new_start, plan=plan, prefer=pipe.prefer,
        )  # fmt: skip
    return out, None  # (B, T, H, D)


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """The block table and ``new_start`` are the mask; transformers builds none."""
    return None


def register() -> str:
    """Register the attention function and its (empty) mask builder with transformers; returns
    the ``attn_implementation`` name (idempotent)."""
    if _TRANSFORMERS_PROBLEM is not None:
        raise ImportError(f"register: {_TRANSFORMERS_PROBLEM}")
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTN_IMPLEMENTATION, lazy_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, _no_mask)
    return ATTN_IMPLEMENTATION


@contextlib.contextmanager
def _attn_implementation(model: Any, name: str) -> Iterator[None]:
    prev = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(prev)


def _cache_kwarg(model: Any) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


# ----------------------------------------------------------------------------- pipeline


@dataclass
class Generation:
    """Output of :meth:`LazyRAGPipeline.generate` (one request)."""

    tokens: list[int]  # generated token ids (eos included when generated)
    text: str | None  # decoded with the tokenizer, when one was given
    step_logits: torch.Tensor  # (n_new, vocab) raw logits each generated token was chosen from
    ttft_s: float  # request start → first token (document KV + query prefill)
    total_s: float
    doc_hits: int
    doc_misses: int


@dataclass
class LazyBatch:
    """A prepared batch of requests: ``model.generate(**batch.inputs, ...)``."""

    inputs: dict[str, Any]  # input_ids, attention_mask and the cache (under the model's kwarg)
    cache: Any  # LazyDocumentCache
    plans: list[RequestPlan]
    prompt_length: int  # input_ids.shape[1]: generated tokens start after it


def _token_ids(x: Any, name: str) -> list[int]:
    """Token ids as Python ints: integers only (int, numpy/torch integer scalars). A float, even
    an integral one like 2.0, is refused rather than truncated by ``int()``; so is a bool."""
    try:
        items = list(x)
    except TypeError as exc:
        raise ValueError(f"{name} must be a string or a flat sequence of token ids") from exc
    ids = []
    for i, t in enumerate(items):
        if isinstance(t, (bool, float)) or (
            isinstance(t, torch.Tensor) and (t.dim() != 0 or not _is_int_dtype(t.dtype))
        ):
            raise ValueError(
                f"{name} must hold integer token ids; element {i} is {t!r} ({type(t).__name__})"
            )
        try:
            ids.append(operator.index(t))  # int, numpy/torch integer scalars; not floats
        except TypeError as exc:
            raise ValueError(
                f"{name} must be a string or a flat sequence of integer token ids; element {i} "
                f"is {t!r} ({type(t).__name__})"
            ) from exc
    return ids


def _is_int_dtype(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


class _FirstTokenClock:
    """A ``generate`` streamer that records when the first new token arrives and forwards
    everything to the caller's own streamer, if any."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner
        self.calls = 0
        self.first: float | None = None

    def put(self, value: Any) -> None:
        self.calls += 1
        if self.calls == 2 and self.first is None:  # call 1 is the prompt
            self.first = time.perf_counter()
        if self.inner is not None:
            self.inner.put(value)

    def end(self) -> None:
        if self.inner is not None:
            self.inner.end()


class LazyRAGPipeline:
    """Prefill documents once; answer requests over any order of them with ``model.generate``.

    Args:
        model: a ``transformers`` causal LM (``model_type`` in ``("llama", "mistral",
            "qwen2")``, no sliding window, a static RoPE type).
        tokenizer: optional, for ``str`` inputs (``encode(text, add_special_tokens=False)``).
        block_size: tokens per KV block (<= 65536; a power of two for the Triton kernels).
        n_blocks: KV pool budget in blocks (cache + per-request blocks share it).
        policy: ``"lazy"`` (the paper) or a baseline ``"reencode"``, ``"prefix"``,
            ``"recompute"`` (see :mod:`icml26_lazyattention.lazy`).
        backend: kernel backend request for :func:`icml26_kernels.backend.select_backend`.
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
        if not isinstance(block_size, int) or not 1 <= block_size <= PAD_MAX + 1:
            raise ValueError(
                f"block_size must be an int in [1, {PAD_MAX + 1}] (the packed pad field is "
                f"16 bits); got {block_size!r}"
            )
        p = next(model.parameters())
        self.dtype, self.device = p.dtype, p.device
        if select_backend(self.device, prefer=backend).uses_triton and block_size & (
            block_size - 1
        ):
            raise ValueError(
                f"block_size must be a power of two for the Triton kernels; got {block_size} "
                "(or pass backend='torch')"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.policy = policy
        self.prefer = backend
        self.rope = rope_config_from_hf(model)
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.n_layers = cfg.num_hidden_layers
        self.pool = BlockPool(
            n_layers=self.n_layers,
            n_blocks=n_blocks,
            block_size=block_size,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.rope.head_dim,
            dtype=self.dtype,
            device=self.device,
        )
        self.cache = DocumentKVCache(self.pool)
        self._table = rope_table(self.rope, 1024, dtype=self.dtype, device=self.device)
        register()

    # ------------------------------------------------------------------ helpers

    def cos_sin(self, n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The de-rotation cos/sin table covering offsets ``< n_positions`` (grown by doubling)."""
        if self._table[0].shape[0] < n_positions:
            n = max(n_positions, 2 * self._table[0].shape[0])
            self._table = rope_table(self.rope, n, dtype=self.dtype, device=self.device)
        return self._table

    def attention(self) -> contextlib.AbstractContextManager[None]:
        """Context in which the model runs with ``attn_implementation="icml26_lazyattention"``
        (restored afterwards)."""
        return _attn_implementation(self.model, ATTN_IMPLEMENTATION)

    def _ids(self, x: Any, name: str) -> list[int]:
        if isinstance(x, str):
            if self.tokenizer is None:
                raise TypeError(
                    f"{name} is a string but the pipeline has no tokenizer; pass token ids"
                )
            ids = _token_ids(self.tokenizer.encode(x, add_special_tokens=False), name)
        else:
            if isinstance(x, torch.Tensor):
                if x.dim() != 1 or not _is_int_dtype(x.dtype):
                    raise ValueError(
                        f"{name} must be a 1-D integer tensor of token ids; got "
                        f"{tuple(x.shape)} {x.dtype}"
                    )
                x = x.tolist()
            ids = _token_ids(x, name)
        if not ids:  # also a string the tokenizer maps to no tokens
            raise ValueError(f"{name} must contain at least one token")
        vocab = self.model.config.vocab_size
        if min(ids) < 0 or max(ids) >= vocab:
            raise ValueError(f"{name} has token ids outside [0, {vocab})")
        return ids

    @torch.no_grad()
    def _prefill_document(
        self, tokens: Sequence[int], blocks: list[int], start: int, kind: str
    ) -> None:
        """The model's own forward over one document alone, at positions start..; its K/V go
        to ``blocks`` (slot 0 onwards)."""
        cache = LazyDocumentCache(self, [_Row([], list(blocks))], start, kind=kind, grow=False)
        ids = torch.as_tensor(list(tokens), device=self.device)[None]
        pos = torch.arange(start, start + ids.shape[1], device=self.device)[None]
        base = self.model.model
        with self.attention():
            base(input_ids=ids, position_ids=pos, use_cache=True, **{_cache_kwarg(base): cache})

    def _pad_id(self) -> int:
        gc = getattr(self.model, "generation_config", None)
        for v in (getattr(gc, "pad_token_id", None), getattr(gc, "eos_token_id", None)):
            if isinstance(v, int):
                return v
            if isinstance(v, (list, tuple)) and v:
                return int(v[0])
        return 0

    # ------------------------------------------------------------------ public API

    def add_documents(self, documents: Sequence[Any]) -> list[str]:
        """Prefill and cache documents ahead of requests (position-independent policies only).
        Returns their cache keys."""
        if self.policy not in ("lazy", "reencode", "inplace"):
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

    def prepare(self, queries: Sequence[Any], documents: Sequence[Sequence[Any]]) -> LazyBatch:
        """Plan every request's documents (cache hits, misses prefilled, pinned) and build the
        ``generate`` inputs; call :meth:`release` afterwards (or use :meth:`request`)."""
        if not isinstance(queries, (list, tuple)) or not queries:
            raise ValueError("queries must be a non-empty list (one query per request)")
        if not isinstance(documents, (list, tuple)) or len(documents) != len(queries):
            raise ValueError(
                f"documents must be a list with one document list per query ({len(queries)})"
            )
        q_ids = [self._ids(q, f"queries[{b}]") for b, q in enumerate(queries)]
        docs: list[list[list[int]]] = []
        for b, ds in enumerate(documents):
            if not isinstance(ds, (list, tuple)) or not ds:
                raise ValueError(f"documents[{b}] must be a non-empty list of documents")
            docs.append([self._ids(d, f"documents[{b}][{i}]") for i, d in enumerate(ds)])
        plans: list[RequestPlan] = []
        try:
            for ds in docs:
                plans.append(
                    plan_documents(
                        self.policy,
                        self.cache,
                        ds,
                        self._prefill_document,
                        self.rope,
                        prefer=self.prefer,
                    )
                )
        except BaseException:
            for plan in plans:
                release_plan(self.cache, plan)
            raise
        d_len = [p.layout.total_length for p in plans]
        past, t_max = max(d_len), max(len(q) for q in q_ids)
        pad = self._pad_id()
        rows, ids, mask = [], [], []
        for plan, ds, q, dl in zip(plans, docs, q_ids, d_len):
            flat = [t for d in ds for t in d]
            ids.append([pad] * (past - dl) + flat + [pad] * (t_max - len(q)) + q)
            mask.append([0] * (past - dl) + [1] * dl + [0] * (t_max - len(q)) + [1] * len(q))
            rows.append(_Row(plan.table().tolist(), [], 0, t_max - len(q)))
        cache = LazyDocumentCache(self, rows, past)
        inputs = {
            "input_ids": torch.tensor(ids, device=self.device),
            "attention_mask": torch.tensor(mask, device=self.device),
            _cache_kwarg(self.model): cache,
        }
        return LazyBatch(inputs, cache, plans, past + t_max)

    def release(self, batch: LazyBatch) -> None:
        """Free the batch's private blocks and unpin its documents (idempotent)."""
        if batch.cache.released:
            return
        batch.cache.released = True
        for row in batch.cache.rows:
            self.pool.free(row.private)
            row.private = []
        for plan in batch.plans:
            release_plan(self.cache, plan)

    @contextlib.contextmanager
    def request(
        self, queries: Sequence[Any], documents: Sequence[Sequence[Any]]
    ) -> Iterator[LazyBatch]:
        """``with pipe.request(queries, documents) as batch: model.generate(**batch.inputs, ...)``

        One row per request, its documents in the given order; any ``generate`` argument
        (sampling, logits processors, stopping criteria, streamer, eos from the model's
        generation config, ...) applies. Beam search and ``num_return_sequences > 1`` are not
        supported. Generated tokens start at ``batch.prompt_length``."""
        batch = self.prepare(queries, documents)
        try:
            with self.attention():
                yield batch
        finally:
            self.release(batch)

    @torch.no_grad()
    def logits(self, query: Any, documents: Sequence[Any]) -> torch.Tensor:
        """One forward of the query over its documents through the lazy path: the query
        positions' logits ``(Tq, vocab)``."""
        with self.request([query], [documents]) as batch:
            past = batch.cache.seq_length
            out = self.model(
                input_ids=batch.inputs["input_ids"][:, past:],
                attention_mask=batch.inputs["attention_mask"],
                position_ids=batch.inputs["attention_mask"].cumsum(-1)[:, past:] - 1,
                **{_cache_kwarg(self.model): batch.cache},
            )
        return out.logits[0]

    @torch.no_grad()
    def generate(
        self, query: Any, documents: Sequence[Any], *, max_new_tokens: int = 16, **kwargs: Any
    ) -> Generation:
        """Answer ``query`` after ``documents`` (token ids or strings), in the given order, with
        ``model.generate`` (greedy unless ``do_sample=True``; any other ``generate`` keyword is
        passed on; eos defaults to the model's generation config)."""
        if not isinstance(documents, (list, tuple)) or not documents:
            raise ValueError("documents must be a non-empty list of documents")
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an int >= 1; got {max_new_tokens!r}")
        for name in ("num_beams", "num_return_sequences"):
            if kwargs.get(name, 1) != 1:
                raise ValueError(f"{name} > 1 is not supported by LazyDocumentCache")
        kwargs.setdefault("do_sample", False)
        kwargs.setdefault("pad_token_id", self._pad_id())
        clock = _FirstTokenClock(kwargs.pop("streamer", None))
        t0 = time.perf_counter()
        with self.request([query], [documents]) as batch:
            out = self.model.generate(  # type: ignore[operator]
                **batch.inputs,
                max_new_tokens=max_new_tokens,
                return_dict_in_generate=True,
                output_logits=True,
                streamer=clock,
                **kwargs,
            )
            plan = batch.plans[0]
        total = time.perf_counter() - t0
        tokens = out.sequences[0, batch.prompt_length :].tolist()
        text = self.tokenizer.decode(tokens) if self.tokenizer is not None else None
        return Generation(
            tokens,
            text,
            torch.cat([s[:1] for s in out.logits]),
            (clock.first or time.perf_counter()) - t0,
            total,
            plan.hits,
            plan.misses,
        )

    @torch.no_grad()
    def dense_block_diagonal_logits(self, query: Any, documents: Sequence[Any]) -> torch.Tensor:
        """Reference for tests: the model's own forward (its configured attention, not the lazy
        one) over ``[docs][query]`` at contiguous positions with an additive 4-D
        :func:`~.lazy.block_diagonal_mask` (no pool, no blocks, no deferred RoPE).
        Returns the query positions' logits ``(Tq, vocab)``."""
        q_ids = self._ids(query, "query")
        docs = [self._ids(d, f"documents[{i}]") for i, d in enumerate(documents)]
        ids = torch.as_tensor([t for d in docs for t in d] + q_ids, device=self.device)[None]
        allowed = block_diagonal_mask([len(d) for d in docs], len(q_ids), device=self.device)
        add = torch.zeros(allowed.shape, dtype=self.dtype, device=self.device)
        add = add.masked_fill(~allowed, torch.finfo(self.dtype).min)[None, None]
        pos = torch.arange(ids.shape[1], device=self.device)[None]
        out = self.model(input_ids=ids, attention_mask=add, position_ids=pos, use_cache=False)
        return out.logits[0, -len(q_ids) :]
