"""The GBB and WBB benchmarks on a price grid (Lunghi et al., ICML 2026, §2-3).

GBB optimum over distributions gamma on price pairs (one linear constraint besides sum = 1):

    OPT_GBB = max_gamma  sum_k gamma_k GFT_k   s.t.  sum_k gamma_k PRO_k >= 0,  gamma in simplex

so an optimal basic solution has at most two pairs. Its value is the upper concave envelope of the
points (PRO_k, GFT_k), maximised over PRO >= 0: either the best single pair with PRO >= 0, or the
envelope's segment that crosses PRO = 0 (one pair with profit > 0 paying for one with profit < 0).

`solve_two_support` finds that segment exactly by Newton's method on the LP dual
min_{m >= 0} max_k (GFT_k + m PRO_k) (each step is one O(n) pass; finite convergence); `opt_gbb`
also solves the LP with scipy's HiGHS (`method="lp"`) and by brute force over pairs
(`method="brute"`) for checking. The WBB optimum (profit >= 0 every round) is the best single
price p = q: GFT(p, q) <= GFT(q, q) for q >= p.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from .envs import ValuationEnv, require_expectations

Array = np.ndarray


def price_grid(grid: int | Array) -> Array:
    """`K` evenly spaced prices 0, 1/(K-1), ..., 1, or an explicit array of prices in [0, 1]."""
    if isinstance(grid, (int, np.integer)):
        if grid < 2:
            raise ValueError("grid: need at least 2 prices")
        return np.linspace(0.0, 1.0, int(grid))
    g = np.asarray(grid, dtype=float).reshape(-1)
    if g.size == 0:
        raise ValueError("grid: empty price grid")
    if not np.all(np.isfinite(g)) or np.any(g < 0) or np.any(g > 1):
        raise ValueError("grid: prices must be finite and inside [0, 1]")
    return g


def pair_tables(env: ValuationEnv, grid: int | Array) -> tuple[Array, Array, Array]:
    """Grid prices g (K,) and (GFT, PRO) tables (K, K), entry [i, j] = pair (p=g[i], q=g[j])."""
    require_expectations(env)
    g = price_grid(grid)
    gft, pro, _, _ = env.expectations(g[:, None], g[None, :])  # (K, K) each
    return g, gft, pro


@dataclass(frozen=True)
class GBBSolution:
    """value = sum_k weights[k] * GFT(pairs[k]); pairs (m, 2) as (p, q) with m <= 2 (LP: any m)."""

    value: float
    pairs: Array
    weights: Array
    profit: float


def solve_two_support(gft: Array, pro: Array, tol: float = 1e-12) -> tuple[float, Array, Array]:
    """max sum g_k y_k s.t. sum g_k x_k >= 0 over the simplex: (value, indices (<=2,), weights).

    gft, pro: flat arrays (n,). Raises if no point has pro >= 0 (the LP is infeasible).
    Newton on the dual: the line through a left point (pro < 0) and a right point (pro >= 0)
    is the envelope's segment at 0 iff no point lies above it; otherwise the point furthest above
    replaces the endpoint on its side.
    """
    y = np.asarray(gft, dtype=float).reshape(-1)
    x = np.asarray(pro, dtype=float).reshape(-1)
    right = x >= 0
    if not right.any():
        raise ValueError("pro: every pair has negative profit; the GBB problem is infeasible")
    scale = max(1.0, float(np.max(np.abs(y))), float(np.max(np.abs(x))))
    j = int(np.flatnonzero(right)[np.argmax(y[right])])  # best pair with non-negative profit
    i = int(np.argmax(y))
    if x[i] >= 0 or y[i] <= y[j]:
        return float(y[j]), np.array([j]), np.array([1.0])
    for _ in range(y.size + 1):
        m = (y[i] - y[j]) / (x[j] - x[i])  # dual price of profit: the line y + m x is level
        h = y + m * x
        k = int(np.argmax(h))
        if h[k] <= y[i] + m * x[i] + tol * scale:
            break
        if x[k] < 0:
            i = k
        else:
            j = k
    lam = x[j] / (x[j] - x[i])  # weight on the left point: lam x_i + (1 - lam) x_j = 0
    value = lam * y[i] + (1 - lam) * y[j]
    if value <= y[j] or lam <= 0:
        return float(y[j]), np.array([j]), np.array([1.0])
    return float(value), np.array([i, j]), np.array([lam, 1 - lam])


def solve_lp(gft: Array, pro: Array) -> tuple[float, Array, Array]:
    """The same LP with scipy.optimize.linprog (HiGHS): (value, indices with weight > 0, weights)."""
    y = np.asarray(gft, dtype=float).reshape(-1)
    x = np.asarray(pro, dtype=float).reshape(-1)
    res = linprog(
        -y,
        A_ub=-x[None, :],
        b_ub=[0.0],
        A_eq=np.ones((1, y.size)),
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise ValueError(f"pro: the GBB LP failed ({res.message})")
    w = np.asarray(res.x)
    idx = np.flatnonzero(w > 1e-9)
    return float(-res.fun), idx, w[idx] / w[idx].sum()


def solve_brute(gft: Array, pro: Array) -> tuple[float, Array, Array]:
    """O(n^2) reference: best single feasible pair or best mix of one pair each side of 0."""
    y = np.asarray(gft, dtype=float).reshape(-1)
    x = np.asarray(pro, dtype=float).reshape(-1)
    best, idx, w = -np.inf, np.array([], dtype=int), np.array([])
    for k in range(y.size):
        if x[k] >= 0 and y[k] > best:
            best, idx, w = y[k], np.array([k]), np.array([1.0])
    for i in np.flatnonzero(x < 0):
        for j in np.flatnonzero(x > 0):
            lam = x[j] / (x[j] - x[i])
            v = lam * y[i] + (1 - lam) * y[j]
            if v > best:
                best, idx, w = v, np.array([i, j]), np.array([lam, 1 - lam])
    return float(best), idx, w


_SOLVERS = {"hull": solve_two_support, "lp": solve_lp, "brute": solve_brute}


def opt_gbb(env: ValuationEnv, grid: int | Array = 129, method: str = "hull") -> GBBSolution:
    """Best distribution over grid price pairs with non-negative expected profit.

    method: "hull" (exact two-support solver, default, fast for 10^6 pairs), "lp" (HiGHS) or
    "brute" (all pairs of pairs, tiny grids only).
    """
    if method not in _SOLVERS:
        raise ValueError(f"method: expected one of {sorted(_SOLVERS)}, got {method!r}")
    g, gft, pro = pair_tables(env, grid)
    value, idx, w = _SOLVERS[method](gft.ravel(), pro.ravel())
    ii, jj = np.unravel_index(idx, gft.shape)
    pairs = np.stack([g[ii], g[jj]], axis=1)  # (m, 2) as (p, q)
    return GBBSolution(value, pairs, w, float(w @ pro.ravel()[idx]))


def opt_wbb(env: ValuationEnv, grid: int | Array = 129) -> tuple[float, float]:
    """Best price p on the grid posted to both sides (profit 0 every round): (value, p)."""
    require_expectations(env)
    g = price_grid(grid)
    gft, _, _, _ = env.expectations(g, g)
    k = int(np.argmax(gft))
    return float(gft[k]), float(g[k])
