"""Aux-loss-free load balancing for every MoE layer of a model (DeepSeek-V3 style, as in §3).

Call :meth:`AuxFreeBalancer.step` after each optimizer step. For every
:class:`~icml26_latentmoe.MultiHeadLatentMoE` or :class:`~icml26_latentmoe.MoE` layer, with c the
tokens per expert counted since the previous step (per head for the multi-head layer):

    b ← b + u · ( sign(mean(c) − c) − mean(sign(mean(c) − c)) )

The bias only moves the top-k selection; the sum of b stays constant. The paper's code uses
u = 50 · max_lr (0.01 at lr 2e-4); DeepSeek-V3 and Megatron-Core default to 1e-3.
"""

from __future__ import annotations

from icml26_kernels.moe import load_imbalance
from torch import nn

from .latentmoe import MultiHeadLatentMoE
from .moe import MoE

__all__ = ["AuxFreeBalancer"]


class AuxFreeBalancer:
    """Applies the aux-loss-free bias update to all MoE layers of a model."""

    def __init__(self, update_rate: float = 1e-3) -> None:
        if not isinstance(update_rate, (int, float)) or not update_rate >= 0:
            raise ValueError(f"update_rate must be a non-negative float; got {update_rate!r}")
        self.update_rate = float(update_rate)

    def step(self, model: nn.Module) -> float:
        """Update every layer's bias from its load; returns the mean max/mean load ratio seen."""
        ratios = []
        for mod in model.modules():
            if isinstance(mod, (MultiHeadLatentMoE, MoE)):
                load = mod.update_bias(self.update_rate)
                if int(load.sum()) > 0:
                    ratios.append(load_imbalance(load).mean().item())
        if not ratios:
            raise ValueError("model contains no MultiHeadLatentMoE or MoE layer with recorded load")
        return sum(ratios) / len(ratios)
