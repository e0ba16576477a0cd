"""Online policies and the online loop (paper §3-§6).

An ``OnlinePolicy`` is told the side information once (``reset(info)``) and then, for each
arriving good, its value vector (n,) (``allocate(t, values) -> agent``). ``divide_online`` runs a
policy over an ``OnlineInstance`` and returns the ``Allocation`` with its history.

Policies and what each guarantees (derivations in the class docstrings; each is checked by
exhaustive search in the tests):

=====================  ===================  =================================================
policy                 information          guarantee
=====================  ===================  =================================================
GreedyPolicy           none                 none (adversary: EF1, MMS -> 0; PROP1 -> n/m)
RoundRobinPolicy       none                 none
RandomPolicy           none                 none against an adaptive adversary
ThresholdGreedy        totals               PROP1 for n = 2; only 1/(n-1)-PROP1 for n >= 3
CappedGreedy           totals (±ε)          (1-ε)/(1+ε)-PROP1 for every n  (PROP1 when ε = 0)
MMSThresholdGreedy     per-agent multisets  (1/n)(1-ε)/(1+ε)-MMS  (1/2-MMS for n = 2)
PlanAndMatch           joint multiset (±ε)  the offline algorithm's guarantee; α(1-ε)/(1+ε)
                                            for share/envy notions when predictions separate
=====================  ===================  =================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from ._tol import RTOL, close
from .info import FrequencyPrediction, NormalizationInfo
from .instance import Allocation, OnlineInstance
from .notions import check_values, mms_lower_bound_lpt, mms_value

__all__ = [
    "CappedGreedy",
    "GreedyPolicy",
    "MMSThresholdGreedy",
    "OnlinePolicy",
    "PlanAndMatch",
    "RandomPolicy",
    "RoundRobinPolicy",
    "ThresholdGreedy",
    "divide_online",
    "predictions_separated",
]


@runtime_checkable
class OnlinePolicy(Protocol):
    """reset(info) before the first good; allocate(t, values (n,)) -> agent index per good."""

    def reset(self, info=None) -> None: ...

    def allocate(self, t: int, values: np.ndarray) -> int: ...


def divide_online(
    policy: OnlinePolicy,
    instance=None,
    info=None,
    validate: bool = True,
    *,
    valuations=None,
    order=None,
) -> Allocation:
    """Run ``policy`` on the goods good by good, mirroring ``fairpyx.divide(algorithm, instance,
    valuations=...)``: pass an ``OnlineInstance``, a fairpyx ``Instance``, or ``valuations``
    (an (n, m) array or fairpyx's {agent: {item: value}} dict) with an optional arrival
    ``order`` (default: item order). ``info`` is checked against the instance first
    (``validate=False`` skips that, e.g. to feed deliberately wrong predictions). The result's
    ``to_dict()`` is {agent: [items]} in the input's names.

    >>> import icml26_online_fair as of
    >>> values = {"Ann": {"x": 5, "y": 1, "z": 3}, "Bob": {"x": 4, "y": 4, "z": 1}}
    >>> of.divide_online(of.GreedyPolicy(), valuations=values).to_dict()
    {'Ann': ['x', 'z'], 'Bob': ['y']}
    """
    if (instance is None) == (valuations is None):
        raise TypeError("pass exactly one of instance= and valuations=")
    if valuations is not None:
        instance = OnlineInstance(valuations, order)
    elif not isinstance(instance, OnlineInstance):
        if all(hasattr(instance, a) for a in ("agents", "items", "agent_item_value")):
            instance = OnlineInstance(instance, order)  # a fairpyx Instance
        else:
            raise TypeError(
                f"instance must be an OnlineInstance or a fairpyx Instance, got "
                f"{type(instance).__name__} (or pass valuations=)"
            )
    elif order is not None:
        instance = instance.with_order(order)
    if not isinstance(policy, OnlinePolicy):
        raise TypeError(
            f"policy must implement reset(info) and allocate(t, values), got {policy!r}"
        )
    if validate and info is not None:
        info.validate(instance)
    policy.reset(info)
    owner = np.full(instance.m, -1, dtype=np.int64)
    history = []
    for t, g, vec in instance.stream():
        a = policy.allocate(t, vec.copy())
        if not (isinstance(a, (int, np.integer)) and 0 <= a < instance.n):
            raise RuntimeError(
                f"policy returned {a!r} for good {g}; expected an agent in [0, {instance.n})"
            )
        owner[g] = int(a)
        history.append((t, g, int(a)))
    return Allocation(owner, instance.n, tuple(history), instance.agents, instance.items)


def _vector(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.ndim != 1:
        raise ValueError(
            f"values must be the arriving good's 1-D value vector (n,), got shape {v.shape}"
        )
    check_values(v[None, :], "values")
    return v


def _totals_of(info, who: str) -> tuple[np.ndarray, float]:
    if isinstance(info, NormalizationInfo):
        return info.totals, info.rel_error
    if isinstance(info, FrequencyPrediction):  # a multiset determines the totals
        return info.values.sum(1), info.rel_error
    raise TypeError(f"{who} needs info=NormalizationInfo (or a FrequencyPrediction), got {info!r}")


def _argmax_among(scores: np.ndarray, mask: np.ndarray) -> int:
    return int(np.argmax(np.where(mask, scores, -np.inf)))


# ----------------------------------------------------------------------------- no information
class GreedyPolicy:
    """Give each good to the agent who values it most (utilitarian greedy; ties: lowest index)."""

    def reset(self, info=None) -> None:
        pass

    def allocate(self, t: int, values) -> int:
        return int(np.argmax(_vector(values)))


class RoundRobinPolicy:
    """Good t goes to agent t mod n, ignoring values."""

    def reset(self, info=None) -> None:
        pass

    def allocate(self, t: int, values) -> int:
        return t % _vector(values).size


class RandomPolicy:
    """Each good to a uniformly random agent (seeded; ``reset`` restarts the stream)."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self, info=None) -> None:
        self.rng = np.random.default_rng(self.seed)

    def allocate(self, t: int, values) -> int:
        return int(self.rng.integers(_vector(values).size))


# ----------------------------------------------------------------------------- normalization
class _NormalizedBase:
    def __init__(self):
        self.totals = None
        self.eps = 0.0
        self.have = None  # (n,) normalised value of each agent's bundle so far

    def _start(self, info, who):
        totals, self.eps = _totals_of(info, who)
        self.totals = np.asarray(totals, dtype=float)
        self.have = np.zeros(self.totals.size)

    def _normalised(self, values) -> np.ndarray:
        v = _vector(values)
        if self.totals is None:
            raise RuntimeError("call reset(info) before allocate")
        if v.size != self.totals.size:
            raise ValueError(
                f"values has {v.size} entries but info describes {self.totals.size} agents"
            )
        live = self.totals > 0
        return np.where(live, v / np.where(live, self.totals, 1.0), 0.0)  # u_i(g) = v_i(g) / T̂_i


class ThresholdGreedy(_NormalizedBase):
    """[recon] The research notes' candidate: with u_i = v_i / T_i, give g to the agent with the
    largest u_i(g) among those with u_i(A_i) < 1/n (anyone when all are satisfied).

    Guarantee (exact totals): PROP1 for n = 2, but only 1/(n-1)-PROP1 for n >= 3 (whether
    that is tight is not shown; the worst instance found reaches 0.9). Proof: if agent i ends
    below 1/n, she was unsatisfied throughout, so every good went to an unsatisfied j with
    u_j(g) >= u_i(g); j's bundle without its last good is < 1/n to j, hence
    u_i(A_j) < 1/n + x with x = max_{g∉A_i} u_i(g). Summing over j != i,
    u_i(A_i) + (n-1) x > 1/n, i.e. u_i(A_i) + x > 1/(n(n-1)). For n = 2 this is PROP1; for
    n >= 3 the n-1 "last goods" add up and the adversary search finds PROP1 violations.
    """

    def reset(self, info=None) -> None:
        self._start(info, "ThresholdGreedy")

    def allocate(self, t: int, values) -> int:
        u = self._normalised(values)
        n = u.size
        open_ = (self.have < (1.0 - RTOL) / n) & (self.totals > 0)  # u is normalised: relative
        a = _argmax_among(u, open_) if open_.any() else int(np.argmax(u))
        self.have[a] += u[a]
        return a

    @staticmethod
    def guarantee(n: int, eps: float = 0.0) -> tuple[str, float]:
        if eps > 0:
            return "prop1", 0.0  # not analysed under noise
        return "prop1", 1.0 if n <= 2 else 1.0 / (n - 1)


class CappedGreedy(_NormalizedBase):
    """Capped greedy (derived here; the PROP1 algorithm for normalized valuations).

    With u_i = v_i / T̂_i and cap c = 1 / (n (1 + s)), an agent is *eligible* for g when
    u_i(A_i) + u_i(g) <= c. Give g to the eligible agent with the largest u_i(g); if nobody is
    eligible, to the agent with the largest u_i(g). The slack s defaults to the declared error ε.

    Guarantee: if (1-ε) T_i <= T̂_i <= (1+ε) T_i then for every agent i
        v_i(A_i) + max_{g∉A_i} v_i(g) >= α T_i / n,
        α = min(1, (1-ε)/(1+s), n - (n-1)(1+ε)/(1+s));   s = ε gives α = (1-ε)/(1+ε),
    i.e. exact PROP1 with exact totals, for every n.
    Proof: suppose i violates it. Then u_i(A_i) + u_i(g) < α T_i/(n T̂_i) <= c for every good g
    she did not get, so she was eligible whenever such a good arrived; hence every such good
    went to an eligible j with u_j(g) >= u_i(g), and no good ever overshot a cap. So
    u_i(A_j) <= u_j(A_j) <= c for every j != i and
        v_i(A_i) >= T_i - (n-1) c T̂_i >= T_i (1 - (n-1)(1+ε)/(n(1+s))) >= α T_i / n,
    a contradiction. (Threshold greedy fails for n >= 3 because its agents overshoot 1/n by their
    last good; the cap forbids the overshoot while anybody still needs the good.)
    """

    def __init__(self, slack: float | None = None):
        super().__init__()
        if slack is not None and not (0.0 <= slack < 1.0):
            raise ValueError(f"slack must be in [0, 1) or None, got {slack}")
        self.slack = slack

    def reset(self, info=None) -> None:
        self._start(info, "CappedGreedy")
        s = self.eps if self.slack is None else self.slack
        self.cap = 1.0 / (self.totals.size * (1.0 + s))

    def allocate(self, t: int, values) -> int:
        u = self._normalised(values)
        eligible = (self.have + u <= self.cap * (1.0 + RTOL)) & (self.totals > 0)
        a = _argmax_among(u, eligible) if eligible.any() else int(np.argmax(u))
        self.have[a] += u[a]
        return a

    @staticmethod
    def guarantee(n: int, eps: float = 0.0, slack: float | None = None) -> tuple[str, float]:
        """α-PROP1 guaranteed when the true error is ``eps`` and the policy uses ``slack``."""
        s = eps if slack is None else slack
        alpha = min(1.0, (1 - eps) / (1 + s), n - (n - 1) * (1 + eps) / (1 + s))
        return "prop1", max(0.0, alpha)


# ----------------------------------------------------------------------------- per-agent frequencies
class MMSThresholdGreedy:
    """Share-threshold greedy for *per-agent* frequency predictions (derived here).

    From agent i's predicted multiset compute a share ŝ_i = MMS_i(prediction) / (1 + s) (s = the
    slack, default the declared error ε; ``mms="lpt"`` uses the fast LPT lower bound, which is
    >= 3/4 MMS; ``mms="auto"`` tries the exact MILP for ``time_limit`` seconds per agent and
    falls back to LPT, recorded in ``used_lpt``). With capped normalised values c_i(g) = min(v_i(g), ŝ_i) / ŝ_i, give g to the
    agent with the largest c_i(g) among those with v_i(A_i) < ŝ_i / n (anyone if none).

    Guarantee: v_i(A_i) >= (1/n) (1-ε)/(1+ε) MMS_i for every i (1/2-MMS for n = 2 and exact
    predictions; with ``mms="lpt"`` multiply by 3/4).
    Proof (ε = 0): capping values at ŝ_i <= MMS_i keeps every bundle of i's MMS partition >= ŝ_i,
    so sum_g c_i(g) >= n. If i ends with v_i(A_i) < ŝ_i/n she was open throughout, so every good
    went to an open j with c_j(g) >= c_i(g); j's bundle before its last good is < 1/n to j and the
    last good counts <= 1, so c_i(A_j) <= c_j(A_j) < 1/n + 1. Then
    n <= sum_g c_i(g) < 1/n + (n-1)(1/n + 1) = n, a contradiction. Predictions off by (1±ε)
    change ŝ_i by the same factor, which the 1/(1+s) deflation absorbs. (The cap only changes
    tie-breaking: without it, removing the n-1 "last goods" from M leaves one of i's MMS bundles
    intact, which gives the same 1/n bound; a planted "no cap" mutant passes every test for
    that reason. Closing agents at ŝ_j/n, not ŝ_j, is what the bound needs, and is tested.)
    """

    def __init__(self, slack: float | None = None, mms: str = "auto", time_limit: float = 2.0):
        if slack is not None and not (0.0 <= slack < 1.0):
            raise ValueError(f"slack must be in [0, 1) or None, got {slack}")
        if mms not in ("exact", "lpt", "auto"):
            raise ValueError(f"mms must be 'exact', 'lpt' or 'auto', got {mms!r}")
        self.slack = slack
        self.mms = mms
        self.time_limit = time_limit
        self.share: np.ndarray | None = None
        self.used_lpt = False

    def _share(self, row: np.ndarray, n: int) -> float:
        if self.mms == "lpt":
            self.used_lpt = True
            return mms_lower_bound_lpt(row, n)
        try:
            return mms_value(row, n, time_limit=self.time_limit)
        except RuntimeError:
            if self.mms == "exact":
                raise
            self.used_lpt = True  # "auto": MILP too slow for this agent, use the 3/4 LPT bound
            return mms_lower_bound_lpt(row, n)

    def reset(self, info=None) -> None:
        if not isinstance(info, FrequencyPrediction):
            raise TypeError(f"MMSThresholdGreedy needs info=FrequencyPrediction, got {info!r}")
        n = info.n
        self.used_lpt = False
        s = info.rel_error if self.slack is None else self.slack
        self.share = np.array([self._share(row, n) for row in info.values]) / (1.0 + s)  # ŝ (n,)
        self.have = np.zeros(n)

    def allocate(self, t: int, values) -> int:
        v = _vector(values)
        if self.share is None:
            raise RuntimeError("call reset(info) before allocate")
        if v.size != self.share.size:
            raise ValueError(
                f"values has {v.size} entries but info describes {self.share.size} agents"
            )
        live = self.share > 0
        safe = np.where(live, self.share, 1.0)
        c = np.where(live, np.minimum(v, safe) / safe, 0.0)
        open_ = live & (self.have < self.share * (1.0 - RTOL) / v.size)  # relative to the share
        a = _argmax_among(c, open_) if open_.any() else int(np.argmax(v / safe))
        self.have[a] += v[a]
        return a

    def guarantee(self, n: int, eps: float = 0.0) -> tuple[str, float]:
        s = eps if self.slack is None else self.slack
        alpha = (1.0 / n) * min(1.0, (1 - eps) / (1 + s)) if s >= eps else 0.0
        return "mms", alpha * (0.75 if (self.mms == "lpt" or self.used_lpt) else 1.0)


# ----------------------------------------------------------------------------- joint frequencies
def _rel_distance(v: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """d_k = max_i |p̂_ik - v_i| / v_i (0/0 = 0, x/0 = inf): within the ε band iff d_k <= ε."""
    diff = np.abs(pred - v[:, None])  # (n, K)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(close(pred, v[:, None], v[:, None]), 0.0, diff / v[:, None])
    rel = np.where(np.isnan(rel), np.inf, rel)
    return rel.max(0)


def predictions_separated(pred_values, eps: float) -> bool:
    """For predictions with one vector per good type (copies of a type predicted alike): true
    when any two *distinct* predicted vectors p̂, q̂ differ in some coordinate by a factor
    outside [(1-ε)/(1+ε), (1+ε)/(1-ε)] (or one is 0 where the other is not). Then an arriving
    good is within ε of predicted vectors of a single value only, so band matching never errs."""
    p = check_values(pred_values, "pred_values")
    lo, hi = (1 - eps) / (1 + eps), (1 + eps) / (1 - eps)
    uniq = np.unique(p.T, axis=0)  # (K, n)
    for a in range(len(uniq)):
        for b in range(a + 1, len(uniq)):
            x, y = uniq[a], uniq[b]
            zero_mismatch = np.any((x == 0) != (y == 0))
            both = (x > 0) & (y > 0)
            r = y[both] / x[both]
            if not zero_mismatch and np.all((r >= lo * (1 - RTOL)) & (r <= hi * (1 + RTOL))):
                return False
    return True


class PlanAndMatch:
    """Frequency-prediction meta-algorithm for *joint* predictions (paper §5, reconstructed).

    reset: plan = offline(p̂) on the predicted goods (columns of the prediction).
    allocate: match the arriving good g to the unused predicted good k minimising
        d_k = max_i |p̂_i(k) - v_i(g)| / v_i(g)   (relative ℓ∞; absolute ℓ∞ if none is finite)
    and give g to plan[k].

    Guarantee. Exact predictions: an arriving good is matched to an identical predicted vector,
    so the final allocation gives each agent exactly her planned multiset of value vectors: it is
    the offline allocation up to swapping identical goods, and *every* guarantee of ``offline``
    transfers (EF1, α-MMS, ...). Noisy predictions (1-ε) v <= p̂ <= (1+ε) v that are separated
    (``predictions_separated``): the invariant "unused predictions = partners of the goods still
    to come" holds, so each agent's bundle is her planned bundle up to a (1±ε) factor per good and
    an offline α-MMS / α-PROP / α-EF1 guarantee becomes α (1-ε)/(1+ε). In general the bound is
    certified after the fact: with d = ``max_distance`` (the worst realised match),
    v_i(A_i) >= p̂_i(Â_i)/(1+d) >= α MMS_i(p̂)/(1+d) >= α (1-ε)/(1+d) MMS_i, and d <= ε whenever
    every good was matched inside its band (always when true types are more than a factor
    (1+ε)/(1-ε) apart, or for separated per-type predictions); unmatched-in-band goods can chain
    errors, which the benchmark reports empirically.
    """

    def __init__(self, offline: Callable[[np.ndarray], np.ndarray]):
        if not callable(offline):
            raise TypeError(
                f"offline must be a callable values (n, m) -> owner (m,), got {offline!r}"
            )
        self.offline = offline
        self.plan: np.ndarray | None = None

    def reset(self, info=None) -> None:
        if not isinstance(info, FrequencyPrediction) or info.kind != "joint":
            raise TypeError(f"PlanAndMatch needs a joint FrequencyPrediction, got {info!r}")
        self.pred = info.values  # (n, K)
        plan = np.asarray(self.offline(np.array(info.values)))
        if plan.shape != (info.m,) or plan.min(initial=0) < 0 or plan.max(initial=0) >= info.n:
            raise ValueError(f"offline algorithm returned an invalid owner vector {plan!r}")
        self.plan = plan.astype(np.int64)
        self.unused = np.ones(info.m, dtype=bool)
        self.matched: list[int] = []  # predicted good used at each step
        self.distances: list[float] = []  # its relative distance d_k to the arriving good

    @property
    def max_distance(self) -> float:
        """Largest realised relative distance d of a match so far (0 with exact predictions)."""
        return max(self.distances, default=0.0)

    def allocate(self, t: int, values) -> int:
        v = _vector(values)
        if self.plan is None:
            raise RuntimeError("call reset(info) before allocate")
        if v.size != self.pred.shape[0]:
            raise ValueError(
                f"values has {v.size} entries but the prediction has {self.pred.shape[0]} agents"
            )
        free = np.flatnonzero(self.unused)
        if free.size == 0:
            raise RuntimeError("more goods arrived than the frequency prediction contains")
        d = _rel_distance(v, self.pred[:, free])
        if not np.isfinite(d).any():
            d = np.abs(self.pred[:, free] - v[:, None]).max(0)
        j = int(np.argmin(d))
        k = int(free[j])
        self.unused[k] = False
        self.matched.append(k)
        self.distances.append(float(_rel_distance(v, self.pred[:, [k]])[0]))
        return int(self.plan[k])
