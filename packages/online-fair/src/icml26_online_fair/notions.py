"""Fairness notions for indivisible goods with additive valuations.

Notation (paper §2): agents N = [n], goods M = [m], values v_i(g) >= 0, an allocation
A = (A_1, ..., A_n) given here as ``owner`` (m,) with owner[g] = the agent holding good g.

    PROP    v_i(A_i) >= v_i(M) / n
    PROP1   v_i(A_i) + max_{g ∉ A_i} v_i(g) >= v_i(M) / n
    PROPX   v_i(A_i) + min_{g ∉ A_i, v_i(g) > 0} v_i(g) >= v_i(M) / n
    EF      v_i(A_i) >= v_i(A_j)
    EF1     v_i(A_i) >= v_i(A_j) - max_{g ∈ A_j} v_i(g)
    EFX     v_i(A_i) >= v_i(A_j) - min_{g ∈ A_j, v_i(g) > 0} v_i(g)
    MMS     v_i(A_i) >= MMS_i = max_{partitions P of M into n bundles} min_k v_i(P_k)

α-X multiplies the right-hand side by α (for the "up to one good" notions the slack good stays on
the left: α-PROP1 is v_i(A_i) + max_{g∉A_i} v_i(g) >= α v_i(M)/n). ``*_ratio`` returns the largest
α in [0, 1] for which the allocation is α-X (1 when it is X). Agents whose right-hand side is 0
are satisfied for every α.

The fast functions are vectorised; ``*_ref`` functions beside them are literal transcriptions of
the quantifiers (loops over goods) used by the tests as the oracle.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import Bounds, LinearConstraint

from ._milp import solve
from ._tol import RTOL, positive

__all__ = [
    "NOTIONS",
    "approx_ratio",
    "ef1_ratio",
    "ef_ratio",
    "efx_ratio",
    "is_fair",
    "mms_lower_bound_lpt",
    "mms_ratio",
    "mms_value",
    "mms_values",
    "prop1_ratio",
    "prop_ratio",
    "propx_ratio",
]

NOTIONS = ("ef", "ef1", "efx", "prop", "prop1", "propx", "mms")


# ----------------------------------------------------------------------------- validation
def as_valuations(values, name: str = "values") -> tuple[np.ndarray, list | None, list | None]:
    """(values (n, m) float array, agent names or None, item names or None).

    Accepts an (n, m) array-like; fairpyx's ``valuations`` dict {agent: {item: value}} (an item
    missing from an agent's dict is worth 0 to her); {agent: [value per item]}; or a fairpyx
    ``Instance`` (anything with ``agents``, ``items`` and ``agent_item_value``). Names keep the
    input's order."""
    agents = items = None
    if all(hasattr(values, a) for a in ("agents", "items", "agent_item_value")):  # fairpyx
        agents, items = list(values.agents), list(values.items)
        values = [[values.agent_item_value(a, g) for g in items] for a in agents]
    elif isinstance(values, dict):
        agents = list(values)
        rows = [values[a] for a in agents]
        if rows and all(isinstance(r, dict) for r in rows):
            items = list(dict.fromkeys(g for r in rows for g in r))
            values = [[r.get(g, 0.0) for g in items] for r in rows]
        else:
            values = rows
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{name} must be an (n_agents, n_goods) array, a {{agent: {{item: value}}}} dict or "
            f"a fairpyx Instance; got {type(values).__name__}"
        ) from err
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n_agents, n_goods) array, got shape {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError(f"{name} must have at least one agent (row), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative: this package handles goods, not chores")
    return arr, agents, items


def check_values(values, name: str = "values") -> np.ndarray:
    """Return ``values`` as a float (n, m) array of finite non-negative numbers (goods); any
    input ``as_valuations`` accepts (array, fairpyx valuations dict, fairpyx Instance)."""
    return as_valuations(values, name)[0]


def check_owner(owner, n: int, m: int, agents=None, items=None) -> np.ndarray:
    """Return the allocation as an int (m,) array of agent indices in [0, n).

    Accepts an owner vector (m,), an ``Allocation``, or a bundle dict {agent: [items]} (fairpyx's
    ``divide`` output; names as in ``agents`` / ``items``, else indices); each item exactly once."""
    owner = getattr(owner, "owner", owner)  # accept an Allocation
    if isinstance(owner, dict):
        agent_ix = {a: k for k, a in enumerate(range(n) if agents is None else agents)}
        item_ix = {g: k for k, g in enumerate(range(m) if items is None else items)}
        out = np.full(m, -1, dtype=np.int64)
        for a, bundle in owner.items():
            if a not in agent_ix:
                raise ValueError(f"allocation names an unknown agent {a!r}")
            for g in bundle:
                if g not in item_ix:
                    raise ValueError(f"allocation names an unknown item {g!r}")
                if out[item_ix[g]] >= 0:
                    raise ValueError(f"allocation gives item {g!r} to two agents")
                out[item_ix[g]] = agent_ix[a]
        if np.any(out < 0):
            missing = [list(item_ix)[k] for k in np.flatnonzero(out < 0)]
            raise ValueError(f"allocation leaves items {missing} unallocated")
        return out
    arr = np.asarray(owner)
    if arr.shape != (m,):
        raise ValueError(
            f"allocation must give one owner per good: expected shape ({m},), got {arr.shape}"
        )
    if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= n):
        raise ValueError(f"allocation owners must be integers in [0, {n}), got {arr}")
    return arr.astype(np.int64)


def _prepare(values, allocation):
    v, agents, items = as_valuations(values)
    n, m = v.shape
    owner = check_owner(allocation, n, m, agents, items)
    onehot = np.zeros((n, m))
    onehot[owner, np.arange(m)] = 1.0  # (n, m): onehot[j, g] = [g ∈ A_j]
    cross = v @ onehot.T  # (n, n): cross[i, j] = v_i(A_j)
    return v, owner, onehot, cross


def _safe_ratio(lhs: np.ndarray, rhs: np.ndarray, scale: np.ndarray) -> float:
    """min over entries of lhs / rhs, clipped to [0, 1]; an entry whose right-hand side is not
    positive relative to ``scale`` (the agent's total value v_i(M), broadcast like rhs) counts
    as satisfied. Relative, so the ratio is invariant to rescaling the values."""
    lhs = np.asarray(lhs, dtype=float)
    rhs = np.asarray(rhs, dtype=float)
    need = positive(rhs, np.broadcast_to(scale, rhs.shape))
    if not np.any(need):
        return 1.0
    r = float(np.min(lhs[need] / rhs[need]))
    return float(min(max(r, 0.0), 1.0))


# ----------------------------------------------------------------------------- proportionality
def prop_ratio(values, allocation) -> float:
    """Largest α with v_i(A_i) >= α v_i(M)/n for all i."""
    v, _, _, cross = _prepare(values, allocation)
    n = v.shape[0]
    return _safe_ratio(np.diag(cross), v.sum(1) / n, v.sum(1))


def prop1_ratio(values, allocation) -> float:
    """Largest α with v_i(A_i) + max_{g∉A_i} v_i(g) >= α v_i(M)/n for all i."""
    v, _, onehot, cross = _prepare(values, allocation)
    n = v.shape[0]
    outside = np.where(onehot > 0, -np.inf, v)  # (n, m): v_i(g) for g ∉ A_i
    best_out = outside.max(1, initial=0.0)
    return _safe_ratio(np.diag(cross) + best_out, v.sum(1) / n, v.sum(1))


def propx_ratio(values, allocation) -> float:
    """Largest α with v_i(A_i) + min_{g∉A_i, v_i(g)>0} v_i(g) >= α v_i(M)/n for all i."""
    v, _, onehot, cross = _prepare(values, allocation)
    n = v.shape[0]
    outside = np.where((onehot > 0) | (v <= 0), np.inf, v)
    least_out = outside.min(1, initial=np.inf)
    # no positive good outside A_i  =>  v_i(A_i) = v_i(M) >= v_i(M)/n
    lhs = np.where(np.isfinite(least_out), np.diag(cross) + least_out, np.inf)
    return _safe_ratio(lhs, v.sum(1) / n, v.sum(1))


# ----------------------------------------------------------------------------- envy
def _envy_ratio(values, allocation, mode: str) -> float:
    v, owner, _, cross = _prepare(values, allocation)
    n = v.shape[0]
    own = np.diag(cross)
    if mode == "ef":
        drop = np.zeros((n, n))
    else:
        drop = np.zeros((n, n))  # drop[i, j] = value of the good i may remove from A_j
        for j in range(n):
            cols = v[:, owner == j]  # (n, |A_j|)
            if cols.shape[1] == 0:
                continue
            if mode == "ef1":
                drop[:, j] = cols.max(1)
            else:  # efx: least positive-valued good
                pos = np.where(cols > 0, cols, np.inf).min(1)
                drop[:, j] = np.where(np.isfinite(pos), pos, 0.0)
    rhs = cross - drop  # (n, n)
    np.fill_diagonal(rhs, 0.0)
    return _safe_ratio(np.repeat(own[:, None], n, 1), rhs, v.sum(1)[:, None])


def ef_ratio(values, allocation) -> float:
    """Largest α with v_i(A_i) >= α v_i(A_j) for all i, j."""
    return _envy_ratio(values, allocation, "ef")


def ef1_ratio(values, allocation) -> float:
    """Largest α with v_i(A_i) >= α (v_i(A_j) - max_{g∈A_j} v_i(g)) for all i, j."""
    return _envy_ratio(values, allocation, "ef1")


def efx_ratio(values, allocation) -> float:
    """Largest α with v_i(A_i) >= α (v_i(A_j) - min_{g∈A_j, v_i(g)>0} v_i(g)) for all i, j."""
    return _envy_ratio(values, allocation, "efx")


# ----------------------------------------------------------------------------- maximin share
def _mms_brute(v: np.ndarray, n: int) -> float:
    """Exact MMS by enumerating all n^m assignments of goods to bundles (reference)."""
    m = v.size
    if n**m > 5_000_000:
        raise ValueError(f"brute-force MMS enumerates n**m = {n**m} partitions; use method='milp'")
    codes = np.arange(n**m)
    digits = (codes[:, None] // (n ** np.arange(m))[None, :]) % n  # (n^m, m) bundle of each good
    sums = np.stack([(digits == k) @ v for k in range(n)], 1)  # (n^m, n)
    return float(sums.min(1).max())


def _mms_milp(v: np.ndarray, n: int, time_limit: float = 60.0) -> float:
    """Exact MMS by mixed-integer programming (HiGHS through scipy.optimize.milp).

    max z  s.t.  sum_k x[g, k] = 1 (each good in one bundle),  sum_g v_g x[g, k] >= z,
    bundle sums non-increasing in k (symmetry breaking), x binary.
    """
    v = v[v > 0]  # zero-valued goods never change a bundle's value
    m = v.size
    if m < n:
        return 0.0
    w = v / v.max()
    nx = m * n  # x[g, k] at index g * n + k, then z
    c = np.zeros(nx + 1)
    c[-1] = -1.0
    rows, lo, hi = [], [], []
    for g in range(m):
        r = np.zeros(nx + 1)
        r[g * n : (g + 1) * n] = 1.0
        rows.append(r)
        lo.append(1.0)
        hi.append(1.0)
    for k in range(n):
        r = np.zeros(nx + 1)
        r[k:nx:n] = w
        r[-1] = -1.0
        rows.append(r)
        lo.append(0.0)
        hi.append(np.inf)
        if k + 1 < n:
            r = np.zeros(nx + 1)
            r[k:nx:n] = w
            r[k + 1 : nx : n] -= w
            rows.append(r)
            lo.append(0.0)
            hi.append(np.inf)
    integrality = np.r_[np.ones(nx), 0.0]
    bounds = Bounds(np.zeros(nx + 1), np.r_[np.ones(nx), np.inf])
    problem = dict(
        c=c,
        constraints=LinearConstraint(np.array(rows), lo, hi),
        integrality=integrality,
        bounds=bounds,
    )
    res = solve(problem, {"mip_rel_gap": 1e-9, "time_limit": time_limit})
    if res.status != 0 or res.x is None:
        raise RuntimeError(
            f"MMS MILP not solved to optimality within time_limit={time_limit}s ({res.message}); "
            "use mms_lower_bound_lpt for a fast 3/4-approximation"
        )
    x = np.round(res.x[:nx]).reshape(m, n)
    return float((v @ x).min())  # recompute exactly from the integral partition


def mms_value(v, n: int, method: str = "auto", time_limit: float = 60.0) -> float:
    """Maximin share of one agent with values ``v`` (m,) among ``n`` agents.

    method: "milp" (HiGHS), "brute" (enumerate n^m partitions, m small), or "auto"
    (brute when n**m <= 4096, else MILP). The MILP raises RuntimeError when it cannot prove
    optimality within ``time_limit`` seconds (symmetric instances with n >= 5 and m >= 20 can
    be hard).
    """
    v = np.asarray(v, dtype=float)
    if v.ndim != 1:
        raise ValueError(f"v must be a 1-D value vector, got shape {v.shape}")
    check_values(v[None, :], "v")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if method not in ("auto", "milp", "brute"):
        raise ValueError(f"method must be 'auto', 'milp' or 'brute', got {method!r}")
    m = v.size
    if n == 1:
        return float(v.sum())
    if m < n or v.max(initial=0.0) <= 0:
        return 0.0
    if method == "brute" or (method == "auto" and n**m <= 4096):
        return _mms_brute(v, n)
    return _mms_milp(v, n, time_limit)


def mms_lower_bound_lpt(v, n: int) -> float:
    """LPT lower bound on MMS: goods in decreasing value, each to the currently poorest bundle;
    the poorest final bundle is >= 3/4 MMS (Deuermeyer, Friesen & Langston 1982). O(m log m)."""
    v = np.asarray(v, dtype=float)
    if v.ndim != 1:
        raise ValueError(f"v must be a 1-D value vector, got shape {v.shape}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    sums = np.zeros(n)
    for x in np.sort(v)[::-1]:
        sums[np.argmin(sums)] += x
    return float(sums.min())


def mms_values(values, n: int | None = None, method: str = "auto") -> np.ndarray:
    """MMS_i for every agent (row of ``values``); n defaults to the number of rows."""
    v = check_values(values)
    n = v.shape[0] if n is None else n
    return np.array([mms_value(row, n, method) for row in v])


def mms_ratio(values, allocation, mms=None) -> float:
    """Largest α with v_i(A_i) >= α MMS_i for all i (pass precomputed ``mms`` (n,) to save time)."""
    v, _, _, cross = _prepare(values, allocation)
    shares = mms_values(v) if mms is None else np.asarray(mms, dtype=float)
    if shares.shape != (v.shape[0],):
        raise ValueError(f"mms must have shape ({v.shape[0]},), got {shares.shape}")
    return _safe_ratio(np.diag(cross), shares, v.sum(1))


# ----------------------------------------------------------------------------- dispatch
_RATIO = {
    "ef": ef_ratio,
    "ef1": ef1_ratio,
    "efx": efx_ratio,
    "prop": prop_ratio,
    "prop1": prop1_ratio,
    "propx": propx_ratio,
    "mms": mms_ratio,
}


def approx_ratio(values, allocation, notion: str) -> float:
    """Largest α in [0, 1] for which ``allocation`` is α-``notion`` (one of NOTIONS).

    >>> values = {"Ann": {"x": 4, "y": 2, "z": 2}, "Bob": {"x": 3, "y": 3, "z": 0}}
    >>> approx_ratio(values, {"Ann": ["x"], "Bob": ["y", "z"]}, "ef")
    1.0
    >>> approx_ratio(values, {"Ann": ["z"], "Bob": ["x", "y"]}, "prop")  # 2 of a 4 share
    0.5
    """
    if notion not in _RATIO:
        raise ValueError(f"notion must be one of {NOTIONS}, got {notion!r}")
    return _RATIO[notion](values, allocation)


def is_fair(values, allocation, notion: str, alpha: float = 1.0) -> bool:
    """Whether ``allocation`` is α-``notion`` (up to the relative tolerance ``RTOL``)."""
    return approx_ratio(values, allocation, notion) >= alpha - RTOL


# ----------------------------------------------------------------------------- references
def is_fair_ref(values, allocation, notion: str, alpha: float = 1.0, mms=None) -> bool:
    """Literal quantifier-by-quantifier check of α-``notion`` (slow oracle for the tests)."""
    v = check_values(values)
    n, m = v.shape
    owner = check_owner(allocation, n, m)
    bundles = [[g for g in range(m) if owner[g] == i] for i in range(n)]

    def val(i, S):
        return sum(v[i, g] for g in S)

    for i in range(n):
        mine = val(i, bundles[i])
        total = val(i, range(m))
        tol = RTOL * total  # relative to the agent's total value
        if notion in ("prop", "prop1", "propx"):
            share = alpha * total / n
            if mine >= share - tol:
                continue
            outside = [g for g in range(m) if owner[g] != i]
            if notion == "prop":
                return False
            if notion == "prop1" and not any(mine + v[i, g] >= share - tol for g in outside):
                return False
            if notion == "propx":
                pos = [g for g in outside if v[i, g] > 0]
                if pos and not all(mine + v[i, g] >= share - tol for g in pos):
                    return False
        elif notion == "mms":
            s = mms_value(v[i], n, "brute") if mms is None else mms[i]
            if mine < alpha * s - tol:
                return False
        else:
            for j in range(n):
                if j == i or not bundles[j]:
                    continue
                other = val(i, bundles[j])
                if notion == "ef" and mine < alpha * other - tol:
                    return False
                if notion == "ef1" and not any(
                    mine >= alpha * (other - v[i, g]) - tol for g in bundles[j]
                ):
                    return False
                if notion == "efx":
                    for g in bundles[j]:
                        if v[i, g] > 0 and mine < alpha * (other - v[i, g]) - tol:
                            return False
    return True


def approx_ratio_ref(values, allocation, notion: str, iters: int = 40) -> float:
    """Largest α in [0, 1] with is_fair_ref(α) by bisection (oracle for ``approx_ratio``)."""
    if is_fair_ref(values, allocation, notion, 1.0):
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if is_fair_ref(values, allocation, notion, mid):
            lo = mid
        else:
            hi = mid
    return lo


def all_allocations(n: int, m: int):
    """Iterate over every owner vector in [0, n)^m (for exhaustive tests)."""
    for owner in itertools.product(range(n), repeat=m):
        yield np.array(owner, dtype=np.int64)
