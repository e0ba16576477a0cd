"""Head Parallel (HP): split the heads, not the experts, over the ranks (§3.2 of the paper).

Rank r owns heads ``r·H_l … (r+1)·H_l − 1`` (H_l = H / W) together with their routers and
experts. Every rank holds N tokens (the same N on every rank: ``B·T`` in the paper). One
all-to-all with fixed equal splits ``[N]·W`` sends, for every token, the H_l sub-tokens of
head group r to rank r:

    dispatch:  (N, H, d_h) local tokens, all heads  ->  (H_l, W·N, d_h) all tokens, own heads
    combine:   the inverse

Per token a rank sends H·d_h·(W−1)/W elements each way, whatever k is; the split sizes never
depend on the routing, so no metadata is exchanged, every rank sends the same volume, and the
pattern is identical at every step. The N must really be equal: :func:`dispatch` checks it
with one tiny all-reduce (``check_tokens``) and raises a ``ValueError`` naming the counts,
instead of a gloo "size doesn't match" or an NCCL hang.

Expert parallelism *inside* a head group (several ranks sharing one head group's experts), which
the paper says HP stays compatible with, is not implemented here: the HP world size is at most
the number of heads; beyond it, add data-parallel replicas (:mod:`.parallel`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .comm import all_to_all

__all__ = ["check_equal_tokens", "combine", "dispatch", "head_groups"]


def head_groups(num_heads: int, group: dist.ProcessGroup | None) -> tuple[int, int, int]:
    """(world size W, this rank r, heads per rank H_l); checks that W divides H."""
    if group is None:
        return 1, 0, num_heads
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if num_heads % world:
        raise ValueError(
            f"num_heads must be divisible by the process group's world size {world}; got {num_heads}"
        )
    return world, rank, num_heads // world


def check_equal_tokens(num_tokens: int, group: dist.ProcessGroup, device=None) -> None:
    """Raise ``ValueError`` unless every rank of ``group`` passes the same ``num_tokens``.

    One all-reduce (MAX) of two integers; every rank of the group must call it.
    """
    t = torch.tensor([num_tokens, -num_tokens], dtype=torch.long, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    hi, lo = int(t[0]), -int(t[1])
    if hi != lo:
        raise ValueError(
            f"Head Parallel needs the same number of tokens N = B·T on every rank of the group; "
            f"this rank (rank {dist.get_rank(group)}) has {num_tokens}, the group ranges from "
            f"{lo} to {hi} (pad or drop tokens so that every rank feeds equal batches)"
        )


def dispatch(
    z: torch.Tensor, group: dist.ProcessGroup | None, *, check_tokens: bool = True
) -> torch.Tensor:
    """(N, H, d_h) local tokens -> (H_l, W·N, d_h) own heads of all tokens, source rank major.

    With ``check_tokens`` (default) the ranks first agree that N is the same everywhere.
    """
    if z.dim() != 3:
        raise ValueError(f"z must be (N, H, d_h); got shape {tuple(z.shape)}")
    n, h, dh = z.shape
    world, _, hl = head_groups(h, group)
    if group is None:
        return z.transpose(0, 1)
    if check_tokens:
        check_equal_tokens(n, group, z.device)
    send = (
        z.reshape(n, world, hl * dh).transpose(0, 1).reshape(world * n, hl * dh)
    )  # (W·N, H_l·d_h)
    recv = all_to_all(send, [n] * world, [n] * world, group, "hp_dispatch")  # (W·N, H_l·d_h)
    return recv.reshape(world * n, hl, dh).transpose(0, 1)  # (H_l, W·N, d_h)


def combine(y: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """(H_l, W·N, d_h) outputs of own heads -> (N, H, d_h) all heads of the local tokens."""
    if y.dim() != 3:
        raise ValueError(f"y must be (H_l, W·N, d_h); got shape {tuple(y.shape)}")
    if group is None:
        return y.transpose(0, 1)
    hl, wn, dh = y.shape
    world = dist.get_world_size(group)
    if wn % world:
        raise ValueError(
            f"y's token dimension must be a multiple of the world size {world}; got {wn}"
        )
    n = wn // world
    send = y.transpose(0, 1).reshape(wn, hl * dh)  # (W·N, H_l·d_h), destination rank major
    recv = all_to_all(send, [n] * world, [n] * world, group, "hp_combine")  # source = head group
    return recv.reshape(world, n, hl, dh).permute(1, 0, 2, 3).reshape(n, world * hl, dh)
