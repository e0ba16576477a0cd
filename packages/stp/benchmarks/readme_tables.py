"""Print the README's results tables from a benchmark JSON (default: reproduce_quick.json).

python benchmarks/readme_tables.py [reproduce_quick.json|reproduce.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "reproduce_quick.json"
    r = json.loads((HERE / name).read_text())
    s, base = r["setup"], r["base"]
    print(
        f"Base (pretrained {s['pretrain_steps']} steps, before fine-tuning): L_STP "
        f"{base['L_STP']:.3f} on the test conversations (iid Gaussian states on the same "
        f"spans: {base['L_STP_iid_states']:.3f}); {s['seeds']} paired seeds; "
        f"{r['cpu_seconds']} CPU-s, {r['seconds']} s wall.\n"
    )
    print(
        "| fraction | λ | exact match % | Δ vs NTP (pts, 95% t-CI) | MDE (pts) "
        "| answer NLL | Δ NLL vs NTP (95% t-CI) | MDE NLL | L_STP after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in r["table"]:
        lam = f"{row['lbd']:g}" + (" (paper)" if row["lbd"] == 0.02 else "")
        lam = "0 (NTP)" if row["lbd"] == 0 else lam
        if "acc_vs_ntp" in row:
            a, n = row["acc_vs_ntp"], row["nll_vs_ntp"]
            extra = (
                f"{pts(a['diff'])} [{pts(a['diff'] - a['ci'])}, {pts(a['diff'] + a['ci'])}] "
                f"| {100 * a['mde']:.1f} | {row['nll']:.3f} "
                f"| {n['diff']:+.3f} [{n['diff'] - n['ci']:+.3f}, {n['diff'] + n['ci']:+.3f}] "
                f"| {n['mde']:.3f}"
            )
        else:
            extra = f"— | — | {row['nll']:.3f} | — | —"
        print(
            f"| {row['fraction']:g} | {lam} | {100 * row['acc']:.1f} | {extra} "
            f"| {row['L_STP']:.3f} |"
        )
    if r["data_multiplier"]:
        print("\n| λ | data multiplier (1 / smallest fraction reaching full-pool NTP) |")
        print("|---|---|")
        for k, v in r["data_multiplier"].items():
            print(f"| {k} | {'not reached' if v is None else f'{v:g}x'} |")


if __name__ == "__main__":
    main()
