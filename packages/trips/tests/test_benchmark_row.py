"""The committed results row says what its stored run measured (issue 61)."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
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


def test_row_intervals_are_clustered_by_test_instance():
    """8 test instances recur in every seed: the interval is over 8 instance means, 7 df."""
    row, full = _load("reproduce_row.json"), _load("reproduce.json")
    assert row["evidence"] == full["evidence"]
    n_test = full["setup"]["n_test"]
    comps = {c["name"]: c for c in row["evidence"]["comparisons"]}
    c = comps["template - constant"]
    units = [
        a - b for a, b in zip(full["per_run"]["template"]["sw"], full["per_run"]["constant"]["sw"])
    ]
    means = [statistics.mean(units[i::n_test]) for i in range(n_test)]
    assert c["n"] == n_test and c["clustered_by"] == "instance"
    half = 2.364624251592785 * statistics.stdev(means) / math.sqrt(n_test)  # t_{0.975, 7}
    assert c["ci95"] == pytest.approx(
        [statistics.mean(means) - half, statistics.mean(means) + half]
    )
    for c in comps.values():
        lo, hi = c["ci95"]
        assert f"{c['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]" in row["claim"]
    assert "±" not in row["claim"]


def test_every_tuned_value_is_interior_and_scored_at_every_point():
    full = _load("reproduce.json")
    for t in full["evidence"]["tuning"]:
        assert len(t["scores"]) == len(t["grid"]) and all(math.isfinite(s) for s in t["scores"])
        if all(isinstance(g, float) for g in t["grid"]):
            assert t["chosen"] not in (min(t["grid"]), max(t["grid"])), (t["arm"], t["param"])
    arms = {t["arm"] for t in full["evidence"]["tuning"]}
    assert arms == {"constant", "flowdps (official baseline)", "template"}
    for arm, scores in full["tuning_scores"].items():
        assert min(scores.values()) == pytest.approx(
            min(
                t["scores"][t["grid"].index(t["chosen"])]
                for t in full["evidence"]["tuning"]
                if t["arm"] == arm
            )
        )


def test_resummarising_the_stored_run_reproduces_the_row():
    pytest.importorskip("icml26_kernels.evidence")
    if not (BENCH / "reproduce.py").is_file():
        pytest.skip("needs the source checkout (benchmarks/)")
    spec = importlib.util.spec_from_file_location("trips_reproduce", BENCH / "reproduce.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    full = mod.summarise(_load("reproduce.json"))
    fresh, row = mod.headline_row(full), _load("reproduce_row.json")
    for key in ("claim", "ours", "baseline", "ratio", "evidence"):
        assert _same(fresh[key], row[key]), key
