"""tools/evidence_lint.py: each rule fails on the planted defect it names, and passes a good row.

The planted rows are the issue-61 findings in miniature: an edge optimum, a ratio that is not
ours/baseline (lazyattention's 1.097 against 280.7/284.0), a claim printing ± 1 SE as if it were
the interval (diffusion-resampling's 5.26 ± 2.65), a resolved flag the CI contradicts, a target
beyond the headroom (onepo's 0.005 left against +0.027), and a benchmark with a 1.96 fallback.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import evidence_lint as lint
import pytest


def _comparison(**kw):
    c = {
        "name": "ot_vs_diffusion",
        "statistic": "paired MSE difference, OT - diffusion",
        "diff": 5.26,
        "ci95": [-0.09, 10.61],
        "n": 48,
        "paired_sd": 18.4,
        "mde": 7.5,
        "target": None,
        "resolved": False,
        "headroom": {"ceiling": 1.0, "baseline": 0.5, "value": 0.5, "how": "metric maximum"},
    }
    c.update(kw)
    return c


def _tuning(**kw):
    t = {
        "arm": "ot",
        "param": "epsilon",
        "grid": [0.2, 0.4, 0.8, 1.6],
        "scores": [5.0, 4.9, 5.2, 5.6],
        "chosen": 0.4,
        "objective": "validation RMSE",
        "hard_bound": None,
    }
    t.update(kw)
    return t


def _row(**kw):
    row = {
        "package": "alpha",
        "claim": "diffusion vs OT: paired MSE difference +5.26 [-0.09, +10.61] (95% CI, unresolved)",
        "paper": "p",
        "ours": 5.485,
        "baseline": 4.983,
        "ratio": 5.485 / 4.983,
        "seconds": 1.0,
        "evidence": {
            "schema": lint.SCHEMA,
            "comparisons": [_comparison()],
            "tuning": [_tuning()],
        },
    }
    row.update(kw)
    return row


GOOD_SCRIPT = """\
from icml26_kernels.evidence import pin_threads, t_interval


def main():
    pin_threads(2)
    return t_interval([1.0, 2.0, 3.0])
"""


def _repo(tmp_path: Path, row: dict, script: str = GOOD_SCRIPT) -> Path:
    bench = tmp_path / "packages" / "alpha" / "benchmarks"
    bench.mkdir(parents=True)
    (tmp_path / "packages" / "alpha" / "pyproject.toml").write_text("[project]\n")
    (bench / "reproduce_row.json").write_text(json.dumps(row))
    (bench / "reproduce.py").write_text(script)
    return tmp_path


def test_a_consistent_row_passes(tmp_path):
    assert lint.check_row(_row(), "row") == []
    assert lint.lint(_repo(tmp_path, _row())) == []
    assert lint.main(["--root", str(tmp_path)]) == 0


def test_planted_edge_optimum_fails_unless_a_hard_bound_is_stated():
    row = _row()
    row["evidence"]["tuning"] = [_tuning(chosen=0.2, scores=[4.0, 4.9, 5.2, 5.6])]
    problems = lint.check_row(row, "row")
    assert len(problems) == 1 and "lower edge" in problems[0]
    row["evidence"]["tuning"][0]["hard_bound"] = "epsilon < 0.2 underflows the Sinkhorn kernel"
    assert lint.check_row(row, "row") == []
    # the top edge too
    row["evidence"]["tuning"] = [_tuning(chosen=1.6)]
    assert "upper edge" in lint.check_row(row, "row")[0]
    # an edge left as it is: allowed only when the JSON says why AND the claim says "grid edge"
    row["evidence"]["tuning"][0]["edge_note"] = "no time to extend"
    assert "upper edge" in lint.check_row(row, "row")[0]
    row["claim"] += "; OT's epsilon at its grid edge (not tuned)"
    assert lint.check_row(row, "row") == []


def test_planted_ratio_mismatch_fails():
    # lazyattention: ours/baseline were median TTFTs, ratio the median of per-request ratios
    row = _row(ours=280.7, baseline=284.0, ratio=1.097)
    problems = lint.check_row(row, "row")
    assert len(problems) == 1 and "ratio 1.097 != ours/baseline" in problems[0]
    assert lint.check_row(_row(ours=280.7, baseline=284.0, ratio=None), "row") == []
    assert lint.check_row(_row(ours=280.7, baseline=284.0, ratio=0.9884), "row") == []


@pytest.mark.parametrize(
    "claim",
    [
        "paired MSE difference 5.26 ± 2.65 (tie)",  # ± 1 SE, not the 95% half-width
        "paired MSE difference +5.26 [-0.09, +10.71]",  # an interval not in the JSON
        "paired MSE difference +5.26 [-0.1, +10.6] and +1.0 [+0.5, +1.5]",  # a second, unbacked
    ],
)
def test_planted_interval_that_is_not_the_jsons_fails(claim):
    problems = lint.check_row(_row(claim=claim), "row")
    assert problems and all("claim prints" in p for p in problems)


def test_intervals_match_at_the_printed_precision():
    for claim in (
        "+5.26 [-0.09, +10.61]",
        "+5.3 [-0.1, +10.6]",
        "5.3 [−0.1, 10.6]",  # a typographic minus
        "5.26 ± 5.35",  # the 95% half-width, printed as ±
    ):
        assert lint.check_row(_row(claim=claim), "row") == [], claim


def test_resolved_contradicted_by_the_ci_or_the_headroom_fails():
    row = _row()
    row["evidence"]["comparisons"] = [_comparison(resolved=True)]
    assert "contains 0" in lint.check_row(row, "row")[0]
    # onepo: the CI excludes 0 but the paper's +0.027 cannot fit in 0.005 of headroom
    room = {"ceiling": 1.0, "baseline": 0.995, "value": 0.005, "how": "1 - SFT->GRPO accuracy"}
    row["evidence"]["comparisons"] = [
        _comparison(diff=0.01, ci95=[0.004, 0.016], target=0.027, resolved=True, headroom=room)
    ]
    row["claim"] = "OnePO - SFT->GRPO +0.010 [+0.004, +0.016]"
    assert "exceeds the headroom" in lint.check_row(row, "row")[0]


def test_missing_evidence_and_missing_keys_fail():
    row = _row()
    del row["evidence"]
    assert "no evidence" in lint.check_row(row, "row")[0]
    row = _row()
    del row["evidence"]["comparisons"][0]["mde"]
    assert "lacks ['mde']" in lint.check_row(row, "row")[0]
    row = _row()
    row["evidence"]["comparisons"][0]["headroom"] = None
    assert "headroom" in lint.check_row(row, "row")[0]
    row = _row()
    row["evidence"]["tuning"][0]["chosen"] = 0.3
    assert "not in grid" in lint.check_row(row, "row")[0]


@pytest.mark.parametrize(
    ("script", "what"),
    [
        (
            "T = {1: 12.706, 2: 4.303}\n"
            "def half(n, s):\n"
            "    return T.get(n - 1, 1.96) * s\n"
            "pin_threads(1)\n",
            "1.96",
        ),
        ("import math\ndef mde(s, n):\n    return 2.8 * s / math.sqrt(n)\npin_threads(1)\n", "2.8"),
        ("from scipy import stats\nq = stats.t.ppf(0.975, 4)\npin_threads(1)\n", "t quantile"),
        ("import torch\ntorch.set_num_threads(2)\n", "does not pin"),
    ],
)
def test_planted_hand_rolled_statistics_and_unpinned_threads_fail(tmp_path, script, what):
    root = _repo(tmp_path, _row(), script)
    problems = lint.lint(root)
    assert problems and any(what in p for p in problems), problems
    assert lint.main(["--root", str(root)]) == 1


def test_reproduce_table_check_runs_the_evidence_lint(tmp_path):
    import reproduce_table

    row = _row()
    root = _repo(tmp_path, row)
    reproduce_table.write_table(root)
    assert reproduce_table.check(root) == []
    bad = copy.deepcopy(row)
    bad["claim"] = "paired MSE difference 5.26 ± 2.65 (tie)"
    reproduce_table.write_row(root, bad)
    reproduce_table.write_table(root)
    problems = reproduce_table.check(root)
    assert len(problems) == 1 and problems[0].startswith("evidence: ")
    assert reproduce_table.main(["--check", "--root", str(root)]) == 1


def test_a_detailed_json_is_read_with_its_own_claim(tmp_path):
    """An edge owned by edge_note passes only where the JSON's own claim says "grid edge", and
    the claim's intervals must be the JSON's 95% CIs (diffusion-resampling's reproduce_quick)."""
    edge = _tuning(chosen=1.6, edge_note="validation score still falls toward it")
    doc = _row(evidence={"schema": lint.SCHEMA, "comparisons": [_comparison()], "tuning": [edge]})
    root = _repo(tmp_path, _row())
    bench = root / "packages" / "alpha" / "benchmarks"
    (bench / "reproduce_quick.json").write_text(json.dumps(doc))
    assert any("upper edge" in p for p in lint.lint(root))  # its claim does not own the edge
    doc["claim"] = doc["claim"].replace("unresolved)", "unresolved; grid edge: ot epsilon)")
    (bench / "reproduce_quick.json").write_text(json.dumps(doc))
    assert lint.lint(root) == []
    doc["claim"] = "diffusion vs OT: +5.26 [-0.09, +10.61]"  # the edge no longer owned
    (bench / "reproduce_quick.json").write_text(json.dumps(doc))
    assert any("upper edge" in p for p in lint.lint(root))
    doc["claim"] = "diffusion vs OT: 5.26 ± 2.65; grid edge"  # an SE printed as the interval
    (bench / "reproduce_quick.json").write_text(json.dumps(doc))
    assert any("half-width" in p for p in lint.lint(root))


def test_a_reproduce_json_without_evidence_must_name_its_row(tmp_path):
    """A results file with no evidence fails unless it names the row JSON that carries it (the
    robust-satisficing rerun merged into the row); a run's inputs (reproduce_config) are exempt."""
    root = _repo(tmp_path, _row())
    bench = root / "packages" / "alpha" / "benchmarks"
    (bench / "reproduce_frozen.json").write_text(json.dumps({"tasks": {}}))
    assert any("evidence_in" in p for p in lint.lint(root))
    (bench / "reproduce_frozen.json").write_text(json.dumps({"evidence_in": "nowhere.json"}))
    assert any("not a JSON file" in p for p in lint.lint(root))
    (bench / "reproduce_frozen.json").write_text(json.dumps({"evidence_in": "reproduce_row.json"}))
    assert lint.lint(root) == []
    (bench / "reproduce_config.json").write_text(json.dumps({"lr": {"bt": 0.001}}))
    (bench / "other_diagnostic.json").write_text(json.dumps({"x": 1}))
    assert lint.lint(root) == []
