"""The README's results table, generated from benchmarks/reproduce_quick.json.

python benchmarks/results_table.py   # paste between the README's results-table markers
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABEL = {
    "structured": "structured",
    "prompt_template": "prompt-only, template protocol",
    "prompt_full": "prompt-only, no template (variant)",
}


def table(path: Path = HERE / "reproduce_quick.json") -> str:
    d = json.loads(path.read_text())
    hp = d["hp"]
    rows = [
        "| p | arm | valid-action rate (95% CI) | best feasible E | reached E* | replies |",
        "|---|---|---|---|---|---|",
    ]
    for p, st in hp["by_p"].items():
        for a, label in LABEL.items():
            s = st[a]
            lo, hi = s["valid_rate_ci95"]
            rows.append(
                f"| {p} | {label} | {s['valid_rate_mean']:.3f} [{lo:.2f}, {hi:.2f}] | "
                f"{s['best_energy_mean']:.2f} | {s['reached_optimum']}/{d['seeds']} | "
                f"{s['turns_mean']:.1f} |"
            )
    rows += [
        "",
        "| p | structured − template prompt: valid rate (95% CI) | MDE (80%) | best E diff (95% CI) "
        "| structured − no-template prompt: valid rate (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for p, st in hp["by_p"].items():
        if p == "0.0":
            continue
        t, f = st["structured_minus_prompt_template"], st["structured_minus_prompt_full"]
        rows.append(
            f"| {p} | {t['valid_rate_diff_mean']:+.3f} [{t['valid_rate_diff_ci95'][0]:+.2f}, "
            f"{t['valid_rate_diff_ci95'][1]:+.2f}] | {t['valid_rate_mde80']:.3f} | "
            f"{t['best_energy_diff_mean']:+.2f} [{t['best_energy_diff_ci95'][0]:+.2f}, "
            f"{t['best_energy_diff_ci95'][1]:+.2f}] | {f['valid_rate_diff_mean']:+.3f} "
            f"[{f['valid_rate_diff_ci95'][0]:+.2f}, {f['valid_rate_diff_ci95'][1]:+.2f}] |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(print(table()))
