"""MoE routing primitives: IO-aware top-k router, token permutation, grouped expert MLP, balancing.

Each fast path has a Triton kernel and a torch reference beside it (``*_ref``); dispatch goes
through :func:`icml26_kernels.select_backend`. Needs the ``torch`` extra (``triton`` for kernels).

Typical MoE layer, N tokens of width D, E experts, top-k::

    idx, gates = topk_router(x, router_w, bias, k=k)          # (N, k), logits never stored
    perm = make_permutation(idx, num_experts=E, block_size=16)
    y = unpermute(grouped_mlp(permute(x, perm), w1, w2, perm), perm, gates)   # (N, D)
"""

try:  # first, so that a missing torch is reported with the extra to install
    import torch  # noqa: F401
except ImportError as _exc:
    from ..backend import missing_torch

    raise missing_torch("icml26_kernels.moe", _exc) from _exc


from .balancing import (
    aux_free_bias_update,
    expert_load,
    load_imbalance,
    router_z_loss,
    switch_aux_loss,
)
from .grouped_mlp import grouped_mlp, grouped_mlp_ref
from .permute import (
    Permutation,
    make_permutation,
    max_rows,
    permute,
    permute_ref,
    unpermute,
    unpermute_ref,
)
from .router import topk_router, topk_router_ref

__all__ = [
    "Permutation",
    "aux_free_bias_update",
    "expert_load",
    "grouped_mlp",
    "grouped_mlp_ref",
    "load_imbalance",
    "make_permutation",
    "max_rows",
    "permute",
    "permute_ref",
    "router_z_loss",
    "switch_aux_loss",
    "topk_router",
    "topk_router_ref",
    "unpermute",
    "unpermute_ref",
]
