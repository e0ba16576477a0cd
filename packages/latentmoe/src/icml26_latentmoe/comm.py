"""All-to-all with autograd and communication accounting, plus the analytical traffic model.

Every collective the MoE layers issue goes through :func:`all_to_all`, which records what it
actually sends while a :func:`count_comm` block is open: one collective, and the bytes of the
rows whose destination is another rank (rows a rank keeps for itself cost nothing).

Analytical model per layer forward, per rank, N tokens on the rank, W ranks, b bytes/element
(Multi-Head LatentMoE §3.2 and §2 on EP):

    HP:  2 · N · H · d_h · b · (W − 1) / W          2 collectives, fixed equal splits
    EP:  2 · Σ_n Σ_j [rank(e_nj) ≠ self] · d · b    3 collectives (split sizes, dispatch, combine)
         = 2 · N · k · d · b · (W − 1) / W           for uniformly spread routing

HP's volume is independent of k and its splits are the same at every step; EP's grows with k,
depends on the routing, and needs the split-size exchange before the data can move.

The collective itself is the *functional* ``all_to_all_single`` of
``torch.distributed._functional_collectives`` (forward and backward both), so ``torch.compile``
traces it into the graph instead of breaking on the in-place ``dist.all_to_all_single``.
Recording is eager-only (skipped while compiling).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

__all__ = [
    "CommStats",
    "all_to_all",
    "count_comm",
    "ep_bytes_formula",
    "ep_bytes_from_routing",
    "hp_bytes_formula",
]


@dataclass
class CommRecord:
    """One collective call: who sent how much."""

    kind: str  # "hp_dispatch", "hp_combine", "ep_splits", "ep_dispatch", "ep_combine" (+ ".grad")
    input_splits: tuple[int, ...]  # rows sent to each rank
    row_bytes: int
    remote_bytes: int  # bytes sent to other ranks


@dataclass
class CommStats:
    """What the collectives sent while :func:`count_comm` was open (this rank's view)."""

    records: list[CommRecord] = field(default_factory=list)

    @property
    def collectives(self) -> int:
        return len(self.records)

    @property
    def bytes_sent(self) -> int:
        return sum(r.remote_bytes for r in self.records)

    def bytes_of(self, prefix: str) -> int:
        return sum(r.remote_bytes for r in self.records if r.kind.startswith(prefix))

    def count_of(self, prefix: str) -> int:
        return sum(1 for r in self.records if r.kind.startswith(prefix))


_ACTIVE: list[CommStats] = []


@contextmanager
def count_comm() -> Iterator[CommStats]:
    """Record every :func:`all_to_all` issued inside the block (nested blocks all record)."""
    stats = CommStats()
    _ACTIVE.append(stats)
    try:
        yield stats
    finally:
        _ACTIVE.remove(stats)


def _record(kind: str, x: torch.Tensor, splits: Sequence[int], rank: int) -> None:
    if torch.compiler.is_compiling() or not _ACTIVE:
        return
    row_bytes = x.element_size() * math.prod(x.shape[1:])
    remote = sum(s for r, s in enumerate(splits) if r != rank) * row_bytes
    rec = CommRecord(kind, tuple(int(s) for s in splits), row_bytes, remote)
    for stats in _ACTIVE:
        stats.records.append(rec)


def _raw_all_to_all(x, in_splits, out_splits, group, kind):
    if not torch.compiler.is_compiling():
        _record(kind, x, in_splits, dist.get_rank(group))
    # functional collective (module attribute looked up per call: tests wrap it to read bytes)
    out = funcol.all_to_all_single(x.contiguous(), list(out_splits), list(in_splits), group)
    if isinstance(out, funcol.AsyncCollectiveTensor):  # eager: wait here, return a plain tensor
        out = out.wait()
    return out


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, in_splits, out_splits, group, kind):
        ctx.args = (in_splits, out_splits, group, kind)
        return _raw_all_to_all(x, in_splits, out_splits, group, kind)

    @staticmethod
    def backward(ctx, grad):
        in_splits, out_splits, group, kind = ctx.args
        # the adjoint of an all-to-all is the all-to-all with the split sizes swapped
        return (
            _raw_all_to_all(grad, out_splits, in_splits, group, kind + ".grad"),
            None,
            None,
            None,
            None,
        )


def all_to_all(
    x: torch.Tensor,
    in_splits: Sequence[int],
    out_splits: Sequence[int],
    group: dist.ProcessGroup | None,
    kind: str = "all_to_all",
) -> torch.Tensor:
    """Rows ``x[sum(in_splits[:r]) : ...]`` go to rank r; returns the rows received, by source.

    Differentiable (the backward is the reverse all-to-all). ``kind`` labels the record.
    """
    in_splits = [int(s) for s in in_splits]
    out_splits = [int(s) for s in out_splits]
    if sum(in_splits) != x.shape[0]:
        raise ValueError(f"in_splits must sum to x.shape[0] = {x.shape[0]}; got {in_splits}")
    return _AllToAll.apply(x, in_splits, out_splits, group, kind)


def hp_bytes_formula(
    num_tokens: int, num_heads: int, head_dim: int, world_size: int, elem_bytes: int = 4
) -> float:
    """Bytes a rank sends per HP layer forward: 2·N·H·d_h·b·(W−1)/W (dispatch + combine)."""
    return 2 * num_tokens * num_heads * head_dim * elem_bytes * (world_size - 1) / world_size


def ep_bytes_formula(
    num_tokens: int, top_k: int, d_model: int, world_size: int, elem_bytes: int = 4
) -> float:
    """Expected bytes a rank sends per EP layer forward for uniform routing: 2·N·k·d·b·(W−1)/W."""
    return 2 * num_tokens * top_k * d_model * elem_bytes * (world_size - 1) / world_size


def ep_bytes_from_routing(
    indices: torch.Tensor,
    num_experts: int,
    d_model: int,
    world_size: int,
    rank: int,
    elem_bytes: int = 4,
) -> int:
    """Exact EP token bytes for a routing (N, k): 2·Σ_n Σ_j [owner(e_nj) ≠ rank]·d·b.

    Experts are split in contiguous blocks: expert e lives on rank e // (E / W).
    """
    owner = indices // (num_experts // world_size)
    return int(2 * int((owner != rank).sum()) * d_model * elem_bytes)
