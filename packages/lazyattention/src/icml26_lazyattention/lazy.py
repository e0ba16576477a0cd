"""LazyAttention's request planning, with the baselines in the same harness.

Given the documents of a request and a callback that prefills one document into given pool
blocks, :func:`plan_documents` decides where each document's KV comes from and what the block
table says about it. All four policies share the pool, the cache, the kernels and the model
forward, so a comparison measures only the policy:

==============  ================================================================  =========
policy          document KV                                                       table Δ_d
==============  ================================================================  =========
``lazy``        cached once at local positions (key independent of position),     Δ_d
                reused in place: zero bytes copied on a hit (the paper)
``reencode``    same cache, but every use copies the KV to request-private        0
                blocks and re-rotates K by +Δ_d (Block-Attention-style
                materialization; the copies draw on the same pool budget)
``inplace``     same cache; the cached K is re-rotated *in place* to the new      0
                Δ_d when no running request holds it (refcount 0), copied as
                ``reencode`` otherwise (the official code's non-naive path:
                no extra pool space, but a K rewrite on every moved reuse)
``prefix``      cached at absolute positions under a prefix-chain key: reused     0
                only when every preceding document is identical (vLLM APC)
``recompute``   every document prefilled again at its position, block-diagonal    0
                (full recompute with the block-diagonal document mask)
==============  ================================================================  =========

In every policy document d attends only to itself (the block-diagonal pattern Block-Attention
fine-tuning teaches), the query attends to all documents and causally to itself, and positions
are the contiguous unpadded ones (see :mod:`.layout`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from icml26_kernels.attention import RopeConfig, apply_rope, pack_block_table

from .cache import BlockPool, CacheEntry, DocumentKVCache, document_key, document_seq_key
from .layout import DocumentLayout, blocks_for

__all__ = [
    "POLICIES",
    "RequestPlan",
    "block_diagonal_mask",
    "materialize_rerotated",
    "plan_documents",
    "release_plan",
    "rerotate_inplace",
]

POLICIES = ("lazy", "reencode", "inplace", "prefix", "recompute")

# prefill_document(tokens, blocks, start_position, kind): write the document's KV for every
# layer into ``blocks`` (slot 0 onwards), its tokens rotated at start_position + j.
PrefillFn = Callable[[Sequence[int], list[int], int, str], None]


def _filler(
    prefill_document: PrefillFn, tokens: Sequence[int], start: int
) -> Callable[[list[int]], None]:
    """fill(blocks) for :meth:`DocumentKVCache.acquire`: prefill ``tokens`` at ``start`` into blocks."""

    def fill(blocks: list[int]) -> None:
        prefill_document(tokens, blocks, start, "document")

    return fill


@dataclass
class RequestPlan:
    """Where each document's KV lives for one request, and what to release afterwards."""

    policy: str
    layout: DocumentLayout
    doc_blocks: list[list[int]]  # pool blocks per document, request order
    deferred: bool  # True: blocks hold KV at local positions, the table carries Δ_d
    pinned: list[CacheEntry] = field(default_factory=list)  # cache entries to unpin
    owned: list[int] = field(default_factory=list)  # request-private blocks to free
    hits: int = 0
    misses: int = 0

    def table(
        self,
        private_blocks: Sequence[int] = (),
        private_tokens: int = 0,
        *,
        width: int | None = None,
    ) -> torch.Tensor:
        """Packed block-table row: documents (Δ_d if deferred, else 0) then private blocks."""
        if self.deferred:
            return self.layout.block_table(
                self.doc_blocks, private_blocks, private_tokens, width=width
            )
        ids = [b for blocks in self.doc_blocks for b in blocks] + list(private_blocks)
        pads = list(self.layout.block_pads)
        n_priv = len(private_blocks)
        if n_priv:
            pads += [0] * (n_priv - 1) + [n_priv * self.layout.block_size - private_tokens]
        row = pack_block_table(ids, [0] * len(ids), pads, block_size=self.layout.block_size)
        if width is not None:
            row = torch.cat([row, row.new_zeros(width - row.numel())])
        return row


def materialize_rerotated(
    pool: BlockPool,
    src_blocks: Sequence[int],
    dst_blocks: Sequence[int],
    n_tokens: int,
    delta: int,
    rope: RopeConfig,
    *,
    prefer: str | None = None,
) -> None:
    """Re-encoding baseline: copy a document's KV (all layers) to ``dst_blocks`` with K rotated
    by +Δ (R(Δ)R(j)k = R(Δ + j)k), counted as ``"copy"`` bytes. This is the materialization
    LazyAttention avoids."""
    src = torch.as_tensor(list(src_blocks), device=pool.k.device)
    n_layers = pool.k.shape[0]
    k = pool.k[:, src].flatten(1, 2)[:, :n_tokens]  # (L, T, H_kv, D)
    v = pool.v[:, src].flatten(1, 2)[:, :n_tokens]
    pos = torch.full((n_layers, n_tokens), abs(delta), dtype=torch.int64, device=k.device)
    k = apply_rope(k, pos, rope, inverse=delta < 0, prefer=prefer)
    for layer in range(n_layers):
        pool.write(layer, dst_blocks, 0, k[layer], v[layer], kind="copy")


def rerotate_inplace(
    pool: BlockPool,
    blocks: Sequence[int],
    n_tokens: int,
    delta: int,
    rope: RopeConfig,
    *,
    prefer: str | None = None,
) -> None:
    """In-place baseline: rotate a cached document's K (all layers) by R(delta) where it lies,
    counted as ``"rotate"`` bytes (K only). Successive moves compose R(a)R(b) = R(a + b) up to
    round-off, which accumulates with every move (the lazy path never touches the KV)."""
    idx = torch.as_tensor(list(blocks), device=pool.k.device)
    n_layers, _, bs, h_kv, d = pool.k.shape
    flat = pool.k[:, idx].flatten(1, 2)  # (L, nb * bs, H_kv, D): one gather
    pos = torch.full((n_layers, n_tokens), abs(delta), dtype=torch.int64, device=flat.device)
    flat[:, :n_tokens] = apply_rope(flat[:, :n_tokens], pos, rope, inverse=delta < 0, prefer=prefer)
    pool.k[:, idx] = flat.reshape(n_layers, len(blocks), bs, h_kv, d)  # one scatter
    pool.bytes_written["rotate"] += n_tokens * pool.bytes_per_token // 2


def plan_documents(
    policy: str,
    cache: DocumentKVCache,
    documents: Sequence[Sequence[int]],
    prefill_document: PrefillFn,
    rope: RopeConfig,
    *,
    prefer: str | None = None,
) -> RequestPlan:
    """Make every document's KV available for one request under ``policy`` (see module doc).

    Cache entries used are pinned until :func:`release_plan`; raises ``ValueError`` on an empty
    document list and :class:`~icml26_lazyattention.layout.OffsetOverflowError` when the
    layout's offsets do not fit the packed table.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}; got {policy!r}")
    docs = [list(d) for d in documents]
    if not docs:
        raise ValueError("documents must be a non-empty list of token sequences")
    bs = cache.pool.block_size
    layout = DocumentLayout.from_lengths([len(d) for d in docs], bs)
    plan = RequestPlan(policy, layout, [], deferred=policy == "lazy")
    try:
        if policy == "inplace":
            for d, toks in enumerate(docs):
                delta = layout.doc_offsets[d]
                entry, hit = cache.acquire(
                    document_key(toks, bs), len(toks), _filler(prefill_document, toks, delta)
                )
                if not hit:
                    entry.offset = delta  # prefilled at its position in this request
                plan.pinned.append(entry)
                plan.hits += hit
                plan.misses += not hit
                if entry.offset == delta:
                    plan.doc_blocks.append(entry.blocks)
                elif entry.refcount == 1:  # only this request holds it: move it in place
                    rerotate_inplace(
                        cache.pool, entry.blocks, len(toks), delta - entry.offset, rope,
                        prefer=prefer,
                    )  # fmt: skip
                    entry.offset = delta
                    plan.doc_blocks.append(entry.blocks)
                else:  # another running request reads it at entry.offset: copy
                    copy = cache.allocate(len(entry.blocks))
                    plan.owned += copy
                    materialize_rerotated(
                        cache.pool, entry.blocks, copy, len(toks), delta - entry.offset, rope,
                        prefer=prefer,
                    )  # fmt: skip
                    plan.doc_blocks.append(copy)
        elif policy in ("lazy", "reencode"):
            for d, toks in enumerate(docs):
                entry, hit = cache.acquire(
                    document_key(toks, bs),
                    len(toks),
                    _filler(prefill_document, toks, 0),
                )
                plan.pinned.append(entry)
                plan.hits += hit
                plan.misses += not hit
                if policy == "lazy":
                    plan.doc_blocks.append(entry.blocks)
                else:
                    copy = cache.allocate(len(entry.blocks))
                    plan.owned += copy
                    materialize_rerotated(
                        cache.pool,
                        entry.blocks,
                        copy,
                        len(toks),
                        layout.doc_offsets[d],
                        rope,
                        prefer=prefer,
                    )
                    plan.doc_blocks.append(copy)
        elif policy == "prefix":
            chain: list[str] = []
            for d, toks in enumerate(docs):
                chain.append(document_key(toks, bs))
                start = layout.doc_offsets[d]
                entry, hit = cache.acquire(
                    document_seq_key(chain),
                    len(toks),
                    _filler(prefill_document, toks, start),
                )
                plan.pinned.append(entry)
                plan.hits += hit
                plan.misses += not hit
                plan.doc_blocks.append(entry.blocks)
        else:  # recompute
            for d, toks in enumerate(docs):
                blocks = cache.allocate(blocks_for(len(toks), bs))
                plan.owned += blocks
                prefill_document(toks, blocks, layout.doc_offsets[d], "document")
                plan.doc_blocks.append(blocks)
                plan.misses += 1
    except BaseException:
        release_plan(cache, plan)
        raise
    return plan


def release_plan(cache: DocumentKVCache, plan: RequestPlan) -> None:
    """Unpin the plan's cache entries and free its private blocks."""
    for entry in plan.pinned:
        cache.release(entry)
    plan.pinned = []
    cache.pool.free(plan.owned)
    plan.owned = []


def block_diagonal_mask(
    doc_lengths: Sequence[int], query_len: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean ``(T, T)`` "may attend" mask over ``[doc₀]…[doc_{n−1}][query]``, T = Σ L_d + Tq:
    causal inside each document and nothing across documents; query tokens see every document
    and, causally, the query."""
    n_doc = sum(doc_lengths)
    t = n_doc + query_len
    causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
    seg = torch.cat(
        [torch.full((n,), i, device=device) for i, n in enumerate(doc_lengths)]
        + [torch.full((query_len,), -1, device=device)]
    )
    same_doc = seg[:, None] == seg[None, :]
    is_query = (seg == -1)[:, None]
    return causal & (same_doc | is_query)
