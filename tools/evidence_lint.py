# /// script
# requires-python = ">=3.10"
# dependencies = []
# ///
"""The evidence lint: fails a results row that misstates what was measured.

Every ``packages/<name>/benchmarks/reproduce_row.json`` carries an ``evidence`` object in the
schema of ``icml26_kernels.evidence`` (documented in CONTRIBUTING.md); any other committed
``benchmarks/*.json`` that carries one is checked the same way, with its own ``claim``; a
``reproduce*.json`` results file without one must name the row JSON that carries the evidence
built from it (``"evidence_in"``; a run's inputs, ``reproduce_config.json``, are exempt). A row
fails when

- it has no ``evidence``, or a comparison or tuning entry lacks a key or is inconsistent
  (``ci95`` not around ``diff``, ``n`` < 2, a chosen value outside its grid);
- a tuned value sits on an edge of its ordered grid without a stated ``hard_bound`` (or, for an
  edge left as it is, an ``edge_note`` in the JSON and the words "grid edge" in the claim);
- ``ratio`` disagrees with ``ours``/``baseline`` when all three are numbers;
- its claim prints an interval ``[lo, hi]`` or a ``± h`` that is not some comparison's 95% CI
  (compared at the printed precision);
- ``resolved`` is true while the CI contains 0, or while the paper's target exceeds the
  recorded headroom;

and a benchmark script fails when it hand-rolls the statistics (a 1.96 or tabulated t value, an
MDE written as ``2.8 *``, a direct ``t.ppf``) instead of importing ``icml26_kernels.evidence``,
or when a ``benchmarks/reproduce*.py`` does not pin its BLAS/OpenMP threads (``pin_threads`` or
threadpoolctl's ``threadpool_limits``).

Standard library only; ``tools/reproduce_table.py --check`` (in ``nox -s lint``) runs it, and
``python tools/evidence_lint.py`` runs it alone.
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "icml26-evidence/1"
COMPARISON_KEYS = (
    "name",
    "statistic",
    "diff",
    "ci95",
    "n",
    "paired_sd",
    "mde",
    "target",
    "resolved",
    "headroom",
)
HEADROOM_KEYS = ("ceiling", "baseline", "value", "how")
TUNING_KEYS = ("arm", "param", "grid", "scores", "chosen", "objective", "hard_bound")
RATIO_RTOL = 5e-3
# a run's inputs, not its results: the frozen choices a run reads (normbt's tuned learning rates)
INPUTS = frozenset({"reproduce_config.json"})

_NUM = r"[+\-−]?\d+(?:\.\d+)?"
_INTERVAL = re.compile(rf"\[\s*({_NUM})\s*%?\s*,\s*({_NUM})\s*%?\s*\]")
_PLUSMINUS = re.compile(rf"(?:({_NUM})\s*%?\s*(?:pts?\s*)?)?±\s*(\d+(?:\.\d+)?)")
# critical values that mean "a statistics table or normal fallback written by hand"
_HAND_ROLLED = {1.96: "1.96", 1.959963984540054: "1.96", 1.645: "1.645", 12.706: "12.706"}


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _close(printed: str, value: float) -> bool:
    """Does ``value`` round to the printed number (half a unit in its last place)?"""
    tol = 0.5 * 10 ** (-_decimals(printed)) + 1e-9
    return abs(_number(printed) - value) <= tol * 1.0001


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_comparison(c: Any, where: str) -> list[str]:
    if not isinstance(c, dict):
        return [f"{where}: a comparison must be an object"]
    missing = [k for k in COMPARISON_KEYS if k not in c]
    if missing:
        return [f"{where}: comparison lacks {missing}"]
    p: list[str] = []
    name = f"{where}: comparison {c['name']!r}"
    ci = c["ci95"]
    if not (isinstance(ci, list) and len(ci) == 2 and all(_is_num(v) for v in ci)):
        return [f"{name}: ci95 must be [low, high]"]
    if not _is_num(c["diff"]) or not ci[0] - 1e-12 <= c["diff"] <= ci[1] + 1e-12:
        p.append(f"{name}: diff {c['diff']!r} outside its ci95 {ci}")
    if not isinstance(c["n"], int) or c["n"] < 2:
        p.append(f"{name}: n must be an int >= 2, got {c['n']!r}")
    h = c["headroom"]
    if h is None:
        if not c.get("headroom_note"):
            p.append(f"{name}: no headroom and no headroom_note saying why")
    elif not isinstance(h, dict) or any(k not in h for k in HEADROOM_KEYS):
        p.append(f"{name}: headroom must have {list(HEADROOM_KEYS)}")
    if c["resolved"] is True:
        if ci[0] <= 0 <= ci[1]:
            p.append(f"{name}: resolved is true but the 95% CI {ci} contains 0")
        t = c["target"]
        if _is_num(t) and isinstance(h, dict) and _is_num(h.get("value")):
            if abs(t) > abs(h["value"]):
                p.append(
                    f"{name}: resolved is true but the target {t} exceeds the headroom "
                    f"{h['value']} ({h.get('how')})"
                )
    return p


def check_tuning(t: Any, where: str, claim: str = "") -> list[str]:
    if not isinstance(t, dict):
        return [f"{where}: a tuning entry must be an object"]
    missing = [k for k in TUNING_KEYS if k not in t]
    if missing:
        return [f"{where}: tuning entry lacks {missing}"]
    name = f"{where}: tuning {t['arm']}.{t['param']}"
    grid, scores = t["grid"], t["scores"]
    if not isinstance(grid, list) or not grid or not isinstance(scores, list):
        return [f"{name}: grid and scores must be non-empty lists"]
    if len(grid) != len(scores):
        return [f"{name}: {len(grid)} grid points but {len(scores)} scores"]
    if t["chosen"] not in grid:
        return [f"{name}: chosen {t['chosen']!r} not in grid {grid}"]
    if len(grid) >= 2 and all(_is_num(g) for g in grid):
        ordered = sorted(grid)
        at_edge = t["chosen"] in (ordered[0], ordered[-1])
        # an edge left as it is must say so where the reader looks: an edge_note in the JSON and
        # "grid edge" in the row's claim (the row then does not call the arm tuned)
        owned = bool(t.get("edge_note")) and "grid edge" in claim
        if at_edge and not t["hard_bound"] and not owned:
            side = "lower" if t["chosen"] == ordered[0] else "upper"
            return [
                f"{name}: chosen {t['chosen']!r} is the {side} edge of {ordered} with no "
                "hard_bound: extend the grid until the optimum is interior, or state the bound"
            ]
    elif len(grid) < 2:
        return [f"{name}: a one-point grid is not tuning (grid {grid})"]
    return []


def check_evidence(ev: Any, where: str, claim: str = "") -> list[str]:
    if not isinstance(ev, dict) or ev.get("schema") != SCHEMA:
        return [f"{where}: evidence must be an object with schema {SCHEMA!r}"]
    comps = ev.get("comparisons")
    if not isinstance(comps, list) or not comps:
        return [f"{where}: evidence needs at least one comparison"]
    p: list[str] = []
    for i, c in enumerate(comps):
        p += check_comparison(c, f"{where} comparisons[{i}]")
    for i, t in enumerate(ev.get("tuning") or []):
        p += check_tuning(t, f"{where} tuning[{i}]", claim)
    return p


def check_claim(claim: str, comparisons: list[dict], where: str) -> list[str]:
    """Every printed interval and ± must be some comparison's 95% CI."""
    p: list[str] = []
    cis = [
        (c, c["ci95"])
        for c in comparisons
        if isinstance(c, dict) and isinstance(c.get("ci95"), list) and len(c["ci95"]) == 2
    ]
    for m in _INTERVAL.finditer(claim):
        lo, hi = m.group(1), m.group(2)
        if not any(_close(lo, ci[0]) and _close(hi, ci[1]) for _, ci in cis):
            p.append(f"{where}: claim prints {m.group(0)} but no comparison has that 95% CI")
    for m in _PLUSMINUS.finditer(claim):
        centre, half = m.group(1), m.group(2)
        ok = False
        for c, ci in cis:
            if _close(half, (ci[1] - ci[0]) / 2) and (
                centre is None or (_is_num(c.get("diff")) and _close(centre, c["diff"]))
            ):
                ok = True
                break
        if not ok:
            p.append(
                f"{where}: claim prints {m.group(0).strip()!r} but no comparison's 95% CI has "
                "that half-width (print the 95% interval, not an SE or SD)"
            )
    return p


def check_row(row: dict, where: str) -> list[str]:
    p: list[str] = []
    ours, base, ratio = row.get("ours"), row.get("baseline"), row.get("ratio")
    if _is_num(ours) and _is_num(base) and _is_num(ratio) and base != 0:
        want = ours / base
        if abs(ratio - want) > RATIO_RTOL * abs(want):
            p.append(f"{where}: ratio {ratio} != ours/baseline = {ours}/{base} = {want:.4g}")
    if "evidence" not in row:
        return [*p, f"{where}: no evidence object (icml26_kernels.evidence; CONTRIBUTING.md)"]
    ev_problems = check_evidence(row["evidence"], where, str(row.get("claim", "")))
    p += ev_problems
    if not ev_problems:
        p += check_claim(str(row.get("claim", "")), row["evidence"]["comparisons"], where)
    return p


def check_detailed(doc: dict, where: str) -> list[str]:
    """A detailed JSON's evidence, read with its own claim (which owns its grid edges)."""
    claim = str(doc.get("claim", ""))
    p = check_evidence(doc["evidence"], where, claim)
    if not p and claim:
        p += check_claim(claim, doc["evidence"]["comparisons"], where)
    return p


def check_evidence_in(doc: Any, where: str, bench: Path) -> list[str]:
    """A ``reproduce*.json`` results file without its own ``evidence`` names the row JSON that
    carries the evidence built from it (``"evidence_in": "reproduce_row.json"``)."""
    ref = doc.get("evidence_in") if isinstance(doc, dict) else None
    if not ref:
        return [
            f"{where}: a reproduce*.json results file needs an evidence object, or "
            '"evidence_in" naming the row JSON that carries the evidence built from it'
        ]
    target = bench / str(ref)
    try:
        row = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"{where}: evidence_in names {ref!r}, which is not a JSON file beside it"]
    if not isinstance(row, dict) or "evidence" not in row:
        return [f"{where}: evidence_in names {ref!r}, which has no evidence object"]
    return []


def _has_ppf_of_t(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "ppf":
        v = node.value
        name = v.attr if isinstance(v, ast.Attribute) else getattr(v, "id", "")
        return name in ("t", "student_t")
    return False


def check_source(path: Path, where: str) -> list[str]:
    """Hand-rolled statistics in a benchmark script, and unpinned threads in a reproduce*.py."""
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [f"{where}: does not parse ({exc})"]
    p: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, float):
            if node.value in _HAND_ROLLED:
                p.append(
                    f"{where}:{node.lineno}: hand-rolled critical value "
                    f"{_HAND_ROLLED[node.value]}: use icml26_kernels.evidence"
                )
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side in (node.left, node.right):
                if isinstance(side, ast.Constant) and side.value == 2.8:
                    p.append(
                        f"{where}:{node.lineno}: MDE as 2.8 * SD / sqrt(n): "
                        "use icml26_kernels.evidence.mde"
                    )
        elif _has_ppf_of_t(node):
            p.append(
                f"{where}:{getattr(node, 'lineno', '?')}: t quantile by hand: "
                "use icml26_kernels.evidence"
            )
    if path.name.startswith("reproduce") and path.suffix == ".py":
        if "pin_threads(" not in text and "threadpool_limits(" not in text:
            p.append(
                f"{where}: does not pin BLAS/OpenMP threads "
                "(icml26_kernels.evidence.pin_threads or threadpoolctl.threadpool_limits)"
            )
    return p


def lint(root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for member in sorted(p.parent for p in (root / "packages").glob("*/pyproject.toml")):
        bench = member / "benchmarks"
        if not bench.is_dir():
            continue
        for path in sorted(bench.glob("*.json")):
            where = str(path.relative_to(root))
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                problems.append(f"{where}: not JSON ({exc})")
                continue
            if path.name == "reproduce_row.json":
                problems += check_row(doc, where)
            elif isinstance(doc, dict) and "evidence" in doc:
                problems += check_detailed(doc, where)
            elif path.name.startswith("reproduce") and path.name not in INPUTS:
                problems += check_evidence_in(doc, where, bench)
        for path in sorted(bench.glob("*.py")):
            problems += check_source(path, str(path.relative_to(root)))
    return problems


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="tools/evidence_lint.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    problems = lint(args.root)
    for p in problems:
        print(f"evidence: {p}", file=sys.stderr)
    if problems:
        print(f"{len(problems)} evidence problem(s)", file=sys.stderr)
        return 1
    print("every row's evidence is consistent with its claim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
