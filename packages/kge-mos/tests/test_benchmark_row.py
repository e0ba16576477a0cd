"""The results row is the test-MRR comparison against linear at >= MoS's parameters (issue 61).

It is rebuilt from the stored per-seed values (``reproduce.py --row-from``): ours / baseline
are MoS's and linear-at-d''s test MRR over the cells with headroom (not training NLL, which
more parameters always buy), ratio = ours / baseline, every printed interval a comparison's 95%
CI from icml26_kernels.evidence. Skipped in an installed wheel (benchmarks ship in none).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(
    not (BENCH / "results_quick.json").is_file(), reason="benchmarks not shipped"
)
PROVENANCE = ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load(BENCH / "reproduce.py", "_kge_mos_reproduce")


@pytest.fixture(scope="module")
def stored():
    return json.loads((BENCH / "results_quick.json").read_text())


@pytest.fixture(scope="module")
def row():
    return json.loads((BENCH / "reproduce_row.json").read_text())


def test_committed_row_and_json_are_the_stored_run_resummarised(bench, stored, row):
    again = bench.resummarise(BENCH / "results_quick.json")
    assert json.loads(json.dumps(again["grid"])) == stored["grid"]
    rebuilt = json.loads(json.dumps(bench.summarise(again)))
    assert {k: v for k, v in rebuilt.items() if k not in PROVENANCE} == {
        k: v for k, v in row.items() if k not in PROVENANCE
    }
    assert stored["evidence"] == row["evidence"]


def test_ours_and_baseline_are_test_mrr_against_linear_at_equal_params(stored, row):
    cells = [r for r in stored["grid"] if r["headroom"] > 0.05]
    mos = np.mean([r["mos_test_mrr"] for r in cells])
    lin_eq = np.mean([r["linear_eq_test_mrr"] for r in cells])
    assert row["ours"] == pytest.approx(mos, abs=1e-4)
    assert row["baseline"] == pytest.approx(lin_eq, abs=1e-4)
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=1e-3)
    assert "test MRR" in row["claim"] and "ours/baseline = test MRR" in row["claim"]
    # the training NLL (the old row's numbers) is a secondary comparison, not the headline
    train = np.mean([r["mos_train_nll"] for r in cells])
    assert abs(row["ours"] - train) > 1


def test_cell_counts_in_the_claim_match_the_intervals(stored, row):
    from_json = [c for c in row["evidence"]["comparisons"] if "MoS vs linear_eq" in c["name"]]
    assert len(from_json) == 6
    up = sum(c["ci95"][0] > 0 for c in from_json)
    down = sum(c["ci95"][1] < 0 for c in from_json)
    assert f"per cell higher in {up}/6, lower in {down}/6" in row["claim"]
    # each cell's interval is the exact t-interval of its 5 per-seed differences
    t_interval = _load(
        LINT.parents[1] / "shared-kernels/src/icml26_kernels/evidence.py", "_ev_kge"
    ).t_interval
    for r, c in zip([r for r in stored["grid"] if r["headroom"] > 0.05], from_json):
        d = [
            m["test_mrr"] - b["test_mrr"]
            for m, b in zip(r["per_seed"]["mos"], r["per_seed"]["linear_eq"])
        ]
        assert c["ci95"] == pytest.approx(list(t_interval(d)[1:]))
        assert r["d_eq_test_mrr"] == pytest.approx(list(t_interval(d)))


def test_the_lint_passes_the_row_and_fails_the_old_numbers(row):
    lint = _load(LINT, "_evidence_lint_kge")
    assert lint.check_row(row, "row") == []
    bad = copy.deepcopy(row)
    bad["ours"], bad["baseline"] = 2.8286, 2.9438  # the old row: training NLL
    assert any("ratio" in p for p in lint.check_row(bad, "row"))


def test_a_better_mos_is_reported_as_higher(bench, stored):
    better = copy.deepcopy(stored)
    for r in better["grid"]:
        for s in r["per_seed"]["mos"]:
            s["test_mrr"] += 0.05 + 0.001 * s["train_nll"]
    row = bench.summarise(better)
    head = row["evidence"]["comparisons"][0]
    assert head["resolved"] and head["diff"] > 0
    assert "(MoS higher)" in row["claim"].split(";")[2]
