"""Print the README results tables from benchmarks/reproduce*.json (markdown)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = {
    "grpo": "pure GRPO",
    "sft_grpo": "SFT → GRPO",
    "naive": "naive injection",
    "luffy": "LUFFY-style shaping",
    "retire_only": "retirement only (plain PPO loss)",
    "onepo": "**OnePO**",
}


def fmt(t: list[float]) -> str:
    return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def main(name: str = "reproduce") -> None:
    d = json.loads((HERE / f"{name}.json").read_text())
    s, cfg = d["summary"], d["config"]
    print(
        f"{d['seeds']} seeds, {cfg['steps']} RL steps, mean [95% t-interval]; base model: "
        f"greedy {d['base_model']['greedy_acc']:.2f}, pass@8 {d['base_model']['pass@8']:.2f}\n"
    )
    steps = s[next(iter(s))]["curve_steps"]
    marks = [
        i
        for i, st in enumerate(steps)
        if st in (steps[len(steps) // 4], steps[len(steps) // 2], steps[-1])
    ]
    head = " | ".join(f"acc@{steps[i]}" for i in marks)
    print(f"| arm | {head} | final greedy acc | pass@1 | pass@8 | OnePO − arm (paired) |")
    print("|---|" + "---|" * (len(marks) + 4))
    diffs = d.get("paired_diff_onepo_minus", {})
    for arm, v in s.items():
        curve = " | ".join(f"{v['curve_mean'][i]:.3f}" for i in marks)
        diff = fmt(diffs[arm]) if arm in diffs else "–"
        print(
            f"| {NAMES.get(arm, arm)} | {curve} | {fmt(v['greedy_acc'])} | {v['pass@1'][0]:.3f} | "
            f"{v['pass@8'][0]:.3f} | {diff} |"
        )
    if "retirement_curve_mean" in d:
        r = d["retirement_curve_mean"]
        w = max(len(r) // 10, 1)
        pts = ", ".join(
            f"{(i + w):d}: {sum(r[i : i + w]) / len(r[i : i + w]):.2f}" for i in range(0, len(r), w)
        )
        print(
            f"\nOnePO retirement rate (mean over seeds, per {w}-step window ending at step): {pts}"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reproduce")
