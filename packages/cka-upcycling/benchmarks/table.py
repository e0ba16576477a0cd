"""Print the README results tables from reproduce.py's JSON (``python benchmarks/table.py FILE``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

NAMES = {
    "split": "Split-Digits (task-IL, 5 tasks)",
    "permuted": "Permuted-Digits (domain-IL, 4 tasks)",
}


def pct(iv: list[float]) -> str:
    m, lo, hi = (100 * v for v in iv)
    return f"{m:.1f} [{lo:.1f}, {hi:.1f}]"


def pts(iv: list[float]) -> str:
    m, lo, hi = iv
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def main(path: str) -> None:
    data = json.loads(Path(path).read_text())
    print(f"seeds {data['seeds']}, lr {data['lr']}\n")
    for seq, res in data["summary"].items():
        print(f"**{NAMES.get(seq, seq)}** (mean [95% t-interval] over seeds)\n")
        print("| arm | average accuracy % | forgetting % | BWT % | added params |")
        print("|---|---|---|---|---|")
        for arm, r in res["arms"].items():
            ap = r["added_params"]
            print(
                f"| {arm} | {pct(r['average_accuracy'])} | {pct(r['forgetting'])} | {pct(r['bwt'])} | {ap[0]:,.0f} |"
            )
        print()
        print("| claim | paper (TRACE) | ours |")
        print("|---|---|---|")
        print(
            f"| forgetting reduction vs SeqFT | 80% | {100 * res['forgetting_reduction_vs_seqft']:.0f}% |"
        )
        print(
            f"| added params / full upcycling | 40% | {100 * res['added_params_fraction_of_full']:.0f}% |"
        )
        print(
            f"| avg accuracy, selective - full (pts, paired) | > 0 | {pts(res['acc_selective_minus_full_pts'])} |"
        )
        if "acc_selective_minus_replay_pts" in res:
            print(
                f"| avg accuracy, selective - replay (pts, paired) | n/a | {pts(res['acc_selective_minus_replay_pts'])} |"
            )
        if "acc_selective_minus_random_pts" in res:
            print(
                f"| avg accuracy, selective - random growth of equal size (pts, paired) | n/a | {pts(res['acc_selective_minus_random_pts'])} |"
            )
        print()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "reproduce_quick.json"))
