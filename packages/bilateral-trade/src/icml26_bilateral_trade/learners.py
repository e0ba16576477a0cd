"""Learners for one-bit online bilateral trade and the simulator (Lunghi et al., ICML 2026, §4).

`GBBTrader` is the paper's three-phase learner (constants documented on the class):

1. **Profit-Max.** Post pairs (x, x + 2^-l) from F_K and bank profit until it reaches beta.
2. **Exploration.** 2K lines of N rounds each estimate, from one bit, the two terms of
       GFT(p, q) = L(p, q) + R(p, q) + PRO(p, q)
   for every grid cell at once: with U ~ U[0, 1] posted to the seller and q_j to the buyer,
       L(p_i, q_j) = E[1{U <= p_i} 1{s <= U, b >= q_j}]   (the bit times 1{U <= p_i}),
   and symmetrically R(p_i, q_j) = E[1{V >= q_j} 1{s <= p_i, b >= V}] with V posted to the buyer.
3. **Constrained UCB.** Per cell an upper confidence bound PRO+ on the profit; the optimistic
   gain u = L^ + R^ + 2r + PRO+; each epoch solves max_gamma E_gamma[u] s.t. E_gamma[PRO+] >= 0
   (two-support, `solve_two_support`) and samples pairs from gamma.

Every learner has two code paths that must agree exactly: a plain round-by-round transcription
(`act` / `update`, used by `BilateralTradeEnv` loops and `simulate(..., fast=False)`) and a
vectorised one (`play`, the default of `simulate`), which runs each epoch as one numpy block and
finds where the epoch ends (a count doubles, the bank crosses beta, the guard fires) by cumsum.
Randomness is drawn once in `reset`, indexed by round, so both paths consume the same coins.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from .benchmarks import opt_gbb, solve_two_support
from .envs import ValuationEnv, check_prices, require_expectations

Array = np.ndarray


class Policy(ABC):
    """A learner: `reset(T, rng)`, then per round `act() -> (p, q)` and `update(trade)`,
    or the whole horizon at once with `play(s, b) -> (p, q, trade)`.

    Subclass it for your own learner: the three per-round methods are abstract; `play`
    defaults to the plain loop over them.
    """

    name = "policy"
    T: int
    phase_marks: dict[str, int | None]

    @abstractmethod
    def reset(self, T: int, rng: np.random.Generator) -> None: ...

    @abstractmethod
    def act(self) -> tuple[float, float]: ...

    @abstractmethod
    def update(self, trade: bool) -> None: ...

    def play(self, s: Array, b: Array) -> tuple[Array, Array, Array]:
        """Default fast path: the plain loop (subclasses vectorise)."""
        p, q, tr = np.empty(self.T), np.empty(self.T), np.empty(self.T, dtype=bool)
        for t in range(self.T):
            p[t], q[t] = self.act()
            tr[t] = s[t] <= p[t] and b[t] >= q[t]
            self.update(bool(tr[t]))
        return p, q, tr


def _check_T(T: int) -> int:
    if int(T) != T or T < 1:
        raise ValueError(f"T: horizon must be an integer >= 1, got {T!r}")
    return int(T)


def _check_sizes(K: int | None, N: int | None, c_K: float, c_N: float) -> None:
    """K, N explicit or from K = ceil(c_K T^{1/4}), N = ceil(c_N T^{1/2}): all must be valid."""
    if K is not None and (int(K) != K or K < 2):
        raise ValueError(f"K: the price grid needs an integer >= 2 prices, got {K!r}")
    if N is not None and (int(N) != N or N < 1):
        raise ValueError(f"N: need an integer >= 1 rounds per exploration line, got {N!r}")
    for name, c in (("c_K", c_K), ("c_N", c_N)):
        if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0):
            raise ValueError(f"{name}: the rate constant must be a finite number > 0, got {c!r}")


def _first(mask: Array) -> int:
    """Index of the first True, or len(mask)."""
    k = int(np.argmax(mask)) if mask.size else 0
    return k if mask.size and mask[k] else mask.size


def _running(start: float, x: Array) -> Array:
    """start + x[0], start + x[0] + x[1], ... added left to right (bit-equal to a Python loop)."""
    return np.cumsum(np.concatenate(([start], x)))[1:]


class _Exp3:
    """EXP3 (Auer et al. 2002) over M arms with exploration gamma, in O(log M) per round.

    Draw: with coin c ~ U[0, 1), c < gamma picks arm floor(c M / gamma) (the uniform part),
    otherwise the arm whose cumulative weight passes (c - gamma) / (1 - gamma) sum w (a sum tree);
    either way P(arm k) = (1 - gamma) w_k / sum w + gamma / M = prob_k.
    Update: log w_k += gamma xhat_k / M with xhat_k = reward / prob_k (importance weighted).
    Weights are stored as exp(log w - shift); the tree is rebuilt when a log weight passes
    shift + 600, so nothing overflows. Pure Python floats: a round costs ~2 us, not ~20 us of
    numpy calls.
    """

    def __init__(self, M: int, gamma: float) -> None:
        self.M, self.gamma = M, gamma
        self.P = 1 << max(0, (M - 1).bit_length())  # leaves P .. P + M - 1
        self.logw = [0.0] * M
        self.shift = 0.0
        self._rebuild()

    def _rebuild(self) -> None:
        P = self.P
        self.tree = [0.0] * (2 * P)
        for k, lw in enumerate(self.logw):
            self.tree[P + k] = math.exp(lw - self.shift)
        for node in range(P - 1, 0, -1):
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]

    def draw(self, c: float) -> tuple[int, float]:
        """(arm, its probability) for this round's coin c."""
        tree, P, M, g = self.tree, self.P, self.M, self.gamma
        if c < g:
            k = min(int(c / g * M), M - 1)
        else:
            x, node = (c - g) / (1.0 - g) * tree[1], 1
            while node < P:
                node *= 2
                if x >= tree[node]:
                    x -= tree[node]
                    node += 1
            k = min(node - P, M - 1)
        return k, (1.0 - g) * tree[P + k] / tree[1] + g / M

    def update(self, k: int, reward: float, prob: float) -> None:
        lw = self.logw[k] = self.logw[k] + self.gamma * (reward / prob) / self.M
        if lw - self.shift > 600.0:
            self.shift = max(self.logw)
            self._rebuild()
            return
        tree = self.tree
        node = self.P + k
        tree[node] = math.exp(lw - self.shift)
        node //= 2
        while node:
            tree[node] = tree[2 * node] + tree[2 * node + 1]
            node //= 2


# ----------------------------------------------------------------------------- GBB learner
@dataclass
class GBBTrader(Policy):
    """Three-phase learner with sublinear regret against OPT_GBB.

    Constants (paper: K = T^{1/4}, N = T^{1/2}, beta = c T^{3/4}):
      K = max(2, ceil(c_K T^{1/4})) grid prices 0, 1/(K-1), ..., 1   (discretisation sigma T / K)
      N = ceil(c_N T^{1/2}) rounds per exploration line                (2KN = 2 c_K c_N T^{3/4})
      r = sqrt(log(4 K^2 / delta) / (2N))   Hoeffding radius of L^ and R^ (values in [0, 1])
      PRO+ = min(mean + |q-p| sqrt(log(4 K^2 T / delta) / (2n)), max(0, q-p)); max(0, q-p) if n=0
    beta:
      "paper": beta = 2KN, the worst case of exploration (every round loses at most 1);
      "sharp" (default): beta = W + reserve, W = sum over the pre-drawn exploration rounds of
        their largest possible loss (U - q_j)^+ or (p_i - V)^+ (known before phase 1 ends, so
        exploration can never make the bank negative), about 2KN / 6: phase 1 is ~6x shorter.
    phase1:
      "ucb" (default): lazy UCB on profit over F_K (re-chosen when the played arm's count
        doubles). Valuations are i.i.d., so a stochastic bandit is enough and lets phase 1 run
        as numpy blocks.
      "exp3": the paper's choice, EXP3 over F_K with reward = profit in [0, 1], exploration
        gamma = min(1, sqrt(M ln M / ((e - 1) T))), one draw per round (`_Exp3`: a sum tree
        over Python floats, ~2 us a round).
    guard: a phase-3 round whose pair can lose money (q < p) is posted only if the bank covers
      its worst loss p - q; otherwise the epoch is re-solved over pairs with q >= p. With the
      sharp beta this makes the realised profit non-negative on every path (GBB with
      probability 1); guard=False is the paper's high-probability version.
    Phase-3 epochs end when a support pair's count doubles (at most 2 log2 T epochs per pair).
    """

    K: int | None = None
    N: int | None = None
    c_K: float = 1.0
    c_N: float = 1.0
    delta: float = 0.05
    beta: str = "sharp"
    reserve: float = 0.0
    phase1: str = "ucb"
    guard: bool = True
    name: str = "GBBTrader"
    T: int = field(default=0, init=False)
    phase_marks: dict[str, int | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.beta not in ("sharp", "paper"):
            raise ValueError(f"beta: expected 'sharp' or 'paper', got {self.beta!r}")
        if self.phase1 not in ("ucb", "exp3"):
            raise ValueError(f"phase1: expected 'ucb' or 'exp3', got {self.phase1!r}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta: must be in (0, 1), got {self.delta!r}")
        _check_sizes(self.K, self.N, self.c_K, self.c_N)
        if self.reserve < 0:
            raise ValueError("reserve: must be >= 0")

    # ------------------------------------------------------------------ setup
    def reset(self, T: int, rng: np.random.Generator) -> None:
        T = self.T = _check_T(T)
        K = self.K or max(2, math.ceil(self.c_K * T**0.25))
        N = self.N or max(1, math.ceil(self.c_N * T**0.5))
        self.k_, self.n_ = K, N
        g = self.grid = np.linspace(0.0, 1.0, K)
        # phase-1 arms F_K: spreads 2^-l down to the grid step, anchored on the grid (M,)
        levels = max(1, math.ceil(math.log2(K - 1)))
        arms = set()
        for ell in range(1, levels + 1):
            d = 2.0**-ell
            for x in g:
                if x + d <= 1.0:
                    arms.add((float(x), float(x + d)))
                if x - d >= 0.0:
                    arms.add((float(x - d), float(x)))
        a = np.array(sorted(arms))
        self.arm_p, self.arm_q = a[:, 0], a[:, 1]  # (M,)
        self.arm_n = np.zeros(len(a), dtype=np.int64)  # plays
        self.arm_tr = np.zeros(len(a), dtype=np.int64)  # trades (profit = spread * trades)
        self.log1 = math.log(4 * len(a) * T / self.delta)
        # exploration schedule (2KN,): L lines (U, q_j) for j < K, then R lines (p_i, V)
        u = rng.random(2 * K * N)
        line = np.arange(2 * K * N) // N
        self.ex_p = np.where(line < K, u, g[line % K])
        self.ex_q = np.where(line < K, g[line % K], u)
        self.ex_u, self.ex_line = u, line
        worst = float(np.maximum(self.ex_p - self.ex_q, 0.0).sum())
        self.beta_ = (2.0 * K * N if self.beta == "paper" else worst) + self.reserve
        self.L_cnt = np.zeros((K, K), dtype=np.int64)  # [i, j]: sum 1{U <= p_i} trade, line j
        self.R_cnt = np.zeros((K, K), dtype=np.int64)  # [i, j]: sum 1{V >= q_j} trade, line i
        self.r_ = math.sqrt(math.log(4 * K * K / self.delta) / (2 * N))
        self.log3 = math.log(4 * K * K * T / self.delta)
        self.spread = g[None, :] - g[:, None]  # (K, K): q_j - p_i
        self.c_n = np.zeros((K, K), dtype=np.int64)  # phase-3 plays per cell
        self.c_tr = np.zeros((K, K), dtype=np.int64)  # phase-3 trades per cell
        self.coins = rng.random(T)  # phase-3 sampling, indexed by round
        self.t, self.bank, self.e = 0, 0.0, 0
        self.phase = 1
        self.phase_marks = {"explore_start": None, "exploit_start": None}
        self._arm: int | None = None  # phase-1 epoch arm
        self._sup: Array | None = None  # phase-3 epoch support (flat cell ids), weights, targets
        self._w = np.zeros(0)
        self._tgt = np.zeros(0, dtype=np.int64)
        M = len(a)
        self.gamma = min(1.0, math.sqrt(M * math.log(M) / ((math.e - 1) * T))) if M > 1 else 1.0
        self._exp3 = _Exp3(M, self.gamma)  # phase1="exp3"
        self.coins1 = rng.random(
            T
        )  # EXP3 draws, indexed by round (drawn last: other coins unchanged)
        self._prob = 1.0
        self._enter_phase2_if_banked()

    def _enter_phase2_if_banked(self) -> None:
        if self.phase == 1 and self.bank >= self.beta_:
            self.phase = 2
            self.phase_marks["explore_start"] = self.t

    # ------------------------------------------------------------------ decisions (shared)
    def _choose_arm(self) -> tuple[int, int]:
        """Phase-1 arm and the count that ends its epoch.

        UCB: argmax spread (mean + sqrt(log / 2n)), unplayed first, until its count doubles.
        EXP3: draw from (1 - gamma) w / sum w + gamma / M with this round's coin, for one round.
        """
        n = self.arm_n
        if self.phase1 == "exp3":
            k, self._prob = self._exp3.draw(float(self.coins1[self.t]))
            return k, int(n[k]) + 1
        spread = self.arm_q - self.arm_p
        with np.errstate(divide="ignore", invalid="ignore"):
            ucb = spread * (self.arm_tr / n + np.sqrt(self.log1 / (2 * n)))
        ucb = np.where(n > 0, ucb, np.inf)
        k = int(np.argmax(ucb))
        return k, max(1, 2 * int(n[k]))

    def _exp3_update(self, a: int, reward: float) -> None:
        """EXP3 gain update: log w_a += gamma (reward / prob_a) / M (importance-weighted)."""
        if self.phase1 == "exp3" and reward != 0:
            self._exp3.update(a, float(reward), self._prob)

    def estimates(self) -> tuple[Array, Array]:
        """(L^, R^), (K, K) each, from the exploration counts."""
        return self.L_cnt / self.n_, self.R_cnt / self.n_

    def _solve_epoch(self) -> None:
        """Phase-3 optimistic LP over the grid cells; sets support, weights and count targets."""
        n, sp = self.c_n, self.spread
        with np.errstate(divide="ignore", invalid="ignore"):
            ucb = sp * self.c_tr / n + np.abs(sp) * np.sqrt(self.log3 / (2 * n))
        pro_ucb = np.where(n > 0, np.minimum(ucb, np.maximum(sp, 0.0)), np.maximum(sp, 0.0))
        lhat, rhat = self.estimates()
        u = (lhat + rhat + 2 * self.r_ + pro_ucb).ravel()
        x = pro_ucb.ravel()
        if self.guard:  # pessimistic profit, paced: E[PRO-] >= -bank / rounds left
            with np.errstate(divide="ignore", invalid="ignore"):
                lcb = sp * self.c_tr / n - np.abs(sp) * np.sqrt(self.log3 / (2 * n))
            low = np.minimum(sp, 0.0)
            x = (np.where(n > 0, np.maximum(lcb, low), low) + self.bank / (self.T - self.t)).ravel()
        _, sup, w = solve_two_support(u, x)
        loss = np.maximum(-sp.ravel()[sup], 0.0)
        if self.guard and self.bank < loss.max():
            safe = np.flatnonzero(sp.ravel() >= 0)  # q >= p: no round can lose money
            _, s2, w = solve_two_support(u[safe], x[safe])
            sup = safe[s2]
        self._sup, self._w = sup, w
        self._tgt = np.maximum(1, 2 * n.ravel()[sup])

    def _cell_of_coin(self, c: float) -> int:
        assert self._sup is not None
        return int(self._sup[0] if (len(self._sup) == 1 or c < self._w[0]) else self._sup[1])

    # ------------------------------------------------------------------ plain transcription
    def act(self) -> tuple[float, float]:
        if self.t >= self.T:
            raise RuntimeError("act: the horizon T is over; call reset")
        if self.phase == 1:
            if self._arm is None:
                self._arm, self._tgt1 = self._choose_arm()
            return float(self.arm_p[self._arm]), float(self.arm_q[self._arm])
        if self.phase == 2:
            return float(self.ex_p[self.e]), float(self.ex_q[self.e])
        if self._sup is None:
            self._solve_epoch()
        k = self._cell_of_coin(self.coins[self.t])
        i, j = divmod(k, self.k_)
        if self.guard and self.grid[i] - self.grid[j] > self.bank:
            self._solve_epoch()  # bank cannot cover this pair's worst loss: re-solve (safe set)
            k = self._cell_of_coin(self.coins[self.t])
            i, j = divmod(k, self.k_)
        self._cell = k
        return float(self.grid[i]), float(self.grid[j])

    def update(self, trade: bool) -> None:
        trade = bool(trade)
        if self.phase == 1:
            a = self._arm
            assert a is not None
            self.arm_n[a] += 1
            self.arm_tr[a] += trade
            self._exp3_update(a, (self.arm_q[a] - self.arm_p[a]) * trade)
            self.bank += (self.arm_q[a] - self.arm_p[a]) * trade
            self.t += 1
            if self.arm_n[a] >= self._tgt1:
                self._arm = None
            self._enter_phase2_if_banked()
            if self.phase == 2:
                self._arm = None
            return
        if self.phase == 2:
            e, K = self.e, self.k_
            line = int(self.ex_line[e])
            if line < K:  # L line j: bit counts for every p_i >= U
                self.L_cnt[:, line] += (self.ex_u[e] <= self.grid) * trade
            else:  # R line i: bit counts for every q_j <= V
                self.R_cnt[line - K, :] += (self.ex_u[e] >= self.grid) * trade
            self.bank += (self.ex_q[e] - self.ex_p[e]) * trade
            self.e += 1
            self.t += 1
            if self.e == 2 * K * self.n_:
                self.phase = 3
                self.phase_marks["exploit_start"] = self.t
            return
        k = self._cell
        i, j = divmod(k, self.k_)
        self.c_n[i, j] += 1
        self.c_tr[i, j] += trade
        self.bank += (self.grid[j] - self.grid[i]) * trade
        self.t += 1
        assert self._sup is not None
        pos = np.flatnonzero(self._sup == k)
        if self.c_n[i, j] >= self._tgt[pos[0]]:
            self._sup = None

    # ------------------------------------------------------------------ vectorised path
    def _play_exp3(self, s: Array, b: Array, P: Array, Q: Array, TR: Array) -> int:
        """Phase 1 with EXP3: one draw per round, so a loop over Python floats (the same
        operations as act/update, in the same order, hence the same bits)."""
        T, t0, ex = self.T, self.t, self._exp3
        sl, bl, coins = s.tolist(), b.tolist(), self.coins1.tolist()
        ap, aq = self.arm_p.tolist(), self.arm_q.tolist()
        arms, trades = [], []
        bank, beta, t = self.bank, self.beta_, t0
        while t < T and bank < beta:
            k, prob = ex.draw(coins[t])
            p, q = ap[k], aq[k]
            arms.append(k)
            if sl[t] <= p and bl[t] >= q:
                trades.append(t - t0)
                bank += q - p
                ex.update(k, q - p, prob)
            t += 1
        a = np.array(arms, dtype=np.int64)  # (rounds,)
        tr = np.zeros(a.size, dtype=bool)
        tr[trades] = True
        P[t0:t], Q[t0:t], TR[t0:t] = self.arm_p[a], self.arm_q[a], tr
        self.arm_n += np.bincount(a, minlength=self.arm_n.size)
        self.arm_tr += np.bincount(a[tr], minlength=self.arm_n.size)
        self.bank, self.t = bank, t
        self._enter_phase2_if_banked()
        return t

    def play(self, s: Array, b: Array) -> tuple[Array, Array, Array]:
        T, K = self.T, self.k_
        P, Q = np.empty(T), np.empty(T)
        TR = np.zeros(T, dtype=bool)
        t = self.t
        if self.phase1 == "exp3" and self.phase == 1:
            t = self._play_exp3(s, b, P, Q, TR)
        while t < T and self.phase == 1:  # one epoch = one arm until its count doubles
            a, tgt = self._choose_arm()
            m = min(tgt - int(self.arm_n[a]), T - t)
            p, q = self.arm_p[a], self.arm_q[a]
            tr = (s[t : t + m] <= p) & (b[t : t + m] >= q)
            bank = _running(self.bank, (q - p) * tr)
            m = min(m, _first(bank >= self.beta_) + 1)  # phase ends on the round that banks beta
            P[t : t + m], Q[t : t + m], TR[t : t + m] = p, q, tr[:m]
            self.arm_n[a] += m
            self.arm_tr[a] += int(tr[:m].sum())
            self.bank = float(bank[m - 1])
            t = self.t = t + m
            self._enter_phase2_if_banked()
        if t < T and self.phase == 2:
            m = min(2 * K * self.n_ - self.e, T - t)
            sl = slice(self.e, self.e + m)
            p, q, u, line = self.ex_p[sl], self.ex_q[sl], self.ex_u[sl], self.ex_line[sl]
            tr = (s[t : t + m] <= p) & (b[t : t + m] >= q)
            for ln in np.unique(line):
                rows = line == ln
                hit = u[rows][tr[rows]]  # prices of the rounds that traded on this line
                if ln < K:  # (K,): how many traded rounds had U <= p_i
                    self.L_cnt[:, ln] += np.searchsorted(np.sort(hit), self.grid, side="right")
                else:  # (K,): how many traded rounds had V >= q_j
                    self.R_cnt[ln - K, :] += hit.size - np.searchsorted(
                        np.sort(hit), self.grid, side="left"
                    )
            P[t : t + m], Q[t : t + m], TR[t : t + m] = p, q, tr
            self.bank = float(_running(self.bank, (q - p) * tr)[-1])
            self.e += m
            t = self.t = t + m
            if self.e == 2 * K * self.n_:
                self.phase = 3
                self.phase_marks["exploit_start"] = t
        while t < T:  # phase 3: one epoch = one LP solve
            self._solve_epoch()
            assert self._sup is not None
            sup, w, tgt3 = self._sup, self._w, self._tgt
            rem = tgt3 - self.c_n.ravel()[sup]  # plays left before a support count doubles
            m = min(int(rem.sum()), T - t)
            c = self.coins[t : t + m]
            pick = np.where((len(sup) == 1) | (c < w[0]), 0, 1)  # (m,) index into sup
            cell = sup[pick]
            i, j = np.divmod(cell, K)
            p, q = self.grid[i], self.grid[j]
            tr = (s[t : t + m] <= p) & (b[t : t + m] >= q)
            # epoch end: the round on which a support count reaches its target (inclusive)
            cnt0 = np.cumsum(pick == 0)
            end = _first(cnt0 >= rem[0])
            if len(sup) == 2:
                end = min(end, _first(np.cumsum(pick == 1) >= rem[1]))
            m_end = min(m, end + 1)
            if self.guard:  # or the first round whose worst loss the bank cannot cover (exclusive)
                run = _running(self.bank, (q - p) * tr)
                before = np.concatenate(([self.bank], run[:-1]))  # bank before each round
                m_end = min(m_end, _first(p - q > before))
            m = m_end
            P[t : t + m], Q[t : t + m], TR[t : t + m] = p[:m], q[:m], tr[:m]
            np.add.at(self.c_n.ravel(), cell[:m], 1)
            np.add.at(self.c_tr.ravel(), cell[:m], tr[:m].astype(np.int64))
            if m:
                self.bank = float(_running(self.bank, ((q - p) * tr)[:m])[-1])
            t = self.t = t + m
        self._sup = None
        return P, Q, TR


# ----------------------------------------------------------------------------- WBB baseline
@dataclass
class FixedPriceWBB(Policy):
    """One-bit explore-then-commit over single prices p = q (weakly budget balanced every round).

    For each of K grid prices p: N rounds posting (U p, p) with U ~ U[0, 1] estimate
    L(p, p) = p P(s <= U p, b >= p), and N rounds posting (p, p + V (1 - p)) estimate
    R(p, p) = (1 - p) P(s <= p, b >= p + V (1 - p)); then commit to argmax L^ + R^ = GFT^(p, p).
    Every posted pair has q >= p, so profit is >= 0 on every round (WBB). Same K, N as GBBTrader.
    Its regret against OPT_WBB is sublinear; against OPT_GBB it is linear whenever
    OPT_GBB > OPT_WBB.
    """

    K: int | None = None
    N: int | None = None
    c_K: float = 1.0
    c_N: float = 1.0
    name: str = "FixedPriceWBB"
    T: int = field(default=0, init=False)
    phase_marks: dict[str, int | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        _check_sizes(self.K, self.N, self.c_K, self.c_N)

    def reset(self, T: int, rng: np.random.Generator) -> None:
        T = self.T = _check_T(T)
        K = self.k_ = self.K or max(2, math.ceil(self.c_K * T**0.25))
        N = self.n_ = self.N or max(1, math.ceil(self.c_N * T**0.5))
        g = self.grid = np.linspace(0.0, 1.0, K)
        u = rng.random(2 * K * N)
        line = np.arange(2 * K * N) // N  # lines 2i (seller side) and 2i + 1 (buyer side)
        price = g[line // 2]
        left = line % 2 == 0
        self.ex_p = np.where(left, u * price, price)
        self.ex_q = np.where(left, price, price + u * (1 - price))
        self.ex_line = line
        self.hits = np.zeros(2 * K, dtype=np.int64)
        self.t = 0
        self.choice: int | None = None
        self.phase_marks = {"explore_start": 0, "exploit_start": None}

    def _commit(self) -> None:
        g = self.grid
        est = (g * self.hits[0::2] + (1 - g) * self.hits[1::2]) / self.n_  # GFT^(p, p), (K,)
        self.choice = int(np.argmax(est))
        self.phase_marks["exploit_start"] = self.t

    def act(self) -> tuple[float, float]:
        if self.t >= self.T:
            raise RuntimeError("act: the horizon T is over; call reset")
        if self.t < self.ex_p.size:
            return float(self.ex_p[self.t]), float(self.ex_q[self.t])
        if self.choice is None:
            self._commit()
        assert self.choice is not None
        return float(self.grid[self.choice]), float(self.grid[self.choice])

    def update(self, trade: bool) -> None:
        if self.t < self.ex_p.size:
            self.hits[self.ex_line[self.t]] += bool(trade)
        self.t += 1

    def play(self, s: Array, b: Array) -> tuple[Array, Array, Array]:
        T, m = self.T, min(self.T, self.ex_p.size)
        P, Q = np.empty(T), np.empty(T)
        P[:m], Q[:m] = self.ex_p[:m], self.ex_q[:m]
        self.hits += np.bincount(
            self.ex_line[:m], weights=(s[:m] <= P[:m]) & (b[:m] >= Q[:m]), minlength=2 * self.k_
        ).astype(np.int64)
        self.t = m
        if m < T:
            self._commit()
            assert self.choice is not None
            P[m:] = Q[m:] = self.grid[self.choice]
            self.t = T
        return P, Q, (s <= P) & (b >= Q)


# ----------------------------------------------------------------------------- simulator
@dataclass(frozen=True)
class Trace:
    """One run. Arrays are (T,); regret[t] = (t + 1) OPT - sum_{u <= t} GFT(p_u, q_u) (pseudo-regret
    with exact expectations), cum_profit[t] the realised profit after round t."""

    p: Array
    q: Array
    trade: Array
    gft: Array  # expected GFT of the posted pair
    profit: Array  # realised profit (q - p) 1{trade}
    regret: Array
    cum_profit: Array
    opt: float
    phase_marks: dict[str, int | None]

    @property
    def final_regret(self) -> float:
        return float(self.regret[-1])

    @property
    def budget_balanced(self) -> bool:
        """GBB on this path: realised total profit >= 0 at the horizon."""
        return bool(self.cum_profit[-1] >= -1e-12)

    @property
    def min_cum_profit(self) -> float:
        return float(self.cum_profit.min())


def simulate(
    policy: Policy,
    env: ValuationEnv,
    T: int,
    seed: int = 0,
    *,
    opt: float | None = None,
    fast: bool = True,
) -> Trace:
    """Run `policy` for T rounds on `env` with seed `seed`; pseudo-regret against `opt`.

    opt defaults to `opt_gbb(env, 1025).value` (GBB benchmark on a 1025-point grid, within
    sigma / 1024 of the continuous one). fast=False runs the plain round-by-round transcription
    (`act` / `update`); both paths give the same trace bit for bit.
    """
    T = _check_T(T)
    require_expectations(env)
    rng_env, rng_pol = (np.random.default_rng(x) for x in np.random.SeedSequence(seed).spawn(2))
    s, b = env.sample(rng_env, T)  # (T,) each
    policy.reset(T, rng_pol)
    if fast:
        p, q, tr = policy.play(s, b)
    else:
        p, q, tr = np.empty(T), np.empty(T), np.zeros(T, dtype=bool)
        for t in range(T):
            p[t], q[t] = policy.act()
            tr[t] = s[t] <= p[t] and b[t] >= q[t]
            policy.update(bool(tr[t]))
    check_prices(p, q)
    if opt is None:
        opt = opt_gbb(env, 1025).value
    gft = env.expectations(p, q)[0]
    profit = (q - p) * tr
    regret = opt * np.arange(1, T + 1) - np.cumsum(gft)
    return Trace(
        p, q, tr, gft, profit, regret, np.cumsum(profit), float(opt), dict(policy.phase_marks)
    )
