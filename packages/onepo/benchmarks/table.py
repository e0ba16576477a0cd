"""Print the README results tables from benchmarks/reproduce*.json (markdown)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = {
    "grpo": "pure GRPO",
    "sft_grpo": "SFT → GRPO",
    "naive": "naive injection (persistent teacher, plain PPO)",
    "luffy": "LUFFY-style shaping (persistent teacher)",
    "retire_only": "retirement only (plain PPO loss)",
    "aoe_only": "objective evolution only (persistent teacher)",
    "onepo": "**OnePO**",
}


def fmt(t: list[float]) -> str:
    return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def fd(d: dict[str, float]) -> str:
    return f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] (MDE {d['mde']:.3f})"


def main(name: str = "reproduce") -> None:
    d = json.loads((HERE / f"{name}.json").read_text())
    s, cfg = d["summary"], d["config"]
    print(
        f"{d['seeds']} paired seeds, {cfg['steps']} RL steps, {cfg['minibatches']} mini-batch "
        f"updates per rollout batch, mean [95% t-interval]; base model on the held-out problems: "
        f"greedy {d['base_model']['greedy_acc']:.2f}, pass@8 {d['base_model']['pass@8']:.2f}; "
        f"CPU {d['cpu_seconds']:.0f} s\n"
    )
    steps = s[next(iter(s))]["curve_steps"]
    marks = [i for i, st in enumerate(steps) if st in (steps[1], steps[len(steps) // 2])]
    head = " | ".join(f"held-out acc@{steps[i]}" for i in marks)
    print(
        f"| arm | {head} | final held-out acc | mean acc over the run | pass@8 | RL problems, "
        "teacher wrong | low-support teacher tokens clipped |"
    )
    print("|---|" + "---|" * (len(marks) + 5))
    for arm, v in s.items():
        curve = " | ".join(f"{v['curve_mean'][i]:.3f}" for i in marks)
        clip = v.get("teacher_low_clipped")
        print(
            f"| {NAMES.get(arm, arm)} | {curve} | {fmt(v['greedy_acc'])} | {v['auc'][0]:.3f} | "
            f"{v['pass@8'][0]:.3f} | {v['train_acc_teacher_wrong'][0]:.3f} | "
            f"{'–' if clip is None else f'{clip:.2f}'} |"
        )
    print(
        "\nOnePO − arm, paired over seeds: mean [95% t-interval] (MDE at 80% power, 5% level: "
        "(t₀.₉₇₅ + t₀.₈) · SD / √n, df = n − 1)\n"
    )
    print("| arm | final held-out acc | mean acc over the run | RL problems, teacher wrong |")
    print("|---|---|---|---|")
    for arm in d.get("paired_diff_onepo_minus", {}):
        print(
            f"| {NAMES.get(arm, arm)} | {fd(d['paired_diff_onepo_minus'][arm])} | "
            f"{fd(d['paired_diff_onepo_minus_auc'][arm])} | "
            f"{fd(d['paired_diff_onepo_minus_train_acc_teacher_wrong'][arm])} |"
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
