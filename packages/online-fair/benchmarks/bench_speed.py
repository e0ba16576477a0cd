"""Per-good decision time of the online policies vs m and n (are they usable in a real loop?).

Reported as a ratio to the utilitarian GreedyPolicy measured in the same run (the policy a user
would otherwise deploy online), and, for context, to re-running an offline algorithm on the
goods seen so far at every arrival (what one would do without an online algorithm; fairpyx's
round robin when fairpyx is installed, else ours). Absolute times are machine-dependent.

    python benchmarks/bench_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="two (n, T) grid points instead of four")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import icml26_online_fair as of
import numpy as np


def per_good_seconds(make, inst, info, repeat=3):
    best = np.inf
    for _ in range(repeat):
        pol = make()
        pol.reset(info)
        t0 = time.perf_counter()
        for t, _, vec in inst.stream():
            pol.allocate(t, vec)
        best = min(best, (time.perf_counter() - t0) / inst.m)
    return best


def offline_rerun_seconds(inst, offline, stride):
    """Seconds per good to recompute an offline allocation of the prefix at every arrival
    (sampled every ``stride`` arrivals and scaled)."""
    vals = inst.values[:, inst.order]
    t0 = time.perf_counter()
    count = 0
    for t in range(stride - 1, inst.m, stride):
        offline(vals[:, : t + 1])
        count += 1
    return (time.perf_counter() - t0) / max(count, 1)


def main():
    args = _parser().parse_args()
    try:
        from fairpyx.algorithms import round_robin as fairpyx_rr

        offline, offline_name = of.fairpyx_offline(fairpyx_rr), "fairpyx round_robin"
    except ImportError:
        offline, offline_name = of.round_robin, "round_robin"
    grid = [(2, 100), (5, 100), (2, 1000), (5, 1000)] if not args.quick else [(2, 100), (5, 300)]
    rng = np.random.default_rng(0)
    rows = []
    t_start = time.time()
    for n, m in grid:
        inst = of.random_instance(n, m, "uniform", rng)
        norm = of.NormalizationInfo.exact(inst)
        joint = of.FrequencyPrediction.exact(inst, "joint", rng)
        per_agent = of.FrequencyPrediction.exact(inst, "per_agent", rng)
        base = per_good_seconds(of.GreedyPolicy, inst, None)
        cells = {
            "CappedGreedy": per_good_seconds(of.CappedGreedy, inst, norm) / base,
            "MMSThresholdGreedy(lpt)": per_good_seconds(
                lambda: of.MMSThresholdGreedy(mms="lpt"), inst, per_agent, 1
            )
            / base,
            "PlanAndMatch(round_robin)": per_good_seconds(
                lambda: of.PlanAndMatch(of.round_robin), inst, joint, 1
            )
            / base,
            f"re-run {offline_name}": offline_rerun_seconds(inst, offline, max(1, m // 10)) / base,
        }
        rows.append((n, m, cells))
        print(
            f"n={n} m={m}: " + ", ".join(f"{k} {v:.1f}x" for k, v in cells.items()), file=sys.stderr
        )
    keys = list(rows[0][2])
    print("\n| n | m | " + " | ".join(keys) + " |", file=sys.stderr)
    print("|---" * (2 + len(keys)) + "|", file=sys.stderr)
    for n, m, cells in rows:
        print(
            f"| {n} | {m} | " + " | ".join(f"{cells[k]:.1f}x" for k in keys) + " |", file=sys.stderr
        )
    last = rows[-1][2]
    print(
        json.dumps(
            {
                "package": "online-fair",
                "claim": "per-good decision time of CappedGreedy relative to greedy (and of re-running offline)",
                "paper": "n/a (theory paper)",
                "ours": round(last["CappedGreedy"], 2),
                "baseline": round(last[f"re-run {offline_name}"], 2),
                "ratio": round(last[f"re-run {offline_name}"] / last["CappedGreedy"], 2),
                "seconds": round(time.time() - t_start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
