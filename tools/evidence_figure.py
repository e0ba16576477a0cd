# /// script
# requires-python = ">=3.10"
# dependencies = []
# ///
"""The figure beside every results row: each comparison's paired difference with its 95% CI.

    python tools/evidence_figure.py --write   # packages/<name>/benchmarks/evidence.svg, every row
    python tools/evidence_figure.py --check   # exit 1 if a figure is missing or stale (lint)

One panel per comparison of ``benchmarks/reproduce_row.json``'s ``evidence`` (the schema of
``icml26_kernels.evidence``): the interval ``ci95`` as a bar, the mean ``diff`` as a dot, the
zero line, the paper's ``target`` (when it publishes one) as a tick, each panel on its own axis
(the comparisons of one row are in different units). The headline colour says what the lint
says: ``resolved`` (the CI excludes 0 and the target fits the headroom) or unresolved; the
right-hand text gives n, the MDE and the headroom, so a reader sees whether the question could
be answered. "Better" points right: a lower-is-better comparison is drawn as baseline - ours.

Standard library only (SVG written by hand): the lint session needs no plotting stack, and the
figure is a pure function of the committed JSON, so ``--check`` is exact.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NAME = "evidence.svg"
WIDTH, LABEL_W, PLOT_W, PANEL_H, TOP = 960, 330, 360, 44, 34
PLOT_X = LABEL_W + 10
COLOURS = {"resolved": "#1a7f37", "unresolved": "#9a6700", "axis": "#57606a", "zero": "#cf222e"}


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    digits = max(0, 2 - mag)
    return f"{x:+.{min(digits, 6)}f}"


def _oriented(c: dict) -> tuple[float, float, float, float | None]:
    """(diff, lo, hi, target), signed so that positive is better for ours."""
    sign = 1.0 if c.get("higher_is_better", True) else -1.0
    lo, hi = c["ci95"]
    t = c.get("target")
    target = sign * float(t) if isinstance(t, (int, float)) else None
    a, b = sign * float(lo), sign * float(hi)
    return sign * float(c["diff"]), min(a, b), max(a, b), target


def scale(lo: float, hi: float, target: float | None) -> tuple[float, float]:
    """The x range of one panel: the interval, 0 and the target, with a 10% margin."""
    points = [lo, hi, 0.0] + ([target] if target is not None else [])
    a, b = min(points), max(points)
    pad = 0.1 * (b - a) if b > a else max(abs(a), 1.0) * 0.1
    return a - pad, b + pad


def x_of(v: float, span: tuple[float, float]) -> float:
    a, b = span
    return PLOT_X + (v - a) / (b - a) * PLOT_W


def panel(c: dict, y: float) -> list[str]:
    diff, lo, hi, target = _oriented(c)
    span = scale(lo, hi, target)
    colour = COLOURS["resolved" if c.get("resolved") else "unresolved"]
    mid = y + PANEL_H / 2
    name = html.escape(str(c.get("name", "")))
    unit = html.escape(str(c.get("unit", "")))
    flip = "" if c.get("higher_is_better", True) else " (sign flipped: lower is better)"
    out = [
        f'<text x="8" y="{mid - 4:.1f}" class="l">{name}</text>',
        f'<text x="8" y="{mid + 11:.1f}" class="s">{unit}{html.escape(flip)}</text>',
        f'<line x1="{PLOT_X}" y1="{mid + 12:.1f}" x2="{PLOT_X + PLOT_W}" y2="{mid + 12:.1f}" '
        f'stroke="{COLOURS["axis"]}" stroke-width="0.5"/>',
    ]
    x0 = x_of(0.0, span)
    out.append(
        f'<line x1="{x0:.1f}" y1="{y + 4:.1f}" x2="{x0:.1f}" y2="{y + PANEL_H - 4:.1f}" '
        f'stroke="{COLOURS["zero"]}" stroke-dasharray="3,2" class="zero"/>'
    )
    if target is not None:
        xt = x_of(target, span)
        out.append(
            f'<line x1="{xt:.1f}" y1="{mid - 10:.1f}" x2="{xt:.1f}" y2="{mid + 10:.1f}" '
            f'stroke="#0969da" stroke-width="2" class="target"/>'
        )
    xl, xh, xd = x_of(lo, span), x_of(hi, span), x_of(diff, span)
    out += [
        f'<line x1="{xl:.1f}" y1="{mid:.1f}" x2="{xh:.1f}" y2="{mid:.1f}" stroke="{colour}" '
        f'stroke-width="3" class="ci"/>',
        f'<circle cx="{xd:.1f}" cy="{mid:.1f}" r="4.5" fill="{colour}" class="diff"/>',
        f'<text x="{xl:.1f}" y="{mid + 24:.1f}" class="s" text-anchor="middle">{_fmt(lo)}</text>',
        f'<text x="{xh:.1f}" y="{mid + 24:.1f}" class="s" text-anchor="middle">{_fmt(hi)}</text>',
    ]
    head = c.get("headroom") or {}
    room = head.get("value") if isinstance(head, dict) else None
    facts = [
        f"{_fmt(diff)} [{_fmt(lo)}, {_fmt(hi)}]",
        f"n {c.get('n')}",
        f"MDE {_fmt(float(c['mde'])).lstrip('+')}"
        if isinstance(c.get("mde"), (int, float))
        else "",
        f"headroom {_fmt(float(room))}" if isinstance(room, (int, float)) else "",
        "resolved" if c.get("resolved") else "unresolved",
    ]
    text = html.escape(" · ".join(f for f in facts if f))
    out.append(
        f'<text x="{PLOT_X + PLOT_W + 14}" y="{mid + 4:.1f}" class="s" fill="{colour}">{text}</text>'
    )
    return out


def render(row: dict) -> str:
    """The SVG of one row's evidence (a pure function of the JSON)."""
    comps = [
        c
        for c in row["evidence"]["comparisons"]
        if isinstance(c.get("ci95"), list) and len(c["ci95"]) == 2
    ]
    height = TOP + PANEL_H * len(comps) + 30
    title = html.escape(
        f"{row.get('package', '')}: paired differences (ours - baseline), 95% CI; "
        "right is better for ours; dashed: 0; blue tick: the paper's effect"
    )
    body = [f'<text x="8" y="20" class="t">{title}</text>']
    for i, c in enumerate(comps):
        body += panel(c, TOP + i * PANEL_H)
    note = html.escape("generated by tools/evidence_figure.py from benchmarks/reproduce_row.json")
    body.append(f'<text x="8" y="{height - 8}" class="s">{note}</text>')
    style = (
        "<style>text{font-family:sans-serif;fill:#24292f}.t{font-size:13px;font-weight:600}"
        ".l{font-size:11px}.s{font-size:10px}</style>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">{style}'
        f'<rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>\n"
    )


def rows(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted((root / "packages").glob("*/benchmarks/reproduce_row.json")):
        row = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(row, dict) and isinstance(row.get("evidence"), dict):
            out.append((path.parent / NAME, row))
    return out


def write(root: Path = ROOT) -> list[Path]:
    written = []
    for target, row in rows(root):
        target.write_text(render(row), encoding="utf-8")
        written.append(target)
    return written


def check(root: Path = ROOT) -> list[str]:
    problems = []
    for target, row in rows(root):
        where = str(target.relative_to(root))
        if not target.is_file():
            problems.append(f"{where}: missing (python tools/evidence_figure.py --write)")
        elif target.read_text(encoding="utf-8") != render(row):
            problems.append(f"{where}: stale (python tools/evidence_figure.py --write)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/evidence_figure.py",
        description="The figure beside every results row: paired differences with 95% CIs.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write every member's evidence.svg")
    mode.add_argument("--check", action="store_true", help="exit 1 if one is missing or stale")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write:
        for p in write(args.root):
            print(p.relative_to(args.root))
        return 0
    problems = check(args.root)
    for p in problems:
        print(f"figure: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
