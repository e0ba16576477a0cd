"""Certificates beyond deterministic minimax (issue 42): writes ``benchmarks/certificates.json``
(or ``--out``).

* randomised: the sequence-form LP value (best expected ratio any *randomised* online algorithm
  guarantees against an oblivious adversary) beside the deterministic game value, same game;
* per_agent: the exact guarantee of the per-agent frequency reading (worst over every multiset
  profile on the grid of the minimax value), beside the 1/n that MMSThresholdGreedy proves.

Run: ``python benchmarks/certify.py`` (about 1 CPU minute). Separate from ``reproduce.py`` so the
over-budget ``--quick`` is not slowed down.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

OUT = pathlib.Path(__file__).with_name("certificates.json")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=pathlib.Path, default=OUT, help=f"the JSON to write (default: {OUT.name})"
    )
    return ap


# --help and bad options exit here, before the heavy imports below
ARGS = _parser().parse_args(None if __name__ == "__main__" else [])

import icml26_online_fair as of
import numpy as np

RANDOMISED = [  # (label, n, m, grid, notion, totals)
    ("totals", 2, 3, list(range(11)), "mms", [10, 10]),
    ("totals", 2, 3, list(range(13)), "mms", [12, 12]),
    ("totals", 2, 4, list(range(7)), "mms", [6, 6]),
    ("totals", 2, 4, list(range(9)), "mms", [8, 8]),
    ("totals", 2, 4, list(range(7)), "ef1", [6, 6]),
    ("totals", 2, 4, list(range(7)), "propx", [6, 6]),
    ("none", 2, 3, [0, 1, 3, 9], "mms", None),
    ("none", 2, 3, [0, 1, 3, 9], "ef1", None),
    ("none", 2, 3, [0, 1, 3, 9], "propx", None),
]
PER_AGENT = [
    (2, 4, [0, 1, 2, 3]),
    (2, 6, [0, 1, 2]),
    (2, 7, [0, 1, 2]),
    (3, 4, [0, 1, 2]),
    (3, 5, [0, 1, 2]),
    (3, 6, [0, 1]),
]


def main():
    rows = []
    for label, n, m, grid, notion, totals in RANDOMISED:
        rem = totals is not None
        t = time.process_time()
        cert = of.randomised_game_value(n, m, grid, notion, totals=totals, remainder=rem)
        cpu = time.process_time() - t
        det, _ = of.game_value(n, m, grid, notion, totals=totals, remainder=rem)
        rows.append(
            dict(
                information=label,
                n=n,
                m=m,
                grid=grid,
                notion=notion,
                totals=totals,
                remainder=rem,
                randomised=round(cert.value, 6),
                deterministic=round(det, 6),
                lp_variables=cert.n_variables,
                lp_cpu_s=round(cpu, 2),
            )
        )
        print(rows[-1], flush=True)
    pa = []
    for n, m, grid in PER_AGENT:
        t = time.process_time()
        value, _ = of.per_agent_worst_value(n, m, grid, "mms", max_games=10**6)
        pa.append(
            dict(
                n=n,
                m=m,
                grid=grid,
                notion="mms",
                value=round(value, 6),
                one_over_n=round(1 / n, 6),
                cpu_s=round(time.process_time() - t, 2),
            )
        )
        print(pa[-1], flush=True)
    # beyond exhaustive grids: seeded random profiles with more goods (values 0..K)
    sampled = []
    rng = np.random.default_rng(0)
    for n, ms, ks, count in [(2, (7, 8), (2, 5), 300), (3, (5, 6), (2, 3), 200)]:
        t = time.process_time()
        values = []
        for _ in range(count):
            m = int(rng.integers(ms[0], ms[1] + 1))
            k = int(rng.integers(ks[0], ks[1] + 1))
            p = rng.integers(0, k + 1, (n, m)).astype(float)
            values.append(of.per_agent_game_value(p, "mms"))
        sampled.append(
            dict(
                n=n,
                m=list(ms),
                max_value=list(ks),
                profiles=count,
                seed=0,
                min_value=round(min(values), 6),
                cpu_s=round(time.process_time() - t, 2),
            )
        )
        print(sampled[-1], flush=True)
    result = {
        "randomised": rows,
        "per_agent": pa,
        "per_agent_random": sampled,
        "known": "1/2-MMS is optimal for n = 2 with normalization (Zhou, Bai & Wu 2023)",
    }
    ARGS.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
