"""Exhaustive and adversarial searches for small n and m (the impossibility results, paper §3-§4).

* ``worst_order``      all m! arrival orders of one instance: the worst ratio a policy reaches.
* ``exhaustive_check`` all instances with values on a grid (as multisets) x all their orders.
* ``adversary_search`` an adaptive adversary against one policy: it picks each next good's value
                       vector from a grid after seeing the policy's earlier choices (and, for a
                       randomised policy, its realised coins); with ``totals`` every instance it
                       builds has exactly those totals and the policy is told them
                       (normalization information).
* ``game_value``       the minimax value  min_adversary max_algorithm ratio  over *all*
                       deterministic online algorithms on the grid: a value < 1 certifies that no
                       deterministic algorithm guarantees the notion (an impossibility result),
                       and a value of 1 that some algorithm does on that grid.
* ``OptimalGridPolicy`` the algorithm that attains that value (so both directions are testable).

Ratios are ``approx_ratio`` (largest α in [0, 1] with α-notion).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from ._tol import RTOL
from .info import NormalizationInfo
from .instance import OnlineInstance
from .notions import approx_ratio, mms_ratio, mms_value
from .policies import OnlinePolicy, divide_online

__all__ = [
    "OptimalGridPolicy",
    "adversary_search",
    "exhaustive_check",
    "game_value",
    "overshoot_instance",
    "worst_order",
]


def _ratio_fn(notion: str) -> Callable[[np.ndarray, np.ndarray], float]:
    if notion != "mms":
        return lambda values, owner: approx_ratio(values, owner, notion)

    @cache
    def share(row: tuple, n: int) -> float:
        return mms_value(np.array(row), n)

    def ratio(values, owner):
        n = values.shape[0]
        return mms_ratio(values, owner, [share(tuple(sorted(r)), n) for r in values])

    return ratio


def _check_grid(grid) -> np.ndarray:
    g = np.unique(np.asarray(grid, dtype=float))
    if g.ndim != 1 or g.size < 1 or np.any(g < 0) or not np.all(np.isfinite(g)):
        raise ValueError(f"grid must be a non-empty 1-D set of non-negative values, got {grid!r}")
    return g


def _n_vectors(n, grid) -> int:
    return len(np.unique(np.asarray(grid, dtype=float))) ** n


def _guard_game(n, m, grid, max_states):
    """Refuse a minimax search whose memo (multisets of m (vector, owner) pairs) would exceed
    ``max_states`` entries, with the estimate in the message (before any work)."""
    _check_nm(n, m)
    _check_grid(grid)
    est = math.comb(_n_vectors(n, grid) * n + m - 1, m)
    if est > max_states:
        raise ValueError(
            f"game search too large: about {est:.3g} states for n={n}, m={m}, "
            f"{_n_vectors(n, grid)} value vectors (max_states={max_states}); shrink n, m or "
            "the grid, or raise max_states"
        )


def _check_nm(n, m):
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")


def overshoot_instance(n: int, k: int | None = None, delta: float = 0.01) -> OnlineInstance:
    """The cap-overshoot family: an instance (values in arrival order, every agent's total = 1)
    on which a normalization policy that lets agents overshoot the share 1/n fails PROP1.

    Agent n-1 is the victim. For each other agent j, k goods arrive in a row, each worth
    u = 2 / (n (2k - 1)) to j, w = min(u, 1/((n-1) k)) (1 - δ) to the victim and 0 to the
    rest; then one good per j carrying j's remaining value 1 - k u, and one good carrying the
    victim's remaining value. A rule that admits j while ``have + u/2 <= 1/n`` (half the
    overshoot guard) gives j all k goods (j ends at 1/n + u/2), so the victim values the others'
    bundles at (n-1) k w and ends with PROP1 ratio about n w (k = n // 2: 0.70 at n = 4, 0.67
    at n = 5, 0.46 at n = 6; n <= 3 has no room and stays PROP1). ``CappedGreedy`` (have + u <= 1/n) refuses j her
    k-th good while the victim still needs it, and stays PROP1 (tested)."""
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    k = max(n // 2, 1) if k is None else k
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    u = 2.0 / (n * (2 * k - 1))  # j's value per good: k-1 goods + u/2 reach 1/n exactly
    w = min(u, 1.0 / ((n - 1) * k)) * (1 - delta)  # the victim's, < u; her total stays <= 1
    cols = []
    for j in range(n - 1):
        for _ in range(k):
            c = np.zeros(n)
            c[j], c[n - 1] = u, w
            cols.append(c)
    for j in range(n - 1):
        c = np.zeros(n)
        c[j] = 1.0 - k * u
        cols.append(c)
    c = np.zeros(n)
    c[n - 1] = 1.0 - (n - 1) * k * w
    cols.append(c)
    return OnlineInstance(np.stack(cols, 1))


def worst_order(policy: OnlinePolicy, instance: OnlineInstance, info=None, notion: str = "prop1"):
    """Min ratio over all arrival orders of ``instance`` (m <= 9). Returns (ratio, order)."""
    if not isinstance(instance, OnlineInstance):
        raise TypeError(f"instance must be an OnlineInstance, got {type(instance).__name__}")
    if instance.m > 9:
        raise ValueError(f"worst_order enumerates m! orders; m must be <= 9, got {instance.m}")
    ratio = _ratio_fn(notion)
    best, arg = 2.0, None
    for order in itertools.permutations(range(instance.m)):
        alloc = divide_online(policy, instance.with_order(order), info, validate=False)
        r = ratio(instance.values, alloc.owner)
        if r < best:
            best, arg = r, np.array(order)
    return best, arg


def exhaustive_check(
    policy: OnlinePolicy,
    n: int,
    m: int,
    grid: Sequence[float],
    notion: str,
    make_info: Callable[[OnlineInstance], object] | None = None,
    orders: bool = True,
    max_cases: int = 2_000_000,
):
    """Min ratio over every instance whose values lie on ``grid`` (each multiset of value vectors
    once) and every arrival order of it. ``make_info(instance)`` builds the information the policy
    gets (None: no information). Refuses (ValueError) when the number of (instance, order) runs,
    about C(V + m - 1, m) m! for V = |grid|^n vectors, exceeds ``max_cases``.
    Returns (ratio, worst instance in arrival order)."""
    _check_nm(n, m)
    g = _check_grid(grid)
    est = math.comb(g.size**n + m - 1, m) * (math.factorial(m) if orders else 1)
    if est > max_cases:
        raise ValueError(
            f"exhaustive_check too large: about {est:.3g} runs for n={n}, m={m}, "
            f"{g.size} grid values (max_cases={max_cases}); shrink n, m or the grid"
        )
    vectors = [np.array(x) for x in itertools.product(g, repeat=n)]
    ratio = _ratio_fn(notion)
    best, arg = 2.0, None
    for combo in itertools.combinations_with_replacement(range(len(vectors)), m):
        perms = set(itertools.permutations(combo)) if orders else {combo}
        for perm in perms:
            inst = OnlineInstance(np.stack([vectors[k] for k in perm], 1))
            info = None if make_info is None else make_info(inst)
            alloc = divide_online(policy, inst, info, validate=False)
            r = ratio(inst.values, alloc.owner)
            if r < best:
                best, arg = r, inst
    return best, arg


def adversary_search(
    policy: OnlinePolicy,
    n: int,
    m: int,
    grid: Sequence[float],
    notion: str = "prop1",
    totals: Sequence[float] | None = None,
    max_nodes: float = 1e8,
):
    """Adaptive adversary: depth-first over the next good's value vector (each agent's value on
    ``grid``), replaying the policy from copied states. With ``totals`` (integers, grid = 0..K
    integers) only sequences that end exactly at those totals are played and the policy is reset
    with ``NormalizationInfo(totals)``. Returns (worst ratio, values (n, m) in arrival order,
    owner (m,)); the search stops early once it reaches ratio 0. Refuses (ValueError) when the
    tree, |grid|^(n m) leaves, exceeds ``max_nodes``."""
    _check_nm(n, m)
    g = _check_grid(grid)
    if float(g.size) ** (n * m) > max_nodes:
        raise ValueError(
            f"adversary_search too large: {g.size}^{n * m} = {float(g.size) ** (n * m):.3g} "
            f"leaves for n={n}, m={m} (max_nodes={max_nodes}); shrink n, m or the grid"
        )
    vectors = [np.array(x) for x in itertools.product(g, repeat=n)]
    info = None
    if totals is not None:
        tot = np.asarray(totals, dtype=float)
        if tot.shape != (n,):
            raise ValueError(f"totals must have shape ({n},), got {tot.shape}")
        info = NormalizationInfo(tot)
    ratio = _ratio_fn(notion)
    gmax = g.max()
    best = {"r": 2.0, "values": None, "owner": None}
    root = copy.deepcopy(policy)
    root.reset(info)

    def feasible(remaining, left):
        if totals is None:
            return True
        slack = RTOL * (1.0 + np.abs(tot))
        return bool(np.all(remaining >= -slack) and np.all(remaining <= left * gmax + slack))

    def dfs(pol, cols, owners, remaining):
        if best["r"] <= 0.0:
            return
        t = len(cols)
        if t == m:
            if totals is not None and np.any(np.abs(remaining) > RTOL * (1.0 + np.abs(tot))):
                return
            values = np.stack(cols, 1)
            r = ratio(values, np.array(owners))
            if r < best["r"]:
                best.update(r=r, values=values, owner=np.array(owners))
            return
        for vec in vectors:
            rem = None if totals is None else remaining - vec
            if not feasible(rem, m - t - 1):
                continue
            child = copy.deepcopy(pol)
            a = int(child.allocate(t, vec.copy()))
            dfs(child, [*cols, vec], [*owners, a], rem)

    dfs(root, [], [], None if totals is None else np.asarray(totals, dtype=float))
    if best["values"] is None:
        raise ValueError("no instance on this grid reaches the given totals in m goods")
    return best["r"], best["values"], best["owner"]


class _Game:
    """The online game on a grid, solved lazily with memoisation (see ``game_value``)."""

    def __init__(self, n, m, grid, notion, totals, remainder=False):
        _check_nm(n, m)
        g = _check_grid(grid)
        if remainder and totals is None:
            raise ValueError("remainder=True needs totals (the last good carries what is left)")
        self.remainder = remainder
        self.n, self.m = n, m
        self.vectors = [tuple(float(y) for y in x) for x in itertools.product(g, repeat=n)]
        self.grid_vectors = tuple(self.vectors)  # the adversary's moves (remainders appended)
        self.grid_array = np.array(self.grid_vectors, dtype=float).reshape(-1, n)  # (V, n)
        self.index = {v: k for k, v in enumerate(self.vectors)}
        self.ratio = _ratio_fn(notion)
        self.gmax = g.max()
        self.tot = None if totals is None else np.asarray(totals, dtype=float)
        if self.tot is not None and self.tot.shape != (n,):
            raise ValueError(f"totals must have shape ({n},), got {self.tot.shape}")
        # feasibility slack for "totals still reachable": round-off only, relative to the totals
        self.slack = 0.0 if self.tot is None else RTOL * (1.0 + np.abs(self.tot))
        self.memo: dict = {}

    def value(self, state: tuple) -> tuple[float, tuple | None]:
        """(minimax ratio, adversary's move (vector index, algorithm's reply)) after ``state``, a
        sorted tuple of (vector index, owner); inf when the totals cannot be met from here."""
        memo, vectors, n, m = self.memo, self.vectors, self.n, self.m
        out: tuple[float, tuple | None]
        if state in memo:
            return memo[state]
        t = len(state)
        if t == m:
            values = np.array([vectors[k] for k, _ in state], dtype=float).T
            out = (self.ratio(values, np.array([a for _, a in state])), None)
            memo[state] = out
            return out
        remaining = None
        if self.tot is not None:
            remaining = self.tot - sum(
                (np.array(vectors[k], dtype=float) for k, _ in state), np.zeros(n)
            )
        worst, worst_move = np.inf, None
        moves: Sequence[int] = range(len(self.grid_vectors))
        if self.remainder and t == m - 1:  # the last good carries exactly what is left
            assert remaining is not None
            moves = [self._vector_index(tuple(float(x) for x in remaining))]
        elif remaining is not None:  # grid moves that keep the totals reachable (vectorised)
            rem = remaining[None, :] - self.grid_array  # (V, n)
            cap = np.inf if self.remainder else (m - t - 1) * self.gmax
            ok = np.all((rem >= -self.slack) & (rem <= cap + self.slack), 1)
            moves = np.flatnonzero(ok).tolist()
        for k in moves:
            best, best_a = self.reply(state, k)
            if not np.isfinite(best):  # this vector cannot be completed to the totals
                continue
            if best < worst:
                worst, worst_move = best, (k, best_a)
            if worst <= 0.0:
                break
        if worst_move is None:  # no feasible continuation
            out = (np.inf, None)
        else:
            out = (float(worst), worst_move)
        memo[state] = out
        return out

    def _vector_index(self, vec: tuple) -> int:
        if vec not in self.index:
            self.index[vec] = len(self.vectors)
            self.vectors.append(vec)
        return self.index[vec]

    def reply(self, state: tuple, k: int) -> tuple[float, int]:
        """The algorithm's best owner for vector ``k`` after ``state`` and the value it secures."""
        best, best_a = -np.inf, 0
        for a in range(self.n):
            r, _ = self.value(tuple(sorted((*state, (k, a)))))
            if r > best:
                best, best_a = r, a
            if best >= 1.0:
                break
        return best, best_a


def game_value(
    n: int,
    m: int,
    grid: Sequence[float],
    notion: str = "prop1",
    totals: Sequence[float] | None = None,
    remainder: bool = False,
    max_states: int = 50_000_000,
) -> tuple[float, list]:
    """Minimax value of the online game on a grid: the adversary picks each good's value vector,
    then the algorithm picks its owner; payoff = the final α-``notion`` ratio. With ``totals``
    the algorithm knows them in advance and the adversary must meet them exactly.

    The subgame after a history depends only on the multiset of (value vector, owner) pairs
    (ratios are order-free and the future does not depend on the order), so states are memoised
    on that multiset; this is exact for deterministic algorithms, which may use the full history.
    ``optimal_policy`` plays the maximising replies, so it attains the value (tested).

    ``remainder=True`` (with ``totals``): the last good carries exactly what is left of every
    total, any non-negative vector, not only grid points. Exact totals on a coarse grid with
    fixed m leave the adversary no room (the old searches returned 1 or non-monotone values
    for MMS); with the remainder the adversary's values are continuous in the last good. Every
    play is a legal instance with those totals, so the value is a *certified* upper bound on
    what any deterministic online algorithm with normalization information guarantees, and it
    can only fall as m grows or the grid is refined by a factor (tested). For MMS, n = 2 it gives
    5/6 (m = 3) and 2/3 (m = 4); the known optimum is 1/2 (Zhou, Bai & Wu 2023), reached only
    as m grows, beyond what this exhaustive search solves.

    ``max_states`` guards the memo size: a ValueError names the estimate before any search.
    Returns (value, principal variation [(vector, owner), ...]).

    >>> value, pv = game_value(2, 3, range(13), "mms", totals=[12, 12], remainder=True)
    >>> round(value, 4)
    0.8333
    """
    _guard_game(n, m, grid, max_states)
    game = _Game(n, m, grid, notion, totals, remainder)
    v, _ = game.value(())
    if not np.isfinite(v):
        raise ValueError("no instance on this grid reaches the given totals in m goods")
    pv: list = []
    state: tuple = ()
    while len(state) < m:
        _, move = game.value(state)
        if move is None:
            break
        pv.append((np.array(game.vectors[move[0]]), move[1]))
        state = tuple(sorted((*state, move)))
    return v, pv


class OptimalGridPolicy:
    """The minimax-optimal deterministic online policy for goods whose values lie on ``grid``
    (exactly ``m`` goods; with ``totals``, instances with exactly those totals). ``value`` is the
    ratio it guarantees, which no deterministic online algorithm can beat on that grid."""

    def __init__(
        self, n, m, grid, notion="prop1", totals=None, remainder=False, max_states=50_000_000
    ):
        _guard_game(n, m, grid, max_states)
        self.game = _Game(n, m, grid, notion, totals, remainder)
        self.value, _ = self.game.value(())
        if not np.isfinite(self.value):
            raise ValueError("no instance on this grid reaches the given totals in m goods")
        self.state: tuple = ()

    def __deepcopy__(self, memo):
        # the solved game (a large memo) is shared; only the position is copied
        clone = object.__new__(type(self))
        clone.game, clone.value, clone.state = self.game, self.value, self.state
        return clone

    def reset(self, info=None) -> None:
        self.state = ()

    def allocate(self, t: int, values) -> int:
        key = tuple(float(x) for x in np.asarray(values, dtype=float))
        if len(self.state) >= self.game.m:
            raise RuntimeError(f"the policy was solved for m = {self.game.m} goods")
        last = self.game.remainder and len(self.state) == self.game.m - 1
        if key not in self.game.index and not last:
            raise ValueError(f"values {key} are not on the policy's grid")
        k = self.game._vector_index(key) if last else self.game.index[key]
        _, a = self.game.reply(self.state, k)
        self.state = tuple(sorted((*self.state, (k, a))))
        return int(a)
