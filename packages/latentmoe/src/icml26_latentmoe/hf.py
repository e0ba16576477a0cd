"""Swap the MLP blocks of a Hugging Face Llama-style model for MoE layers.

A "Llama-style MLP" is any submodule with ``gate_proj``, ``up_proj`` and ``down_proj`` linear
layers (Llama, Mistral, Qwen2, ...), called as ``mlp(hidden_states)``. No import of
``transformers`` is needed here: the model is walked as a plain ``nn.Module`` (install
``transformers`` yourself to build such models).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .latentmoe import MultiHeadLatentMoE
from .moe import MoE

__all__ = ["replace_mlp"]


def _is_llama_mlp(mod: nn.Module) -> bool:
    return all(
        isinstance(getattr(mod, n, None), nn.Linear) for n in ("gate_proj", "up_proj", "down_proj")
    )


def replace_mlp(model: nn.Module, kind: str = "latent", **config: Any) -> list[str]:
    """Replace every Llama-style MLP of ``model`` in place; returns the replaced module names.

    Args:
        model: e.g. a ``transformers`` ``LlamaForCausalLM``.
        kind: ``"latent"`` for :class:`MultiHeadLatentMoE` (config: num_heads, head_dim,
            num_experts, top_k, expert_size, ...) or ``"moe"`` for :class:`MoE` (config:
            num_experts, top_k, expert_size, ...). ``d_model`` is read from each MLP and
            ``num_layers`` defaults to the number of MLPs found.
    """
    if kind not in ("latent", "moe"):
        raise ValueError(f"kind must be 'latent' or 'moe'; got {kind!r}")
    targets = [
        (parent, child_name, f"{parent_name}.{child_name}" if parent_name else child_name)
        for parent_name, parent in model.named_modules()
        for child_name, child in parent.named_children()
        if _is_llama_mlp(child)
    ]
    if not targets:
        raise ValueError(
            "model has no Llama-style MLP (a module with gate_proj, up_proj and down_proj)"
        )
    cls = MultiHeadLatentMoE if kind == "latent" else MoE
    config.setdefault("num_layers", len(targets))
    names = []
    for parent, child_name, full in targets:
        old = getattr(parent, child_name)
        w = old.gate_proj.weight
        new = cls(old.gate_proj.in_features, **config).to(device=w.device, dtype=w.dtype)
        setattr(parent, child_name, new)
        names.append(full)
    return names
