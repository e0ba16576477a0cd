"""Online instances, allocations, and synthetic valuation generators (paper §2, the model).

n agents with additive values v_i(g) >= 0; goods g_1, ..., g_m arrive one at a time. When good
g_t arrives its value vector (v_1(g_t), ..., v_n(g_t)) is revealed and the good is given to one
agent, irrevocably.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from .notions import as_valuations, check_owner, check_values

__all__ = ["Allocation", "OnlineInstance", "random_instance"]


@dataclass(frozen=True)
class OnlineInstance:
    """A valuation matrix plus an arrival order.

    values: (n, m) array, column g is good g's value vector (goods are indexed by id, not time);
            also fairpyx's {agent: {item: value}} dict or a fairpyx ``Instance``, whose agent
            and item names are kept in ``agents`` / ``items`` (and used by ``Allocation.to_dict``).
    order:  (m,) permutation, order[t] = id of the good that arrives at step t (default 0..m-1).
    """

    values: np.ndarray
    order: np.ndarray | None = None
    agents: tuple | None = None
    items: tuple | None = None

    def __post_init__(self):
        v, agents, items = as_valuations(self.values)
        agents = agents if self.agents is None else list(self.agents)
        items = items if self.items is None else list(self.items)
        for label, names, size in (("agents", agents, v.shape[0]), ("items", items, v.shape[1])):
            if names is not None and len(names) != size:
                raise ValueError(f"{label} must name all {size} {label}, got {len(names)}")
        object.__setattr__(self, "agents", None if agents is None else tuple(agents))
        object.__setattr__(self, "items", None if items is None else tuple(items))
        v.setflags(write=False)
        m = v.shape[1]
        order = np.arange(m) if self.order is None else np.asarray(self.order)
        if order.shape != (m,) or not np.array_equal(np.sort(order), np.arange(m)):
            raise ValueError(f"order must be a permutation of range({m}), got {order!r}")
        order = order.astype(np.int64)
        order.setflags(write=False)
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "order", order)

    @classmethod
    def from_stream(cls, stream: Iterable) -> OnlineInstance:
        """Build from an iterable of value vectors in arrival order (each of length n)."""
        cols = [np.asarray(x, dtype=float) for x in stream]
        if not cols:
            raise ValueError("stream must contain at least one good")
        if len({c.shape for c in cols}) != 1 or cols[0].ndim != 1:
            raise ValueError("stream must yield 1-D value vectors of one common length n")
        return cls(np.stack(cols, 1))

    @property
    def n(self) -> int:
        return self.values.shape[0]

    @property
    def m(self) -> int:
        return self.values.shape[1]

    def stream(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield (t, good id, value vector (n,)) in arrival order."""
        for t, g in enumerate(np.asarray(self.order)):  # always set by __post_init__
            yield t, int(g), self.values[:, g]

    def with_order(self, order) -> OnlineInstance:
        """The same goods arriving in another order."""
        return OnlineInstance(self.values, order, self.agents, self.items)


@dataclass(frozen=True)
class Allocation:
    """An allocation of goods (by id) with the online history that produced it.

    owner:   (m,) owner[g] = agent holding good g.
    history: ((t, good, agent), ...) in arrival order.
    agents, items: names for ``to_dict`` (from a fairpyx-style input), else indices.
    """

    owner: np.ndarray
    n: int
    history: tuple = ()
    agents: tuple | None = None
    items: tuple | None = None

    def __post_init__(self):
        owner = check_owner(self.owner, self.n, len(np.asarray(self.owner)))
        owner.setflags(write=False)
        object.__setattr__(self, "owner", owner)

    @property
    def bundles(self) -> list[np.ndarray]:
        """Good ids held by each agent."""
        return [np.flatnonzero(self.owner == i) for i in range(self.n)]

    def to_dict(self) -> dict:
        """{agent: [goods]}, the shape fairpyx's ``divide`` returns (names when known)."""
        agents = range(self.n) if self.agents is None else self.agents
        items = range(self.owner.size) if self.items is None else self.items
        return {a: [items[int(g)] for g in b] for a, b in zip(agents, self.bundles)}

    def bundle_values(self, values) -> np.ndarray:
        """(n, n) matrix V[i, j] = v_i(A_j)."""
        v = check_values(values)
        onehot = np.zeros((self.n, self.owner.size))
        onehot[self.owner, np.arange(self.owner.size)] = 1.0
        return v @ onehot.T


def random_instance(
    n: int, m: int, kind: str = "uniform", rng: np.random.Generator | int | None = None
) -> OnlineInstance:
    """A random instance in random arrival order.

    kind: "uniform"      v_i(g) ~ U(0, 1) i.i.d.;
          "correlated"   v_i(g) = q_g * U(0.8, 1.2) with a common quality q_g ~ U(0, 1)
                         (agents largely agree: the hard case for envy);
          "heavy_tailed" v_i(g) ~ Pareto(1.5) i.i.d. (a few goods dominate);
          "bivalued"     v_i(g) in {1, 3} with equal probability.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")
    rng = np.random.default_rng(rng)
    if kind == "uniform":
        v = rng.uniform(0, 1, (n, m))
    elif kind == "correlated":
        v = rng.uniform(0, 1, (1, m)) * rng.uniform(0.8, 1.2, (n, m))
    elif kind == "heavy_tailed":
        v = rng.pareto(1.5, (n, m)) + 1e-3
    elif kind == "bivalued":
        v = rng.choice([1.0, 3.0], (n, m))
    else:
        raise ValueError(
            f"kind must be 'uniform', 'correlated', 'heavy_tailed' or 'bivalued', got {kind!r}"
        )
    return OnlineInstance(v, rng.permutation(m))
