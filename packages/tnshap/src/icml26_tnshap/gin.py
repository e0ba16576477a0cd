"""A small Graph Isomorphism Network (Xu et al., 2019) in plain torch, for the benchmark.

    h_u^{(l+1)} = MLP^{(l)}((1 + ε^{(l)}) h_u^{(l)} + Σ_{v ∈ N(u)} h_v^{(l)}),
    ŷ_G = w · Σ_u h_u^{(L)} + b                                   (sum readout)

Messages flow ``edge_index[0] -> edge_index[1]`` (pass both directions for an undirected
graph, the PyG convention). ``forward(x, edge_index, batch)`` matches
:class:`~icml26_tnshap.MaskedGraphGame`'s batched call.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

__all__ = ["GIN"]


class GIN(nn.Module):
    """``GIN(in_dim, hidden=64, layers=3)``: graph regression with sum readout -> ``(B,)``."""

    def __init__(self, in_dim: int, hidden: int = 64, layers: int = 3) -> None:
        super().__init__()
        if in_dim < 1 or hidden < 1 or layers < 1:
            raise ValueError(
                f"in_dim, hidden and layers must be >= 1; got {in_dim}, {hidden}, {layers}"
            )
        dims = [in_dim] + [hidden] * layers
        self.eps = nn.Parameter(torch.zeros(layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(a, hidden), nn.ReLU(), nn.Linear(hidden, b), nn.ReLU())
            for a, b in itertools.pairwise(dims)
        )
        self.head = nn.Linear(hidden, 1)

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``x (N, F)``, ``edge_index (2, E)``, ``batch (N,)`` graph ids -> ``(B,)``."""
        src, dst = edge_index
        h = x
        for eps, mlp in zip(self.eps, self.mlps):
            agg = torch.zeros_like(h).index_add_(0, dst, h[src])  # Σ_{v→u} h_v   (N, D)
            h = mlp((1 + eps) * h + agg)
        if batch is None:
            batch = torch.zeros(h.shape[0], dtype=torch.long, device=h.device)
        n_graphs = int(batch.max()) + 1 if batch.numel() else 0
        pooled = torch.zeros(n_graphs, h.shape[1], dtype=h.dtype, device=h.device)
        pooled.index_add_(0, batch, h)  # (B, D)
        return self.head(pooled).squeeze(-1)
