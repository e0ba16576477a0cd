"""The committed results row says what its stored run measured (issue 61)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


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


def _load(name: str) -> dict:
    path = BENCH / name
    if not path.is_file():
        pytest.skip("needs the source checkout (benchmarks/)")
    return json.loads(path.read_text())


def test_row_prints_the_evidence_and_every_tuned_lr():
    row, full, cfg = (
        _load("reproduce_row.json"),
        _load("reproduce.json"),
        _load("reproduce_config.json"),
    )
    assert row["evidence"] == full["evidence"]
    assert row["machine"] != "unrecorded (before machine provenance)"
    for c in row["evidence"]["comparisons"]:
        lo, hi = c["ci95"]
        assert f"{c['diff']:+.1f} [{lo:+.1f}, {hi:+.1f}] pts" in row["claim"]
    tuning = {t["arm"]: t for t in row["evidence"]["tuning"]}
    assert set(tuning) == set(full["lr"])
    for arm, t in tuning.items():
        assert t["grid"] == cfg["lr_grid"] and t["chosen"] == cfg["lr"][arm]
        assert t["scores"] == [cfg["tuning_val_accuracy"][arm][str(lr)] for lr in t["grid"]]
        assert t["chosen"] not in (min(t["grid"]), max(t["grid"]))  # interior optimum
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=5e-3)


def test_resummarising_the_stored_run_reproduces_the_row():
    pytest.importorskip("icml26_kernels.evidence")
    if not (BENCH / "reproduce.py").is_file():
        pytest.skip("needs the source checkout (benchmarks/)")
    spec = importlib.util.spec_from_file_location("normbt_reproduce", BENCH / "reproduce.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    stored = _load("reproduce.json")
    full = mod.resummarise(stored, _load("reproduce_config.json"))
    # the README's tables come from the summary: its intervals are the module's too
    assert _same(json.loads(json.dumps(full["summary"])), stored["summary"])
    fresh, row = mod.headline_row(full), _load("reproduce_row.json")
    for key in ("claim", "ours", "baseline", "ratio", "evidence"):
        assert _same(fresh[key], row[key]), key
