"""Paired-seed statistics shared by the benchmarks: the 95% t-interval and the MDE.

For n paired differences d with sample SD s, the interval is mean ± t_{n-1} s/√n and the
minimum detectable effect (80% power, 5% two-sided) is MDE = 2.8 s/√n.
"""

from __future__ import annotations

import math

import numpy as np

# two-sided 95% Student t quantiles t_{0.975, df}, df = 1..30
T_CRIT = dict(
    enumerate(
        [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042],
        start=1,
    )
)  # fmt: skip


def t_crit(df: int) -> float:
    if df not in T_CRIT:
        raise ValueError(f"no t quantile tabulated for df={df} (1..30)")
    return T_CRIT[df]


def interval(diffs: list[float]) -> list[float]:
    """[mean, low, high]: the 95% t-interval of the mean of paired differences."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2:
        return [float(d.mean()), float("nan"), float("nan")]
    h = t_crit(len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return [float(d.mean()), float(d.mean() - h), float(d.mean() + h)]


def mde_from_interval(iv: list[float], n: int) -> float:
    """2.8 s/√n, recovered from an interval's half-width t_{n-1} s/√n."""
    return 2.8 * (iv[2] - iv[0]) / t_crit(n - 1)
