"""Paired statistics and the evidence schema every benchmark row is written in.

One implementation for every ``benchmarks/reproduce.py`` of the monorepo (benchmarks ship in no
wheel; a vendored method never needs this module). Standard library and numpy only: the Student t
quantiles are exact (the regularised incomplete beta function, inverted by bisection), so no
table runs out and nothing falls back to the normal 1.96.

Statistics, for n paired differences d_i = ours_i - baseline_i with mean d̄ and sample SD s:

- 95% t-interval: d̄ ± t_{0.975, n-1} s / √n
- minimum detectable effect (two-sided level α, power 1-β):
  MDE = (t_{1-α/2, n-1} + t_{1-β, n-1}) s / √n
- seeds needed for a target effect δ from a pilot's SD: the least n with MDE(n) ≤ |δ|
- Wilson score interval for a proportion k/n
- clustered interval: the t-interval over cluster means (df = G - 1), for units that share an
  instance (8 test instances recurring in every seed are 8 clusters, not 24 units)

The schema (``SCHEMA``), one ``evidence`` object per row JSON::

    {"schema": "icml26-evidence/1",
     "comparisons": [comparison(...), ...],   # one per claim the row prints
     "tuning": [tuned(...), ...]}              # one per tuned hyper-parameter of each arm

``tools/reproduce_table.py --check`` (in ``nox -s lint``) reads it and fails a row whose claim
prints an interval that is not a comparison's 95% CI, whose ``resolved`` is true while the CI
holds 0 or the paper's target exceeds the headroom, or whose tuned value sits on a grid edge
without a stated hard bound. CONTRIBUTING.md documents every key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "SCHEMA",
    "clustered_interval",
    "comparison",
    "evidence",
    "headroom",
    "mde",
    "paired_sd",
    "pin_threads",
    "seeds_needed",
    "t_interval",
    "t_quantile",
    "tuned",
    "wilson",
]

SCHEMA = "icml26-evidence/1"

# per-unit values: a list of floats or a 1-d array
Values = Sequence[float] | np.ndarray


# ------------------------------------------------------------------ Student t, exactly


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b})")


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    lbt += b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` > 0 degrees of freedom (exact to ~1e-12).

    ``t_quantile(0.975, 9)`` = 2.2621571628 (the 95% two-sided critical value at 10 seeds).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p must be in (0, 1), got {p!r}")
    if not (df > 0 and math.isfinite(df)):
        raise ValueError(f"t_quantile: df must be positive and finite, got {df!r}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
        if hi > 1e300:  # pragma: no cover - p within float eps of 1
            raise ValueError(f"t_quantile: p={p!r} too close to 1")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


# ------------------------------------------------------------------ intervals


def _as_1d(values: Any, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float).reshape(-1)
    if x.size and not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or inf ({x.tolist()})")
    return x


def paired_sd(diffs: Values) -> float:
    """Sample SD (ddof = 1) of paired differences; needs at least two."""
    d = _as_1d(diffs, "diffs")
    if d.size < 2:
        raise ValueError(f"diffs: a paired SD needs at least 2 differences, got {d.size}")
    return float(d.std(ddof=1))


def t_interval(values: Values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): mean ± t_{(1+level)/2, n-1} s/√n. Needs n ≥ 2."""
    x = _as_1d(values, "values")
    if x.size < 2:
        raise ValueError(f"values: an interval needs at least 2 values, got {x.size}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    m = float(x.mean())
    h = t_quantile(0.5 + level / 2.0, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - h, m + h


def clustered_interval(
    values: Values, clusters: Sequence[Any], level: float = 0.95
) -> tuple[float, float, float]:
    """(mean, low, high) over G cluster means, t with G - 1 df.

    Units that share a cluster (a test instance reused in every seed) are averaged first, so
    the interval's n is the number of independent clusters, not of units.
    """
    x = _as_1d(values, "values")
    keys = list(clusters)
    if len(keys) != x.size:
        raise ValueError(f"clusters: {len(keys)} labels for {x.size} values")
    groups: dict[Any, list[float]] = {}
    for k, v in zip(keys, x.tolist()):
        groups.setdefault(k, []).append(v)
    if len(groups) < 2:
        raise ValueError(f"clusters: need at least 2 clusters, got {len(groups)}")
    return t_interval([float(np.mean(g)) for g in groups.values()], level)


def mde(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable paired effect: (t_{1-α/2,n-1} + t_{power,n-1}) · sd / √n."""
    if n < 2:
        raise ValueError(f"n: the MDE needs at least 2 paired units, got {n}")
    if not (sd >= 0 and math.isfinite(sd)):
        raise ValueError(f"sd must be finite and >= 0, got {sd!r}")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r}, {power!r}")
    t = t_quantile(1.0 - alpha / 2.0, n - 1) + t_quantile(power, n - 1)
    return t * sd / math.sqrt(n)


def seeds_needed(
    sd: float, target: float, alpha: float = 0.05, power: float = 0.8, n_max: int = 100_000
) -> int:
    """The least n ≥ 2 whose MDE at the pilot's paired SD is at most |target|."""
    if not (target != 0 and math.isfinite(target)):
        raise ValueError(f"target must be a non-zero finite effect, got {target!r}")
    if sd == 0:
        return 2
    lo, hi = 2, 2
    while mde(sd, hi, alpha, power) > abs(target):
        lo, hi = hi, hi * 2
        if hi > n_max:
            raise ValueError(f"target {target!r} needs more than n_max={n_max} units at sd={sd!r}")
    while lo < hi:  # least n in [lo, hi] with MDE(n) <= |target| (MDE decreases in n)
        mid = (lo + hi) // 2
        if mde(sd, mid, alpha, power) <= abs(target):
            hi = mid
        else:
            lo = mid + 1
    return lo


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float, float]:
    """(k/n, low, high): the Wilson score interval of a proportion."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"wilson: need 0 <= k <= n and n > 0, got k={k!r}, n={n!r}")
    z = _normal_quantile(0.5 + level / 2.0)
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return p, low, high


def _normal_quantile(p: float) -> float:
    """Standard normal quantile: the t quantile's limit, by bisection on erf."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ------------------------------------------------------------------ the schema


def headroom(ceiling: float, baseline: float, how: str) -> dict[str, Any]:
    """How far the compared metric can still move: ceiling - baseline, and how it was measured.

    ``how`` names the ceiling ("oracle with the true drift times", "metric maximum 1.0", ...).
    Record it before reading the comparison: a paper's effect larger than ``value`` cannot show.
    """
    if not how:
        raise ValueError("headroom: say how the ceiling was measured (how='...')")
    for name, v in (("ceiling", ceiling), ("baseline", baseline)):
        if not math.isfinite(float(v)):
            raise ValueError(f"headroom: {name} must be finite, got {v!r}")
    return {
        "ceiling": float(ceiling),
        "baseline": float(baseline),
        "value": float(ceiling) - float(baseline),
        "how": how,
    }


def comparison(
    name: str,
    statistic: str,
    diffs: Values | None = None,
    *,
    clusters: Sequence[Any] | None = None,
    interval: tuple[float, float, float] | None = None,
    n: int | None = None,
    sd: float | None = None,
    target: float | None = None,
    target_source: str | None = None,
    headroom: dict[str, Any] | None = None,
    headroom_note: str | None = None,
    unit: str = "",
    higher_is_better: bool = True,
    alpha: float = 0.05,
    power: float = 0.8,
) -> dict[str, Any]:
    """One paired comparison in the schema: the statistic the row prints and its evidence.

    Give ``diffs`` (per-seed paired differences ours - baseline, in the unit the row prints;
    with ``clusters`` for a clustered interval), or a precomputed ``interval`` = (mean, lo, hi)
    with ``n`` and ``sd`` (a bootstrap, say). ``target`` is the paper's effect in the same unit
    (None when the paper gives no number: say so in ``target_source``). ``resolved`` is True
    when the 95% CI excludes 0 and, where both are known, the target fits in the headroom.
    """
    if diffs is not None:
        d = _as_1d(diffs, f"{name}: diffs")
        if clusters is not None:
            iv = clustered_interval(d, clusters)
            groups = len(set(clusters))
            n_eff = groups
            means: dict[Any, list[float]] = {}
            for k, v in zip(clusters, d.tolist()):
                means.setdefault(k, []).append(v)
            sd_eff = float(np.std([np.mean(g) for g in means.values()], ddof=1))
        else:
            iv = t_interval(d)
            n_eff, sd_eff = int(d.size), float(d.std(ddof=1))
        per_unit = [float(v) for v in d.tolist()]
    else:
        if interval is None or n is None or sd is None:
            raise ValueError(f"{name}: give diffs, or interval with n and sd")
        iv = (float(interval[0]), float(interval[1]), float(interval[2]))
        n_eff, sd_eff, per_unit = int(n), float(sd), None
    if headroom is None and not headroom_note:
        raise ValueError(f"{name}: record the headroom, or say in headroom_note why there is none")
    mean, lo, hi = (float(v) for v in iv)
    m = mde(sd_eff, n_eff, alpha, power)
    fits = None
    if target is not None and headroom is not None:
        fits = abs(float(target)) <= abs(float(headroom["value"]))
    excludes_zero = lo > 0 or hi < 0
    out: dict[str, Any] = {
        "name": name,
        "statistic": statistic,
        "unit": unit,
        "higher_is_better": bool(higher_is_better),
        "diff": mean,
        "ci95": [lo, hi],
        "n": n_eff,
        "paired_sd": sd_eff,
        "mde": m,
        "target": None if target is None else float(target),
        "target_source": target_source,
        "powered": None if target is None else bool(m <= abs(float(target))),
        "seeds_for_target": (
            None if target is None or sd_eff == 0 else seeds_needed(sd_eff, float(target))
        ),
        "headroom": headroom,
        "headroom_note": headroom_note,
        "target_fits_headroom": fits,
        "resolved": bool(excludes_zero and fits is not False),
    }
    if clusters is not None:
        out["clustered_by"] = "instance"
    if per_unit is not None:
        out["per_unit"] = per_unit
    return out


def tuned(
    arm: str,
    param: str,
    grid: Sequence[Any],
    scores: Sequence[float],
    *,
    objective: str,
    higher_is_better: bool = True,
    chosen: Any = None,
    hard_bound: str | None = None,
) -> dict[str, Any]:
    """One tuned hyper-parameter of one arm: the grid, the validation score at every point.

    ``chosen`` defaults to the best score's grid point. A choice at either end of an ordered
    grid is an edge optimum: the lint fails it unless ``hard_bound`` states why the grid cannot
    extend past it (a window at the run's length, a probability at 1, a divergence measured).
    """
    g, s = list(grid), [float(v) for v in scores]
    if len(g) != len(s) or not g:
        raise ValueError(f"{arm}.{param}: grid ({len(g)}) and scores ({len(s)}) must match")
    if chosen is None:
        best = int(np.nanargmax(s) if higher_is_better else np.nanargmin(s))
        chosen = g[best]
    if chosen not in g:
        raise ValueError(f"{arm}.{param}: chosen {chosen!r} not in grid {g!r}")
    return {
        "arm": arm,
        "param": param,
        "grid": g,
        "scores": s,
        "chosen": chosen,
        "objective": objective,
        "higher_is_better": bool(higher_is_better),
        "hard_bound": hard_bound,
    }


def evidence(
    comparisons: Sequence[dict[str, Any]], tuning: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The ``evidence`` object of a row JSON."""
    if not comparisons:
        raise ValueError("evidence: at least one comparison")
    return {"schema": SCHEMA, "comparisons": list(comparisons), "tuning": list(tuning)}


# ------------------------------------------------------------------ reproducible threads


_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def pin_threads(n: int) -> dict[str, Any]:
    """Pin BLAS, OpenMP and torch to ``n`` threads, in this process and its workers.

    Sets the thread variables (inherited by subprocess workers; read by BLAS libraries loaded
    after this call), limits already-loaded BLAS/OpenMP pools through threadpoolctl when it is
    installed, and torch's intra-op pool when torch is imported. Returns what it pinned, for the
    JSON. A rerun matches only under the same pinning: rcfcl moved from 0.6966 (one BLAS thread)
    to 0.7012 (the default) with torch's threads alone pinned.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"pin_threads: n must be a positive int, got {n!r}")
    for var in _THREAD_VARS:
        os.environ[var] = str(n)
    pinned: dict[str, Any] = {"threads": n, "env": list(_THREAD_VARS), "threadpoolctl": False}
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
        pinned["threadpoolctl"] = True
    except ImportError:
        pass
    import sys

    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_num_threads(n)
        pinned["torch"] = n
    return pinned
