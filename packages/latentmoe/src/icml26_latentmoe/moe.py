"""Baseline: a plain top-k MoE layer with Expert Parallel (EP), for side-by-side comparison.

    idx = top-k_e (x R + b),   g = softmax((x R)[idx]),   y = Σ_j g_j · gelu(x W1[e_j]) · W2[e_j]

With ``process_group`` set, the E experts are split over the W ranks in contiguous blocks
(expert e on rank e // (E/W)). One forward issues three all-to-alls:

1. split sizes: how many rows each rank will receive for each of its experts (metadata);
2. dispatch: every (token, expert) assignment whose expert lives elsewhere is sent there,
   so the volume is ~ N·k·d and depends on the routing;
3. combine: the expert outputs come back the same way; gates are applied at the source.

Balancing: the aux-loss-free bias (:meth:`update_bias`) and/or the Switch aux loss and router
z-loss (``aux_loss_coef``, ``z_loss_coef``: the weighted sum is left in ``self.aux_loss`` after
each training forward, to be added to the task loss).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from icml26_kernels import select_backend
from icml26_kernels.moe import (
    aux_free_bias_update,
    expert_load,
    grouped_mlp,
    make_permutation,
    max_rows,
    permute,
    router_z_loss,
    switch_aux_loss,
    topk_router,
    unpermute,
)
from torch import nn

from ._precision import KeepRouterFP32, recomputing
from .comm import all_to_all

__all__ = ["MoE", "moe_ref"]


class MoE(KeepRouterFP32):
    """Top-k MoE of GELU MLP experts, (..., d_model) -> (..., d_model), optionally expert-parallel.

    Args:
        d_model: token width d.
        num_experts: E (divisible by the EP world size).
        top_k: k experts per token.
        expert_size: m, hidden width of each expert.
        block_size: rows per expert block in the permuted buffer; None: 64 (Triton) or 16 (torch).
        aux_loss_coef: weight of the Switch load-balancing loss (0 disables it).
        z_loss_coef: weight of the router z-loss (0 disables it).
        init_std, num_layers: as in :class:`MultiHeadLatentMoE`.
        process_group: a ``torch.distributed`` group for Expert Parallel, or None.
        static_capacity: (single process only) size the permuted buffer by its bound
            P_max = N·k + E·(bs − 1) and skip the finiteness check, so nothing is read back from
            the device and ``torch.compile(fullgraph=True)`` traces the layer.
        backend: ``"auto" | "triton" | "torch"``.
    """

    router_bias: torch.Tensor  # buffer (E,)
    expert_load: torch.Tensor  # buffer (E,) long, tokens routed since the last bias update

    #: kept in fp32 (or fp64) whatever dtype the module is cast to
    FP32: tuple[str, ...] = ("router", "router_bias")

    def __init__(
        self,
        d_model: int,
        num_experts: int,
        top_k: int,
        expert_size: int,
        *,
        block_size: int | None = None,
        aux_loss_coef: float = 0.0,
        z_loss_coef: float = 0.0,
        init_std: float = 0.02,
        num_layers: int = 1,
        process_group: dist.ProcessGroup | None = None,
        static_capacity: bool = False,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        for name, v in [
            ("d_model", d_model),
            ("num_experts", num_experts),
            ("top_k", top_k),
            ("expert_size", expert_size),
            ("num_layers", num_layers),
        ]:
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int; got {v!r}")
        if top_k > num_experts:
            raise ValueError(f"top_k must be <= num_experts={num_experts}; got {top_k}")
        if top_k < 2 and not (aux_loss_coef or z_loss_coef):
            raise ValueError(
                f"top_k must be >= 2 (or set aux_loss_coef / z_loss_coef): with k = 1 the gate "
                f"softmax(one logit) is constantly 1 and the router gets no gradient; got {top_k}"
            )
        if static_capacity and process_group is not None:
            raise ValueError(
                "static_capacity=True needs process_group=None: expert parallelism exchanges "
                "routing-dependent split sizes, which are read back from the device"
            )
        self.world_size = 1 if process_group is None else dist.get_world_size(process_group)
        self.rank = 0 if process_group is None else dist.get_rank(process_group)
        if num_experts % self.world_size:
            raise ValueError(
                f"num_experts must be divisible by the process group's world size {self.world_size}; got {num_experts}"
            )
        self.d_model, self.num_experts, self.top_k, self.expert_size = (
            d_model,
            num_experts,
            top_k,
            expert_size,
        )
        self.local_experts = num_experts // self.world_size
        if block_size is not None:
            if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
                raise ValueError(f"block_size must be a positive int or None; got {block_size!r}")
        self.block_size, self.backend, self.process_group = block_size, backend, process_group
        self.static_capacity = bool(static_capacity)
        self.aux_loss_coef, self.z_loss_coef = aux_loss_coef, z_loss_coef
        own = slice(self.rank * self.local_experts, (self.rank + 1) * self.local_experts)
        out_std = init_std / math.sqrt(2 * num_layers)
        E, m = num_experts, expert_size
        self.router = nn.Parameter(torch.randn(d_model, E) * init_std)  # (d, E), replicated
        self.w1 = nn.Parameter((torch.randn(E, d_model, m) * init_std)[own].clone())  # (E_l, d, m)
        self.w2 = nn.Parameter((torch.randn(E, m, d_model) * out_std)[own].clone())  # (E_l, m, d)
        self.register_buffer("router_bias", torch.zeros(E))
        self.register_buffer("expert_load", torch.zeros(E, dtype=torch.long), persistent=False)
        self.aux_loss: torch.Tensor | None = None

    def _block_size(self, device: torch.device) -> int:
        """Rows per expert block: 64 (a tensor-core tile) for the Triton kernels, 16 otherwise."""
        if self.block_size is not None:
            return self.block_size
        return 16 if select_backend(device, prefer=self.backend).backend == "torch" else 64

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_experts={self.num_experts}, top_k={self.top_k}, "
            f"expert_size={self.expert_size}, world_size={self.world_size}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}; got shape {tuple(x.shape)}"
            )
        xs = x.reshape(-1, self.d_model)  # (N, d)
        E, static = self.num_experts, self.static_capacity
        idx, gates = topk_router(
            xs,
            self.router,
            self.router_bias,
            k=self.top_k,
            backend=self.backend,
            check_finite=not static,
        )  # (N, k)
        if static:
            idx = idx.clamp(0, E - 1)  # a non-finite row (-1) stays in bounds; its gates are NaN
        gates = gates.to(xs.dtype)
        perm = None
        if self.process_group is None:
            bs = self._block_size(xs.device)
            cap = max_rows(idx.numel(), E, bs) if static else None
            perm = make_permutation(idx, E, bs, num_rows=cap)
        if self.training:
            if not recomputing():  # count once under activation checkpointing
                load = perm.counts if perm is not None else expert_load(idx.detach(), E)
                self.expert_load += load
            self.aux_loss = None
            if self.aux_loss_coef or self.z_loss_coef:
                logits = xs.to(self.router.dtype) @ self.router  # (N, E): the losses need all
                self.aux_loss = self.aux_loss_coef * switch_aux_loss(
                    logits, idx
                ) + self.z_loss_coef * router_z_loss(logits)
        if perm is not None:
            yp = grouped_mlp(
                permute(xs, perm, backend=self.backend),
                self.w1,
                self.w2,
                perm,
                backend=self.backend,
            )
            y = unpermute(yp, perm, gates, backend=self.backend)
        else:
            y = self._expert_parallel(xs, idx, gates)
        return y.view_as(x)

    def _expert_parallel(
        self, xs: torch.Tensor, idx: torch.Tensor, gates: torch.Tensor
    ) -> torch.Tensor:
        W, El, group = self.world_size, self.local_experts, self.process_group
        # assignments sorted by expert = grouped by destination rank; no padding on the wire
        send_perm = make_permutation(idx, self.num_experts, 1)
        send = permute(xs, send_perm, backend=self.backend)  # (N·k, d)
        counts = send_perm.counts.view(W, El)  # (W, E_l): rows for each expert of each rank
        send_splits = counts.sum(1).tolist()
        # 1. metadata: each rank learns how many rows it gets from every source, per local expert
        recv_counts = all_to_all(counts, [1] * W, [1] * W, group, "ep_splits")  # (W src, E_l)
        recv_splits = recv_counts.sum(1).tolist()
        # 2. dispatch: data-dependent split sizes
        recv = all_to_all(
            send, send_splits, recv_splits, group, "ep_dispatch"
        )  # (R, d), by (src, expert)
        local_e = torch.repeat_interleave(
            torch.arange(El, device=xs.device).repeat(W), recv_counts.reshape(-1)
        )
        perm = make_permutation(local_e[:, None], El, self._block_size(xs.device))
        yp = grouped_mlp(
            permute(recv, perm, backend=self.backend), self.w1, self.w2, perm, backend=self.backend
        )
        out = unpermute(yp, perm, backend=self.backend)  # (R, d), back in received order
        if torch.is_grad_enabled() and self.w1.requires_grad and not out.requires_grad:
            # a rank that received no rows must still join the backward all-to-all of step 3
            out = out.detach().requires_grad_()
        # 3. combine: outputs return to their source ranks, gates applied there
        back = all_to_all(
            out, recv_splits, send_splits, group, "ep_combine"
        )  # (N·k, d) in send order
        return unpermute(back, send_perm, gates, backend=self.backend)

    @torch.no_grad()
    def update_bias(self, rate: float) -> torch.Tensor:
        """Aux-loss-free bias step (see :func:`icml26_kernels.moe.aux_free_bias_update`).

        Under EP the load is summed over ranks first (the router is replicated, so every rank
        must apply the same update). Returns the load used and resets it.
        """
        load = self.expert_load.clone()
        if self.process_group is not None:
            dist.all_reduce(load, group=self.process_group)
        self.router_bias.copy_(aux_free_bias_update(self.router_bias, load, rate))
        self.expert_load.zero_()
        return load


@torch.no_grad()
def moe_ref(module: MoE, x: torch.Tensor) -> torch.Tensor:
    """Per-token loop over a single-rank :class:`MoE`'s parameters: the test oracle."""
    if module.process_group is not None:
        raise ValueError("moe_ref needs a single-rank module (process_group=None)")
    xs = x.reshape(-1, module.d_model)
    out = torch.zeros_like(xs)
    for n in range(xs.shape[0]):
        logits = xs[n] @ module.router
        sel = torch.topk(logits + module.router_bias, module.top_k).indices
        g = torch.softmax(logits[sel], 0)
        for j, e in enumerate(sel.tolist()):
            out[n] += g[j] * (F.gelu(xs[n] @ module.w1[e]) @ module.w2[e])
    return out.view_as(x)
