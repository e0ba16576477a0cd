"""Time per resampling step vs N: diffusion resampling (O(N² · n_steps)) vs entropic OT
(ott-jax Sinkhorn, O(N² · iterations)), d = 2, both jitted, same run, same machine.

Prints a table to stderr and one JSON line (the ratio at the largest N) to stdout.
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
    ap.add_argument(
        "--quick", action="store_true", help="N up to 512, 3 repeats (default 2048, 10)"
    )
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import jax
import jax.numpy as jnp
from icml26_diffusion_resampling import diffusion_resample, ot_resample


def bench(fn, *args, repeats):
    jax.block_until_ready(fn(*args))  # compile
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main():
    args = _parser().parse_args()
    sizes = (32, 128, 512) if args.quick else (32, 128, 512, 2048)
    repeats = 3 if args.quick else 10
    diff = jax.jit(lambda k, lw, x: diffusion_resample(k, lw, x, n_steps=8)[1])
    ot = jax.jit(
        lambda k, lw, x: ot_resample(k, lw, x, epsilon=0.5, threshold=1e-3, max_iterations=200)[1]
    )
    rows = []
    print(f"{'N':>6} {'diffusion ms':>13} {'OT ms':>10} {'OT/diffusion':>13}", file=sys.stderr)
    for n in sizes:
        x = jax.random.normal(jax.random.PRNGKey(n), (n, 2))
        lw = -0.5 * jnp.sum((x - 1.0) ** 2, axis=1)
        key = jax.random.PRNGKey(0)
        td, to = bench(diff, key, lw, x, repeats=repeats), bench(ot, key, lw, x, repeats=repeats)
        rows.append((n, td, to))
        print(f"{n:6d} {1e3 * td:13.3f} {1e3 * to:10.3f} {to / td:13.2f}", file=sys.stderr)
    n, td, to = rows[-1]
    print(
        json.dumps(
            {
                "bench": "diffusion-resampling speed",
                "N": n,
                "diffusion_over_ot_time": round(td / to, 3),
                "rows": [
                    {"N": r[0], "diffusion_ms": 1e3 * r[1], "ot_ms": 1e3 * r[2]} for r in rows
                ],
            }
        )
    )


if __name__ == "__main__":
    main()
