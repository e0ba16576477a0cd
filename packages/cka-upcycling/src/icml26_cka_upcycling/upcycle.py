"""Upcycling: dense FFN -> MoE, and selective growth of an MoE's experts, function-preserving.

The layer (:class:`UpcycledMoE`) routes each token over S expert *slots* with the shared top-k
router, and each slot s holds c_s >= 1 physical copies mixed by a per-slot softmax
("copy router", a reconstruction: the abstract only says experts are replicated):

    idx, g = topk_router(x, R, b, k)                     (N, k) slots, gates summing to 1
    u_p    = x · Q[:, p] + q_p                           copy logits, one per physical expert p
    π_p    = m_p e^{u_p} / Σ_{p' ∈ slot(p)} m_p' e^{u_p'}  presence-weighted softmax in the slot
    y      = Σ_j g_j Σ_{p ∈ slot(idx_j)} π_p · f_p(x) + b2
    f_p(x) = gelu(x W1[p] + b1[p]) W2[p]                          GELU experts (default)
    f_p(x) = (silu(x W_g[p] + b_g[p]) ⊙ (x W_u[p] + b_u[p])) W2[p]  SwiGLU experts (Llama, Qwen)

(W1[p] = [W_g | W_u] is stored fused, (d, 2m); the hidden bias b1 is optional and enters the
grouped kernel as one more input row, [x, 1] · [W1; b1], so the kernel needs no bias operand.)

Token permutation and the grouped expert MLP come from :mod:`icml26_kernels.moe`; the (slot,
copy) pairs of a token are flattened into k·C_max assignments (C_max = the largest c_s; padding
assignments carry gate 0).

Function preservation (exact up to float rounding, checked in fp64 by the tests):

* :func:`upcycle_ffn` copies a dense FFN into every slot (sparse upcycling, Komatsuzaki et al.
  2023): ``Linear -> GELU -> Linear`` with or without biases, or a Llama-style gated MLP
  (``gate_proj``, ``up_proj``, ``down_proj``, SiLU; e.g. ``LlamaMLP``, ``Qwen2MLP``). All experts
  are equal and the gates sum to 1, so any router initialization preserves the function.
* :meth:`UpcycledMoE.grow` adds a copy p' of a source copy p in the same slot, copies its copy
  logit and sets q_p, q_p' <- q_p - log 2: the two share p's old mass, e^{u-log2}·2 = e^{u}.
* :meth:`UpcycledMoE.add_experts` is the other form of growth: new *routed* experts, i.e.
  new router columns (sparse-upcycling / LLaMA-MoE style). New slot s' copies slot s (all its
  copies, copy logits included) and its router column, R[:, s'] = R[:, s]; its selection bias
  is b[s'] = b[s] − ``bias_offset``. The gates use the logits only, so s' is an exact
  replica of s, but top-k *selection* changes wherever s' enters a token's top k (it displaces
  another slot): the function is preserved exactly only while s' is never selected (an offset
  larger than any logit gap), and aux-loss-free balancing (which raises the bias of an
  under-loaded slot) then brings it in gradually.
* The presence m_p in [0, 1] is the Gumbel mask of a provisional copy during the search;
  m_p = 0 is exactly the layer without p, so dropping an unselected copy changes nothing.

Frozen copies (the sources of a growth, by default) keep their weights: their gradient is cut
with a per-expert ``detach`` inside one stacked weight tensor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
import torch.nn.functional as F
from icml26_kernels.moe import (
    grouped_mlp,
    make_permutation,
    max_rows,
    permute,
    topk_router,
    unpermute,
)
from torch import nn

__all__ = ["UpcycledMoE", "moe_ref", "upcycle_ffn", "upcycle_moe"]

LOG2 = math.log(2.0)


class UpcycledMoE(nn.Module):
    """Top-k MoE over expert slots, each a softmax mixture of one or more expert copies.

    Args:
        d_model: token width d.
        num_experts: S, number of slots (routed experts).
        top_k: k slots per token.
        expert_size: m, hidden width of each expert.
        init_std: std of the random initialization (experts and router).
        block_size: rows per expert block in the permuted buffer (the Triton kernels' row tile
            divides it). ``None``: 64 on a GPU (64-row tensor-core tiles), 16 on the CPU (the
            torch path computes the padding rows too, so small blocks waste less there).
        static_rows: size the permuted buffer statically (``max_rows``; padding rows owned by
            the last copy), so a forward reads nothing back from the device. ``None``: on a GPU.
        backend: ``"auto" | "triton" | "torch"`` for the shared kernels, or ``"dense"``: every
            copy on every token as two GEMMs, (N, d)·(d, P·m1) then (N, P·m)·(P·m, d), weighted
            by the combine weights (zero for unrouted copies). P/(k·C) times the expert FLOPs
            but no permutation: faster for tiny layers on a CPU (the benchmark's width 32).
        activation: ``"gelu"`` or ``"swiglu"`` (gated experts, W1 = [W_g | W_u] of (d, 2m)).
        hidden_bias: give every expert a bias b1 after its first projection (a biased FFN).
    """

    router_bias: torch.Tensor  # (S,) selection bias (aux-loss-free balancing), not in the gates
    slot_of: torch.Tensor  # (P,) long, the slot of each physical expert
    frozen: torch.Tensor  # (P,) bool
    provisional: torch.Tensor  # (P,) bool, copies whose presence the search mask controls

    def __init__(
        self,
        d_model: int,
        num_experts: int,
        top_k: int,
        expert_size: int,
        *,
        init_std: float = 0.02,
        block_size: int | None = None,
        backend: str = "auto",
        activation: str = "gelu",
        hidden_bias: bool = False,
        static_rows: bool | None = None,
    ) -> None:
        super().__init__()
        if backend not in ("auto", "triton", "torch", "dense"):
            raise ValueError(
                f"backend must be 'auto', 'triton', 'torch' or 'dense'; got {backend!r}"
            )
        if activation not in ("gelu", "swiglu"):
            raise ValueError(f"activation must be 'gelu' or 'swiglu'; got {activation!r}")
        for name, v in [
            ("d_model", d_model),
            ("num_experts", num_experts),
            ("top_k", top_k),
            ("expert_size", expert_size),
            ("block_size", 1 if block_size is None else block_size),
        ]:
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int; got {v!r}")
        if top_k > num_experts:
            raise ValueError(f"top_k must be <= num_experts={num_experts}; got {top_k}")
        S, d, m = num_experts, d_model, expert_size
        self.d_model, self.num_experts, self.top_k, self.expert_size = d, S, top_k, m
        self.block_size, self.backend, self.activation = block_size, backend, activation
        self.static_rows = static_rows
        m1 = 2 * m if activation == "swiglu" else m  # columns of W1: [W_g | W_u] when gated
        self.router = nn.Parameter(torch.randn(d, S) * init_std)  # R: (d, S)
        self.register_buffer("router_bias", torch.zeros(S))
        self.w1 = nn.Parameter(torch.randn(S, d, m1) * init_std)  # (P, d, m1)
        self.b1: nn.Parameter | None = (
            nn.Parameter(torch.zeros(S, m1)) if hidden_bias else None
        )  # (P, m1) hidden bias
        self.w2 = nn.Parameter(torch.randn(S, m, d) * init_std)  # (P, m, d)
        self.copy_router = nn.Parameter(torch.zeros(d, S))  # Q: (d, P)
        self.copy_bias = nn.Parameter(torch.zeros(S))  # q: (P,)
        self.out_bias: nn.Parameter | None = None  # (d,), set by upcycle_ffn for a biased FFN
        self.register_buffer("slot_of", torch.arange(S))
        self.register_buffer("frozen", torch.zeros(S, dtype=torch.bool))
        self.register_buffer("provisional", torch.zeros(S, dtype=torch.bool))
        self.presence: torch.Tensor | None = None  # (num provisional,) mask values, set by search
        self._struct: tuple | None = None  # _structure()'s cache and the buffers it was read from

    # ------------------------------------------------------------------ structure
    @property
    def num_copies(self) -> int:
        """P, the number of physical experts."""
        return self.w1.shape[0]

    def copies_per_slot(self) -> list[int]:
        return torch.bincount(self.slot_of, minlength=self.num_experts).tolist()

    def expert_params(self) -> int:
        """Parameters one copy adds: W1 (and b1), W2, its copy-router column and bias."""
        m1 = self.w1.shape[2]
        hidden = (self.d_model + (1 if self.b1 is not None else 0)) * m1
        return hidden + self.expert_size * self.d_model + self.d_model + 1

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_experts={self.num_experts}, top_k={self.top_k}, "
            f"expert_size={self.expert_size}, activation={self.activation!r}, "
            f"hidden_bias={self.b1 is not None}, copies={self.copies_per_slot()}"
        )

    def _structure(self) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(slot table, valid mask, number of provisional copies), recomputed (one host sync)
        only when ``slot_of`` or ``provisional`` change (a new tensor or an in-place write bumps
        its version), so a forward on a GPU reads nothing back from the device."""
        bufs = (self.slot_of, self.provisional)
        versions = tuple(b._version for b in bufs)
        c = self._struct  # (buffers, their versions, result) of the last computation
        if c is None or any(a is not b for a, b in zip(c[0], bufs)) or c[1] != versions:
            table, valid = self._slot_table()
            c = self._struct = (bufs, versions, (table, valid, int(self.provisional.sum())))
        return c[2]

    def _slot_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(S, C_max) physical index of each slot's copies (padded with the first copy), valid mask."""
        S, dev = self.num_experts, self.slot_of.device
        counts = torch.bincount(self.slot_of, minlength=S)
        cmax = int(counts.max())
        order = torch.argsort(
            self.slot_of, stable=True
        )  # copies grouped by slot, in creation order
        starts = torch.cumsum(counts, 0) - counts
        col = torch.arange(cmax, device=dev)
        valid = col[None, :] < counts[:, None]  # (S, C)
        pos = (starts[:, None] + col[None, :].clamp_max(counts[:, None] - 1)).clamp_max(
            order.numel() - 1
        )
        return order[pos], valid

    def _presence(self, dtype: torch.dtype, n: int) -> torch.Tensor:
        """m_p: 1 for permanent copies, the search mask for the n provisional ones. (P,)"""
        pres = torch.ones(self.num_copies, dtype=dtype, device=self.w1.device)
        if self.presence is not None:
            if self.presence.shape != (n,):
                raise ValueError(
                    f"presence must have shape ({n},) (one per provisional copy); got {tuple(self.presence.shape)}"
                )
            pres = pres.masked_scatter(self.provisional, self.presence.to(dtype))
        return pres

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}; got shape {tuple(x.shape)}"
            )
        xs = x.reshape(-1, self.d_model)  # (N, d)
        kb = "torch" if self.backend == "dense" else self.backend  # the shared kernels' backend
        idx, gates = topk_router(xs, self.router, self.router_bias, k=self.top_k, backend=kb)
        table, valid, n_prov = self._structure()  # (S, C), (S, C), int
        phys, ok = table[idx], valid[idx]  # (N, k, C)
        u = xs @ self.copy_router + self.copy_bias  # (N, P) copy logits
        u = torch.gather(u, 1, phys.flatten(1)).view(phys.shape)  # (N, k, C)
        u = u.masked_fill(~ok, float("-inf"))
        w = self._presence(u.dtype, n_prov)[phys] * torch.exp(
            u - u.amax(-1, keepdim=True)
        )  # m_p e^{u_p}
        pi = w / w.sum(-1, keepdim=True)  # (N, k, C) presence-weighted softmax in the slot
        comb = (gates.to(xs.dtype)[..., None] * pi).flatten(1)  # (N, k·C)
        w1 = torch.where(self.frozen[:, None, None], self.w1.detach(), self.w1)  # (P, d, m1)
        w2 = torch.where(self.frozen[:, None, None], self.w2.detach(), self.w2)
        xin = xs
        if self.b1 is not None:  # [x, 1] · [W1; b1] = x W1 + b1 (padding rows stay all-zero)
            b1 = torch.where(self.frozen[:, None], self.b1.detach(), self.b1)
            w1 = torch.cat([w1, b1[:, None, :]], 1)  # (P, d + 1, m1)
            xin = torch.cat([xs, xs.new_ones(xs.shape[0], 1)], 1)  # (N, d + 1)
        if self.backend == "dense":
            y = self._dense_experts(xin, w1, w2, phys.flatten(1), comb)
            if self.out_bias is not None:
                y = y + self.out_bias
            return y.view_as(x)
        bs = self.block_size or (64 if xs.is_cuda else 16)
        static = xs.is_cuda if self.static_rows is None else self.static_rows
        rows = max_rows(phys.numel(), self.num_copies, bs) if static else None  # no host sync
        perm = make_permutation(phys.flatten(1), self.num_copies, bs, num_rows=rows)
        yp = grouped_mlp(
            permute(xin, perm, backend=self.backend),
            w1,
            w2,
            perm,
            activation=self.activation,
            backend=self.backend,
        )
        y = unpermute(yp, perm, comb, backend=self.backend)
        if self.out_bias is not None:
            y = y + self.out_bias  # Σ g π = 1, so a shared output bias is exact
        return y.view_as(x)

    def _dense_experts(
        self,
        xin: torch.Tensor,  # (N, d1) tokens (with the ones column when b1 is set)
        w1: torch.Tensor,  # (P, d1, m1)
        w2: torch.Tensor,  # (P, m, d)
        phys: torch.Tensor,  # (N, k·C) physical copy of each assignment
        comb: torch.Tensor,  # (N, k·C) its combine weight g_j π_p (0 for padding)
    ) -> torch.Tensor:
        """y = Σ_p c_{np} f_p(x_n) for all P copies at once: c (N, P) scatters the combine weights."""
        n, (P, d1, m1), m = xin.shape[0], w1.shape, w2.shape[1]
        c = comb.new_zeros(n, P).scatter_add(1, phys, comb)  # (N, P)
        pre = (xin @ w1.permute(1, 0, 2).reshape(d1, P * m1)).view(n, P, m1)
        if self.activation == "swiglu":
            gate, up = pre.chunk(2, dim=-1)
            h = F.silu(gate) * up  # (N, P, m)
        else:
            h = F.gelu(pre)
        return (h * c[..., None]).reshape(n, P * m) @ w2.reshape(P * m, -1)  # (N, d)

    # ------------------------------------------------------------------ growth
    @torch.no_grad()
    def grow(
        self,
        slots: Sequence[int],
        *,
        noise: float = 0.0,
        freeze_source: bool = True,
        provisional: bool = False,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Add one copy to each slot in ``slots`` (source: the slot's newest copy); returns new indices.

        Function-preserving when ``noise == 0``: the new copy duplicates the source's weights and
        copy logit, and both logits drop by log 2. ``noise`` adds N(0, (noise·std(W))²) to the new
        copy's weights (Drop-Upcycling-style symmetry breaking; no longer exact). ``provisional``
        copies are the search's candidates: their presence is the mask, their sources are not
        frozen until :meth:`commit`.
        """
        slots = [int(s) for s in slots]
        for s in slots:
            if not 0 <= s < self.num_experts:
                raise ValueError(f"slots must lie in [0, num_experts={self.num_experts}); got {s}")
        if len(set(slots)) != len(slots):
            raise ValueError(f"slots must not repeat; got {slots}")
        if not noise >= 0:
            raise ValueError(f"noise must be >= 0; got {noise}")
        new = []
        for s in slots:
            src = int(torch.nonzero(self.slot_of == s).max())  # newest copy of slot s
            self._append_copy(src, s, noise, generator)
            self.copy_bias.data[src] -= LOG2
            self.copy_bias.data[-1] = self.copy_bias.data[src]
            p = self.num_copies - 1
            self.provisional[p] = provisional
            if freeze_source and not provisional:
                self.frozen[src] = True
            new.append(p)
        return new

    @torch.no_grad()
    def add_experts(
        self,
        sources: Sequence[int],
        *,
        bias_offset: float = 1e4,
        noise: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Grow the router: one new slot per entry of ``sources``, a replica of that slot.

        The new slot gets copies of all the source slot's copies (weights, hidden bias, copy
        logits), the source's router column and the selection bias b[src] − ``bias_offset``
        (see the module docstring: exact while the new slot is never selected; 1e4 keeps it out
        of every top k at the start, and a smaller offset lets it compete at once). ``noise``
        perturbs the new copies' weights (Drop-Upcycling-style). Returns the new slot indices.
        """
        sources = [int(s) for s in sources]
        for s in sources:
            if not 0 <= s < self.num_experts:
                raise ValueError(
                    f"sources must lie in [0, num_experts={self.num_experts}); got {s}"
                )
        if not (bias_offset >= 0 and math.isfinite(bias_offset)):
            raise ValueError(f"bias_offset must be finite and >= 0; got {bias_offset}")
        if not noise >= 0:
            raise ValueError(f"noise must be >= 0; got {noise}")
        new_slots = []
        for s in sources:
            slot = self.num_experts
            for p in torch.nonzero(self.slot_of == s).flatten().tolist():
                self._append_copy(p, slot, noise, generator)
            self.router = nn.Parameter(
                torch.cat([self.router.data, self.router.data[:, s : s + 1]], 1),
                requires_grad=self.router.requires_grad,
            )
            self.router_bias = torch.cat(
                [self.router_bias, (self.router_bias[s] - bias_offset)[None]]
            )
            self.num_experts += 1
            new_slots.append(slot)
        return new_slots

    def _append_copy(self, src: int, slot: int, noise: float, generator) -> None:
        def cat(t: torch.Tensor, row: torch.Tensor) -> torch.Tensor:
            return torch.cat([t, row[None]], 0)

        w1, w2 = self.w1.data[src].clone(), self.w2.data[src].clone()
        if self.b1 is not None:
            self.b1 = nn.Parameter(
                cat(self.b1.data, self.b1.data[src]), requires_grad=self.b1.requires_grad
            )
        if noise > 0:
            for w in (w1, w2):
                z = torch.randn(w.shape, generator=generator, dtype=w.dtype).to(w.device)
                w.add_(noise * w.std() * z)
        self.w1 = nn.Parameter(cat(self.w1.data, w1), requires_grad=self.w1.requires_grad)
        self.w2 = nn.Parameter(cat(self.w2.data, w2), requires_grad=self.w2.requires_grad)
        self.copy_router = nn.Parameter(
            torch.cat([self.copy_router.data, self.copy_router.data[:, src : src + 1]], 1),
            requires_grad=self.copy_router.requires_grad,
        )
        self.copy_bias = nn.Parameter(
            cat(self.copy_bias.data, self.copy_bias.data[src]),
            requires_grad=self.copy_bias.requires_grad,
        )
        self.slot_of = cat(self.slot_of, self.slot_of.new_tensor(slot))
        self.frozen = cat(self.frozen, self.frozen.new_tensor(False))
        self.provisional = cat(self.provisional, self.provisional.new_tensor(False))

    @torch.no_grad()
    def commit(
        self, keep: torch.Tensor | Sequence[bool], *, freeze_source: bool = True
    ) -> list[int]:
        """End a search: keep the provisional copies where ``keep`` (one per provisional copy, in
        index order), delete the others (exactly the layer at presence 0), freeze kept sources.
        Returns the slots that grew."""
        prov = torch.nonzero(self.provisional).flatten().tolist()
        keep = [bool(k) for k in (keep.tolist() if isinstance(keep, torch.Tensor) else keep)]
        if len(keep) != len(prov):
            raise ValueError(
                f"keep must have one entry per provisional copy ({len(prov)}); got {len(keep)}"
            )
        grown, drop = [], []
        for p, k in zip(prov, keep):
            s = int(self.slot_of[p])
            if k:
                grown.append(s)
                if freeze_source:
                    older = torch.nonzero((self.slot_of == s) & ~self.provisional).flatten()
                    self.frozen[older] = True
            else:
                drop.append(p)
        self.provisional.zero_()
        self.presence = None
        if drop:
            live = torch.ones(self.num_copies, dtype=torch.bool, device=self.slot_of.device)
            live[drop] = False
            self.w1 = nn.Parameter(self.w1.data[live], requires_grad=self.w1.requires_grad)
            self.w2 = nn.Parameter(self.w2.data[live], requires_grad=self.w2.requires_grad)
            if self.b1 is not None:
                self.b1 = nn.Parameter(self.b1.data[live], requires_grad=self.b1.requires_grad)
            self.copy_router = nn.Parameter(
                self.copy_router.data[:, live], requires_grad=self.copy_router.requires_grad
            )
            self.copy_bias = nn.Parameter(
                self.copy_bias.data[live], requires_grad=self.copy_bias.requires_grad
            )
            self.slot_of, self.frozen = self.slot_of[live], self.frozen[live]
            self.provisional = self.provisional[live]
        return grown


def moe_ref(layer: UpcycledMoE, x: torch.Tensor) -> torch.Tensor:
    """Dense reference of :meth:`UpcycledMoE.forward`: every copy on every token, then masked.

    O(N·P) expert evaluations, no permutation; used by the tests against the kernel path.
    """
    xs = x.reshape(-1, layer.d_model)
    logits = xs @ layer.router  # (N, S)
    idx = torch.topk(logits + layer.router_bias, layer.top_k, -1).indices  # (N, k)
    gates = torch.softmax(torch.gather(logits, 1, idx), -1)  # (N, k)
    g_slot = torch.zeros_like(logits).scatter(1, idx, gates)  # (N, S)
    u = xs @ layer.copy_router + layer.copy_bias  # (N, P)
    pres = layer._presence(u.dtype, int(layer.provisional.sum()))
    same = layer.slot_of[None, :] == layer.slot_of[:, None]  # (P, P)
    e = pres * torch.exp(u - u.amax(-1, keepdim=True))  # (N, P)
    pi = e / (e @ same.to(e.dtype))  # normalize within each slot
    pre = torch.einsum("nd,pdm->npm", xs, layer.w1)  # (N, P, m1)
    if layer.b1 is not None:
        pre = pre + layer.b1
    if layer.activation == "swiglu":
        gate, up = pre.chunk(2, dim=-1)
        hidden = F.silu(gate) * up
    else:
        hidden = F.gelu(pre)
    outs = torch.einsum("npm,pmd->npd", hidden, layer.w2)  # (N, P, d)
    y = torch.einsum("np,npd->nd", g_slot[:, layer.slot_of] * pi, outs)
    if layer.out_bias is not None:
        y = y + layer.out_bias
    return y.view_as(x)


_FFN_HELP = (
    "ffn must be nn.Sequential(nn.Linear(d, m), nn.GELU(), nn.Linear(m, d)) (biases optional, "
    "exact GELU) or a Llama-style gated MLP with gate_proj, up_proj, down_proj Linears and a SiLU "
    "act_fn (LlamaMLP, Qwen2MLP, MistralMLP)"
)


def _is_silu(act: object) -> bool:
    """True when ``act`` computes silu(u) = u σ(u): nn.SiLU, or transformers' ACT2FN["silu"]
    (a class of its own in some versions), checked on a probe rather than by class name."""
    if isinstance(act, nn.SiLU):
        return True
    if not callable(act):
        return False
    u = torch.linspace(-6.0, 6.0, 25, dtype=torch.float64)
    try:
        out = act(u)
    except Exception:
        return False
    return isinstance(out, torch.Tensor) and bool(
        torch.allclose(out, F.silu(u), rtol=1e-6, atol=1e-9)
    )


def _ffn_weights(
    ffn: nn.Module,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None, str]:
    """W1 (d, m1), W2 (m, d), b1 (m1,) or None, b2 (d,) or None, and the activation of a dense FFN.

    ``Sequential(Linear(d, m), GELU(), Linear(m, d))``: W1 = A.weightᵀ, activation ``"gelu"``.
    Gated MLP (``gate_proj``, ``up_proj``, ``down_proj``; y = down(silu(gate(x)) ⊙ up(x))):
    W1 = [gate.weightᵀ | up.weightᵀ], activation ``"swiglu"``.
    """
    if all(
        isinstance(getattr(ffn, a, None), nn.Linear) for a in ("gate_proj", "up_proj", "down_proj")
    ):
        g, u, dn = (cast(nn.Linear, getattr(ffn, a)) for a in ("gate_proj", "up_proj", "down_proj"))
        act = getattr(ffn, "act_fn", None)
        if not _is_silu(act):
            raise ValueError(
                f"a gated MLP must use SiLU (hidden_act='silu'); got act_fn {type(act).__name__}"
            )
        if (
            g.weight.shape != u.weight.shape
            or dn.in_features != g.out_features
            or dn.out_features != g.in_features
        ):
            raise ValueError(
                f"gated MLP must map d -> m (gate, up) -> d; got gate {tuple(g.weight.shape)}, "
                f"up {tuple(u.weight.shape)}, down {tuple(dn.weight.shape)}"
            )
        if (g.bias is None) != (u.bias is None):
            raise ValueError("gate_proj and up_proj must both have a bias or both have none")
        b1 = None if g.bias is None or u.bias is None else torch.cat([g.bias, u.bias])
        return torch.cat([g.weight.T, u.weight.T], 1), dn.weight.T, b1, dn.bias, "swiglu"
    mods = list(ffn.children()) if isinstance(ffn, nn.Sequential) else []
    if (
        len(mods) != 3
        or not isinstance(mods[0], nn.Linear)
        or not isinstance(mods[1], nn.GELU)
        or not isinstance(mods[2], nn.Linear)
    ):
        raise ValueError(
            f"{_FFN_HELP}; got {type(ffn).__name__} with children {[type(m).__name__ for m in mods]}"
        )
    a, act, b = cast(nn.Linear, mods[0]), mods[1], cast(nn.Linear, mods[2])
    if getattr(act, "approximate", "none") != "none":
        raise ValueError(
            "ffn's GELU must be the exact (erf) form, approximate='none', as in the expert MLP"
        )
    if b.in_features != a.out_features or b.out_features != a.in_features:
        raise ValueError(
            f"ffn must map d -> m -> d; got {a.in_features}->{a.out_features}->{b.out_features}"
        )
    return a.weight.T, b.weight.T, a.bias, b.bias, "gelu"


@torch.no_grad()
def upcycle_ffn(
    ffn: nn.Module,
    num_experts: int,
    *,
    top_k: int = 2,
    router_init: str = "zero",
    noise: float = 0.0,
    init_std: float = 0.02,
    generator: torch.Generator | None = None,
    backend: str = "auto",
) -> UpcycledMoE:
    """Sparse upcycling: a dense FFN becomes an MoE of ``num_experts`` copies of it.

    Args:
        ffn: ``nn.Sequential(nn.Linear(d, m), nn.GELU(), nn.Linear(m, d))`` (biases optional), or
            a Llama-style gated MLP (``gate_proj``, ``up_proj``, ``down_proj``, SiLU ``act_fn``:
            ``LlamaMLP``, ``Qwen2MLP``, ``MistralMLP``, with or without ``mlp_bias``), whose
            copies are SwiGLU experts.
        num_experts: S >= 1 slots, each initialized to the FFN.
        top_k: k <= S slots per token.
        router_init: ``"zero"`` (uniform gates), ``"orthogonal"`` (orthogonal columns scaled by
            ``init_std``; distinct routing from the start, cf. mergekit#664) or ``"normal"``.
        noise: relative Gaussian noise added to every copy but the first (0: exact function).
    """
    if not isinstance(num_experts, int) or isinstance(num_experts, bool) or num_experts < 1:
        raise ValueError(f"num_experts must be a positive int; got {num_experts!r}")
    if router_init not in ("zero", "orthogonal", "normal"):
        raise ValueError(
            f"router_init must be 'zero', 'orthogonal' or 'normal'; got {router_init!r}"
        )
    if not noise >= 0:
        raise ValueError(f"noise must be >= 0; got {noise}")
    W1, W2, b1, b2, activation = _ffn_weights(ffn)
    d, m1 = W1.shape  # m1 = m, or 2m for a gated MLP
    m = W2.shape[0]
    moe = UpcycledMoE(
        d,
        num_experts,
        top_k,
        m,
        init_std=init_std,
        backend=backend,
        activation=activation,
        hidden_bias=b1 is not None,
    )
    moe = moe.to(device=W1.device, dtype=W1.dtype)
    moe.w1.copy_(W1.expand(num_experts, d, m1))
    moe.w2.copy_(W2.expand(num_experts, m, d))
    if b1 is not None:
        assert moe.b1 is not None
        moe.b1.copy_(b1.expand(num_experts, m1))
    for p in range(1, num_experts if noise > 0 else 0):
        for w in (moe.w1[p], moe.w2[p]):
            z = torch.randn(w.shape, generator=generator, dtype=w.dtype).to(w.device)
            w.add_(noise * w.std() * z)
    if router_init == "zero":
        moe.router.zero_()
    elif router_init == "orthogonal":
        r = torch.empty(d, num_experts, dtype=torch.float64)
        nn.init.orthogonal_(r, generator=generator)
        moe.router.copy_(r * init_std)
    else:
        moe.router.copy_(
            torch.randn(d, num_experts, generator=generator, dtype=torch.float64) * init_std
        )
    if b2 is not None:
        moe.out_bias = nn.Parameter(b2.detach().clone())
    return moe


@torch.no_grad()
def upcycle_moe(
    moe: nn.Module,
    num_copies: int = 2,
    *,
    slots: Sequence[int] | None = None,
    freeze_source: bool = True,
    backend: str = "auto",
) -> UpcycledMoE:
    """Upcycle an existing top-k MoE layer: every slot (or ``slots``) gets ``num_copies`` copies.

    ``moe`` is an :class:`UpcycledMoE` (grown in place and returned) or any module with
    ``router`` (d, E), ``w1`` (E, d, m), ``w2`` (E, m, d) and ``top_k`` (optionally
    ``router_bias`` (E,)), such as ``icml26_latentmoe.MoE``; the routing over the E original
    experts is kept, so the function is preserved exactly.
    """
    if not isinstance(num_copies, int) or isinstance(num_copies, bool) or num_copies < 1:
        raise ValueError(f"num_copies must be a positive int; got {num_copies!r}")
    if isinstance(moe, UpcycledMoE):
        layer = moe
    else:
        for a in ("router", "w1", "w2", "top_k"):
            if not hasattr(moe, a):
                raise ValueError(
                    f"moe must have attributes router, w1, w2, top_k; {a!r} is missing"
                )
        router, w1, w2 = (getattr(moe, a) for a in ("router", "w1", "w2"))
        bias = getattr(moe, "router_bias", None)
        assert isinstance(router, torch.Tensor) and isinstance(w1, torch.Tensor)
        assert isinstance(w2, torch.Tensor)
        E, d, m = w1.shape
        top_k = moe.top_k
        assert isinstance(top_k, int)
        layer = UpcycledMoE(d, E, top_k, m, backend=backend).to(w1.device, w1.dtype)
        layer.router.copy_(router)
        layer.w1.copy_(w1)
        layer.w2.copy_(w2)
        if isinstance(bias, torch.Tensor):
            layer.router_bias.copy_(bias)
    targets = list(range(layer.num_experts)) if slots is None else list(slots)
    for _ in range(num_copies - 1):
        layer.grow(targets, freeze_source=freeze_source)
    return layer
