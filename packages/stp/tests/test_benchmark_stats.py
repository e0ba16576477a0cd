"""The benchmark's paired statistics (icml26_kernels.evidence) and its committed row (issue 61)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCH / "reproduce.py"


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


@pytest.fixture(scope="module")
def bench():
    if not SCRIPT.is_file():
        pytest.skip("benchmarks/ not present (installed package)")
    pytest.importorskip("icml26_kernels.evidence")
    threads = torch.get_num_threads()
    spec = importlib.util.spec_from_file_location("stp_reproduce", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.set_num_threads(threads)  # the script pins one thread at import
    return mod


def test_paired_difference_interval_and_mde(bench) -> None:
    xs = [0.0] * 10
    ys = [float(k) for k in range(1, 11)]  # differences 1..10: mean 5.5, SD sqrt(55/6)
    r = bench.paired(xs, ys)
    sd = math.sqrt(55 / 6)
    assert r["diff"] == pytest.approx(5.5)
    assert r["sd"] == pytest.approx(sd)
    # t_{0.975, 9} = 2.2622, t_{0.8, 9} = 0.8834 (exact quantiles, not a table or 2.8)
    assert r["ci"] == pytest.approx(2.262157 * sd / math.sqrt(10), rel=1e-6)
    assert r["mde"] == pytest.approx((2.262157 + 0.883430) * sd / math.sqrt(10), rel=1e-5)
    flipped = bench.paired(ys, xs)  # the sign follows ys - xs
    assert flipped["diff"] == pytest.approx(-5.5)


def test_the_row_is_the_stored_quick_run_resummarised(bench) -> None:
    quick = json.loads((BENCH / "reproduce_quick.json").read_text())
    row = json.loads((BENCH / "reproduce_row.json").read_text())
    fresh = bench.summarise(quick)
    for key in ("claim", "ours", "baseline", "ratio", "evidence"):
        assert _same(fresh[key], row[key]) and row[key] == quick[key], key


def test_the_claim_prints_the_95_interval() -> None:
    if not (BENCH / "reproduce_row.json").is_file():
        pytest.skip("needs the source checkout (benchmarks/)")
    row = json.loads((BENCH / "reproduce_row.json").read_text())
    c = next(
        c
        for c in row["evidence"]["comparisons"]
        if c["name"] == "lambda 0.02 - NTP at fraction 0.5"
    )
    lo, hi = c["ci95"]
    assert f"{c['diff']:+.1f} [{lo:+.1f}, {hi:+.1f}] pts" in row["claim"]
    assert "±" not in row["claim"] and "+-" not in str(row["ours"])
    assert ("unresolved" in row["claim"]) == (not c["resolved"])
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=5e-3)
