"""TN-SHAP-G surrogate: a graph-aligned tensor network fitted to a masked game (Sec. 3).

The surrogate is the multilinear function

    ν̂(z) = μ + σ · Σ_{bonds, p} Π_u A^(u)[p_u, bonds(u)] · b_u[p_u],   b_u = [1 − z_u, z_u]

with one core ``A^(u)`` per graph node and one bond per graph edge (so its wiring mirrors the
input graph), ``μ, σ`` the mean and standard deviation of the training targets. It is trained
from a small number of oracle queries: coalitions from a size-uniform sampler (``|S| ~ U{0..n}``,
then a uniform subset of that size), MSE on standardized targets, Adam with ReduceLROnPlateau
and early stopping on a held-out validation split (the paper's recipe), or alternating least
squares (an exact per-core solve; our addition).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from icml26_kernels.tensornet import (
    GraphTopology,
    contract,
    environment,
    init_cores,
    multilinear_vectors,
)
from torch import nn

__all__ = ["FitConfig", "FitResult", "GraphTN", "fit_surrogate"]

Structure = Literal["graph", "tree", "spanning_tree", "chain"]
_STRUCTURES = ("graph", "tree", "spanning_tree", "chain")


def _warn_self_loops(edges: Any, as_edge_index: bool | None) -> None:
    arr = edges.detach().cpu().numpy() if hasattr(edges, "detach") else np.asarray(edges)
    if arr.size == 0 or arr.ndim != 2:
        return
    pairs = (
        arr.T
        if (as_edge_index or (as_edge_index is None and arr.shape[0] == 2 and arr.shape[1] != 2))
        else arr
    )
    loops = sorted({int(u) for u, v in pairs if u == v})
    if loops:
        warnings.warn(
            f"self-loops on nodes {loops[:8]} carry no bond in the surrogate (a node already has "
            "one core); the model still sees them through the game",
            UserWarning,
            stacklevel=3,
        )


def _graph_parts(graph: Any, n_nodes: int | None) -> tuple[int, Any, bool | None]:
    """(n_nodes, edges, edge_index flag) from a game, a PyG Data, a topology or an edge list."""
    if hasattr(graph, "edge_index"):  # MaskedGraphGame or torch_geometric Data
        n = getattr(graph, "n_players", None) or getattr(graph, "num_nodes", None) or n_nodes
        if n is None:
            raise ValueError("n_nodes must be given for a graph object without a node count")
        return int(n), graph.edge_index, True
    if isinstance(graph, tuple) and len(graph) == 2 and isinstance(graph[0], (int, np.integer)):
        return int(graph[0]), graph[1], None
    edges = graph.detach().cpu().numpy() if hasattr(graph, "detach") else np.asarray(graph)
    if n_nodes is None:
        if edges.size == 0:
            raise ValueError("n_nodes must be given for an empty edge list")
        n_nodes = int(edges.max()) + 1
    return int(n_nodes), edges, None


class GraphTN(nn.Module):
    """A tensor network shaped like the input graph, as a multilinear surrogate ``ν̂(z)``.

    Args:
        graph: a :class:`~icml26_tnshap.MaskedGraphGame`, a PyG ``Data``, a
            ``GraphTopology``, ``(n_nodes, edges)`` or an edge list / ``(2, E)`` edge_index.
        bond_dim: ``χ`` of every bond (≥ 1). The pairwise graph game needs ``χ = 2`` on stars and
            ``χ = 3`` on general trees (rank of the cut across an edge).
        n_nodes: number of nodes when ``graph`` is an edge list (default: max id + 1).
        structure: ``"graph"`` (one bond per edge, loops kept; the paper's choice),
            ``"tree"`` (the graph must be a tree), ``"spanning_tree"`` (BFS tree of the graph)
            or ``"chain"`` (an MPS along a depth-first order; allows disconnected graphs).
        init_scale: noise scale around the constant initial network.
        seed: initialization seed.
        dtype: parameter dtype (float64 keeps the 1e-8 identities of the tests).
    """

    shift: torch.Tensor  # μ (buffer)
    anchors: torch.Tensor  # (α, β) buffer: weights of the anchor terms Π(1 − z_u), Π z_u
    fitted: torch.Tensor  # bool buffer: set by fit_surrogate (or by hand), saved in state_dict
    scale: torch.Tensor  # σ (buffer)
    prior_coef: torch.Tensor  # (1 + n + |E|,) pairwise-prior coefficients (buffer)
    prior_edges: torch.Tensor  # (|E|, 2) int64 graph edges of the pairwise prior

    def __init__(
        self,
        graph: Any,
        bond_dim: int = 4,
        *,
        n_nodes: int | None = None,
        structure: Structure = "graph",
        init_scale: float = 0.1,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        if (
            not isinstance(bond_dim, (int, np.integer))
            or isinstance(bond_dim, bool)
            or bond_dim < 1
        ):
            raise ValueError(f"bond_dim must be an integer >= 1; got {bond_dim!r}")
        if structure not in _STRUCTURES:
            raise ValueError(f"structure must be one of {_STRUCTURES}; got {structure!r}")
        if isinstance(graph, GraphTopology):
            base = graph.with_bond_dim(int(bond_dim))
        else:
            n, edges, as_ei = _graph_parts(graph, n_nodes)
            _warn_self_loops(edges, as_ei)
            base = GraphTopology.from_edges(n, edges, int(bond_dim), edge_index=as_ei)
        if structure == "graph":
            if not base.is_connected:
                raise ValueError(
                    f"structure='graph' needs a connected graph: with {len(base.components)} components "
                    "the network is a product over components and cannot represent additive games; "
                    "use structure='chain'"
                )
            topo = base
        elif structure == "tree":
            base.check("tree")
            topo = base
        elif structure == "spanning_tree":
            topo = GraphTopology.spanning_tree(base.n_nodes, base.edges, int(bond_dim))
        else:
            topo = GraphTopology.chain(base.n_nodes, int(bond_dim), order=_dfs_order(base))
        self.topology = topo
        self.graph_edges = base.edges
        cores = init_cores(topo, init_scale=init_scale, seed=seed)
        self.cores = nn.ParameterList([nn.Parameter(torch.tensor(c, dtype=dtype)) for c in cores])
        self.register_buffer("shift", torch.zeros((), dtype=dtype))  # μ
        self.register_buffer("scale", torch.ones((), dtype=dtype))  # σ
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))
        self.register_buffer("anchors", torch.zeros(2, dtype=dtype))  # (α, β), see raw()
        # (1 + n + |E|,) coefficients [c, a_u, w_uv per graph edge] of the optional pairwise
        # prior ``c + Σ a_u z_u + Σ_{(u,v) ∈ E} w_uv z_u z_v`` (FitConfig(prior="pairwise")); zeros
        # = no prior. Not saved in the state dict (older checkpoints load unchanged).
        n_e = len(self.graph_edges)
        self.register_buffer(
            "prior_coef", torch.zeros(1 + topo.n_nodes + n_e, dtype=dtype), persistent=False
        )
        self.prior_edges = torch.as_tensor(
            np.asarray(self.graph_edges, dtype=np.int64).reshape(n_e, 2)
        )  # (|E|, 2)

    def check_fitted(self) -> None:
        """Raise unless the surrogate was fitted (``fit_surrogate``) or marked by hand
        (``tn.fitted.fill_(True)`` after setting the cores yourself)."""
        if not bool(self.fitted):
            raise RuntimeError(
                "the surrogate has not been fitted: call fit_surrogate(tn, game, budget) first "
                "(or tn.fitted.fill_(True) after setting the cores yourself)"
            )

    @property
    def n_players(self) -> int:
        return self.topology.n_nodes

    @property
    def n_params(self) -> int:
        return self.topology.n_params

    def raw(self, z: torch.Tensor, *, max_batch: int | None = 4096) -> torch.Tensor:
        """The standardized surrogate ``TN(z) + α Π_u (1 − z_u) + β Π_u z_u``: ``(B, n) -> (B,)``.

        The two anchor terms are rank-1 networks (together: a graph-aligned network of bond
        dimension χ + 2, block diagonal) that vanish on every binary coalition except ∅ and N;
        ``fit_surrogate`` sets ``(α, β)`` so the surrogate interpolates ``v(∅)`` and ``v(N)``.
        """
        out = contract(self.topology, list(self.cores), multilinear_vectors(z), max_batch=max_batch)
        a0, a1 = self.anchors[0], self.anchors[1]
        if bool(a0 != 0) or bool(a1 != 0):
            out = out + a0 * torch.prod(1 - z, dim=1) + a1 * torch.prod(z, dim=1)
        return out

    def prior(self, z: torch.Tensor) -> torch.Tensor:
        """The pairwise prior ``c + Σ a_u z_u + Σ_{(u,v) ∈ E} w_uv z_u z_v``: ``(B, n) -> (B,)``
        (zero unless fitted with ``FitConfig(prior="pairwise")``)."""
        n, coef = self.n_players, self.prior_coef
        out = coef[0] + z @ coef[1 : n + 1]
        if len(self.prior_edges):
            u, v = self.prior_edges[:, 0], self.prior_edges[:, 1]
            out = out + (z[:, u] * z[:, v]) @ coef[n + 1 :]
        return out

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``ν̂(z) = μ + σ · raw(z) + prior(z)`` for ``z (B, n)`` in ``[0, 1]``."""
        z = torch.as_tensor(z, dtype=self.shift.dtype)
        if z.ndim != 2 or z.shape[1] != self.n_players:
            raise ValueError(f"z must have shape (B, {self.n_players}); got {tuple(z.shape)}")
        out = self.shift + self.scale * self.raw(z)
        if bool(self.prior_coef.any()):
            out = out + self.prior(z)
        return out

    @torch.no_grad()
    def value(self, coalitions: Any) -> np.ndarray:
        """The surrogate as a game: ``(B, n)`` bool/0-1 numpy -> ``(B,)`` numpy (shapiq style)."""
        z = torch.as_tensor(np.asarray(coalitions, dtype=np.float64), dtype=self.shift.dtype)
        return self.forward(z.reshape(-1, self.n_players)).cpu().numpy()


def _dfs_order(topo: GraphTopology) -> list[int]:
    seen: set[int] = set()
    order: list[int] = []
    for root in range(topo.n_nodes):
        if root in seen:
            continue
        stack = [root]
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen.add(u)
            order.append(u)
            stack.extend(v for v in reversed(topo.neighbors[u]) if v not in seen)
    return order


# ----------------------------------------------------------------------------- fitting
@dataclass
class FitConfig:
    """Training recipe. ``FitConfig()`` is the fast default; ``FitConfig.paper()`` the released code's.

    Validation rule: validation coalitions are never carved out of ``budget``. With
    ``val_queries = 0`` (default) every one of the ``budget`` queries trains the surrogate and the
    solver runs its fixed schedule (no early stopping); ``val_queries = k > 0`` buys ``k`` extra
    queries (the released code: 500 training + 100 extra validation) on which the best epoch is
    kept; ``FitResult.n_queries`` counts both.
    """

    solver: Literal["auto", "adam", "lbfgs", "als"] = "auto"  # auto: see fit_surrogate
    batch_size: int | None = None  # Adam minibatch; None = full batch (one step per epoch)
    epochs: int = 300  # Adam epochs (steps when full batch)
    lr: float = 1e-2  # Adam learning rate (cosine decay to 0 without validation)
    weight_decay: float = 1e-5  # L2 on the cores (Adam: decoupled from the loss scale as in torch)
    lr_factor: float = 0.5  # ReduceLROnPlateau factor (only with validation queries)
    lr_patience: int = 5  # ReduceLROnPlateau patience (epochs)
    early_stopping: int = 10  # stop after this many epochs without validation improvement
    val_queries: int = 0  # extra validation queries beyond the budget (paper's code: 100)
    extreme_weight: float = 1.0  # loss weight of ∅ and N relative to the other coalitions
    pin_extremes: bool = True  # anchor terms make ν̂(0) = v(∅), ν̂(1) = v(N) exactly (efficiency)
    lbfgs_iters: int = 150  # L-BFGS: full-batch iterations (strong-Wolfe line search)
    als_sweeps: int = 30  # ALS: forward+backward sweeps over the cores
    als_ridge: float = 1e-3  # ALS: ridge on each core solve (relative to the Gram trace)
    als_tol: float = 1e-12  # ALS: stop when the training MSE falls below this
    standardize: bool = True  # fit (y − μ)/σ and store μ, σ in the surrogate
    # "pairwise" (our variant, not the paper's): first a least-squares fit of the bond-pairwise
    # game c + Σ a_u z_u + Σ_{(u,v) ∈ E} w_uv z_u z_v (1 + n + |E| coefficients, min-norm), then
    # the network on its residual; ν̂ = prior + network (a low-order prior for small budgets)
    prior: Literal[None, "pairwise"] = None
    prior_extreme_weight: float = 100.0  # LS weight of ∅ and N in the prior fit
    seed: int | None = 0  # sampler and minibatch order; None = fresh randomness

    @classmethod
    def paper(cls, **overrides: Any) -> FitConfig:
        """The released code's recipe: Adam (lr 1e-2, wd 1e-5, 100 epochs, batch 32),
        ReduceLROnPlateau (0.5, 5), early stopping (10) on 100 extra validation queries,
        unweighted MSE."""
        base: dict[str, Any] = dict(
            solver="adam",
            batch_size=32,
            epochs=100,
            lr=1e-2,
            val_queries=100,
            pin_extremes=False,
        )
        base.update(overrides)
        return cls(**base)


@dataclass
class FitResult:
    """What :func:`fit_surrogate` did."""

    n_queries: int  # training + validation queries
    n_train: int
    n_val: int
    train_mse: float  # on the original scale
    val_mse: float  # on the original scale (nan without validation queries)
    val_r2: float  # nan without validation queries
    epochs: int
    history: list[float] = field(default_factory=list)  # loss per epoch / sweep (validation if any)
    solver: str = ""  # the solver that ran ("auto" resolved)


def _game_n(game: Any, tn: GraphTN) -> int:
    n = getattr(game, "n_players", None)
    if n is not None and int(n) != tn.n_players:
        raise ValueError(f"game has {n} players but the surrogate has {tn.n_players} nodes")
    return tn.n_players


def _check_config(cfg: FitConfig) -> None:
    if cfg.solver not in ("auto", "adam", "lbfgs", "als"):
        raise ValueError(
            f"config.solver must be 'auto', 'adam', 'lbfgs' or 'als'; got {cfg.solver!r}"
        )
    if not isinstance(cfg.val_queries, (int, np.integer)) or cfg.val_queries < 0:
        raise ValueError(f"config.val_queries must be an integer >= 0; got {cfg.val_queries!r}")
    if cfg.batch_size is not None and (
        not isinstance(cfg.batch_size, (int, np.integer)) or cfg.batch_size < 1
    ):
        raise ValueError(
            f"config.batch_size must be None or an integer >= 1; got {cfg.batch_size!r}"
        )
    if not isinstance(cfg.epochs, (int, np.integer)) or cfg.epochs < 1:
        raise ValueError(f"config.epochs must be an integer >= 1; got {cfg.epochs!r}")
    if not (cfg.lr > 0 and math.isfinite(cfg.lr)):
        raise ValueError(f"config.lr must be a positive finite number; got {cfg.lr!r}")
    if not (cfg.extreme_weight > 0 and math.isfinite(cfg.extreme_weight)):
        raise ValueError(
            f"config.extreme_weight must be positive and finite; got {cfg.extreme_weight!r}"
        )
    if cfg.prior not in (None, "pairwise"):
        raise ValueError(f"config.prior must be None or 'pairwise'; got {cfg.prior!r}")
    if cfg.weight_decay < 0 or cfg.als_ridge < 0:
        raise ValueError("config.weight_decay and config.als_ridge must be >= 0")


def _default_sampler(n: int, seed: int | None) -> Any:
    """shapiq's ``CoalitionSampler`` with size-uniform weights (the paper's balanced sampler)."""
    from shapiq.approximator.sampling import CoalitionSampler

    return CoalitionSampler(n, np.ones(n + 1), random_state=seed)


def _draw(sampler: Any, n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    if hasattr(sampler, "sample") and hasattr(sampler, "coalitions_matrix"):  # CoalitionSampler
        if int(getattr(sampler, "n", n)) != n:
            raise ValueError(f"sampler has {sampler.n} players but the surrogate has {n} nodes")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sampling might be inefficient")
            sampler.sample(m)
        z = np.asarray(sampler.coalitions_matrix, dtype=bool)
    elif callable(sampler):
        z = np.asarray(sampler(n, m, rng), dtype=bool)
    else:
        raise ValueError(
            f"sampler must be None, a shapiq CoalitionSampler or a callable (n, m, rng); got {sampler!r}"
        )
    if z.ndim != 2 or z.shape[1] != n:
        raise ValueError(f"sampler must return (m, {n}) coalitions; got {z.shape}")
    return z


def fit_surrogate(
    tn: GraphTN,
    game: Callable[[np.ndarray], Any],
    budget: int = 500,
    sampler: Any = None,
    config: FitConfig | None = None,
) -> FitResult:
    """Fit ``tn`` to ``game`` from ``budget`` training queries (plus ``config.val_queries``).

    Minimizes the weighted, standardized squared error

        L(θ) = Σ_i w_i (TN_θ(z_i) − (v(z_i) − μ)/σ)² / Σ_i w_i,   w = extreme_weight on ∅ and N,

    then (``pin_extremes``) sets the two anchor terms of :class:`GraphTN` so that ``ν̂(0) = v(∅)``
    and ``ν̂(1) = v(N)`` exactly; hence ``Σ_u φ_u = v(N) − v(∅)`` for the game itself
    (efficiency), whatever the solver reached.

    Args:
        tn: the surrogate (modified in place and marked fitted).
        game: ``(B, n) bool -> (B,)`` oracle, e.g. a :class:`MaskedGraphGame` or any shapiq game.
        budget: training coalitions queried (≥ 2); ∅ and N are always among them. At most 2^n:
            a larger budget is capped with a ``UserWarning``.
        sampler: ``None`` (shapiq ``CoalitionSampler`` with size-uniform weights, the paper's
            sampler), a ``CoalitionSampler`` (its ``sampling_weights`` / ``pairing_trick`` are
            used as given), or a callable ``(n, m, rng) -> (m, n) bool``.
        config: :class:`FitConfig`.

    ``solver="auto"`` (default): full-batch L-BFGS when the training queries are at least twice
    the surrogate's free parameters (cores minus the ``χ²`` gauge freedom of each bond) or all
    ``2^n`` coalitions (the problem is well determined, so converge), full-batch Adam (300 steps
    from the near-constant initialization, an implicit regularizer) otherwise; near the
    threshold (budget ≈ free parameters) L-BFGS amplifies noise. A ``UserWarning`` says when ``budget`` is below the
    free parameters and below ``2^n``: the fit then leans on the initialization and weight decay.
    """
    cfg = config or FitConfig()
    _check_config(cfg)
    n = _game_n(game, tn)
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget < 2:
        raise ValueError(
            f"budget must be an integer >= 2 (∅ and N are always queried); got {budget!r}"
        )
    if n < 63 and budget > 2**n:
        warnings.warn(
            f"budget={budget} exceeds the 2^n = {2**n} distinct coalitions of {n} players; "
            f"using {2**n} queries",
            UserWarning,
            stacklevel=2,
        )
        budget = 2**n
    if sampler is not None and not callable(sampler) and not hasattr(sampler, "sample"):
        raise ValueError(
            f"sampler must be None, a shapiq CoalitionSampler or a callable (n, m, rng); got {sampler!r}"
        )
    dof = tn.n_params - sum(c * c for c in tn.topology.bond_dims)  # minus the gauge freedom
    if budget < dof and (n > 20 or budget < 2**n):
        warnings.warn(
            f"budget={budget} is smaller than the surrogate's ~{dof} free parameters: the fit is "
            "under-determined (ill-posed) and relies on the initialization and weight decay; "
            "lower bond_dim or raise the budget",
            UserWarning,
            stacklevel=2,
        )
    rng = np.random.default_rng(cfg.seed)
    smp = _default_sampler(n, cfg.seed) if sampler is None else sampler
    z = _draw(smp, n, int(budget), rng)
    sizes = z.sum(1)
    for extreme, size in ((np.zeros(n, bool), 0), (np.ones(n, bool), n)):
        if not (sizes == size).any():  # a custom sampler without ∅ / N: replace a random row
            free = np.flatnonzero((sizes > 0) & (sizes < n))
            z[rng.choice(free)] = extreme
            sizes = z.sum(1)
    z_val = np.zeros((0, n), bool)
    if cfg.val_queries:
        vs = _default_sampler(n, None if cfg.seed is None else cfg.seed + 1)
        z_val = _draw(vs, n, min(int(cfg.val_queries) + 2, 2**n if n < 63 else 2**62), rng)
        z_val = z_val[(z_val.sum(1) > 0) & (z_val.sum(1) < n)][: cfg.val_queries]
    y_all = np.asarray(game(np.concatenate([z, z_val])), dtype=np.float64).reshape(-1)
    if y_all.shape[0] != len(z) + len(z_val):
        raise ValueError(f"game must return one value per coalition; got shape {y_all.shape}")
    if not np.all(np.isfinite(y_all)):
        raise ValueError(
            f"game returned {int((~np.isfinite(y_all)).sum())} non-finite values (NaN/inf); "
            "check the model and its inputs"
        )
    dtype = tn.shift.dtype
    y_game = y_all.copy()  # the game's values (y_all becomes the prior's residual below)
    with torch.no_grad():
        tn.prior_coef.zero_()
        if cfg.prior == "pairwise":  # LS on [1, z_u, z_u z_v per edge]; the network fits the rest
            zt = torch.as_tensor(z, dtype=dtype)
            feats = torch.cat(
                [torch.ones(len(z), 1, dtype=dtype), zt]
                + (
                    [zt[:, tn.prior_edges[:, 0]] * zt[:, tn.prior_edges[:, 1]]]
                    if len(tn.prior_edges)
                    else []
                ),
                dim=1,
            ).numpy()  # (m, 1 + n + |E|)
            ends = (sizes == 0) | (sizes == n)
            sw = np.sqrt(np.where(ends, cfg.prior_extreme_weight, 1.0))
            coef = np.linalg.lstsq(feats * sw[:, None], y_all[: len(z)] * sw, rcond=None)[0]
            tn.prior_coef.copy_(torch.as_tensor(coef, dtype=dtype))
            y_all = (
                y_all - tn.prior(torch.as_tensor(np.concatenate([z, z_val]), dtype=dtype)).numpy()
            )
    y, y_val = y_all[: len(z)], y_all[len(z) :]
    mu = float(y.mean()) if cfg.standardize else 0.0
    sd = float(y.std()) if cfg.standardize else 1.0
    sd = sd if sd > 1e-12 * max(1.0, abs(mu)) else 1.0
    with torch.no_grad():
        tn.anchors.zero_()
        tn.fitted.fill_(False)
        tn.shift.fill_(mu)
        tn.scale.fill_(sd)
    z_tr = torch.as_tensor(z, dtype=dtype)
    y_tr = torch.as_tensor((y - mu) / sd, dtype=dtype)
    w_tr = torch.ones(len(z), dtype=dtype)
    w_tr[torch.as_tensor((sizes == 0) | (sizes == n))] = cfg.extreme_weight
    val = (
        (torch.as_tensor(z_val, dtype=dtype), torch.as_tensor((y_val - mu) / sd, dtype=dtype))
        if len(z_val)
        else None
    )
    solver = cfg.solver
    if solver == "auto":
        solver = "lbfgs" if len(z) >= 2 * dof or (n < 63 and len(z) == 2**n) else "adam"
    if solver == "adam":
        epochs, history = _fit_adam(tn, z_tr, y_tr, w_tr, val, cfg)
    elif solver == "lbfgs":
        epochs, history = _fit_lbfgs(tn, z_tr, y_tr, w_tr, val, cfg)
    else:
        epochs, history = _fit_als(tn, z_tr, y_tr, w_tr, val, cfg)
    with torch.no_grad():
        if cfg.pin_extremes:  # ν̂ = μ + σ (TN + α Π(1 − z) + β Π z) exact at ∅ and N
            ends = torch.stack([torch.zeros(n, dtype=dtype), torch.ones(n, dtype=dtype)])
            tn.anchors.zero_()
            te = tn.raw(ends)
            y0 = (float(y[sizes == 0][0]) - mu) / sd
            y1 = (float(y[sizes == n][0]) - mu) / sd
            tn.anchors.copy_(torch.stack([y0 - te[0], y1 - te[1]]))
        tn.fitted.fill_(True)
        tr_mse = float(((tn.raw(z_tr) - y_tr) ** 2).mean()) * sd**2
        if val is not None:
            va_mse = float(((tn.raw(val[0]) - val[1]) ** 2).mean()) * sd**2
            var = float(np.var(y_game[len(z) :]))
            r2 = 1.0 - va_mse / var if var > 0 else float("nan")
        else:
            va_mse = r2 = float("nan")
    return FitResult(
        n_queries=len(z) + len(z_val),
        n_train=len(z),
        n_val=len(z_val),
        train_mse=tr_mse,
        val_mse=va_mse,
        val_r2=r2,
        epochs=epochs,
        history=history,
        solver=solver,
    )


def _wmse(tn: GraphTN, z: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (w * (tn.raw(z) - y) ** 2).sum() / w.sum()


def _fit_adam(
    tn: GraphTN,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    w_tr: torch.Tensor,
    val: tuple[torch.Tensor, torch.Tensor] | None,
    cfg: FitConfig,
) -> tuple[int, list[float]]:
    """Adam on the weighted loss. Without validation queries: a fixed number of epochs (cosine
    learning-rate decay to 0, last state kept). With them: the released code's
    ReduceLROnPlateau + early stopping, best validation state kept."""
    opt = torch.optim.Adam(tn.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched: Any
    if val is None:
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs)
    else:
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, factor=cfg.lr_factor, patience=cfg.lr_patience
        )
    gen = torch.Generator()
    if cfg.seed is not None:
        gen.manual_seed(cfg.seed)
    else:
        gen.seed()
    bs = cfg.batch_size or len(z_tr)
    best, best_state, bad, history = math.inf, copy.deepcopy(tn.state_dict()), 0, []
    epoch = 0
    for epoch in range(1, cfg.epochs + 1):  # noqa: B007  (epoch is reported)
        order = torch.randperm(len(z_tr), generator=gen) if bs < len(z_tr) else None
        for i in range(0, len(z_tr), bs):
            idx = order[i : i + bs] if order is not None else slice(None)
            opt.zero_grad()
            loss = _wmse(tn, z_tr[idx], y_tr[idx], w_tr[idx])
            loss.backward()
            opt.step()
        if val is None:
            history.append(float(loss.detach()))
            sched.step()
            continue
        with torch.no_grad():
            v = float(((tn.raw(val[0]) - val[1]) ** 2).mean())
        history.append(v)
        sched.step(v)
        if v < best - 1e-12:
            best, best_state, bad = v, copy.deepcopy(tn.state_dict()), 0
        else:
            bad += 1
            if bad >= cfg.early_stopping:
                break
    if val is not None:
        tn.load_state_dict(best_state)
    return epoch, history


def _fit_lbfgs(
    tn: GraphTN,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    w_tr: torch.Tensor,
    val: tuple[torch.Tensor, torch.Tensor] | None,
    cfg: FitConfig,
) -> tuple[int, list[float]]:
    """Full-batch L-BFGS on ``L(θ) + weight_decay · ||θ||² / 2``.

    Second-order information lets an exactly representable game be recovered to ~1e-6 (Adam
    stalls around 1e-3); used by the closed-form tests and for large budgets.
    """
    params = list(tn.parameters())
    opt = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=cfg.lbfgs_iters,
        tolerance_grad=1e-14,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = _wmse(tn, z_tr, y_tr, w_tr)
        if cfg.weight_decay:
            loss = loss + 0.5 * cfg.weight_decay * sum((p**2).sum() for p in params)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        ref = val if val is not None else (z_tr, y_tr)
        history = [float(((tn.raw(ref[0]) - ref[1]) ** 2).mean())]
    return int(opt.state[params[0]].get("n_iter", 0)), history


@torch.no_grad()
def _fit_als(
    tn: GraphTN,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    w_tr: torch.Tensor,
    val: tuple[torch.Tensor, torch.Tensor] | None,
    cfg: FitConfig,
) -> tuple[int, list[float]]:
    """Alternating least squares: ν̂ is linear in each core, ``ν̂(z_i) = <E_u(z_i), A^(u)>``, so
    each core is set to ``argmin Σ_i w_i (D_i a − y_i)² + λ||a||²`` with ``D`` the environment
    rows. With validation queries the best sweep is kept, otherwise the last."""
    topo = tn.topology
    vec_tr = multilinear_vectors(z_tr)
    order = list(range(topo.n_nodes))
    sweep_order = order + order[::-1][1:-1] if topo.n_nodes > 2 else order
    best, best_state, history, sweep = math.inf, copy.deepcopy(tn.state_dict()), [], 0
    for sweep in range(1, cfg.als_sweeps + 1):  # noqa: B007
        for u in sweep_order:
            cores = list(tn.cores)
            d = environment(topo, cores, vec_tr, u, max_batch=4096).reshape(
                len(z_tr), -1
            )  # (N, P_u)
            dw = d * w_tr[:, None]
            gram = d.T @ dw
            lam = cfg.als_ridge * (float(torch.trace(gram)) / gram.shape[0] + 1e-30)
            a = torch.linalg.solve(
                gram + lam * torch.eye(gram.shape[0], dtype=gram.dtype), dw.T @ y_tr
            )
            tn.cores[u].copy_(a.reshape(tn.cores[u].shape))
        ref = val if val is not None else (z_tr, y_tr)
        v = float(((tn.raw(ref[0]) - ref[1]) ** 2).mean())
        history.append(v)
        if val is not None and v < best:
            best, best_state = v, copy.deepcopy(tn.state_dict())
        if float(((tn.raw(z_tr) - y_tr) ** 2).mean()) < cfg.als_tol:
            break
    if val is not None:
        tn.load_state_dict(best_state)
    return sweep, history
