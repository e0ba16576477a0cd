"""Multi-Head LatentMoE (arXiv 2602.04870, §3): MoE on H latent sub-tokens, one router per head.

For a token x ∈ R^d (notation of the paper):

    z      = x · W_in                         W_in ∈ R^{d × H·d_h}, z split into H sub-tokens z_h
    idx_h  = top-k_e ( z_h R_h + b_h )        per-head router R_h ∈ R^{d_h × E}, aux-free bias b_h
    g_h    = softmax( (z_h R_h)[idx_h] )      gates over the k clean logits
    y_h    = Σ_j g_hj · gelu(z_h W1[h, e_j]) · W2[h, e_j]     expert (h, e): a GELU MLP of width m
    out    = concat_h(y_h) · W_out            W_out ∈ R^{H·d_h × d}

Each head has its own E experts (H·E in total); a token activates k ≥ 2 per head (with k = 1
the softmax over one logit is the constant 1 and the router would never learn; the official
code asserts k ≥ 2). With ``process_group`` set, the heads are split over the ranks (Head
Parallel, see :mod:`.head_parallel`): W_in and W_out are replicated like any data-parallel
weight, routers and experts of head h live only on the rank that owns h ("head-local",
:attr:`MultiHeadLatentMoE.HEAD_LOCAL`; see :mod:`.parallel` for DDP / HP × DP).

Precision: the router and its bias stay fp32 under ``.to(dtype)`` / ``.half()`` / ``.bfloat16()``
and route in fp32 under autocast (the paper's router is fp32); everything else follows the
module's dtype.

Kernels: routing, permutation and the expert MLP come from :mod:`icml26_kernels.moe`
(Triton on CUDA, the torch reference elsewhere; ``backend`` chooses). :func:`mh_latent_moe_ref`
is a per-token loop over the same parameters, the oracle of the tests.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from icml26_kernels import select_backend
from icml26_kernels.moe import (
    aux_free_bias_update,
    grouped_mlp,
    make_permutation,
    max_rows,
    permute,
    topk_router,
    unpermute,
)
from torch import nn

from . import head_parallel
from ._precision import KeepRouterFP32, recomputing

__all__ = ["MultiHeadLatentMoE", "mh_latent_moe_ref"]


def _positive_int(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")
    return value


class MultiHeadLatentMoE(KeepRouterFP32):
    """Multi-Head LatentMoE layer: (..., d_model) -> (..., d_model).

    Args:
        d_model: token width d.
        num_heads: H sub-tokens per token (and routers); divisible by the HP world size.
        head_dim: d_h, the sub-token width (H·d_h = d is the usual choice).
        num_experts: E experts per head.
        top_k: k experts per head and sub-token.
        expert_size: m, hidden width of each expert MLP.
        block_size: rows per expert block in the permuted buffer (a multiple of 16 for Triton);
            None: 64 on the Triton path (the tensor-core row tile), 16 on the torch path.
        init_std: std of W_in, the routers and W1 (0.02 as in the paper's code).
        router_init_std: std of the routers if not ``init_std``. With W_in ~ N(0, 0.02) the
            sub-tokens are small in narrow models and 0.02 gives near-constant logits; a
            larger value (e.g. 1/sqrt(head_dim)) restores token-dependent routing there.
        num_layers: depth of the model; W_out uses init_std / sqrt(2·num_layers). W2 (the
            experts' V) uses init_std like W1, as the official code does (0.02 for K and V).
        process_group: a ``torch.distributed`` group for Head Parallel, or None (single rank).
        replica_group: the ranks that hold the *same* heads (the data-parallel group of an
            HP × DP mesh, :func:`icml26_latentmoe.parallel.hp_dp_groups`), or None. Expert loads
            are summed over it before the bias update, so the replicas' biases stay equal.
        check_token_counts: under HP, check once per forward (one tiny all-reduce) that every
            rank feeds the same number of tokens; unequal counts otherwise fail inside the
            all-to-all (gloo) or hang (NCCL). In the hot path (and under ``torch.compile``,
            where its read-back is a graph break) turn it off and call
            :func:`~icml26_latentmoe.head_parallel.check_equal_tokens` once per step instead.
        static_capacity: size the permuted buffer by its bound P_max = N·k + E·(bs − 1) instead
            of the routing's exact size, and skip the per-call index / finiteness checks: the
            expert path then reads nothing back from the device (no host sync; non-finite
            router logits give NaN outputs instead of a ValueError); with it
            ``torch.compile(fullgraph=True)`` traces the layer, HP collectives included.
        backend: ``"auto" | "triton" | "torch"`` for the kernels.

    Initialization draws the full (all-head) tensors from torch's RNG and keeps this rank's
    heads, so the same seed gives the same model at any world size.
    """

    router_bias: torch.Tensor  # buffer (H_l, E)
    expert_load: torch.Tensor  # buffer (H_l, E) long, sub-tokens routed since the last update

    #: parameters and buffers that belong to this rank's heads only (never all-reduced or
    #: broadcast over the HP group; the official code marks them ``*_no_share``)
    HEAD_LOCAL: tuple[str, ...] = ("router", "w1", "w2", "router_bias", "expert_load")
    #: kept in fp32 (or fp64) whatever dtype the module is cast to
    FP32: tuple[str, ...] = ("router", "router_bias")

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        head_dim: int,
        num_experts: int,
        top_k: int,
        expert_size: int,
        *,
        block_size: int | None = None,
        init_std: float = 0.02,
        router_init_std: float | None = None,
        num_layers: int = 1,
        process_group: dist.ProcessGroup | None = None,
        replica_group: dist.ProcessGroup | None = None,
        check_token_counts: bool = True,
        static_capacity: bool = False,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        for name, v in [
            ("d_model", d_model),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
            ("num_experts", num_experts),
            ("top_k", top_k),
            ("expert_size", expert_size),
            ("num_layers", num_layers),
        ]:
            _positive_int(name, v)
        if top_k > num_experts:
            raise ValueError(f"top_k must be <= num_experts={num_experts}; got {top_k}")
        if top_k < 2:
            raise ValueError(
                f"top_k must be >= 2: with k = 1 the gate softmax(one logit) is constantly 1, so "
                f"the router gets no gradient and never learns (the official code asserts k >= 2); "
                f"got {top_k}"
            )
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, head_dim
        self.num_experts, self.top_k, self.expert_size = num_experts, top_k, expert_size
        if block_size is not None:
            _positive_int("block_size", block_size)
        self.block_size, self.backend, self.process_group = block_size, backend, process_group
        self.replica_group, self.check_token_counts = replica_group, check_token_counts
        self.static_capacity = bool(static_capacity)
        self.world_size, self.rank, self.local_heads = head_parallel.head_groups(
            num_heads, process_group
        )
        H, E, m, dh = num_heads, num_experts, expert_size, head_dim
        out_std = init_std / math.sqrt(2 * num_layers)
        own = slice(self.rank * self.local_heads, (self.rank + 1) * self.local_heads)
        self.w_in = nn.Parameter(torch.randn(d_model, H * dh) * init_std)  # (d, H·d_h)
        r_std = init_std if router_init_std is None else router_init_std
        self.router = nn.Parameter((torch.randn(H, dh, E) * r_std)[own].clone())  # (H_l, d_h, E)
        self.w1 = nn.Parameter(
            (torch.randn(H, E, dh, m) * init_std)[own].clone()
        )  # (H_l, E, d_h, m)
        self.w2 = nn.Parameter(
            (torch.randn(H, E, m, dh) * init_std)[own].clone()
        )  # (H_l, E, m, d_h)
        self.w_out = nn.Parameter(torch.randn(H * dh, d_model) * out_std)  # (H·d_h, d)
        self.register_buffer("router_bias", torch.zeros(self.local_heads, E))  # b, (H_l, E)
        self.register_buffer(
            "expert_load", torch.zeros(self.local_heads, E, dtype=torch.long), persistent=False
        )

    def _block_size(self, device: torch.device) -> int:
        """Rows per expert block: 64 (a tensor-core tile) for the Triton kernels, 16 otherwise."""
        if self.block_size is not None:
            return self.block_size
        return 16 if select_backend(device, prefer=self.backend).backend == "torch" else 64

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"num_experts={self.num_experts}, top_k={self.top_k}, expert_size={self.expert_size}, "
            f"world_size={self.world_size}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}; got shape {tuple(x.shape)}"
            )
        lead = x.shape[:-1]
        xs = x.reshape(-1, self.d_model)  # (N, d)
        z = (xs @ self.w_in).view(-1, self.num_heads, self.head_dim)  # (N, H, d_h)
        zl = head_parallel.dispatch(
            z, self.process_group, check_tokens=self.check_token_counts
        )  # (H_l, W·N, d_h)
        yl = self.experts(zl)  # (H_l, W·N, d_h)
        y = head_parallel.combine(yl, self.process_group)  # (N, H, d_h)
        return (y.reshape(-1, self.num_heads * self.head_dim) @ self.w_out).view(
            *lead, self.d_model
        )

    def experts(self, zl: torch.Tensor) -> torch.Tensor:
        """Route and run this rank's heads: (H_l, N', d_h) sub-tokens -> (H_l, N', d_h)."""
        hl, n, dh = zl.shape
        E, k = self.num_experts, self.top_k
        idx, gates = topk_router(
            zl,
            self.router,
            self.router_bias,
            k=k,
            backend=self.backend,
            check_finite=not self.static_capacity,
        )  # (H_l, N', k)
        if self.static_capacity:
            idx = idx.clamp(0, E - 1)  # a non-finite row (-1) stays in bounds; its gates are NaN
        # head h's experts are global experts h·E … h·E + E − 1 of one grouped MLP
        gidx = idx + torch.arange(hl, device=idx.device)[:, None, None] * E  # (H_l, N', k)
        bs = self._block_size(zl.device)
        cap = max_rows(hl * n * k, hl * E, bs) if self.static_capacity else None
        perm = make_permutation(gidx.reshape(hl * n, k), hl * E, bs, num_rows=cap)
        if self.training and not recomputing():  # count once under activation checkpointing
            self.expert_load += perm.counts.view(hl, E)  # sub-tokens per (head, expert)
        rows = zl.reshape(hl * n, dh)  # (H_l·N', d_h)
        xp = permute(rows, perm, backend=self.backend)  # (P, d_h)
        w1 = self.w1.reshape(hl * E, dh, self.expert_size)
        w2 = self.w2.reshape(hl * E, self.expert_size, dh)
        yp = grouped_mlp(xp, w1, w2, perm, backend=self.backend)  # (P, d_h)
        y = unpermute(yp, perm, gates.reshape(hl * n, k).to(yp.dtype), backend=self.backend)
        return y.view(hl, n, dh)

    @torch.no_grad()
    def update_bias(self, rate: float) -> torch.Tensor:
        """Aux-loss-free step b ← b + u·(sign(mean(c) − c) − mean(sign)) per head; resets the load.

        Returns the load (H_l, E) the update used. Under HP each rank owns whole heads and sees
        all their tokens of its HP group, so no load is averaged across the HP group; with a
        ``replica_group`` (HP × DP) the load is summed over the replicas of these heads, so every
        replica applies the same update.
        """
        load = self.expert_load.clone()
        if self.replica_group is not None:
            dist.all_reduce(load, group=self.replica_group)
        self.router_bias.copy_(aux_free_bias_update(self.router_bias, load, rate))
        self.expert_load.zero_()
        return load


@torch.no_grad()
def mh_latent_moe_ref(module: MultiHeadLatentMoE, x: torch.Tensor) -> torch.Tensor:
    """Per-token, per-head loop over ``module``'s parameters (single rank): the test oracle."""
    if module.process_group is not None:
        raise ValueError("mh_latent_moe_ref needs a single-rank module (process_group=None)")
    xs = x.reshape(-1, module.d_model)
    out = torch.zeros_like(xs)
    for n in range(xs.shape[0]):
        z = (xs[n] @ module.w_in).view(module.num_heads, module.head_dim)
        ys = []
        for h in range(module.num_heads):
            logits = z[h] @ module.router[h]  # (E,)
            sel = torch.topk(logits + module.router_bias[h], module.top_k).indices
            g = torch.softmax(logits[sel], 0)
            ys.append(
                sum(
                    (
                        g[j] * (F.gelu(z[h] @ module.w1[h, e]) @ module.w2[h, e])
                        for j, e in enumerate(sel.tolist())
                    ),
                    torch.zeros_like(z[h]),
                )
            )
        out[n] = torch.cat(ys) @ module.w_out
    return out.view_as(x)
