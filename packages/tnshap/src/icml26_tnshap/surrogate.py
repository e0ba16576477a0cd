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

__all__ = ["FitConfig", "FitResult", "GraphTN", "fit_surrogate", "size_uniform_sampler"]

Structure = Literal["graph", "tree", "spanning_tree", "chain"]
_STRUCTURES = ("graph", "tree", "spanning_tree", "chain")


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
    scale: torch.Tensor  # σ (buffer)

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

    @property
    def n_players(self) -> int:
        return self.topology.n_nodes

    @property
    def n_params(self) -> int:
        return self.topology.n_params

    def raw(self, z: torch.Tensor, *, max_batch: int | None = 4096) -> torch.Tensor:
        """The network without ``μ, σ``: ``(B, n) -> (B,)``."""
        return contract(
            self.topology, list(self.cores), multilinear_vectors(z), max_batch=max_batch
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``ν̂(z) = μ + σ · TN(z)`` for ``z (B, n)`` in ``[0, 1]``."""
        z = torch.as_tensor(z, dtype=self.shift.dtype)
        if z.ndim != 2 or z.shape[1] != self.n_players:
            raise ValueError(f"z must have shape (B, {self.n_players}); got {tuple(z.shape)}")
        return self.shift + self.scale * self.raw(z)

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


# ----------------------------------------------------------------------------- sampling
def size_uniform_sampler(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` distinct coalitions ``(m, n)`` bool: size ``k ~ U{0..n}``, then a uniform subset.

    Uniform over sizes (not over subsets) puts mass on the small and large coalitions that
    dominate the Shapley weights. When ``m ≥ 2^n`` every coalition is returned once.
    """
    if n <= 20 and m >= 2**n:
        masks = np.arange(2**n)
        return ((masks[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    seen: set[bytes] = set()
    out: list[np.ndarray] = []
    tries = 0
    while len(out) < m:
        tries += 1
        if tries > 200 * m:  # sizes near 0/n exhausted; fill with uniform random subsets
            row = rng.random(n) < 0.5
        else:
            k = int(rng.integers(0, n + 1))
            row = np.zeros(n, dtype=bool)
            row[rng.choice(n, size=k, replace=False)] = True
        key = np.packbits(row).tobytes()
        if key not in seen:
            seen.add(key)
            out.append(row)
    return np.stack(out)


# ----------------------------------------------------------------------------- fitting
@dataclass
class FitConfig:
    """Training recipe; defaults follow the paper's released configuration unless noted."""

    solver: Literal["adam", "lbfgs", "als"] = "adam"  # paper: Adam; lbfgs/als: our additions
    val_fraction: float = 1 / 6  # 500 train + 100 validation coalitions at budget 600
    lr: float = 1e-2  # Adam learning rate
    weight_decay: float = 1e-5  # Adam weight decay (a weak prior for small budgets)
    epochs: int = 100  # Adam epochs over the training set
    batch_size: int = 32  # Adam minibatch
    lr_factor: float = 0.5  # ReduceLROnPlateau factor
    lr_patience: int = 5  # ReduceLROnPlateau patience (epochs)
    early_stopping: int = 10  # stop after this many epochs without validation improvement
    lbfgs_iters: int = 2000  # L-BFGS: full-batch iterations (strong-Wolfe line search)
    als_sweeps: int = 30  # ALS: forward+backward sweeps over the cores
    als_ridge: float = 1e-6  # ALS: ridge on each core solve (removes gauge null directions)
    als_tol: float = 1e-12  # ALS: stop when the training MSE falls below this
    include_extremes: bool = True  # always query ∅ and N: pins ν̂(0), ν̂(1) hence Σφ (efficiency)
    standardize: bool = True  # fit (y − μ)/σ and store μ, σ in the surrogate
    seed: int = 0  # sampler and minibatch order


@dataclass
class FitResult:
    """What :func:`fit_surrogate` did."""

    n_queries: int
    n_train: int
    n_val: int
    train_mse: float  # on the original scale
    val_mse: float  # on the original scale (train set when there is no validation split)
    val_r2: float
    epochs: int
    history: list[float] = field(default_factory=list)  # validation MSE per epoch / sweep


def _game_n(game: Any, tn: GraphTN) -> int:
    n = getattr(game, "n_players", None)
    if n is not None and int(n) != tn.n_players:
        raise ValueError(f"game has {n} players but the surrogate has {tn.n_players} nodes")
    return tn.n_players


def fit_surrogate(
    tn: GraphTN,
    game: Callable[[np.ndarray], Any],
    budget: int = 600,
    sampler: str | Callable[[int, int, np.random.Generator], np.ndarray] = "size_uniform",
    config: FitConfig | None = None,
) -> FitResult:
    """Fit ``tn`` to ``game`` from ``budget`` oracle queries (training + validation).

    Args:
        tn: the surrogate (modified in place; its best-validation state is kept).
        game: ``(B, n) bool -> (B,)`` oracle, e.g. a :class:`MaskedGraphGame`.
        budget: total number of coalitions queried (≥ 2).
        sampler: ``"size_uniform"`` or a callable ``(n, m, rng) -> (m, n) bool``.
        config: :class:`FitConfig`.

    A ``UserWarning`` says when ``budget`` is below the number of free parameters (cores minus
    the ``χ²`` gauge freedom of each bond) and below ``2^n``: the least-squares problem is then
    under-determined and the fit leans on weight decay and early stopping.
    """
    cfg = config or FitConfig()
    n = _game_n(game, tn)
    if not isinstance(budget, (int, np.integer)) or budget < 2:
        raise ValueError(f"budget must be an integer >= 2 (training + validation); got {budget!r}")
    if not 0.0 <= cfg.val_fraction < 1.0:
        raise ValueError(f"config.val_fraction must be in [0, 1); got {cfg.val_fraction}")
    if cfg.solver not in ("adam", "lbfgs", "als"):
        raise ValueError(f"config.solver must be 'adam', 'lbfgs' or 'als'; got {cfg.solver!r}")
    sample: Callable[[int, int, np.random.Generator], np.ndarray]
    if sampler == "size_uniform":
        sample = size_uniform_sampler
    elif callable(sampler):
        sample = sampler
    else:
        raise ValueError(f"sampler must be 'size_uniform' or a callable; got {sampler!r}")
    dof = tn.n_params - sum(c * c for c in tn.topology.bond_dims)  # minus the gauge freedom
    if budget < dof and (n > 20 or budget < 2**n):
        warnings.warn(
            f"budget={budget} is smaller than the surrogate's ~{dof} free parameters: the fit is "
            "under-determined (ill-posed) and relies on weight decay / early stopping; lower "
            "bond_dim or raise the budget",
            UserWarning,
            stacklevel=2,
        )
    rng = np.random.default_rng(cfg.seed)
    z = np.asarray(sample(n, int(budget), rng), dtype=bool)
    if z.ndim != 2 or z.shape[1] != n:
        raise ValueError(f"sampler must return (m, {n}) coalitions; got {z.shape}")
    if cfg.include_extremes and len(z) >= 2:
        rows = {np.packbits(r).tobytes() for r in z}
        for extreme in (np.zeros(n, bool), np.ones(n, bool)):
            if np.packbits(extreme).tobytes() not in rows:
                # replace a random non-extreme row so the budget is kept
                free = np.flatnonzero((z.sum(1) > 0) & (z.sum(1) < n))
                z[rng.choice(free)] = extreme
    y = np.asarray(game(z), dtype=np.float64).reshape(-1)
    if y.shape[0] != z.shape[0] or not np.all(np.isfinite(y)):
        raise ValueError("game must return one finite value per coalition")
    n_val = round(cfg.val_fraction * len(z)) if len(z) >= 4 else 0
    sizes = z.sum(1)
    pinned = (sizes == 0) | (sizes == n) if cfg.include_extremes else np.zeros(len(z), bool)
    others = rng.permutation(np.flatnonzero(~pinned))  # ∅ and N always stay in training
    n_val = min(n_val, len(others))
    va = others[:n_val]
    tr = np.concatenate([others[n_val:], np.flatnonzero(pinned)])
    mu = float(y[tr].mean()) if cfg.standardize else 0.0
    sd = float(y[tr].std()) if cfg.standardize else 1.0
    sd = sd if sd > 1e-12 else 1.0
    dtype = tn.shift.dtype
    with torch.no_grad():
        tn.shift.fill_(mu)
        tn.scale.fill_(sd)
    zt = torch.as_tensor(z, dtype=dtype)
    yt = torch.as_tensor((y - mu) / sd, dtype=dtype)
    z_tr, y_tr = zt[tr], yt[tr]
    z_va, y_va = (zt[va], yt[va]) if n_val else (z_tr, y_tr)
    if cfg.solver == "adam":
        epochs, history = _fit_adam(tn, z_tr, y_tr, z_va, y_va, cfg)
    elif cfg.solver == "lbfgs":
        epochs, history = _fit_lbfgs(tn, z_tr, y_tr, z_va, y_va, cfg)
    else:
        epochs, history = _fit_als(tn, z_tr, y_tr, z_va, y_va, cfg)
    with torch.no_grad():
        tr_mse = float(((tn.raw(z_tr) - y_tr) ** 2).mean()) * sd**2
        va_mse = float(((tn.raw(z_va) - y_va) ** 2).mean()) * sd**2
        var = float(y_va.var(unbiased=False)) * sd**2
    r2 = 1.0 - va_mse / var if var > 0 else float("nan")
    return FitResult(
        n_queries=len(z),
        n_train=len(tr),
        n_val=n_val,
        train_mse=tr_mse,
        val_mse=va_mse,
        val_r2=r2,
        epochs=epochs,
        history=history,
    )


def _fit_adam(
    tn: GraphTN,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    z_va: torch.Tensor,
    y_va: torch.Tensor,
    cfg: FitConfig,
) -> tuple[int, list[float]]:
    opt = torch.optim.Adam(tn.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, factor=cfg.lr_factor, patience=cfg.lr_patience
    )
    gen = torch.Generator().manual_seed(cfg.seed)
    best, best_state, bad, history = math.inf, copy.deepcopy(tn.state_dict()), 0, []
    epoch = 0
    for epoch in range(1, cfg.epochs + 1):  # noqa: B007  (epoch is reported)
        order = torch.randperm(len(z_tr), generator=gen)
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i : i + cfg.batch_size]
            opt.zero_grad()
            loss = ((tn.raw(z_tr[idx]) - y_tr[idx]) ** 2).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            val = float(((tn.raw(z_va) - y_va) ** 2).mean())
        history.append(val)
        sched.step(val)
        if val < best - 1e-12:
            best, best_state, bad = val, copy.deepcopy(tn.state_dict()), 0
        else:
            bad += 1
            if bad >= cfg.early_stopping:
                break
    tn.load_state_dict(best_state)
    return epoch, history


def _fit_lbfgs(
    tn: GraphTN,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    z_va: torch.Tensor,
    y_va: torch.Tensor,
    cfg: FitConfig,
) -> tuple[int, list[float]]:
    """Full-batch L-BFGS on ``mean (TN(z) − y)² + weight_decay · ||θ||² / 2``.

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
    history: list[float] = []

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = ((tn.raw(z_tr) - y_tr) ** 2).mean()
        if cfg.weight_decay:
            loss = loss + 0.5 * cfg.weight_decay * sum((p**2).sum() for p in params)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        history.append(float(((tn.raw(z_va) - y_va) ** 2).mean()))
    return int(opt.state[params[0]].get("n_iter", 0)), history


@torch.no_grad()
def _fit_als(
    tn: GraphTN,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    z_va: torch.Tensor,
    y_va: torch.Tensor,
    cfg: FitConfig,
) -> tuple[int, list[float]]:
    """Alternating least squares: ν̂ is linear in each core, ``ν̂(z_i) = <E_u(z_i), A^(u)>``, so
    each core is set to ``argmin ||D a − y||² + λ||a||²`` with ``D`` the environment rows."""
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
            gram = d.T @ d
            lam = cfg.als_ridge * (float(torch.trace(gram)) / gram.shape[0] + 1e-30)
            a = torch.linalg.solve(
                gram + lam * torch.eye(gram.shape[0], dtype=gram.dtype), d.T @ y_tr
            )
            tn.cores[u].copy_(a.reshape(tn.cores[u].shape))
        val = float(((tn.raw(z_va) - y_va) ** 2).mean())
        history.append(val)
        if val < best:
            best, best_state = val, copy.deepcopy(tn.state_dict())
        if float(((tn.raw(z_tr) - y_tr) ** 2).mean()) < cfg.als_tol:
            break
    tn.load_state_dict(best_state)
    return sweep, history
