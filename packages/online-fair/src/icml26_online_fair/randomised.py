"""Impossibility for *randomised* online algorithms: a sequence-form LP over the finite game tree.

``game_value`` (adversary.py) solves the online game for deterministic algorithms. A randomised
algorithm can do better in expectation against an *oblivious* adversary (one that fixes the whole
instance in advance; an adaptive adversary that sees the coins reduces to the deterministic
game). Its best guarantee on a grid is

    V_rand = max_{behaviour strategy β}  min_{instance I on the grid}  E_β[ratio(I, A)],

where β picks, at every information set (the value vectors seen so far, the algorithm's own past
choices, the newly arrived vector), a distribution over the n agents. By Kuhn's theorem (perfect
recall) behaviour strategies are all randomised algorithms, and in sequence form (Koller, Megiddo,
von Stengel 1996) the max-min is one LP. With realisation weights x(h) of the algorithm's
sequences h = (k_1, a_1, ..., k_t, a_t):

    max z   s.t.  x(()) = 1,
                  sum_a x(h, k, a) = x(h)              for every h and feasible next vector k,
                  sum_a x(k_1 a_1 ... k_m a_m) ratio(k, a) >= z   for every instance k_1..k_m,
                  x >= 0.

The instance constraints' duals are the adversary's mixed strategy y over instances (Yao): every
deterministic algorithm, hence every randomised one, has expected ratio <= V_rand against y. Both
certificates are returned and the tests check them independently (the behaviour strategy by
enumeration, y by a best-response recursion that does not use the LP).

With ``totals`` and ``remainder=True`` the game is the certified normalization game of
``game_value``: the algorithm knows the totals, the first m - 1 goods are grid vectors that keep
every remaining total >= 0, and the last good carries exactly what is left, so every instance is
a legal normalized instance and V_rand bounds what any randomised algorithm with normalization
information guarantees *in expectation of the ratio* (min over instances of E[ratio]).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from ._tol import RTOL
from .adversary import _check_grid, _check_nm, _ratio_fn

__all__ = ["RandomisedCertificate", "randomised_game_value"]


@dataclass(frozen=True)
class RandomisedCertificate:
    """The LP's value and both optimal strategies.

    value       V_rand (float).
    vectors     the value vectors that occur, (K, n); instances refer to them by row.
    instances   (I, m) int: the adversary's instances (rows of ``vectors`` in arrival order).
    mixture     (I,) the adversary's optimal distribution over ``instances`` (sums to 1).
    behaviour   {(history, k): probs (n,)}: the algorithm's optimal behaviour strategy; history is
                ((k_1, a_1), ..., (k_t, a_t)), k the arriving vector's row.
    n_variables the LP's number of sequence variables.
    """

    value: float
    vectors: np.ndarray
    instances: np.ndarray
    mixture: np.ndarray
    behaviour: dict
    n_variables: int


def _instances(n, m, grid, totals, remainder, max_variables=np.inf):
    """All feasible vector sequences (rows into ``vectors``), as the deterministic game has them;
    ValueError as soon as their leaf variables (n^m each) pass ``max_variables``."""
    g = _check_grid(grid)
    vectors = [tuple(float(y) for y in x) for x in itertools.product(g, repeat=n)]
    index = {v: k for k, v in enumerate(vectors)}
    grid_arr = np.array(vectors, dtype=float)  # (V, n)
    tot = None if totals is None else np.asarray(totals, dtype=float)
    if tot is not None and tot.shape != (n,):
        raise ValueError(f"totals must have shape ({n},), got {tot.shape}")
    if remainder and tot is None:
        raise ValueError("remainder=True needs totals (the last good carries what is left)")
    slack = 0.0 if tot is None else RTOL * (1.0 + np.abs(tot))
    gmax = g.max()
    out: list[tuple] = []

    def _guard():
        if len(out) * n**m > max_variables:
            raise ValueError(
                f"randomised LP too large: more than {max_variables:.3g} sequence variables for "
                f"n={n}, m={m} (max_variables); shrink n, m or the grid"
            )

    def rec(prefix, remaining):
        t = len(prefix)
        if t == m:
            if tot is None or remainder or np.all(np.abs(remaining) <= slack):
                out.append(prefix)
                _guard()
            return
        if remainder and t == m - 1:
            last = tuple(float(max(x, 0.0)) for x in remaining)
            if last not in index:
                index[last] = len(vectors)
                vectors.append(last)
            out.append((*prefix, index[last]))
            _guard()
            return
        moves: Sequence[int]
        if tot is None:
            moves = range(len(grid_arr))
        else:
            rem = remaining[None, :] - grid_arr
            cap = np.inf if remainder else (m - t - 1) * gmax
            moves = np.flatnonzero(np.all((rem >= -slack) & (rem <= cap + slack), 1)).tolist()
        for k in moves:
            rec((*prefix, k), None if tot is None else remaining - grid_arr[k])

    rec((), tot)
    if not out:
        raise ValueError("no instance on this grid reaches the given totals in m goods")
    return np.array(vectors, dtype=float).reshape(-1, n), np.array(out, dtype=np.int64)


def randomised_game_value(
    n: int,
    m: int,
    grid: Sequence[float],
    notion: str = "mms",
    totals: Sequence[float] | None = None,
    remainder: bool = False,
    max_variables: int = 3_000_000,
) -> RandomisedCertificate:
    """Solve the sequence-form LP above (HiGHS) and return a ``RandomisedCertificate``.

    Refuses (ValueError, before any work) when the number of sequence variables,
    sum_t |feasible prefixes of length t| n^t, exceeds ``max_variables``.

    >>> from icml26_online_fair import game_value
    >>> cert = randomised_game_value(2, 3, range(4), "mms", totals=[3, 3], remainder=True)
    >>> cert.value >= game_value(2, 3, range(4), "mms", totals=[3, 3], remainder=True)[0]
    True
    """
    _check_nm(n, m)
    vectors, inst = _instances(n, m, grid, totals, remainder, max_variables)  # inst: (I, m)
    # level t: distinct k-prefixes of length t, with their parent prefix at level t - 1
    prefixes: list[list[tuple[int, ...]]] = [[()]]
    parents = [np.zeros(0, dtype=np.int64)]
    for t in range(1, m + 1):
        keys = {tuple(r) for r in inst[:, :t].tolist()}
        lvl = sorted(keys)
        up = {p: j for j, p in enumerate(prefixes[-1])}
        prefixes.append(lvl)
        parents.append(np.array([up[p[:-1]] for p in lvl], dtype=np.int64))
    sizes = [len(prefixes[t]) * n**t for t in range(m + 1)]
    nvar = int(sum(sizes))
    if nvar > max_variables:
        raise ValueError(
            f"randomised LP too large: {nvar:.3g} sequence variables for n={n}, m={m} "
            f"(max_variables={max_variables}); shrink n, m or the grid"
        )
    offset = np.r_[
        0, np.cumsum(sizes)
    ]  # variable of (level t, prefix j, actions c): off_t + j n^t + c
    z = nvar  # the last variable

    # flow constraints: x(parent, c) = sum_a x(child, c n + a), one row per (child prefix, c)
    rows, cols, vals = [0], [0], [1.0]  # row 0: x(()) = 1
    r = 1
    for t in range(m):
        nt = n**t
        for jc, jp in enumerate(parents[t + 1]):
            base_c = offset[t + 1] + jc * nt * n
            for c in range(nt):
                rows += [r] * (n + 1)
                cols += [offset[t] + jp * nt + c, *range(base_c + c * n, base_c + c * n + n)]
                vals += [-1.0] + [1.0] * n
                r += 1
    a_eq = coo_matrix((vals, (rows, cols)), shape=(r, nvar + 1)).tocsr()
    b_eq = np.zeros(r)
    b_eq[0] = 1.0

    # instance constraints: z - sum_c x(leaf, c) ratio(leaf, c) <= 0
    ratio = _ratio_fn(notion)
    cache: dict = {}
    actions = np.array(list(itertools.product(range(n), repeat=m)), dtype=np.int64)  # (n^m, m)
    leaf_index = {p: j for j, p in enumerate(prefixes[m])}
    rows, cols, vals = [], [], []
    for i, seq in enumerate(inst.tolist()):
        j = leaf_index[tuple(seq)]
        values = vectors[seq].T  # (n, m) in arrival order
        for c, a in enumerate(actions):
            key = tuple(sorted(zip(seq, a.tolist())))
            if key not in cache:
                cache[key] = ratio(values, a)
            if cache[key] > 0:
                rows.append(i)
                cols.append(offset[m] + j * n**m + c)
                vals.append(-cache[key])
        rows.append(i)
        cols.append(z)
        vals.append(1.0)
    a_ub = coo_matrix((vals, (rows, cols)), shape=(len(inst), nvar + 1)).tocsr()
    cost = np.zeros(nvar + 1)
    cost[z] = -1.0
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(len(inst)),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=[(0, None)] * nvar + [(0, 1)],
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"randomised-game LP failed: {res.message}")
    x = res.x
    mixture = np.clip(-res.ineqlin.marginals, 0.0, None)
    # value 1 can leave every dual at 0; any mixture then certifies the (trivial) bound 1
    mixture = mixture / mixture.sum() if mixture.sum() > 0 else np.full(len(inst), 1.0 / len(inst))

    behaviour: dict = {}
    for t in range(m):
        nt = n**t
        for jc in range(len(parents[t + 1])):
            p = prefixes[t + 1][jc]
            for c in range(nt):
                own = np.unravel_index(c, (n,) * t) if t else ()
                hist: tuple = tuple(zip(p[:-1], (int(a) for a in own)))
                w = x[offset[t + 1] + jc * nt * n + c * n : offset[t + 1] + jc * nt * n + c * n + n]
                s = w.sum()
                behaviour[(hist, p[-1])] = w / s if s > 1e-12 else np.full(n, 1.0 / n)
    return RandomisedCertificate(
        value=float(-res.fun),
        vectors=vectors,
        instances=inst,
        mixture=mixture,
        behaviour=behaviour,
        n_variables=nvar,
    )
