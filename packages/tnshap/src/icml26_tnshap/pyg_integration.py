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
(graph-level models; ``batch`` is PyG's graph-id vector; per-node / per-edge / per-graph keyword
tensors such as ``edge_attr`` (first dimension = nodes, edges or graphs of the batch) are sliced
to the explained graph and tiled along; a tensor whose row count matches two of these is refused). Attributions are raw Shapley values (signed, not
squashed by a sigmoid).

``index`` and ``target`` mean what they mean in PyG:

- ``index`` selects rows of the graph-level output, i.e. graphs of ``batch``: each selected graph
  is sliced out of the batch and explained alone (``budget`` queries per graph); its rows of
  ``node_mask`` / ``edge_mask`` hold its values, the rows of other graphs are 0. ``index=None``
  explains every graph of the batch (PyG: "all model outputs").
- ``target`` picks the class: for ``multiclass_classification`` the game is the model's output
  column ``target[index]`` (the predicted class for ``explanation_type="model"``, the given label
  for ``"phenomenon"``). Regression explains the (single) output, binary classification the
  single positive-class score whatever the label.
- Node-level tasks (``task_level="node"`` / ``"edge"``) are refused at construction.

At ``budget >= 2^n`` (per graph) the values are exact (``shapiq.ExactComputer`` on the ``2^n``
queried values) and no surrogate is fitted.

Fidelity: ``node_mask`` holds signed Shapley values, not a soft mask in [0, 1], so
``torch_geometric.explain.metric.fidelity`` (which multiplies ``x`` by the mask) is meaningless
on it. Threshold first: ``Explainer(..., edge_mask_type=None,
threshold_config=dict(threshold_type="topk_hard", value=k))`` turns ``node_mask`` into the 0/1
indicator of the ``k`` most positive nodes, and ``x * mask`` is then exactly the masked input of
that coalition under the zero baseline (the game TN-SHAP-G explains).
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
from .shapiq_integration import exact_interaction_values
from .surrogate import FitConfig, FitResult, GraphTN, fit_surrogate

__all__ = ["TNSHAPExplainer", "game_from_data"]


class _BatchKwarg(torch.nn.Module):
    """Calls a PyG model as ``model(x, edge_index, batch=batch, **kwargs)`` on the disjoint union
    of ``b`` masked copies of one graph: per-node / per-edge keyword tensors of that graph
    (``(n, ...)`` / ``(E, ...)``) are tiled ``b`` times, copy-major like ``x`` and ``edge_index``."""

    def __init__(
        self,
        model: Any,
        kwargs: dict[str, Any],
        node_kwargs: dict[str, Tensor] | None = None,
        edge_kwargs: dict[str, Tensor] | None = None,
        n_nodes: int = 1,
        graph_kwargs: dict[str, Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.model, self.kwargs, self.n_nodes = model, kwargs, n_nodes
        self.node_kwargs, self.edge_kwargs = node_kwargs or {}, edge_kwargs or {}
        self.graph_kwargs = graph_kwargs or {}  # (1, ...) rows of per-graph tensors

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        b = x.shape[0] // self.n_nodes
        per = {**self.node_kwargs, **self.edge_kwargs, **self.graph_kwargs}
        tiled = {k: v.repeat(b, *([1] * (v.ndim - 1))) for k, v in per.items()}
        return self.model(x, edge_index, batch=batch, **self.kwargs, **tiled)


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
        index: edge interaction index, ``"SII"``, ``"STII"`` or ``"BII"`` (not PyG's call-time
            ``index``, which selects the graph).
        batch_size: masked copies per model call.

    After a call, :attr:`last_fit` holds the :class:`~icml26_tnshap.FitResult` and
    :attr:`surrogate` the fitted :class:`~icml26_tnshap.GraphTN` of the last graph explained
    (both ``None`` when its values were computed exactly, ``budget >= 2^n``).
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
            raise ValueError(
                "TNSHAPExplainer explains graph-level outputs only (model_config task_level="
                f"'graph'); got task_level='{self.model_config.task_level.value}'. For a node's "
                "output, wrap the model so it returns that node's output per graph "
                "(model(x, edge_index, batch) -> (B,)) and explain it as a graph-level regression"
            )
        if cfg.node_mask_type not in (None, MaskType.object):
            return False  # players are nodes, not node features
        return cfg.edge_mask_type in (None, MaskType.object)

    # ------------------------------------------------------------------ PyG's index / target
    @staticmethod
    def _graph_rows(index: int | Tensor | None, n_graphs: int) -> list[int]:
        """PyG's ``index``: rows of the graph-level model output, i.e. graphs of ``batch``."""
        if index is None:
            return list(range(n_graphs))  # PyG: all outputs are explained
        idx = torch.as_tensor(index).reshape(-1)
        if idx.dtype == torch.bool or torch.is_floating_point(idx):
            raise ValueError(f"index must hold integer graph ids; got dtype {idx.dtype}")
        rows = sorted({int(i) for i in idx.tolist()})
        bad = [r for r in rows if not 0 <= r < n_graphs]
        if bad or not rows:
            raise ValueError(
                f"index selects graphs of the batch, 0 <= index < {n_graphs} (PyG: the rows of "
                f"the graph-level output); got {idx.tolist()}"
            )
        return rows

    def _output_column(self, target: Tensor | None, row: int, n_graphs: int) -> int | None:
        """The model-output column of graph ``row``: the class ``target[row]`` (the predicted
        class for ``explanation_type="model"``) for multiclass models, none otherwise."""
        mode = self.model_config.mode
        if mode != ModelMode.multiclass_classification:
            # regression: the output itself; binary: the single positive-class score
            return None
        if target is None:
            raise ValueError("target (the class per graph) is needed for multiclass models")
        t = torch.as_tensor(target)
        if t.dtype == torch.bool or torch.is_floating_point(t) or t.numel() != n_graphs:
            raise ValueError(
                f"target must hold one integer class per graph ({n_graphs}) for "
                f"multiclass_classification; got dtype {t.dtype}, shape {tuple(t.shape)}"
            )
        return int(t.reshape(-1)[row])

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
        """Explain graph ``index`` of the batch (every graph when ``None``) for class ``target``.

        Each selected graph is sliced out of ``batch`` and explained alone (players: its nodes);
        its rows of ``node_mask`` / ``edge_mask`` hold its values, all other rows are 0."""
        batch = kwargs.pop("batch", None)
        n_all, e_all = x.shape[0], edge_index.shape[1]
        if batch is None:
            batch = torch.zeros(n_all, dtype=torch.long, device=x.device)
        batch = torch.as_tensor(batch, device=x.device).reshape(-1)
        if batch.numel() != n_all:
            raise ValueError(
                f"batch must have one graph id per node ({n_all}); got {batch.numel()}"
            )
        n_graphs = int(batch.max()) + 1 if n_all else 0
        if n_all and bool((batch[edge_index[0]] != batch[edge_index[1]]).any()):
            raise ValueError("edge_index has edges between different graphs of batch")
        node_kw: dict[str, Any] = {}
        edge_kw: dict[str, Any] = {}
        graph_kw: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, val in kwargs.items():
            rows = val.shape[0] if isinstance(val, Tensor) and val.ndim >= 1 else None
            kinds = [
                k for k, m in (("node", n_all), ("edge", e_all), ("graph", n_graphs)) if rows == m
            ]
            if len(kinds) > 1:
                raise ValueError(
                    f"cannot tell whether keyword {key!r} ({rows} rows) is per {' or per '.join(kinds)} "
                    f"(x has {n_all} rows, edge_index {e_all} columns, batch {n_graphs} graphs)"
                )
            if kinds:
                {"node": node_kw, "edge": edge_kw, "graph": graph_kw}[kinds[0]][key] = val
            else:
                other[key] = val
        base_all = self.baseline
        if isinstance(base_all, Tensor) and base_all.ndim == 2 and base_all.shape[0] == n_all:
            pass  # (N, F) over the whole batch: sliced per graph below
        else:
            base_all = None
        node_mask = torch.zeros(n_all, 1, dtype=x.dtype, device=x.device)  # (N, 1)
        edge_mask = torch.zeros(e_all, dtype=x.dtype, device=x.device)  # (E,)
        node_shap = torch.zeros(n_all, dtype=torch.float64)  # (N,)
        for row in self._graph_rows(index, n_graphs):
            keep = batch == row  # (N,) nodes of this graph
            ekeep = keep[edge_index[0]]  # (E,) its edges (no edge crosses graphs)
            nodes = torch.nonzero(keep).flatten()
            relabel = torch.full((n_all,), -1, dtype=torch.long, device=x.device)
            relabel[nodes] = torch.arange(len(nodes), device=x.device)
            ei = relabel[edge_index[:, ekeep]]  # (2, E_g)
            game = MaskedGraphGame(
                _BatchKwarg(
                    model,
                    other,
                    {k: v[keep] for k, v in node_kw.items()},
                    {k: v[ekeep] for k, v in edge_kw.items()},
                    len(nodes),
                    {k: v[row : row + 1] for k, v in graph_kw.items()},
                ),
                x[keep],
                ei,
                self.baseline if base_all is None else base_all[keep],
                self.batch_size,
                output_index=self._output_column(target, row, n_graphs),
            )
            phi, pair = self._explain_graph(game)
            node_mask[keep, 0] = torch.as_tensor(phi, dtype=x.dtype, device=x.device)
            node_shap[keep.cpu()] = torch.as_tensor(np.asarray(phi, dtype=np.float64))
            src, dst = ei.tolist()
            edge_mask[ekeep] = torch.tensor(
                [pair.get((min(u, v), max(u, v)), 0.0) for u, v in zip(src, dst)],
                dtype=x.dtype,
                device=x.device,
            )  # 0 on self-loops
        return Explanation(
            node_mask=node_mask if self.explainer_config.node_mask_type is not None else None,
            edge_mask=edge_mask if self.explainer_config.edge_mask_type is not None else None,
            node_shap=node_shap,
        )

    def _explain_graph(self, game: MaskedGraphGame) -> tuple[np.ndarray, dict]:
        """``(φ (n,), {bond (u, v): interaction})`` of one graph's game: read off a surrogate
        fitted on ``budget`` queries, or exact from all ``2^n`` values when ``budget >= 2^n``."""
        n = game.n_players
        if n < 63 and self.budget >= 2**n:
            self.last_fit, self.surrogate = None, None
            from shapiq import ExactComputer

            ec = ExactComputer(game, n)  # evaluates the 2^n coalitions once
            sv = exact_interaction_values(game, n, "SV", 1, 1, computer=ec)
            phi = np.array([sv[(u,)] for u in range(n)])
            if self.explainer_config.edge_mask_type is None:
                return phi, {}
            top = exact_interaction_values(game, n, self.index, 2, 2, computer=ec)
            return phi, {e: top[e] for e in game.edges}
        tn = GraphTN(game, self.bond_dim, dtype=torch.float64)
        self.last_fit = fit_surrogate(tn, game, budget=self.budget, config=self.config)
        self.surrogate = tn
        phi = shapley_values(tn)  # (n,)
        if self.explainer_config.edge_mask_type is None:
            return phi, {}
        return phi, interactions(tn, "edges", index=self.index).to_dict()
