"""PyTorch Geometric adapter: explain a PyG model on a ``torch_geometric.data.Data`` graph.

Needs the ``[pyg]`` extra (pure Python). ``game_from_data(model, data)`` wraps a model called
as ``model(x, edge_index, batch)`` (the usual PyG graph-level signature) into a
:class:`~icml26_tnshap.MaskedGraphGame`; ``explain_data`` fits the surrogate and returns the
Shapley values and the edge interactions, and ``data_from_attributions`` writes them back onto
a copy of the graph (``node_shap``, ``edge_sii``) for PyG's own utilities and plotting.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from .attribution import interactions, shapley_values
from .game import MaskedGraphGame
from .surrogate import FitConfig, FitResult, GraphTN, fit_surrogate

__all__ = ["data_from_attributions", "explain_data", "game_from_data"]


def game_from_data(
    model: Any, data: Data, baseline: Any = None, batch_size: int = 256, **kwargs: Any
) -> MaskedGraphGame:
    """A masked game over the nodes of ``data`` (``data.x`` masked towards ``baseline``)."""
    if not isinstance(data, Data):
        raise TypeError(f"data must be a torch_geometric.data.Data; got {type(data).__name__}")
    if data.x is None or data.edge_index is None:
        raise ValueError("data must carry node features x and an edge_index")
    return MaskedGraphGame(model, data.x, data.edge_index, baseline, batch_size, **kwargs)


def explain_data(
    model: Any,
    data: Data,
    *,
    budget: int = 600,
    bond_dim: int = 4,
    baseline: Any = None,
    config: FitConfig | None = None,
    index: str = "SII",
) -> tuple[np.ndarray, dict[tuple[int, ...], float], FitResult]:
    """Fit TN-SHAP-G on ``data``: ``(φ (n,), {edge: interaction}, fit result)``."""
    game = game_from_data(model, data, baseline)
    tn = GraphTN(game, bond_dim)
    fit = fit_surrogate(tn, game, budget=budget, config=config)
    return shapley_values(tn), interactions(tn, "edges", index=index).to_dict(), fit


def data_from_attributions(
    data: Data, phi: np.ndarray, edge_values: dict[tuple[int, int], float] | None = None
) -> Data:
    """A copy of ``data`` with ``node_shap (n,)`` and, if given, ``edge_sii (E,)`` per edge_index column."""
    out = data.clone()
    phi = np.asarray(phi)
    if phi.shape != (data.num_nodes,):
        raise ValueError(f"phi must have shape ({data.num_nodes},); got {phi.shape}")
    out.node_shap = torch.as_tensor(phi, dtype=torch.float64)
    if edge_values is not None:
        src, dst = data.edge_index.tolist()
        out.edge_sii = torch.tensor(
            [edge_values.get((min(u, v), max(u, v)), 0.0) for u, v in zip(src, dst)],
            dtype=torch.float64,
        )
    return out
