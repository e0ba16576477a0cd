"""Offline allocation algorithms to lift online with ``PlanAndMatch`` (paper §5).

Each algorithm maps a valuation matrix (n, m) to an owner vector (m,) and carries the
guarantee it is lifted with (``GUARANTEES``):

* ``round_robin``            EF1 (hence PROP1: EF1 implies PROP1 for additive goods).
* ``envy_cycle_elimination`` EF1 (Lipton, Markakis, Mossel, Saberi 2004).
* ``mms_bag_filling``        1/2-MMS (single large goods first, then bag filling; needs exact MMS).
* ``max_mms_ratio``          the largest α_I = max_A min_i v_i(A_i)/MMS_i of *this* instance
                             (MILP); α_I >= the best proven bound (> 3/4) whenever that bound holds.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint

from ._milp import solve
from ._tol import positive
from .notions import check_values, mms_values

__all__ = [
    "GUARANTEES",
    "envy_cycle_elimination",
    "max_mms_ratio",
    "mms_bag_filling",
    "round_robin",
]


def round_robin(values) -> np.ndarray:
    """Agents 0, 1, ..., n-1, 0, ... each pick their most valued remaining good (ties: lowest id)."""
    v = check_values(values)
    n, m = v.shape
    owner = np.full(m, -1, dtype=np.int64)
    free = np.ones(m, dtype=bool)
    for t in range(m):
        i = t % n
        g = int(np.argmax(np.where(free, v[i], -np.inf)))
        owner[g], free[g] = i, False
    return owner


def envy_cycle_elimination(values) -> np.ndarray:
    """Goods in id order; each goes to an agent nobody envies, after rotating envy cycles away."""
    v = check_values(values)
    n, m = v.shape
    bundles: list[list[int]] = [[] for _ in range(n)]
    worth = np.zeros((n, n))  # worth[i, j] = v_i(bundle j)
    total = v.sum(1)[:, None]  # (n, 1): envy is measured relative to each agent's total value
    for g in range(m):
        while True:
            envies = positive(worth - np.diag(worth)[:, None], total)  # (n, n) i envies j
            np.fill_diagonal(envies, False)
            sources = np.flatnonzero(~envies.any(0))
            if sources.size:
                break
            # every agent is envied: walk backwards along envy edges until a node repeats
            path, seen, x = [0], {0: 0}, 0
            while True:
                x = int(np.flatnonzero(envies[:, x])[0])  # someone who envies x
                if x in seen:
                    cycle = path[seen[x] :]
                    break
                seen[x] = len(path)
                path.append(x)
            # cycle = [x0, x1, ...] with x_{k+1} envying x_k: x_{k+1} takes x_k's bundle
            old = [bundles[a] for a in cycle]
            for k in range(len(cycle)):
                bundles[cycle[(k + 1) % len(cycle)]] = old[k]
            worth = np.array([[v[i, b].sum() for b in bundles] for i in range(n)])
        s = int(sources[0])
        bundles[s].append(g)
        worth[:, s] += v[:, g]
    owner = np.empty(m, dtype=np.int64)
    for i, b in enumerate(bundles):
        owner[b] = i
    return owner


def mms_bag_filling(values, mms=None) -> np.ndarray:
    """1/2-MMS: normalise MMS_i = 1; give single goods worth >= 1/2 to such agents; then fill a
    bag good by good until a remaining agent values it >= 1/2 and give it to her; the last
    agent takes the rest. Each bag is worth < 1 to every remaining agent, and removing an agent
    with one good never lowers the others' MMS, so everyone ends with >= 1/2 MMS_i."""
    v = check_values(values)
    n, m = v.shape
    shares = mms_values(v) if mms is None else np.asarray(mms, dtype=float)
    owner = np.zeros(m, dtype=np.int64)
    active = [i for i in range(n) if shares[i] > 0]
    if not active:
        return owner
    u = np.zeros_like(v)
    u[active] = v[active] / shares[active, None]
    free = list(range(m))
    while len(active) > 1:
        pairs = [(i, g) for i in active for g in free if u[i, g] >= 0.5]
        if not pairs:
            break
        i, g = pairs[0]
        owner[g] = i
        active.remove(i)
        free.remove(g)
    while len(active) > 1 and free:
        bag: list[int] = []
        taker = None
        while free and taker is None:
            bag.append(free.pop(0))
            happy = [i for i in active if u[i, bag].sum() >= 0.5]
            taker = happy[0] if happy else None
        if taker is None:  # goods ran out: the last partial bag goes to the first active agent
            taker = active[0]
        owner[bag] = taker
        active.remove(taker)
    owner[free] = active[0] if active else owner[free]
    return owner


def max_mms_ratio(values, mms=None) -> np.ndarray:
    """argmax_A min_{i: MMS_i > 0} v_i(A_i) / MMS_i by MILP (HiGHS); exact, for small instances."""
    v = check_values(values)
    n, m = v.shape
    shares = mms_values(v) if mms is None else np.asarray(mms, dtype=float)
    need = np.flatnonzero(shares > 0)
    if need.size == 0:
        return np.zeros(m, dtype=np.int64)
    nx = n * m  # x[i, g] at i * m + g, then t
    c = np.zeros(nx + 1)
    c[-1] = -1.0
    rows, lo, hi = [], [], []
    for g in range(m):
        r = np.zeros(nx + 1)
        r[g:nx:m] = 1.0
        rows.append(r)
        lo.append(1.0)
        hi.append(1.0)
    for i in need:
        r = np.zeros(nx + 1)
        r[i * m : (i + 1) * m] = v[i] / shares[i]
        r[-1] = -1.0
        rows.append(r)
        lo.append(0.0)
        hi.append(np.inf)
    problem = dict(
        c=c,
        constraints=LinearConstraint(np.array(rows), lo, hi),
        integrality=np.r_[np.ones(nx), 0.0],
        bounds=Bounds(np.zeros(nx + 1), np.r_[np.ones(nx), float(m) * n + 1]),
    )
    res = solve(problem, {"mip_rel_gap": 1e-9})
    if res.x is None:
        raise RuntimeError(f"max-MMS-ratio MILP failed: {res.message}")
    x = np.round(res.x[:nx]).reshape(n, m)
    return np.argmax(x, 0).astype(np.int64)


GUARANTEES = {
    "round_robin": ("ef1", 1.0),
    "envy_cycle_elimination": ("ef1", 1.0),
    "mms_bag_filling": ("mms", 0.5),
    "max_mms_ratio": ("mms", None),  # instance-optimal; no fixed constant
}
