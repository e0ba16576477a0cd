"""icml26_kernels.evidence: the one statistics module the benchmarks use.

Reference values are Student t and normal quantiles from published tables (and scipy, when it
is installed, over a grid); the interval, MDE and Wilson formulas are checked against their
closed forms written out here, not against the module's own helpers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from icml26_kernels import evidence as ev

# t_{p, df} from standard tables (10 significant digits)
T_TABLE = [
    (0.975, 1, 12.70620474),
    (0.975, 2, 4.302652730),
    (0.975, 4, 2.776445105),
    (0.975, 9, 2.262157163),
    (0.975, 29, 2.045229642),
    (0.975, 30, 2.042272456),
    (0.975, 31, 2.039513446),  # beyond the df <= 30 tables the benchmarks used to carry
    (0.975, 120, 1.979930405),
    (0.8, 9, 0.8834038597),
    (0.995, 5, 4.032142984),
]


@pytest.mark.parametrize(("p", "df", "want"), T_TABLE)
def test_t_quantile_matches_published_tables(p: float, df: int, want: float) -> None:
    assert ev.t_quantile(p, df) == pytest.approx(want, rel=1e-8)
    assert ev.t_quantile(1 - p, df) == pytest.approx(-want, rel=1e-8)


def test_t_quantile_matches_scipy_over_a_grid() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 7, 15, 40, 200, 5000):
        for p in (0.55, 0.8, 0.9, 0.975, 0.995, 0.9995):
            assert ev.t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9)


def test_t_quantile_tends_to_the_normal_not_to_a_fallback() -> None:
    # large df: the t quantile approaches 1.959964 from above, never jumps to it
    qs = [ev.t_quantile(0.975, df) for df in (30, 31, 60, 1000, 10**6)]
    assert all(a > b for a, b in itertools.pairwise(qs))
    assert qs[-1] == pytest.approx(1.959963985, rel=2e-6)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.975, 0), (0.975, float("nan"))])
def test_t_quantile_rejects_bad_input(p: float, df: float) -> None:
    with pytest.raises(ValueError, match="p must|df must"):
        ev.t_quantile(p, df)


def test_t_interval_is_mean_plus_minus_t_s_over_root_n() -> None:
    d = [1.0, 2.0, 4.0, 0.5, 3.5]
    m, lo, hi = ev.t_interval(d)
    s = float(np.std(d, ddof=1))
    half = 2.776445105 * s / math.sqrt(5)
    assert m == pytest.approx(2.2)
    assert (lo, hi) == (pytest.approx(2.2 - half, rel=1e-8), pytest.approx(2.2 + half, rel=1e-8))


def test_t_interval_covers_at_its_level() -> None:
    # 95% coverage over 4000 simulated 5-seed experiments (binomial SD 0.34 pts)
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(4000):
        _, lo, hi = ev.t_interval(rng.normal(0.3, 1.0, size=5))
        hits += lo <= 0.3 <= hi
    assert 0.94 <= hits / 4000 <= 0.96


def test_clustered_interval_counts_clusters_not_units() -> None:
    # 3 seeds x 4 instances: the instance effect recurs in every seed, so n is 4, not 12
    inst = np.array([0.0, 1.0, 2.0, 3.0])
    values = np.concatenate([inst + 0.01 * s for s in range(3)])
    clusters = [i for _ in range(3) for i in range(4)]
    m, lo, hi = ev.clustered_interval(values, clusters)
    means = [i + 0.01 for i in range(4)]
    half = 3.182446305 * float(np.std(means, ddof=1)) / 2.0
    assert (m, lo, hi) == (
        pytest.approx(1.51),
        pytest.approx(1.51 - half, rel=1e-8),
        pytest.approx(1.51 + half, rel=1e-8),
    )
    naive = ev.t_interval(values)
    assert naive[2] - naive[1] < hi - lo  # treating 12 units as independent is too narrow


def test_mde_and_seeds_needed() -> None:
    # MDE = (t_{.975,n-1} + t_{.8,n-1}) s / sqrt(n); at n=10: (2.262157 + 0.883402) / sqrt(10)
    assert ev.mde(1.0, 10) == pytest.approx((2.262157163 + 0.8834038597) / math.sqrt(10), 1e-8)
    # rcfcl's pilot: paired SD 10.4 pts against a 3-pt target
    n = ev.seeds_needed(10.4, 3.0)
    assert ev.mde(10.4, n) <= 3.0 < ev.mde(10.4, n - 1)
    assert 90 <= n <= 100
    assert ev.seeds_needed(1.0, -0.5) == ev.seeds_needed(1.0, 0.5)
    with pytest.raises(ValueError, match="target"):
        ev.seeds_needed(1.0, 0.0)
    with pytest.raises(ValueError, match="n"):
        ev.mde(1.0, 1)


def test_wilson_closed_form() -> None:
    z = 1.959963984540054
    k, n = 3, 10
    p = k / n
    centre = (p + z * z / 20) / (1 + z * z / 10)
    half = z * math.sqrt(p * (1 - p) / 10 + z * z / 400) / (1 + z * z / 10)
    got = ev.wilson(k, n)
    assert got == (pytest.approx(0.3), pytest.approx(centre - half), pytest.approx(centre + half))
    assert ev.wilson(0, 20)[1] == 0.0 and ev.wilson(20, 20)[2] == 1.0
    with pytest.raises(ValueError, match="wilson"):
        ev.wilson(5, 3)


def test_comparison_records_the_evidence_and_resolves_honestly() -> None:
    room = ev.headroom(1.0, 0.985, "metric maximum 1.0 minus the best baseline")
    c = ev.comparison(
        "onepo_vs_sft_grpo",
        "held-out accuracy, OnePO - SFT->GRPO",
        [0.02, 0.03, 0.01, 0.025],
        target=0.027,
        headroom=room,
    )
    assert c["n"] == 4 and c["ci95"][0] > 0
    assert c["headroom"]["value"] == pytest.approx(0.015)
    # the CI excludes 0, but the paper's +0.027 cannot fit in 0.015 of headroom
    assert c["target_fits_headroom"] is False and c["resolved"] is False
    null = ev.comparison("x", "s", [0.1, -0.1, 0.05], headroom_note="speed ratio: no ceiling")
    assert null["resolved"] is False and null["target"] is None
    with pytest.raises(ValueError, match="headroom"):
        ev.comparison("x", "s", [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN"):
        ev.comparison("x", "s", [0.1, float("nan")], headroom_note="n/a")


def test_tuned_picks_the_best_and_rejects_mismatch() -> None:
    t = ev.tuned("erm", "lr", [1e-3, 1e-2, 1e-1], [0.5, 0.7, 0.6], objective="val acc")
    assert t["chosen"] == 1e-2 and t["hard_bound"] is None
    t = ev.tuned("x", "w", [1, 2], [3.0, 1.0], objective="val loss", higher_is_better=False)
    assert t["chosen"] == 2
    with pytest.raises(ValueError, match="must match"):
        ev.tuned("x", "w", [1, 2], [3.0], objective="o")


def test_pin_threads_sets_every_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import sys

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    # pin to the count torch already uses, so the rest of the session runs as before
    torch = sys.modules.get("torch")
    n = torch.get_num_threads() if torch is not None else 1
    got = ev.pin_threads(n)
    assert all(os.environ[v] == str(n) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"))
    assert got["threads"] == n
    if torch is not None:
        assert got["torch"] == n and torch.get_num_threads() == n
    with pytest.raises(ValueError, match="pin_threads"):
        ev.pin_threads(0)
