"""Block-padded request layout: document lengths → blocks, per-block RoPE offsets and pad masks.

A request is ``[doc₀][doc₁]…[doc_{n−1}][query]``. Each document was prefilled once on its own at
local positions 0..L_d−1 and stored in ⌈L_d / B⌉ whole blocks (right-padded, so no block holds
two documents). Logically the documents sit back to back without padding, so document d starts
at

    Δ_d = Σ_{e<d} L_e                (the *unpadded* offset; paper §4 "position fix-up")

and the query token t sits at position Σ_e L_e + t. A key stored at local position j of document
d is logically at Δ_d + j; the kernel de-rotates Q by Δ_d for every block of d. The last block of
a document carries its pad count so padding never scores.

The paper keeps vLLM's padded positions for the query and de-rotates by P_pad + Σ_{e<d} L_e; we
rotate the query at its unpadded position directly, which gives the same relative distances
(every score is identical) with a smaller offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from icml26_kernels.attention import OFFSET_MAX, BlockTableOverflowError, pack_block_table

__all__ = ["DocumentLayout", "OffsetOverflowError", "blocks_for"]


class OffsetOverflowError(BlockTableOverflowError):
    """A document offset Δ does not fit the packed block table's 16-bit offset field."""


def blocks_for(n_tokens: int, block_size: int) -> int:
    """⌈n_tokens / block_size⌉."""
    return -(-n_tokens // block_size)


@dataclass(frozen=True)
class DocumentLayout:
    """Layout of the documents of one request (construct with :meth:`from_lengths`)."""

    doc_lengths: tuple[int, ...]  # L_d, tokens of each document, request order
    block_size: int  # B, tokens per KV block

    @classmethod
    def from_lengths(cls, doc_lengths: Sequence[int], block_size: int) -> DocumentLayout:
        """Validate and build; raises :class:`OffsetOverflowError` when Δ cannot be represented."""
        if not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive int; got {block_size!r}")
        lengths = tuple(int(n) for n in doc_lengths)
        if not lengths:
            raise ValueError("doc_lengths must name at least one document; got an empty list")
        if min(lengths) < 1:
            raise ValueError(f"every document needs >= 1 token; got lengths {list(lengths)}")
        layout = cls(lengths, block_size)
        if layout.max_rotation_offset > OFFSET_MAX:
            raise OffsetOverflowError(
                f"the last document starts at offset {layout.max_rotation_offset} > {OFFSET_MAX}, "
                "which the 16-bit offset field of the packed block table cannot represent; "
                "use fewer or shorter documents in one request"
            )
        return layout

    @property
    def n_docs(self) -> int:
        return len(self.doc_lengths)

    @property
    def doc_blocks(self) -> tuple[int, ...]:
        """⌈L_d / B⌉ blocks per document."""
        return tuple(blocks_for(n, self.block_size) for n in self.doc_lengths)

    @property
    def padded_lengths(self) -> tuple[int, ...]:
        """P_d = B·⌈L_d / B⌉."""
        return tuple(nb * self.block_size for nb in self.doc_blocks)

    @property
    def doc_offsets(self) -> tuple[int, ...]:
        """Δ_d = Σ_{e<d} L_e: logical start of each document."""
        out, acc = [], 0
        for n in self.doc_lengths:
            out.append(acc)
            acc += n
        return tuple(out)

    @property
    def total_length(self) -> int:
        """Σ L_d: the query's first position."""
        return sum(self.doc_lengths)

    @property
    def max_rotation_offset(self) -> int:
        """The largest Δ any block carries (the last document's start)."""
        return self.doc_offsets[-1]

    @property
    def block_offsets(self) -> list[int]:
        """Δ of every document block, request order."""
        return [off for off, nb in zip(self.doc_offsets, self.doc_blocks) for _ in range(nb)]

    @property
    def block_pads(self) -> list[int]:
        """Pad slots of every document block (non-zero only on a document's last block)."""
        out: list[int] = []
        for n, nb in zip(self.doc_lengths, self.doc_blocks):
            out += [0] * (nb - 1) + [nb * self.block_size - n]
        return out

    def block_table(
        self,
        doc_block_ids: Sequence[Sequence[int]],
        private_block_ids: Sequence[int] = (),
        private_tokens: int = 0,
        *,
        width: int | None = None,
    ) -> torch.Tensor:
        """Packed block-table row: documents' blocks (offset Δ_d) then the request's private
        blocks (its own query/generated tokens, stored at absolute positions: offset 0).

        Args:
            doc_block_ids: pool blocks of each document, request order.
            private_block_ids: blocks holding the request's own tokens, in order.
            private_tokens: how many tokens those blocks hold (the last block's pad follows).
            width: pad the row with zero (unused) entries to this many columns.

        Returns:
            int64 tensor ``(n_entries,)`` (or ``(width,)``).
        """
        if len(doc_block_ids) != self.n_docs:
            raise ValueError(
                f"doc_block_ids must list {self.n_docs} documents; got {len(doc_block_ids)}"
            )
        ids: list[int] = []
        for d, (blocks, nb) in enumerate(zip(doc_block_ids, self.doc_blocks)):
            if len(blocks) != nb:
                raise ValueError(f"document {d} needs {nb} blocks; got {len(blocks)}")
            ids += list(blocks)
        offs, pads = self.block_offsets, self.block_pads
        n_priv = blocks_for(private_tokens, self.block_size)
        if len(private_block_ids) != n_priv:
            raise ValueError(
                f"{private_tokens} private tokens need {n_priv} private blocks; got {len(private_block_ids)}"
            )
        if n_priv:
            ids += list(private_block_ids)
            offs = offs + [0] * n_priv
            pads = pads + [0] * (n_priv - 1) + [n_priv * self.block_size - private_tokens]
        row = pack_block_table(ids, offs, pads, block_size=self.block_size)
        if width is not None:
            if width < row.numel():
                raise ValueError(f"width={width} is smaller than the {row.numel()} entries")
            row = torch.cat([row, row.new_zeros(width - row.numel())])
        return row
