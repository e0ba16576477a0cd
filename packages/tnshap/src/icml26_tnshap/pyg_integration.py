"""PyTorch Geometric integration: TN-SHAP-G as a ``torch_geometric.explain.ExplainerAlgorithm``.

Needs the ``[pyg]`` extra. Use it like any PyG explainer::

    from torch_geometric.explain import Explainer
    explainer = Explainer(model, TNSHAPExplainer(budget=200), explanation_type="model",
                          node_mask_type="object", edge_mask_type="object",
                          model_config=dict(mode="regression", task_level="graph",
                                            return_type="raw"))
    explanation = explainer(data.x, data.edge_index)   # torch_geometric.explain.Explanation
    explanation.node_mask   # (n, 1) Shapley values φ_u of the nodes (atoms)
    explanation.edge_mask   # (E,)  order-2 interaction (SII) of the bond of each edge_index column

Players are the nodes: a coalition keeps the features of its nodes and masks the others to a
baseline (zeros by default), the graph is kept. The model is called as
``model(x, edge_index, batch=batch, **kwargs)`` on a disjoint union of masked copies
(graph-level models; ``batch`` is PyG's graph-id vector). Attributions are raw Shapley values
(signed, not squashed by a sigmoid). For multi-output models ``index`` (or the ``target`` class
for classification) picks the output column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.explain import Explanation
from torch_geometric.explain.algorithm import ExplainerAlgorithm
from torch_geometric.explain.config import MaskType, ModelMode, ModelTaskLevel

from .attribution import interactions, shapley_values
from .game import MaskedGraphGame
from .surrogate import FitConfig, FitResult, GraphTN, fit_surrogate

__all__ = ["TNSHAPExplainer", "game_from_data"]


class _BatchKwarg(torch.nn.Module):
    """Calls a PyG model as ``model(x, edge_index, batch=batch, **kwargs)``."""

    def __init__(self, model: Any, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.model, self.kwargs = model, kwargs

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        return self.model(x, edge_index, batch=batch, **self.kwargs)


def game_from_data(
    model: Any, data: Data, baseline: Any = None, batch_size: int = 256, **kwargs: Any
) -> MaskedGraphGame:
    """A masked game over the nodes of ``data`` (``data.x`` masked towards ``baseline``)."""
    if not isinstance(data, Data):
        raise TypeError(f"data must be a torch_geometric.data.Data; got {type(data).__name__}")
    if data.x is None or data.edge_index is None:
        raise ValueError("data must carry node features x and an edge_index")
    return MaskedGraphGame(model, data.x, data.edge_index, baseline, batch_size, **kwargs)


class TNSHAPExplainer(ExplainerAlgorithm):
    """TN-SHAP-G node attributions (Shapley values) and bond interactions for graph-level models.

    Args:
        budget: model queries spent fitting the surrogate.
        bond_dim: ``χ`` of the graph-aligned tensor network.
        baseline: masked-node features (``None`` = zeros; scalar, ``(F,)`` or ``(n, F)``).
        config: :class:`~icml26_tnshap.FitConfig`.
        index: edge interaction index, ``"SII"``, ``"STII"`` or ``"BII"``.
        batch_size: masked copies per model call.

    After a call, :attr:`last_fit` holds the :class:`~icml26_tnshap.FitResult` and
    :attr:`surrogate` the fitted :class:`~icml26_tnshap.GraphTN`.
    """

    def __init__(
        self,
        budget: int = 500,
        *,
        bond_dim: int = 3,
        baseline: Any = None,
        config: FitConfig | None = None,
        index: str = "SII",
        batch_size: int = 256,
    ) -> None:
        super().__init__()
        if not isinstance(budget, int) or budget < 2:
            raise ValueError(f"budget must be an integer >= 2; got {budget!r}")
        if index not in ("SII", "STII", "BII"):
            raise ValueError(f"index must be 'SII', 'STII' or 'BII'; got {index!r}")
        self.budget, self.bond_dim, self.baseline = budget, bond_dim, baseline
        self.config, self.index, self.batch_size = config, index, batch_size
        self.last_fit: FitResult | None = None
        self.surrogate: GraphTN | None = None

    def supports(self) -> bool:
        cfg = self.explainer_config
        if self.model_config.task_level != ModelTaskLevel.graph:
            return False  # one game per graph output (node-level: explain one node's output)
        if cfg.node_mask_type not in (None, MaskType.object):
            return False  # players are nodes, not node features
        return cfg.edge_mask_type in (None, MaskType.object)

    def forward(
        self,
        model: torch.nn.Module,
        x: Tensor,
        edge_index: Tensor,
        *,
        target: Tensor,
        index: int | Tensor | None = None,
        **kwargs: Any,
    ) -> Explanation:
        kwargs.pop("batch", None)  # one graph is explained; the game builds its own batch
        out_col = None
        if index is not None:
            out_col = int(index)
        elif self.model_config.mode != ModelMode.regression and target.numel() == 1:
            out_col = int(target.reshape(-1)[0])  # the predicted / given class
        game = MaskedGraphGame(
            _BatchKwarg(model, kwargs),
            x,
            edge_index,
            self.baseline,
            self.batch_size,
            output_index=out_col,
        )
        tn = GraphTN(game, self.bond_dim, dtype=torch.float64)
        self.last_fit = fit_surrogate(tn, game, budget=self.budget, config=self.config)
        self.surrogate = tn
        phi = shapley_values(tn)  # (n,)
        node_mask = edge_mask = None
        if self.explainer_config.node_mask_type is not None:
            node_mask = torch.as_tensor(phi, dtype=x.dtype, device=x.device)[:, None]  # (n, 1)
        if self.explainer_config.edge_mask_type is not None:
            vals = interactions(tn, "edges", index=self.index).to_dict()
            src, dst = edge_index.tolist()
            edge_mask = torch.tensor(
                [vals.get((min(u, v), max(u, v)), 0.0) for u, v in zip(src, dst)],
                dtype=x.dtype,
                device=x.device,
            )  # (E,): 0 on self-loops
        return Explanation(
            node_mask=node_mask,
            edge_mask=edge_mask,
            node_shap=torch.as_tensor(np.asarray(phi)),
        )
