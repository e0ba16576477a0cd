"""Body of the distributed tests, run in each spawned rank (imported by name in the children).

Every check compares the distributed layer with the single-process layer built from the same
seed: outputs of this rank's tokens, gradients (replicated weights all-reduced), expert loads,
and the bytes / split sizes the collectives actually carried.
"""

from __future__ import annotations

import datetime
import os
import sys

import icml26_latentmoe as L
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

D, H, DH, E, M, N = (
    16,
    4,
    8,
    8,
    12,
    6,
)  # d_model, heads, head dim, experts, expert width, tokens/rank
KS = (2, 3, 4)


class _Wire:
    """Wraps the functional ``all_to_all_single`` (``torch.distributed._functional_collectives``)
    that every HP / EP collective goes through, forward and backward: the bytes each call really
    moved to other ranks, read off the tensors handed to the collective (not from the package's
    own counter)."""

    def __init__(self):
        self.calls: list[int] = []
        self._real = funcol.all_to_all_single

    def __enter__(self):
        def wrapped(input, output_split_sizes, input_split_sizes, group, *args, **kw):
            me = dist.get_rank(group)
            rows = input.shape[0]
            row_bytes = input.element_size() * input[0].numel() if rows else 0
            splits = input_split_sizes or [
                rows // dist.get_world_size(group)
            ] * dist.get_world_size(group)
            kept = splits[me] * row_bytes
            self.calls.append(input.numel() * input.element_size() - kept)
            return self._real(input, output_split_sizes, input_split_sizes, group, *args, **kw)

        funcol.all_to_all_single = wrapped
        return self

    def __exit__(self, *exc):
        funcol.all_to_all_single = self._real


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
            with L.count_comm() as fwd, _Wire() as wire_f:
                y = hp(x[mine])
            with L.count_comm() as bwd, _Wire() as wire_b:
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
            # what the socket was handed == the counter == the closed form, both directions
            assert len(wire_f.calls) == 2 == len(wire_b.calls)
            assert sum(wire_f.calls) == fwd.bytes_sent == formula, (wire_f.calls, formula)
            assert sum(wire_b.calls) == bwd.bytes_sent == formula, (wire_b.calls, formula)
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
        with L.count_comm() as fwd, _Wire() as wire:
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
        assert wire.calls == [r.remote_bytes for r in fwd.records], (wire.calls, fwd.records)
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
    assert ep_bytes[2] < ep_bytes[3] < ep_bytes[4], ep_bytes  # EP traffic grows with k


def _check_unequal_tokens(rank, world, group):
    torch.manual_seed(0)
    hp = L.MultiHeadLatentMoE(D, H, DH, E, 2, M, backend="torch", process_group=group)
    try:
        hp(torch.randn(N + (rank == world - 1), D))
    except ValueError as exc:
        assert "same number of tokens" in str(exc) and f"from {N} to {N + 1}" in str(exc), exc
    else:
        raise AssertionError("unequal token counts were not detected")
    hp(torch.randn(N, D))  # the group is still usable afterwards


def _check_hp_compiles(rank, world, group):
    """The HP layer under ``torch.compile(fullgraph=True)`` (functional collectives, static
    capacity, token check off): no graph break, and forward + backward equal eager."""
    torch._dynamo.reset()
    mine = slice(rank * N, (rank + 1) * N)
    mods = []
    for _ in range(2):
        torch.manual_seed(7)
        mods.append(
            L.MultiHeadLatentMoE(
                D,
                H,
                DH,
                E,
                2,
                M,
                init_std=0.3,
                backend="torch",
                process_group=group,
                static_capacity=True,
                check_token_counts=False,
            )
        )
    eager, static = mods
    compiled = torch.compile(static, fullgraph=True, backend="aot_eager")
    x, dy, _ = _data(world, seed=3)
    xa, xb = x[mine].clone().requires_grad_(), x[mine].clone().requires_grad_()
    ya = eager(xa)
    yb = compiled(xb)
    (ya * dy[mine]).sum().backward()
    (yb * dy[mine]).sum().backward()
    _close(yb, ya.detach(), "compiled HP output")
    _close(xb.grad, xa.grad, "compiled HP input grad")
    for (name, pa), pb in zip(eager.named_parameters(), static.parameters()):
        _close(pb.grad, pa.grad, f"compiled HP grad {name}")
    assert torch.equal(static.expert_load, eager.expert_load)


class _Net(torch.nn.Module):
    """A shared weight around one MH-LatentMoE layer: both kinds of parameters."""

    def __init__(self, **kw):
        super().__init__()
        self.inp = torch.nn.Linear(D, D)
        self.moe = L.MultiHeadLatentMoE(D, H, DH, E, 2, M, init_std=0.3, backend="torch", **kw)

    def forward(self, x):
        return self.moe(torch.tanh(self.inp(x)))


def _check_hp_dp(rank, world):
    """2 HP × 2 DP on 4 gloo ranks, with DDP and with the manual all-reduce, one SGD step each,
    against one process that holds every head and sees every token."""
    from icml26_latentmoe import parallel as P

    mesh = P.hp_dp_mesh(2)
    hp_group, dp_group = P.hp_dp_groups(mesh)
    hp_rank, hl = dist.get_rank(hp_group), H // 2
    heads = slice(hp_rank * hl, (hp_rank + 1) * hl)
    mine = slice(rank * N, (rank + 1) * N)
    x, dy, bias = _data(world, seed=99)
    for mode in ("ddp", "fsdp2", "manual"):
        torch.manual_seed(7)
        ref = _Net()
        torch.manual_seed(7)
        net = _Net(process_group=hp_group, replica_group=dp_group)
        ref.moe.router_bias.copy_(bias)
        net.moe.router_bias.copy_(bias[heads])
        if mode == "ddp":
            model = P.data_parallel(net, mesh)
        elif mode == "fsdp2":
            model = P.fully_shard_hp(net, mesh)  # shared weights become DP-sharded DTensors
        else:
            model = net
        # DDP must not have overwritten this rank's heads with rank 0's
        _close(net.moe.router.detach(), ref.moe.router[heads].detach(), f"{mode} init router")
        _close(net.moe.router_bias, ref.moe.router_bias[heads], f"{mode} init bias")
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        for _step in range(2):
            # reference: the mean over ranks of each rank's mean loss, all tokens in one process
            ref_opt.zero_grad()
            ref_loss = (ref(x) * dy).sum(-1).view(world, N).mean(1).mean()
            ref_loss.backward()
            ref_opt.step()
            ref.moe.update_bias(0.05)
            opt.zero_grad()
            loss = (model(x[mine]) * dy[mine]).sum(-1).mean()
            loss.backward()
            if mode in ("ddp", "fsdp2"):
                P.sync_head_local_grads(net, mesh)
            else:
                P.all_reduce_grads(net, mesh)
            opt.step()
            net.moe.update_bias(0.05)
            for name, p in net.named_parameters():
                want = dict(ref.named_parameters())[name]
                if name.startswith("moe.") and name.split(".")[1] in net.moe.HEAD_LOCAL:
                    want = want[heads]
                got = p.detach().full_tensor() if hasattr(p, "full_tensor") else p.detach()
                _close(got, want.detach(), f"{mode} {name} after SGD step {_step}")
            _close(net.moe.router_bias, ref.moe.router_bias[heads], f"{mode} bias step {_step}")
    assert set(P.head_local_names(net)) == {f"moe.{n}" for n in net.moe.HEAD_LOCAL}


def run(rank: int, world: int, port: int, checks: str = "all") -> None:
    """checks: "all", or "hp_dp" (the 2 HP × 2 DP run only, the default suite's world 4)."""
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
        if checks == "all":
            _check_hp(rank, world, group)
            _check_ep(rank, world, group)
            _check_hp_compiles(rank, world, group)
        _check_unequal_tokens(rank, world, group)
        if world == 4:
            _check_hp_dp(rank, world)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # Every check passed. Leave without interpreter finalisation: the process group outlives
    # destroy_process_group here (the compiled graph's FX nodes keep a reference to it), so its
    # gloo threads would otherwise be torn down while the interpreter finalises, where a C++
    # thread that needs the GIL is ended by pthread_exit and the rank aborts with "terminate
    # called without an active exception" (seen once in CI). A failed check never gets here:
    # the exception reaches torch.multiprocessing's wrapper, which records the rank's traceback
    # for the parent.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
