"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end at tiny horizons.

Skipped in an installed wheel (benchmarks/ ships in no wheel).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(120)
def test_smoke_writes_a_linted_json(tmp_path):
    paper = _load(BENCH / "paper.py", "bilateral_trade_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"} <= set(doc)
    assert doc["recipe"] == "bilateral-trade" and doc["smoke"] is True
    assert doc["config"]["T"] == [256, 512, 1024]
    res = doc["results"]
    assert set(res) == set(paper.SMOKE["envs"])
    comps = {c["name"]: c for c in doc["evidence"]["comparisons"]}
    for env, r in res.items():
        assert r["opt_gbb"] >= r["opt_wbb"] - 1e-12  # GBB relaxes WBB
        runs = r["runs"]["paper"]
        assert len(runs) == 3 and [row["T"] for row in runs[0]] == [256, 512, 1024]
        # the slope is the least-squares fit of log max(R, 1) on log T, per seed
        for rows, s in zip(runs, r["slope"]["paper"]):
            x = np.log([row["T"] for row in rows])
            y = np.log(np.maximum([row["regret"] for row in rows], 1.0))
            assert s == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-9)
        c = comps[f"{env}: regret slope, GBB (paper) - WBB"]
        want = np.asarray(r["slope"]["paper"]) - np.asarray(r["slope"]["wbb"])
        assert c["n"] == 3 and c["diff"] == pytest.approx(float(want.mean()), rel=1e-9)
        assert c["higher_is_better"] is False
        assert r["gbb_held"]["wbb"] == 1.0  # a one-price learner never loses money
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_environment_from_a_local_json(tmp_path):
    paper = _load(BENCH / "paper.py", "bilateral_trade_paper")
    f = tmp_path / "u.json"
    f.write_text(json.dumps({"rects": [[0, 1, 0, 1]], "weights": [1.0]}))
    env, ref = paper.load_env(str(f)), paper.load_env("independent_uniform")
    p, q = np.array([0.3, 0.5]), np.array([0.6, 0.5])
    assert np.allclose(env.expectations(p, q)[0], ref.expectations(p, q)[0])
    with pytest.raises(SystemExit, match="unknown environment"):
        paper.load_env("nope")


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "bilateral_trade_paper")
    P = paper.PAPER
    assert P["rate"] == 0.75 and P["c_K"] == 1.0 and P["c_N"] == 1.0 and P["delta"] == 0.05
    assert P["beta"] == "paper" and P["phase1"] == "exp3" and P["guard"] is False
    assert P["log2_T"] == list(range(14, 21)) and P["seeds"] == 32 and P["opt_grid"] == 1025
    a = paper.build_parser().parse_args([])
    assert a.model == "paper" and a.dataset == P["envs"] and a.log2_T == P["log2_T"]
    assert a.delta == P["delta"] and a.c_K == P["c_K"] and a.seeds == P["seeds"]
    pol = paper.learner("paper", {"c_K": a.c_K, "c_N": a.c_N, "delta": a.delta})
    assert (pol.beta, pol.phase1, pol.guard, pol.delta) == ("paper", "exp3", False, 0.05)


def test_help_imports_no_heavy_module():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        "try: runpy.run_path({!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('numpy','icml26_bilateral_trade') if m in sys.modules])"
    ).format(str(BENCH / "paper.py"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
