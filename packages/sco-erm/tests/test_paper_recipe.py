"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end, offline and tiny.

No hub model: the instance is built from a certified code. ``--smoke`` runs m = 3, 4 with 12
trials (6 with SGD) and a 2-point GD curve and writes the JSON; the tests check its keys, that the
instance has the paper's d = factor x m, the paired evidence and the lint. Skipped in an installed
wheel.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")
KEYS = {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(120)
def test_smoke_writes_a_linted_json(tmp_path):
    paper = _load(BENCH / "paper.py", "scoerm_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) >= KEYS and doc["recipe"] == "sco-erm" and doc["smoke"] is True
    rows = doc["results"]["feldman"]
    assert [r["m"] for r in rows] == [3, 4]
    for r in rows:
        assert r["d"] == 6 * r["m"] and r["N"] == 2 ** r["k"] and 4 * r["distance"] >= r["d"]
        assert r["n"] == 12 and len(r["erm_excess_paired"]) == len(r["sgd_excess_paired"]) == 6
        # every ERM found is Feldman's: excess 1/4 at an unseen codeword, else 0
        assert all(e == 0 or abs(e - 0.25) <= 1e-12 for e in r["erm_excess_paired"])
        assert all(0 <= s <= r["sgd_bound"] + 1e-12 for s in r["sgd_excess_paired"])
        assert 0 < r["p_exact"] < 1 and r["p_overfit_erm"] == r["hits"] / r["n"]
    gd = doc["results"]["gd_recon_control"]
    assert [g["m"] for g in gd] == [4] and len(gd[0]["gap_mean"]) == 2
    comps = {c["name"]: c for c in doc["evidence"]["comparisons"]}
    assert len(comps) == 5
    for r in rows:
        c = comps[f"m={r['m']}: worst ERM excess - one-pass SGD excess"]
        want = [e - s for e, s in zip(r["erm_excess_paired"], r["sgd_excess_paired"])]
        assert c["per_unit"] == pytest.approx(want, abs=1e-15)
        c = comps[f"m={r['m']}: P(an ERM with excess 1/4 exists) - 1/2"]
        assert c["diff"] == pytest.approx(r["p_overfit_erm"] - 0.5, abs=1e-15) and c["n"] == 12
    pooled = comps["all m: worst ERM excess - one-pass SGD excess"]
    assert pooled["n"] == 2 and pooled["clustered_by"] == "instance"
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_hits_count_the_samples_with_an_overfitting_erm():
    import icml26_sco_erm as sco
    import numpy as np

    paper = _load(BENCH / "paper.py", "scoerm_paper")
    args = paper.build_parser().parse_args(["--ms", "3", "--trials", "16", "--sgd-trials", "16"])
    (row,) = paper.experiment_a(args, lambda *a: None)
    assert row["hits"] == sum(e > 0 for e in row["erm_excess_paired"])
    assert 0 < row["hits"] < 16  # both outcomes occur at m = 3 (exact P = 0.656)
    # the same draws, counted directly from the instance
    inst, facts = paper.build_instance(3, 6)
    rng = np.random.default_rng([0, 3])
    direct = sum(inst.unseen(inst.sample(3, rng)).size > 0 for _ in range(16))
    assert row["hits"] == direct and facts["d"] == 18
    assert row["p_exact"] == pytest.approx(sco.overfit_erm_probability(3, 2 ** facts["k"]))


def test_paper_constants_and_defaults():
    import icml26_sco_erm as sco

    paper = _load(BENCH / "paper.py", "scoerm_paper")
    P = paper.PAPER
    assert P["dimension_factor"] == 6 and sco.paper_dimension(7) == 7 * P["dimension_factor"]
    assert (P["rel_distance"], P["p"], P["theta"]) == (0.25, 0.5, 0.5)
    assert sco.paper_lambda(4.0) == pytest.approx(4.0 ** P["lambda_exponent"])
    assert (P["claimed_probability"], P["feldman_excess"]) == (0.5, 0.25)
    assert P["ms"] == list(range(6, 16))
    a = paper.build_parser().parse_args([])
    assert (a.ms, a.dimension_factor, a.trials, a.sgd_trials, a.seeds) == (
        P["ms"],
        P["dimension_factor"],
        P["trials"],
        P["sgd_trials"],
        P["seeds"],
    )
    assert (a.gd_ms, a.gd_T, a.gd_points, a.gd_samples, a.gd_alpha) == (
        P["gd_ms"],
        P["gd_T"],
        P["gd_points"],
        P["gd_samples"],
        P["gd_alpha"],
    )


def test_help_imports_no_jax():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        f"try: runpy.run_path({str(BENCH / 'paper.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('jax','numpy','icml26_sco_erm') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
