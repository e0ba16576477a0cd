"""The results row is rebuilt from the stored run and says what the JSON says (issue 61).

ours / baseline / ratio are one statistic (geometric-mean TTFT; ratio = ours / baseline), every
printed interval is a comparison's 95% CI from icml26_kernels.evidence, and the per-request
median and the batched throughput against ``inplace`` are in the evidence. Skipped in an
installed wheel (benchmarks ship in none).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(
    not (BENCH / "reproduce.json").is_file(), reason="benchmarks not shipped"
)
PROVENANCE = ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start")


def _same(a, b, rel: float = 1e-9) -> bool:
    """Equal JSON trees, floats to a relative 1e-9: a resummarised number is recomputed (numpy
    sums and logs), and another CPU or numpy build rounds its last bit differently."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
            return a == b
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    return a == b


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load(BENCH / "reproduce.py", "_lazyattention_reproduce")


@pytest.fixture(scope="module")
def stored():
    return json.loads((BENCH / "reproduce.json").read_text())


@pytest.fixture(scope="module")
def row():
    return json.loads((BENCH / "reproduce_row.json").read_text())


def test_committed_row_is_the_stored_run_resummarised(bench, stored, row):
    rebuilt = json.loads(json.dumps(bench.summarise(stored)))
    for k in PROVENANCE:
        rebuilt.pop(k, None)
    assert _same(rebuilt, {k: v for k, v in row.items() if k not in PROVENANCE})
    assert stored["evidence"] == row["evidence"]


def test_ours_baseline_ratio_are_one_statistic(stored, row):
    per = stored["all_hit"]["ttft_ms_per_request"]
    geo = {p: math.exp(np.mean(np.log(per[p]))) for p in ("lazy", "inplace")}
    assert row["ours"] == pytest.approx(geo["lazy"], abs=0.006)
    assert row["baseline"] == pytest.approx(geo["inplace"], abs=0.006)
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=1e-3)
    # the geometric mean of the paired per-request ratios is the ratio of geometric means
    paired = math.exp(np.mean(np.log(np.divide(per["lazy"], per["inplace"]))))
    assert row["ratio"] == pytest.approx(paired, rel=1e-3)


def test_intervals_are_exact_t_intervals_of_the_log_ratios(stored, row):
    from icml26_kernels.evidence import t_interval

    per = stored["all_hit"]["ttft_ms_per_request"]
    d = 100 * np.log(np.divide(per["inplace"], per["lazy"]))
    m, lo, hi = t_interval(d)
    c = row["evidence"]["comparisons"][0]
    assert c["n"] == 48 and c["diff"] == pytest.approx(m) and c["ci95"] == pytest.approx([lo, hi])
    assert f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]" in row["claim"]


def test_the_claim_names_the_throughput_and_the_per_request_median(row):
    names = [c["name"] for c in row["evidence"]["comparisons"]]
    assert any("median of per-request ratios" in n for n in names)
    bt = next(c for c in row["evidence"]["comparisons"] if n_is(c, "batched throughput"))
    assert bt["resolved"] is False and bt["ci95"][0] < 0 < bt["ci95"][1]
    assert "Batched throughput" in row["claim"] and "unresolved" in row["claim"]
    assert "1.40x" in row["claim"]


def n_is(c: dict, prefix: str) -> bool:
    return c["name"].startswith(prefix)


def test_the_lint_passes_the_row_and_fails_planted_errors(row):
    lint = _load(LINT, "_evidence_lint")
    assert lint.check_row(row, "row") == []
    bad = copy.deepcopy(row)
    bad["ratio"] = 1.097  # the old row: median per-request ratio next to median TTFTs
    assert any("ratio" in p for p in lint.check_row(bad, "row"))
    bad = copy.deepcopy(row)
    c = bad["evidence"]["comparisons"][0]
    se = (c["ci95"][1] - c["ci95"][0]) / 2 / 2.0117  # t_{0.975, 47}
    bad["claim"] += f"; {c['diff']:.1f} ± {se:.1f}"  # a standard error printed as if a CI
    assert any("half-width" in p for p in lint.check_row(bad, "row"))


def test_a_slower_lazy_is_reported_as_slower(bench, stored):
    slow = copy.deepcopy(stored)
    slow["all_hit"]["ttft_ms_per_request"]["lazy"] = [
        1.5 * t for t in stored["all_hit"]["ttft_ms_per_request"]["inplace"]
    ]
    r = bench.summarise(slow)
    assert r["ratio"] == pytest.approx(1.5, rel=1e-3)
    assert "(lazy slower)" in r["claim"]
