"""The committed results row says what its stored run measured (issue 61)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
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


def test_row_comparisons_are_the_stored_per_molecule_cosines():
    row, quick = _load("reproduce_row.json"), _load("reproduce_quick.json")
    assert row["evidence"] == quick["evidence"]
    tn = np.asarray(quick["table"]["TN-SHAP-G"]["50"]["per_molecule_cosine"])
    comps = {c["name"]: c for c in row["evidence"]["comparisons"]}
    level = comps["TN-SHAP-G - 0.99 at 50 queries"]
    assert level["per_unit"] == pytest.approx((tn - 0.99).tolist())
    assert row["ours"] == pytest.approx(tn.mean(), abs=5e-5)
    for c in comps.values():
        lo, hi = c["ci95"]
        assert f"{c['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]" in row["claim"]
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=5e-3)


def test_resummarising_the_stored_run_reproduces_the_row():
    pytest.importorskip("icml26_kernels.evidence")
    if not (BENCH / "reproduce.py").is_file():
        pytest.skip("needs the source checkout (benchmarks/)")
    spec = importlib.util.spec_from_file_location("tnshap_reproduce", BENCH / "reproduce.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fresh = mod.summarise(_load("reproduce_quick.json"))["summary"]
    row = _load("reproduce_row.json")
    for key in ("claim", "ours", "baseline", "ratio", "evidence"):
        assert _same(fresh[key], row[key]), key
