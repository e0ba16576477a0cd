"""Graph-shaped tensor-network topologies: one core per node, one bond per edge.

A :class:`GraphTopology` fixes the *shape* of a tensor network whose wiring mirrors a graph:

- node ``u`` carries a core ``A^(u)`` of shape ``(d, χ_e1, χ_e2, ...)``: a physical index of
  size ``d`` (2 for a multilinear surrogate, carrying ``[1 - z_u, z_u]``) followed by one bond
  index per incident edge, in increasing edge order;
- edge ``e = (u, v)`` is a bond of dimension ``χ_e`` shared by ``A^(u)`` and ``A^(v)``.

Trees, chains and graphs with loops are all topologies; :meth:`GraphTopology.from_edges` can
require one of them, :meth:`GraphTopology.chain` and :meth:`GraphTopology.spanning_tree` build
the two common simplifications of a graph. Only numpy (and the standard library) is imported.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

__all__ = ["GraphTopology", "normalize_edges"]

Requirement = Literal["any", "connected", "tree", "chain"]
_REQUIREMENTS = ("any", "connected", "tree", "chain")


def normalize_edges(
    n_nodes: int, edges: Any, *, edge_index: bool | None = None
) -> tuple[tuple[int, int], ...]:
    """Undirected, deduplicated, sorted edges ``(u, v)`` with ``u < v`` from many input forms.

    Accepts a ``(2, E)`` array (PyG ``edge_index``, both directions allowed), an ``(E, 2)``
    array, or a sequence of pairs. Self-loops are dropped (a node has one core already).
    ``edge_index=True`` forces the ``(2, E)`` reading (needed when ``E == 2``), ``False`` the
    ``(E, 2)`` one; ``None`` infers it from the shape (a ``(2, 2)`` array is read as pairs).
    """
    if not isinstance(n_nodes, (int, np.integer)) or isinstance(n_nodes, bool) or n_nodes < 1:
        raise ValueError(f"n_nodes must be a positive integer; got {n_nodes!r}")
    if hasattr(edges, "detach"):  # a torch tensor, without importing torch
        edges = edges.detach().cpu().numpy()
    arr = np.asarray(list(edges) if not isinstance(edges, np.ndarray) else edges)
    if arr.size == 0:
        return ()
    if arr.ndim != 2 or (arr.shape[0] != 2 and arr.shape[1] != 2):
        raise ValueError(
            f"edges must be a (2, E) edge_index, an (E, 2) array or a list of pairs; got shape {arr.shape}"
        )
    if edge_index is None:
        edge_index = arr.shape[0] == 2 and arr.shape[1] != 2
    if edge_index:
        if arr.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, E); got {arr.shape}")
        arr = arr.T
    elif arr.shape[1] != 2:
        raise ValueError(f"edges must have shape (E, 2); got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError("edges must hold integer node ids")
        arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= n_nodes:
        raise ValueError(
            f"edges reference node ids outside [0, {n_nodes}); got min {arr.min()}, max {arr.max()}"
        )
    out = {(int(min(u, v)), int(max(u, v))) for u, v in arr if u != v}
    return tuple(sorted(out))


@dataclass(frozen=True)
class GraphTopology:
    """The wiring of a graph-aligned tensor network.

    Attributes:
        n_nodes: number of cores (graph nodes, players).
        edges: sorted undirected edges ``(u, v)``, ``u < v``; one bond each.
        bond_dims: bond dimension ``χ_e`` per edge (same order as ``edges``).
        phys_dim: size of every physical index (2 for multilinear surrogates).
    """

    n_nodes: int
    edges: tuple[tuple[int, int], ...]
    bond_dims: tuple[int, ...]
    phys_dim: int = 2

    def __post_init__(self) -> None:
        if self.n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1; got {self.n_nodes}")
        if len(self.bond_dims) != len(self.edges):
            raise ValueError(
                f"bond_dims must have one entry per edge ({len(self.edges)}); got {len(self.bond_dims)}"
            )
        for chi in self.bond_dims:
            if int(chi) < 1:
                raise ValueError(f"bond_dim must be >= 1; got {chi}")
        if self.phys_dim < 1:
            raise ValueError(f"phys_dim must be >= 1; got {self.phys_dim}")

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_edges(
        cls,
        n_nodes: int,
        edges: Any,
        bond_dim: int | Sequence[int] = 2,
        *,
        phys_dim: int = 2,
        require: Requirement = "any",
        edge_index: bool | None = None,
    ) -> GraphTopology:
        """A topology with one bond per graph edge.

        Args:
            n_nodes: number of nodes.
            edges: ``(2, E)`` edge_index, ``(E, 2)`` array or list of pairs.
            bond_dim: one ``χ`` for every edge, or one per (normalized, sorted) edge.
            require: ``"any"``, ``"connected"``, ``"tree"`` or ``"chain"``; a ValueError says
                which requirement failed.
            edge_index: how to read a 2-D ``edges`` array (see :func:`normalize_edges`).
        """
        if require not in _REQUIREMENTS:
            raise ValueError(f"require must be one of {_REQUIREMENTS}; got {require!r}")
        norm = normalize_edges(n_nodes, edges, edge_index=edge_index)
        dims = _bond_dims(bond_dim, len(norm))
        topo = cls(int(n_nodes), norm, dims, int(phys_dim))
        topo.check(require)
        return topo

    @classmethod
    def chain(
        cls,
        n_nodes: int,
        bond_dim: int = 2,
        *,
        order: Sequence[int] | None = None,
        phys_dim: int = 2,
    ) -> GraphTopology:
        """A matrix-product (chain) topology visiting nodes in ``order`` (default 0..n-1)."""
        order = list(range(n_nodes)) if order is None else [int(u) for u in order]
        if sorted(order) != list(range(n_nodes)):
            raise ValueError(f"order must be a permutation of range({n_nodes}); got {order}")
        edges = list(itertools.pairwise(order))
        return cls.from_edges(n_nodes, edges or np.zeros((0, 2), int), bond_dim, phys_dim=phys_dim)

    @classmethod
    def spanning_tree(
        cls, n_nodes: int, edges: Any, bond_dim: int = 2, *, root: int = 0, phys_dim: int = 2
    ) -> GraphTopology:
        """A breadth-first spanning tree of a connected graph (a loop-free, cheaper network)."""
        full = cls.from_edges(n_nodes, edges, 1, phys_dim=phys_dim)
        if not full.is_connected:
            raise ValueError(
                f"a spanning tree needs a connected graph; this one has {len(full.components)} "
                "components (connect them or use GraphTopology.chain)"
            )
        seen, frontier, tree = {root}, [root], []
        while frontier:
            nxt = []
            for u in frontier:
                for v in full.neighbors[u]:
                    if v not in seen:
                        seen.add(v)
                        tree.append((u, v))
                        nxt.append(v)
            frontier = nxt
        return cls.from_edges(n_nodes, tree or np.zeros((0, 2), int), bond_dim, phys_dim=phys_dim)

    # ----------------------------------------------------------------- structure
    @cached_property
    def incident(self) -> tuple[tuple[int, ...], ...]:
        """``incident[u]``: indices of the edges touching ``u``, increasing (= core bond order)."""
        inc: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for e, (u, v) in enumerate(self.edges):
            inc[u].append(e)
            inc[v].append(e)
        return tuple(tuple(x) for x in inc)

    @cached_property
    def neighbors(self) -> tuple[tuple[int, ...], ...]:
        """``neighbors[u]``: neighbouring nodes, in the order of the core's bond indices."""
        out = []
        for u in range(self.n_nodes):
            nbrs = []
            for e in self.incident[u]:
                a, b = self.edges[e]
                nbrs.append(b if a == u else a)
            out.append(tuple(nbrs))
        return tuple(out)

    @cached_property
    def components(self) -> tuple[tuple[int, ...], ...]:
        """Connected components (sorted node tuples)."""
        parent = list(range(self.n_nodes))

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for u, v in self.edges:
            parent[find(u)] = find(v)
        groups: dict[int, list[int]] = {}
        for u in range(self.n_nodes):
            groups.setdefault(find(u), []).append(u)
        return tuple(tuple(g) for g in sorted(groups.values()))

    @property
    def is_connected(self) -> bool:
        return len(self.components) == 1

    @property
    def is_tree(self) -> bool:
        return self.is_connected and len(self.edges) == self.n_nodes - 1

    @property
    def is_chain(self) -> bool:
        return self.is_tree and all(len(i) <= 2 for i in self.incident)

    def check(self, require: Requirement) -> None:
        """Raise a ValueError unless the topology is ``require`` (any/connected/tree/chain)."""
        if require == "any":
            return
        if not self.is_connected:
            raise ValueError(
                f"require={require!r} needs a connected graph; got {len(self.components)} "
                f"components {[list(c) for c in self.components][:4]}"
            )
        if require == "tree" and not self.is_tree:
            raise ValueError(
                f"require='tree' needs n_nodes - 1 = {self.n_nodes - 1} edges and no loop; "
                f"got {len(self.edges)} edges (use GraphTopology.spanning_tree)"
            )
        if require == "chain" and not self.is_chain:
            raise ValueError("require='chain' needs a path graph (a tree with degrees <= 2)")

    def core_shape(self, u: int) -> tuple[int, ...]:
        """Shape of core ``u``: ``(phys_dim, χ_e for e in incident[u])``."""
        return (self.phys_dim, *(self.bond_dims[e] for e in self.incident[u]))

    @property
    def core_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.core_shape(u) for u in range(self.n_nodes))

    @property
    def n_params(self) -> int:
        """Total number of entries in all cores."""
        return int(sum(int(np.prod(s)) for s in self.core_shapes))

    def with_bond_dim(self, bond_dim: int | Sequence[int]) -> GraphTopology:
        """The same wiring with other bond dimensions."""
        return GraphTopology(
            self.n_nodes, self.edges, _bond_dims(bond_dim, len(self.edges)), self.phys_dim
        )


def _bond_dims(bond_dim: int | Iterable[int], n_edges: int) -> tuple[int, ...]:
    if isinstance(bond_dim, (int, np.integer)) and not isinstance(bond_dim, bool):
        if bond_dim < 1:
            raise ValueError(f"bond_dim must be >= 1; got {bond_dim}")
        return (int(bond_dim),) * n_edges
    dims = tuple(int(c) for c in bond_dim)  # type: ignore[union-attr]
    if len(dims) != n_edges:
        raise ValueError(
            f"bond_dim must be an int or one int per edge ({n_edges}); got {len(dims)}"
        )
    if any(c < 1 for c in dims):
        raise ValueError(f"bond_dim must be >= 1; got {dims}")
    return dims
