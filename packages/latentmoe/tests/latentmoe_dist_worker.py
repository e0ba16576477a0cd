"""Body of the distributed tests, run in each spawned rank (imported by name in the children).

Every check compares the distributed layer with the single-process layer built from the same
seed: outputs of this rank's tokens, gradients (replicated weights all-reduced), expert loads,
and the bytes / split sizes the collectives actually carried.
"""

from __future__ import annotations

import datetime
import os

import icml26_latentmoe as L
import torch
import torch.distributed as dist

D, H, DH, E, M, N = (
    16,
    4,
    8,
    8,
    12,
    6,
)  # d_model, heads, head dim, experts, expert width, tokens/rank
KS = (1, 2, 4)


def _close(a, b, what):
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (
        f"{what}: max diff {(a - b).abs().max().item()}"
    )


def _data(world, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(world * N, D, generator=gen)
    dy = torch.randn(world * N, D, generator=gen)
    bias = torch.randn(H, E, generator=gen)
    return x, dy, bias


def _check_hp(rank, world, group):
    mine = slice(rank * N, (rank + 1) * N)
    hl = H // world
    heads = slice(rank * hl, (rank + 1) * hl)
    split_history = set()
    fwd_bytes = {}
    for k in KS:
        torch.manual_seed(100 + k)
        full = L.MultiHeadLatentMoE(D, H, DH, E, k, M, init_std=0.3, backend="torch")
        torch.manual_seed(100 + k)
        hp = L.MultiHeadLatentMoE(
            D, H, DH, E, k, M, init_std=0.3, backend="torch", process_group=group
        )
        assert hp.router.shape == (hl, DH, E) and hp.w1.shape == (hl, E, DH, M)
        for step in range(2):  # two steps with different tokens and routings (random biases)
            x, dy, bias = _data(world, seed=10 * k + step)
            full.router_bias.copy_(bias)
            hp.router_bias.copy_(bias[heads])
            full.zero_grad()
            hp.zero_grad()
            y_full = full(x)
            (y_full * dy).sum().backward()
            with L.count_comm() as fwd:
                y = hp(x[mine])
            with L.count_comm() as bwd:
                (y * dy[mine]).sum().backward()
            _close(y, y_full[mine].detach(), f"HP output k={k}")
            for name in ("w_in", "w_out"):
                g = getattr(hp, name).grad.clone()
                dist.all_reduce(g, group=group)
                _close(g, getattr(full, name).grad, f"HP grad {name} k={k}")
            for name in ("router", "w1", "w2"):
                _close(
                    getattr(hp, name).grad, getattr(full, name).grad[heads], f"HP grad {name} k={k}"
                )
            assert torch.equal(hp.expert_load, full.expert_load[heads])
            full.expert_load.zero_()
            hp.expert_load.zero_()
            # the collectives: 2 forward, 2 backward, fixed equal splits [N]·W
            assert [r.kind for r in fwd.records] == ["hp_dispatch", "hp_combine"]
            assert [r.kind for r in bwd.records] == ["hp_combine.grad", "hp_dispatch.grad"]
            for r in fwd.records + bwd.records:
                split_history.add(r.input_splits)
            formula = L.hp_bytes_formula(N, H, DH, world, 4)
            assert fwd.bytes_sent == formula == bwd.bytes_sent, (fwd.bytes_sent, formula)
            fwd_bytes.setdefault(k, set()).add(fwd.bytes_sent)
    assert split_history == {(N,) * world}, split_history
    assert len({b for v in fwd_bytes.values() for b in v}) == 1, fwd_bytes  # same bytes for every k


def _check_ep(rank, world, group):
    mine = slice(rank * N, (rank + 1) * N)
    el = E // world
    own = slice(rank * el, (rank + 1) * el)
    ep_bytes = {}
    for k in KS:
        torch.manual_seed(200 + k)
        full = L.MoE(D, E, k, M, init_std=0.3, backend="torch")
        torch.manual_seed(200 + k)
        ep = L.MoE(D, E, k, M, init_std=0.3, backend="torch", process_group=group)
        x, dy, bias = _data(world, seed=50 + k)
        full.router_bias.copy_(bias[0])
        ep.router_bias.copy_(bias[0])
        y_full = full(x)
        (y_full * dy).sum().backward()
        with L.count_comm() as fwd:
            y = ep(x[mine])
        (y * dy[mine]).sum().backward()
        _close(y, y_full[mine].detach(), f"EP output k={k}")
        g = ep.router.grad.clone()
        dist.all_reduce(g, group=group)
        _close(g, full.router.grad, f"EP grad router k={k}")
        for name in ("w1", "w2"):
            p = getattr(ep, name)  # grad is None on a rank that received no rows
            got = p.grad if p.grad is not None else torch.zeros_like(p)
            _close(got, getattr(full, name).grad[own], f"EP grad {name} k={k}")
        assert [r.kind for r in fwd.records] == ["ep_splits", "ep_dispatch", "ep_combine"]
        # this rank's tokens make a round trip when their expert is elsewhere; the combine a rank
        # sends carries the *other* ranks' tokens, so the identity holds for the sum over ranks
        idx = torch.topk(x[mine] @ full.router + bias[0], k).indices
        totals = torch.tensor(
            [
                float(fwd.bytes_of("ep_dispatch") + fwd.bytes_of("ep_combine")),
                float(L.ep_bytes_from_routing(idx, E, D, world, rank, 4)),
            ]
        )
        dist.all_reduce(totals, group=group)
        assert totals[0] == totals[1], totals.tolist()
        total = totals[:1]
        ep_bytes[k] = total.item()
    assert ep_bytes[1] < ep_bytes[2] < ep_bytes[4], ep_bytes  # EP traffic grows with k


def run(rank: int, world: int, port: int) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=90),
    )
    try:
        group = dist.group.WORLD
        _check_hp(rank, world, group)
        _check_ep(rank, world, group)
        dist.barrier()
    finally:
        dist.destroy_process_group()
