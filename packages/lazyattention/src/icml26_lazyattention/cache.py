"""A position-independent document KV cache over a fixed pool of KV blocks.

- :class:`BlockPool`: ``k, v: (n_layers, n_blocks, block_size, H_kv, D)`` allocated once, a free
  list, and byte counters of every KV write by kind (``"document"`` = a cache miss prefilled,
  ``"copy"`` = KV materialized by re-encoding, ``"private"`` = a request's own tokens,
  ``"rotate"`` = K re-rotated in place by the in-place baseline).
- :func:`document_key`: a content hash whose chain starts from a fixed root, *not* from the
  request's preceding tokens (paper §4 "document caching": the block-hash chain of a document
  starts from None), so the key is the same wherever the document is placed. The document's
  length closes the chain, so one 32-token document and two 16-token documents never alias.
- :class:`DocumentKVCache`: key → blocks, with reference counts (pinned while a request uses
  them), LRU eviction of unpinned entries when the pool runs out, hit / miss / eviction counters.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from icml26_kernels.attention import PAD_MAX

from .layout import blocks_for

__all__ = [
    "BlockPool",
    "CacheEntry",
    "DocumentKVCache",
    "PoolExhaustedError",
    "document_key",
    "document_seq_key",
]

_ROOT = b"icml26-lazyattention/document-root"


class PoolExhaustedError(RuntimeError):
    """No free blocks remain and nothing unpinned can be evicted."""


def _h(*parts: bytes) -> bytes:
    m = hashlib.blake2b(digest_size=16)
    for p in parts:
        m.update(len(p).to_bytes(8, "little"))
        m.update(p)
    return m.digest()


def _tokens_bytes(tokens: Sequence[int]) -> bytes:
    return torch.as_tensor(list(tokens), dtype=torch.int64).numpy().tobytes()


def document_key(tokens: Sequence[int], block_size: int) -> str:
    """Position-independent content key of one document.

    h₀ = H(root); h_i = H(h_{i−1}, tokens of block i); key = H(h_n, L). The chain never sees the
    document's position or neighbours; the final length term separates a 32-token document from
    two 16-token ones (whose block hashes would otherwise chain identically).
    """
    toks = list(tokens)
    if not toks:
        raise ValueError("a document must have at least one token")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1; got {block_size}")
    h = _h(_ROOT)
    for s in range(0, len(toks), block_size):
        h = _h(h, _tokens_bytes(toks[s : s + block_size]))
    return _h(h, len(toks).to_bytes(8, "little")).hex()


def document_seq_key(doc_keys: Sequence[str]) -> str:
    """Key of an ordered tuple of documents (boundaries included): the prefix-cache chain seed."""
    h = _h(b"icml26-lazyattention/document-seq")
    for k in doc_keys:
        h = _h(h, bytes.fromhex(k))
    return h.hex()


class BlockPool:
    """Fixed pool of KV blocks shared by every layer (a block id names the same slot in each layer)."""

    KINDS = ("document", "copy", "private", "rotate")

    def __init__(
        self,
        *,
        n_layers: int,
        n_blocks: int,
        block_size: int,
        n_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        for name, val in (
            ("n_layers", n_layers),
            ("n_blocks", n_blocks),
            ("block_size", block_size),
            ("n_kv_heads", n_kv_heads),
            ("head_dim", head_dim),
        ):
            if not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int; got {val!r}")
        if block_size > PAD_MAX + 1:
            raise ValueError(
                f"block_size must be <= {PAD_MAX + 1} (the packed table's pad field is 16 bits); "
                f"got {block_size}"
            )
        shape = (n_layers, n_blocks, block_size, n_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (L, N, B, H_kv, D)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size = block_size
        self.n_blocks = n_blocks
        self._free = list(range(n_blocks - 1, -1, -1))
        self.bytes_written = dict.fromkeys(self.KINDS, 0)

    @property
    def n_free(self) -> int:
        return len(self._free)

    @property
    def bytes_per_token(self) -> int:
        """K + V bytes of one token across all layers."""
        n_layers, _, _, h_kv, d = self.k.shape
        return 2 * n_layers * h_kv * d * self.k.element_size()

    def alloc(self, n: int) -> list[int]:
        if n > len(self._free):
            raise PoolExhaustedError(f"need {n} blocks, {len(self._free)} free of {self.n_blocks}")
        return [self._free.pop() for _ in range(n)]

    def free(self, blocks: Sequence[int]) -> None:
        self._free.extend(reversed(list(blocks)))

    def write(
        self,
        layer: int,
        blocks: Sequence[int],
        start: int,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        kind: str,
    ) -> None:
        """Write ``k, v (T, H_kv, D)`` at token slots ``start .. start+T−1`` of the concatenated
        ``blocks`` of one layer, counting ``T`` tokens of KV bytes under ``kind``."""
        if kind not in self.bytes_written:
            raise ValueError(f"kind must be one of {self.KINDS}; got {kind!r}")
        t = k.shape[0]
        if start < 0 or start + t > len(blocks) * self.block_size:
            raise ValueError(
                f"slots {start}..{start + t} do not fit {len(blocks)} blocks of {self.block_size}"
            )
        slots = torch.arange(start, start + t, device=self.k.device)
        ids = torch.as_tensor(list(blocks), device=self.k.device)[slots // self.block_size]
        self.k[layer, ids, slots % self.block_size] = k.to(self.k.dtype)
        self.v[layer, ids, slots % self.block_size] = v.to(self.v.dtype)
        self.bytes_written[kind] += t * self.bytes_per_token // self.k.shape[0]

    def scatter(
        self, layer: int, dest: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, kind: str
    ) -> None:
        """Write ``k, v (n, H_kv, D)`` at flat slots ``dest (n,)`` (``block * block_size + slot``,
        on the pool's device) of one layer; counted like :meth:`write`. No device→host read."""
        if kind not in self.bytes_written:
            raise ValueError(f"kind must be one of {self.KINDS}; got {kind!r}")
        n, bs, h_kv, d = self.k.shape[1:]
        self.k[layer].view(n * bs, h_kv, d).index_copy_(0, dest, k.to(self.k.dtype))
        self.v[layer].view(n * bs, h_kv, d).index_copy_(0, dest, v.to(self.v.dtype))
        self.bytes_written[kind] += dest.shape[0] * self.bytes_per_token // self.k.shape[0]


@dataclass
class CacheEntry:
    """One cached document: its pool blocks and token count."""

    key: str
    blocks: list[int]
    n_tokens: int
    refcount: int = 0
    hits: int = field(default=0)
    offset: int = 0  # position of the first token the stored K is rotated for (0: local)


class DocumentKVCache:
    """Content-addressed document KV over a :class:`BlockPool`, LRU-evicted, reference counted."""

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()  # LRU order: oldest first
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def hit_ratio(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    def allocate(self, n_blocks: int) -> list[int]:
        """``n_blocks`` free blocks, evicting least-recently-used unpinned entries as needed."""
        while self.pool.n_free < n_blocks:
            victim = next((e for e in self._entries.values() if e.refcount == 0), None)
            if victim is None:
                pinned = sum(len(e.blocks) for e in self._entries.values())
                why = (
                    f"every cached document ({pinned} blocks) is pinned by a running request"
                    if self._entries
                    else "nothing is cached (the other blocks hold running requests' own tokens)"
                )
                raise PoolExhaustedError(
                    f"need {n_blocks} blocks but only {self.pool.n_free} of "
                    f"{self.pool.n_blocks} are free and {why}; enlarge the pool (n_blocks)"
                )
            del self._entries[victim.key]
            self.pool.free(victim.blocks)
            self.evictions += 1
        return self.pool.alloc(n_blocks)

    def acquire(
        self, key: str, n_tokens: int, fill: Callable[[list[int]], None]
    ) -> tuple[CacheEntry, bool]:
        """Pin the entry for ``key``; on a miss allocate ⌈n_tokens / B⌉ blocks and call
        ``fill(blocks)`` to write its KV. Returns ``(entry, hit)``."""
        entry = self._entries.get(key)
        if entry is not None:
            if entry.n_tokens != n_tokens:
                raise ValueError(
                    f"key {key[:12]}… is cached with {entry.n_tokens} tokens, not {n_tokens}"
                )
            self._entries.move_to_end(key)
            entry.refcount += 1
            entry.hits += 1
            self.hits += 1
            return entry, True
        self.misses += 1
        blocks = self.allocate(blocks_for(n_tokens, self.pool.block_size))
        entry = CacheEntry(key, blocks, n_tokens, refcount=1)
        self._entries[key] = entry  # pinned before fill so a nested allocate cannot evict it
        try:
            fill(blocks)
        except BaseException:
            del self._entries[key]
            self.pool.free(blocks)
            raise
        return entry, False

    def release(self, entry: CacheEntry) -> None:
        """Unpin an entry obtained from :meth:`acquire`."""
        if entry.refcount <= 0:
            raise ValueError(f"entry {entry.key[:12]}… is not pinned")
        entry.refcount -= 1
