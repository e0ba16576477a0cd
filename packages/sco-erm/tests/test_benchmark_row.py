"""The results row's intervals are the evidence module's (issue 61), and it says what its JSON says.

Every Wilson interval the claim prints is a comparison in ``evidence`` (``interval=``, ``n=``,
``sd=`` the Bernoulli SD), computed by icml26_kernels.evidence with the exact normal quantile
(no hand-written 1.96); A's reference is the closed form (``headroom_note``), B's [recon]
control has the oracle arm as its measured ceiling. Skipped in an installed wheel.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(
    not (BENCH / "reproduce_quick.json").is_file(), reason="benchmarks not shipped"
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
    return _load(BENCH / "reproduce.py", "_sco_erm_reproduce")


@pytest.fixture(scope="module")
def row():
    return json.loads((BENCH / "reproduce_row.json").read_text())


@pytest.fixture(scope="module")
def stored(bench, row):
    """The run the row was rebuilt from: the full run (reproduce.json) when the claim names its
    samples per m, else the quick run (``nox -s reproduce`` writes the row from ``--quick``)."""
    full = f"{bench.FULL_DRAWS_A} samples per m" in row["claim"]
    name = "reproduce.json" if full else "reproduce_quick.json"
    if not full:
        assert f"{bench.QUICK_DRAWS_A} samples per m" in row["claim"], row["claim"]
    return json.loads((BENCH / name).read_text())


@pytest.fixture(scope="module")
def lint():
    return _load(ROOT / "tools" / "evidence_lint.py", "_evidence_lint_sco")


def test_committed_row_is_the_stored_run_summarised(bench, stored, row):
    rebuilt = json.loads(json.dumps(bench.summarise(stored)))
    strip = lambda r: {k: v for k, v in r.items() if k not in PROVENANCE}
    assert strip(rebuilt) == strip(row)
    assert stored["evidence"] == row["evidence"]


@pytest.mark.parametrize("name", ["reproduce_quick.json", "reproduce.json"])
def test_each_stored_run_carries_its_own_summary(bench, name):
    """Both committed runs (quick and full) say what summarise says of them (no stale summary)."""
    path = BENCH / name
    if not path.is_file():
        pytest.skip(f"{name} not committed")
    run = json.loads(path.read_text())
    summary = json.loads(json.dumps(bench.summarise(run)))
    assert run["evidence"] == summary.pop("evidence")
    assert run["summary"] == summary
    draws = bench.QUICK_DRAWS_A if run["quick"] else bench.FULL_DRAWS_A
    assert all(r["n"] == draws for r in run["feldman"])
    assert f"{draws} samples per m" in summary["claim"]


def test_wilson_intervals_are_the_modules(bench, stored, row):
    ev = _load(ROOT / "shared-kernels/src/icml26_kernels/evidence.py", "_ev_sco")
    comps = {c["name"]: c for c in row["evidence"]["comparisons"]}
    for r in stored["feldman"]:
        c = comps[f"A m={r['m']}: P(an ERM with excess 1/4 exists)"]
        p, lo, hi = ev.wilson(r["hits"], r["n"])
        assert (c["diff"], *c["ci95"]) == pytest.approx((p, lo, hi), abs=1e-12)
        assert c["n"] == r["n"] and c["paired_sd"] == pytest.approx(math.sqrt(p * (1 - p)))
        assert c["headroom"] is None and "closed form" in c["headroom_note"]
        assert c["closed_form_in_ci95"] == (lo <= r["p_exact"] <= hi)
        assert r["ci95"] == pytest.approx([lo, hi], abs=1e-12)  # the JSON's own rows agree
    pooled = next(c for c in row["evidence"]["comparisons"] if c["name"].startswith("B pooled"))
    n = sum(r["recon"]["n"] for r in stored["unique_erm"])
    assert pooled["n"] == n and pooled["ci95"] == pytest.approx(list(ev.wilson(0, n)[1:]))
    assert pooled["resolved"] is False and pooled["target"] == 0.5
    assert pooled["headroom"]["value"] > 0.5  # the oracle arm shows the certificate can fire


def test_the_claim_prints_the_evidence_and_the_lint_agrees(row, lint):
    assert lint.check_row(row, "row") == []
    assert lint.check_source(BENCH / "reproduce.py", "reproduce.py") == []
    assert "unresolved" in row["claim"]
    worst = min(
        (c for c in row["evidence"]["comparisons"] if c["name"].startswith("A ")),
        key=lambda c: c["diff"],
    )
    lo, hi = worst["ci95"]
    printed = f"[{lo:.3f}, {hi:.3f}]"
    assert printed in row["claim"]
    bad = copy.deepcopy(row)  # a hand-rolled interval with its upper bound rounded differently
    bad["claim"] = bad["claim"].replace(printed, f"[{lo:.3f}, {hi + 0.001:.3f}]")
    assert any("no comparison has that 95% CI" in p for p in lint.check_row(bad, "row"))


def test_a_hand_rolled_wilson_is_caught(tmp_path, lint):
    src = (BENCH / "reproduce.py").read_text()
    planted = src.replace("def wilson(k: int, n: int)", "def wilson(k: int, n: int, z=1.96)")
    (tmp_path / "reproduce.py").write_text(planted)
    assert any("1.96" in p for p in lint.check_source(tmp_path / "reproduce.py", "x"))


def test_the_claim_says_when_the_control_reaches_a_cap_or_the_closed_form_misses(bench):
    """A tail sample whose noise direction passes 1/2 (the full run's 400 samples per m) must not
    print '<= 0.55 < 1/2'; a closed form outside its interval names the m."""
    run = json.loads((BENCH / "reproduce_quick.json").read_text())
    assert "< 1/2" in bench.summarise(run)["claim"] and "outside at" not in run["summary"]["claim"]
    run["unique_erm"][1]["recon"].update(noise_unseen_corr_max=0.55, p_certified_in_unseen_cap=0.02)
    run["feldman"][2]["p_exact"] = 0.99
    claim = bench.summarise(run)["claim"]
    assert "< 1/2" not in claim and "max 0.55" in claim
    n = sum(r["recon"]["n"] for r in run["unique_erm"])
    assert f"certified inside an unseen cap in 2/{n} samples" in claim
    assert "inside every interval: False (outside at m=10)" in claim


def test_the_full_mode_in_parts_assembles_the_unsplit_json(bench, tmp_path):
    """--part A/B per m and C, in any order and in separate calls, give one JSON with the runs'
    rows in m order and the summary of those rows; the JSON appears only with the last part."""
    import argparse

    run = json.loads((BENCH / "reproduce_quick.json").read_text())
    by_m = {("A", r["m"]): r for r in run["feldman"]} | {
        ("B", r["m"]): r for r in run["unique_erm"]
    }
    runs = {"A": lambda m: by_m["A", m], "B": lambda m: by_m["B", m], "C": lambda _m: run["gd"]}
    out = tmp_path / "reproduce.json"
    calls = [("B", [14, 6]), ("C", None), ("A", None), ("B", [8, 12]), ("B", [10])]
    for i, (part, ms) in enumerate(calls):
        assert not out.exists()
        args = argparse.Namespace(part=part, m=ms, quick=False)
        bench._run_part(args, out, runs, run["threads"])
        assert (tmp_path / "reproduce_parts" / f"{part}_{(ms or [6])[-1]}.json").is_file() or (
            part == "C" and (tmp_path / "reproduce_parts" / "C.json").is_file()
        )
    full = json.loads(out.read_text())
    assert [r["m"] for r in full["feldman"]] == bench.MS == [r["m"] for r in full["unique_erm"]]
    assert full["feldman"] == run["feldman"] and full["unique_erm"] == run["unique_erm"]
    assert full["gd"] == run["gd"] and full["quick"] is False
    summary = json.loads(json.dumps(bench.summarise(run)))
    assert full["evidence"] == summary["evidence"] and full["summary"]["claim"] == summary["claim"]
    assert set(full["parts"]) == set(bench._part_units()) and full["cpu_seconds"] >= 0
    with pytest.raises(SystemExit, match="--m must be among"):
        bench._run_part(argparse.Namespace(part="A", m=[7], quick=False), out, runs, {})
    with pytest.raises(SystemExit, match="part C runs every m"):
        bench._run_part(argparse.Namespace(part="C", m=[8], quick=False), out, runs, {})
