"""The per-agent frequency reading solved exactly: the best share guarantee and a policy attaining it.

Reading (``FrequencyPrediction(kind="per_agent")``): before the first good, the algorithm knows
each agent's multiset P_i = {v_i(g) : g ∈ M} but not which entries of different rows belong to
the same good, nor the order. The adversary links the rows and orders the goods; it may do so
adaptively, since for a deterministic algorithm adaptive and oblivious adversaries are the same.

For a *share-based* notion (MMS, PROP: agent i's share s_i depends on P_i alone, and the payoff
min_i v_i(A_i) / s_i on the bundle values only), the game after any history depends only on

    state = (the multisets still to come R_1, ..., R_n;  the bundle values h_1, ..., h_n),

so its minimax value

    W(R, h) = min_{(x_1, ..., x_n) ∈ R_1 × ... × R_n}  max_a  W(R - x, h + x_a e_a),
    W(∅, h) = min(1, min_{i: s_i > 0} h_i / s_i),

is computed exactly by memoised recursion. ``per_agent_game_value(P)`` is the best ratio any
deterministic online algorithm can guarantee on every instance with those multisets, and
``PerAgentOptimalPolicy`` plays the maximising replies, so it guarantees exactly that value
(tested against brute force over every linking and every order). ``per_agent_worst_value`` takes
the minimum over all multisets on a grid: the exact per-agent guarantee at that size, to compare
with the 1/n that ``MMSThresholdGreedy`` proves for every size.

The policy is exponential in m (a certificate and a yardstick, not a practical algorithm); no
polynomial per-agent algorithm with a proven bound above 1/n is implemented.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from ._tol import RTOL
from .adversary import _check_grid, _check_nm
from .info import FrequencyPrediction
from .notions import check_values, mms_value

__all__ = ["PerAgentOptimalPolicy", "per_agent_game_value", "per_agent_worst_value"]

_SHARE_NOTIONS = ("mms", "prop")


def _shares(p: np.ndarray, notion: str) -> np.ndarray:
    n = p.shape[0]
    if notion == "mms":
        return np.array([mms_value(row, n) for row in p])
    if notion == "prop":
        return p.sum(1) / n
    raise ValueError(f"notion must be one of {_SHARE_NOTIONS} (share-based), got {notion!r}")


class _PerAgentGame:
    def __init__(self, p: np.ndarray, notion: str):
        self.n, self.m = p.shape
        self.shares = _shares(p, notion)  # (n,)
        self.scale = p.sum(1)  # (n,) for the relative tolerance
        self.root = tuple(tuple(sorted(float(x) for x in row)) for row in p)
        self.memo: dict = {}

    def payoff(self, have) -> float:
        r = 1.0
        for h, s, tot in zip(have, self.shares, self.scale):
            if s > RTOL * tot and h < s - RTOL * tot:
                r = min(r, h / s)
        return r

    def value(self, rem: tuple, have: tuple) -> tuple[float, tuple | None]:
        """(W(rem, have), the adversary's minimising vector)."""
        key = (rem, have)
        if key in self.memo:
            return self.memo[key]
        if not rem[0]:
            out: tuple[float, tuple | None] = (self.payoff(have), None)
            self.memo[key] = out
            return out
        worst, arg = np.inf, None
        for x in itertools.product(*(sorted(set(r)) for r in rem)):
            best, _ = self.reply(rem, have, x)
            if best < worst:
                worst, arg = best, x
            if worst <= 0.0:
                break
        out = (float(worst), arg)
        self.memo[key] = out
        return out

    def reply(self, rem: tuple, have: tuple, x: tuple) -> tuple[float, int]:
        """The best owner a of the arriving vector x and the value it secures."""
        nxt = []
        for r, xi in zip(rem, x):
            lst = list(r)
            lst.remove(xi)
            nxt.append(tuple(lst))
        nrem = tuple(nxt)
        best, best_a = -np.inf, 0
        for a in range(self.n):
            h = list(have)
            h[a] += x[a]
            v, _ = self.value(nrem, tuple(h))
            if v > best:
                best, best_a = v, a
            if best >= 1.0:
                break
        return best, best_a


def _check_pred(p, notion) -> np.ndarray:
    if isinstance(p, FrequencyPrediction):
        if p.kind != "per_agent":
            raise ValueError(f"prediction must be kind='per_agent', got {p.kind!r}")
        if p.rel_error > 0:
            raise ValueError("the exact per-agent game needs an exact prediction (rel_error = 0)")
        p = p.values
    if notion not in _SHARE_NOTIONS:
        raise ValueError(f"notion must be one of {_SHARE_NOTIONS} (share-based), got {notion!r}")
    return check_values(p, "prediction")


def per_agent_game_value(prediction, notion: str = "mms", max_cells: int = 18) -> float:
    """W(P, 0): the best α such that some deterministic online algorithm that knows the per-agent
    multisets ``prediction`` (n, m) (rows unlinked) is α-``notion`` on every instance with them.
    Refuses (ValueError) when n * m exceeds ``max_cells`` (the search is exponential in it)."""
    p = _check_pred(prediction, notion)
    n, m = p.shape
    if n * m > max_cells:
        raise ValueError(
            f"per-agent game too large: n * m = {n * m} > max_cells = {max_cells}; shrink n or m"
        )
    game = _PerAgentGame(p, notion)
    return game.value(game.root, (0.0,) * n)[0]


def per_agent_worst_value(
    n: int, m: int, grid: Sequence[float], notion: str = "mms", max_games: int = 20_000
) -> tuple[float, np.ndarray]:
    """min over all per-agent multisets on ``grid`` (agents up to relabelling) of
    ``per_agent_game_value``: the exact guarantee of the per-agent reading at this size.
    Returns (value, the worst multisets (n, m))."""
    _check_nm(n, m)
    g = _check_grid(grid)
    rows = list(itertools.combinations_with_replacement(g.tolist(), m))
    count = math.comb(len(rows) + n - 1, n)
    if count > max_games:
        raise ValueError(
            f"per_agent_worst_value too large: {count} multiset profiles for n={n}, m={m}, "
            f"{g.size} grid values (max_games={max_games}); shrink n, m or the grid"
        )
    best: float = 2.0
    arg: np.ndarray | None = None
    for combo in itertools.combinations_with_replacement(range(len(rows)), n):
        p = np.array([rows[k] for k in combo], dtype=float)
        v = per_agent_game_value(p, notion)
        if v < best:
            best, arg = v, p
    assert arg is not None
    return best, arg


class PerAgentOptimalPolicy:
    """The minimax-optimal deterministic policy for exact per-agent multisets (see module doc).

    ``reset(FrequencyPrediction(values, "per_agent"))`` solves the game; ``value`` is then the
    ratio it guarantees on every instance with those multisets, and no deterministic online
    algorithm with the same information guarantees more. A good whose value for some agent is
    not left in that agent's predicted multiset raises ValueError (the prediction was wrong)."""

    def __init__(self, notion: str = "mms"):
        if notion not in _SHARE_NOTIONS:
            raise ValueError(
                f"notion must be one of {_SHARE_NOTIONS} (share-based), got {notion!r}"
            )
        self.notion = notion
        self.game: _PerAgentGame | None = None
        self.value = float("nan")

    def __deepcopy__(self, memo):
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)  # the solved game is shared; the position is a tuple
        return clone

    def reset(self, info=None) -> None:
        if not isinstance(info, FrequencyPrediction):
            raise TypeError(f"PerAgentOptimalPolicy needs info=FrequencyPrediction, got {info!r}")
        p = _check_pred(info, self.notion)
        if self.game is None or self.game.root != tuple(
            tuple(sorted(float(x) for x in row)) for row in p
        ):
            self.game = _PerAgentGame(p, self.notion)
        self.rem, self.have = self.game.root, (0.0,) * p.shape[0]
        self.value = self.game.value(self.rem, self.have)[0]

    def allocate(self, t: int, values) -> int:
        if self.game is None:
            raise RuntimeError("call reset(info) before allocate")
        x = tuple(float(y) for y in np.asarray(values, dtype=float).ravel())
        if len(x) != self.game.n:
            raise ValueError(f"values has {len(x)} entries but info describes {self.game.n} agents")
        for i, (r, xi) in enumerate(zip(self.rem, x)):
            if xi not in r:
                raise ValueError(
                    f"agent {i} values this good at {xi}, which is not left in her predicted "
                    f"multiset {r}: the per-agent prediction is wrong"
                )
        _, a = self.game.reply(self.rem, self.have, x)
        nxt = []
        for r, xi in zip(self.rem, x):
            lst = list(r)
            lst.remove(xi)
            nxt.append(tuple(lst))
        h = list(self.have)
        h[a] += x[a]
        self.rem, self.have = tuple(nxt), tuple(h)
        return int(a)
