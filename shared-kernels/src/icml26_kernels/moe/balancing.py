"""Load balancing for top-k routers: aux-loss-free bias update, Switch aux loss, router z-loss.

Aux-loss-free balancing (DeepSeek-V3; Multi-Head LatentMoE §3 uses it per head). After each
optimizer step, with c_e the number of tokens routed to expert e since the last update:

    s_e = sign( mean(c) − c_e )                  +1 for under-loaded experts, −1 for over-loaded
    b_e ← b_e + u · ( s_e − mean(s) )            Σ_e b_e is unchanged

Subtracting mean(s) keeps the bias sum constant; it does not change routing, since selection
is invariant to adding a constant to b.

Switch Transformer auxiliary loss (Fedus et al. 2021, eq. 4), with f_e the fraction of
assignments to expert e and P_e the mean router probability of e:

    L_aux = E · Σ_e f_e · P_e                    (= 1 at perfect balance)

Router z-loss (ST-MoE, Zoph et al. 2022, eq. 5):  L_z = mean_n ( logsumexp_e s_ne )².

The last two need the full (N, E) logits; the aux-free update needs only the expert counts,
which is what lets the IO-aware router (:func:`icml26_kernels.moe.topk_router`) skip them.
"""

from __future__ import annotations

import torch

__all__ = [
    "aux_free_bias_update",
    "expert_load",
    "load_imbalance",
    "router_z_loss",
    "switch_aux_loss",
]


def expert_load(indices: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Tokens routed to each expert: (..., N, k) int -> (..., E) int64 counts (per leading group)."""
    if not isinstance(indices, torch.Tensor) or indices.dim() < 2:
        raise ValueError("indices must be an integer tensor of shape (..., N, k)")
    if not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"num_experts must be a positive int; got {num_experts!r}")
    lead = indices.shape[:-2]
    flat = indices.reshape(-1, indices.shape[-2] * indices.shape[-1]).long()  # (G, N·k)
    # the range check reads back from the device; a compiled graph skips it (scatter_add_
    # still refuses an out-of-range index on CPU)
    if (
        not torch.compiler.is_compiling()
        and flat.numel()
        and (int(flat.min()) < 0 or int(flat.max()) >= num_experts)
    ):
        raise ValueError(f"indices must lie in [0, num_experts={num_experts})")
    counts = torch.zeros(flat.shape[0], num_experts, dtype=torch.long, device=indices.device)
    counts.scatter_add_(1, flat, torch.ones_like(flat))
    return counts.reshape(*lead, num_experts)


def load_imbalance(load: torch.Tensor) -> torch.Tensor:
    """max_e c_e / mean_e c_e over the last dim (1 = perfectly balanced)."""
    load = load.float()
    return load.amax(-1) / load.mean(-1).clamp_min(1e-12)


def aux_free_bias_update(bias: torch.Tensor, load: torch.Tensor, rate: float) -> torch.Tensor:
    """New bias b + u·(sign(mean(c) − c) − mean(sign(·))), per row of (..., E); sum preserved."""
    if bias.shape != load.shape:
        raise ValueError(
            f"load must have the bias's shape {tuple(bias.shape)}; got {tuple(load.shape)}"
        )
    if not rate >= 0:
        raise ValueError(f"rate must be a non-negative float; got {rate!r}")
    load = load.to(bias.dtype)
    s = torch.sign(load.mean(-1, keepdim=True) - load)  # (..., E)
    return bias + rate * (s - s.mean(-1, keepdim=True))


def switch_aux_loss(logits: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Switch load-balancing loss E·Σ_e f_e P_e from logits (N, E) and top-k indices (N, k)."""
    if logits.dim() != 2 or indices.dim() != 2 or indices.shape[0] != logits.shape[0]:
        raise ValueError(
            f"logits must be (N, E) and indices (N, k) with the same N; got "
            f"{tuple(logits.shape)} and {tuple(indices.shape)}"
        )
    num_experts = logits.shape[1]
    f = expert_load(indices, num_experts).to(logits.dtype) / indices.numel()  # (E,)
    p = torch.softmax(logits, dim=-1).mean(0)  # (E,)
    return num_experts * (f * p).sum()


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """mean over tokens of logsumexp(logits)², logits (..., E)."""
    return torch.logsumexp(logits, dim=-1).pow(2).mean()
