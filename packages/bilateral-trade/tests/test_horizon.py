"""Issue 63 item 3: benchmarks/horizon.py, local log-log regret slopes per octave, paired per seed.

Skipped in an installed wheel (benchmarks/ ships in no wheel).
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(
    not (BENCH / "horizon.py").is_file(), reason="benchmarks not shipped"
)
REL = 64 * np.finfo(float).eps  # a few roundings of float64 logs and differences


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _octave_slopes(Ts, reg):
    """Independent transcription: per seed, log2 of the regret ratio over one octave (T doubles)."""
    out = []
    for j in range(len(Ts) - 1):
        assert Ts[j + 1] == 2 * Ts[j]
        out.append([math.log2(max(b, 1.0) / max(a, 1.0)) for a, b in zip(reg[j], reg[j + 1])])
    return out


def _check_doc(doc, hz):
    from icml26_kernels import evidence as ev

    Ts, seeds = doc["T"], doc["seeds"]
    for n in ("paper", "wbb"):
        r = doc[n]
        reg = r["regret"]
        assert np.shape(reg) == (len(Ts), len(seeds))
        want = _octave_slopes(Ts, reg)
        np.testing.assert_allclose(r["local_slopes"], want, rtol=REL, atol=REL)
        for row, ci in zip(want, r["local_slope_ci"]):
            np.testing.assert_allclose(ci, ev.t_interval(row), rtol=REL, atol=REL)
        Ta = np.asarray(Ts, dtype=float)[:, None]
        for row, ci in zip(np.asarray(reg) / Ta**0.75, r["R_over_T34"]):
            np.testing.assert_allclose(ci, ev.t_interval(row), rtol=REL, atol=REL)
        # settles_at: the first octave from which every later octave's CI contains 3/4
        ok = [lo <= 0.75 <= hi for _, lo, hi in r["local_slope_ci"]]
        first = next((j for j in range(len(ok)) if all(ok[j:])), None)
        assert r["settles_at"] == (None if first is None else Ts[first])
        ok = [lo <= 0.75 for _, lo, _ in r["local_slope_ci"]]
        first = next((j for j in range(len(ok)) if all(ok[j:])), None)
        assert r["bound_holds_from"] == (None if first is None else Ts[first])
        for T, f, row in zip(Ts, r["phase1_rounds_over_T34"], r["phase"]):
            assert f * T**0.75 <= T * (1 + REL)  # phase 1 lasts at most the horizon ...
            if all(ph == 1 for ph in row):  # ... and all of it for a run that never leaves it
                assert f * T**0.75 == pytest.approx(T, rel=REL)
        assert r["reached_phase3"] == [float(np.mean([p == 3 for p in row])) for row in r["phase"]]
    comps = {c["name"].split(", ")[-1]: c for c in doc["evidence"]["comparisons"]}
    last_p = np.asarray(_octave_slopes(Ts, doc["paper"]["regret"])[-1])
    last_w = np.asarray(_octave_slopes(Ts, doc["wbb"]["regret"])[-1])
    c = comps["paper's algorithm - FixedPriceWBB"]  # paired by seed, in seed order
    np.testing.assert_allclose(c["per_unit"], last_p - last_w, rtol=REL, atol=REL)
    assert c["n"] == len(seeds) and c["target"] == -0.25 and c["higher_is_better"] is False
    c = comps["paper's algorithm - 3/4"]
    np.testing.assert_allclose(c["per_unit"], last_p - 0.75, rtol=REL, atol=REL)
    settled = doc["paper"]["settles_at"]
    assert ("does not settle" in doc["claim"]) == (settled is None)
    if LINT.is_file():
        lint = _load(LINT, "evidence_lint")
        assert lint.check_detailed(doc, "horizon.json") == []


def test_local_slopes_are_per_seed_exponents_in_natural_units():
    hz = _load(BENCH / "horizon.py", "bt_horizon")
    Ts = [2**k for k in range(4, 21, 4)]
    # seed 0: 1000 T^0.5, seed 1: T^1.0 -- their order swaps over the grid, so a pairing that
    # sorts or shuffles seeds within a horizon gives other exponents
    reg = [[1000 * T**0.5, T**1.0] for T in Ts]
    got = np.asarray(hz.local_slopes(Ts, reg))
    np.testing.assert_allclose(got, [[0.5, 1.0]] * (len(Ts) - 1), rtol=REL)
    # regret below 1 is floored at 1 (log 0 at small T)
    assert hz.local_slopes([2, 4], [[-3.0], [4.0]]) == [[pytest.approx(2.0, rel=REL)]]


def test_settles_at_needs_every_later_octave_inside():
    hz = _load(BENCH / "horizon.py", "bt_horizon")
    Ts = [1, 2, 4, 8, 16]
    cis = [(0.8, 0.9), (0.7, 0.8), (0.9, 1.0), (0.7, 0.8)]
    assert hz.settles_at(Ts, cis) == 8  # octave 1 holds 3/4, octave 2 does not: not settled there
    assert hz.settles_at(Ts, [(0.7, 0.8)] * 4) == 1
    assert hz.settles_at(Ts, [*cis[:3], (0.8, 0.9)]) is None
    below = [(0.8, 0.9), (0.6, 0.7), (0.7, 0.8), (0.6, 0.7)]  # under 3/4 is within the bound
    assert hz.settles_at(Ts, below) is None and hz.settles_at(Ts, below, upper_only=True) == 2


@pytest.mark.timeout(120)
def test_smoke_run_recomputes_from_its_per_seed_regrets(tmp_path):
    hz = _load(BENCH / "horizon.py", "bt_horizon")
    out = tmp_path / "h.json"
    assert hz.main(["--smoke", "--out", str(out), "--quiet", "--workers", "1"]) == 0
    doc = json.loads(out.read_text())
    assert doc["T"] == [256, 512, 1024, 2048] and doc["seeds"] == [0, 1, 2] and doc["smoke"]
    assert not out.with_name(out.name + ".partial.jsonl").exists()
    _check_doc(doc, hz)
    with pytest.raises(SystemExit, match="--seeds"):
        hz.main(["--smoke", "--seeds", "1", "--out", str(out), "--quiet"])


def test_committed_full_run():
    path = BENCH / "horizon.json"
    if not path.is_file():
        pytest.skip("no committed full run")
    hz = _load(BENCH / "horizon.py", "bt_horizon")
    doc = json.loads(path.read_text())
    assert doc["T"] == [2**k for k in range(12, 25)] and len(doc["seeds"]) >= 4
    assert doc["smoke"] is False
    _check_doc(doc, hz)
