"""Packed block tables: one int64 per KV block carrying its index, RoPE offset and pad count.

LazyAttention (ICML 2026, §4 "per-block metadata") lets the positional correction ride along
with the block table, so a kernel learns everything about a KV block from one load::

    bit  63            48 47            32 31                             0
        [   pad (16)     |  offset+1 (16)  |         block index (32)       ]

- ``block index``: row of the KV pool, ``0 <= idx < 2**31``.
- ``offset``: Δ, the logical position of the block's document start. A key stored at local
  position j is *logically* at Δ + j; the kernel de-rotates Q by Δ instead of re-rotating K.
  The field stores Δ + 1 so that a zero entry means "unused slot" (tables are right-padded
  with zeros), hence ``0 <= Δ <= OFFSET_MAX = 65534``.
- ``pad``: how many trailing slots of the block are padding (never scored), ``< block_size``
  and ``<= PAD_MAX = 65535`` (so blocks larger than 65536 slots cannot carry every pad count).

Values that do not fit raise :class:`BlockTableOverflowError`; nothing is silently truncated.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BLOCK_INDEX_MAX",
    "OFFSET_MAX",
    "PAD_MAX",
    "BlockTableOverflowError",
    "pack_block_table",
    "unpack_block_table",
]

BLOCK_INDEX_MAX = 2**31 - 1  # 32-bit field, kept non-negative
OFFSET_MAX = 2**16 - 2  # 16-bit field stores Δ + 1; 0 is reserved for "unused"
PAD_MAX = 2**16 - 1  # 16-bit field


class BlockTableOverflowError(ValueError):
    """A block index, RoPE offset or pad count does not fit its packed bit field."""


def pack_block_table(
    block_ids: Any, offsets: Any, pads: Any, *, block_size: int | None = None
) -> Any:
    """Pack ``(block_ids, offsets, pads)`` (equal-shape integer tensors) into one int64 tensor.

    Args:
        block_ids: pool rows, ``(..., n_blocks)``.
        offsets: Δ per block (logical start of the block's document), same shape.
        pads: trailing pad slots per block, same shape.
        block_size: if given, pads must be ``< block_size`` (a block is never all padding).

    Returns:
        int64 tensor of the same shape: ``idx | (Δ + 1) << 32 | pad << 48``.
    """
    import torch

    block_ids = torch.as_tensor(block_ids, dtype=torch.int64)
    offsets = torch.as_tensor(offsets, dtype=torch.int64, device=block_ids.device)
    pads = torch.as_tensor(pads, dtype=torch.int64, device=block_ids.device)
    if not (block_ids.shape == offsets.shape == pads.shape):
        raise ValueError(
            "block_ids, offsets and pads must have the same shape; got "
            f"{tuple(block_ids.shape)}, {tuple(offsets.shape)}, {tuple(pads.shape)}"
        )
    if block_ids.numel():
        if int(block_ids.min()) < 0 or int(block_ids.max()) > BLOCK_INDEX_MAX:
            raise BlockTableOverflowError(
                f"block_ids must lie in [0, {BLOCK_INDEX_MAX}]; got range "
                f"[{int(block_ids.min())}, {int(block_ids.max())}]"
            )
        if int(offsets.min()) < 0 or int(offsets.max()) > OFFSET_MAX:
            raise BlockTableOverflowError(
                f"offsets must lie in [0, {OFFSET_MAX}] to fit the 16-bit offset field "
                f"(stored as offset + 1); got range [{int(offsets.min())}, {int(offsets.max())}]. "
                "The request is too long for a packed block table."
            )
        # the 16-bit field bounds the pad even when block_size - 1 is larger (block_size > 65536)
        pad_hi = PAD_MAX if block_size is None else min(block_size - 1, PAD_MAX)
        if int(pads.min()) < 0 or int(pads.max()) > pad_hi:
            raise BlockTableOverflowError(
                f"pads must lie in [0, {pad_hi}]; got range [{int(pads.min())}, {int(pads.max())}]"
            )
    return block_ids | ((offsets + 1) << 32) | (pads << 48)


def unpack_block_table(table: Any) -> tuple[Any, Any, Any, Any]:
    """Inverse of :func:`pack_block_table`.

    Returns:
        ``(block_ids, offsets, pads, used)``; ``used`` is False for zero (padding) entries,
        whose other fields are meaningless.
    """
    import torch

    if not isinstance(table, torch.Tensor) or table.dtype != torch.int64:
        raise TypeError(
            f"block_table must be an int64 torch.Tensor; got {getattr(table, 'dtype', type(table))}"
        )
    block_ids = table & 0xFFFFFFFF
    field = (table >> 32) & 0xFFFF
    pads = (table >> 48) & 0xFFFF
    return block_ids, field - 1, pads, field > 0
