"""Fit time: the default fit vs the released recipe vs shapiq KernelSHAP, same run, same game.

Issue 29 measured 56.8 s for 1024 queries at n = 10 with the old default (minibatch-32 Adam).
Here, on a 10-atom ring-with-tail graph and a 2-layer message-passing game, each arm spends 1024
queries (all 2^10 coalitions); times are wall seconds in this process (ratios are the result).
Run: ``python benchmarks/bench_fit.py``; prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write the JSON line to this file (default: stdout only)",
    )
    return ap


# --help and bad options exit here, before the heavy imports below
ARGS = _parser().parse_args(None if __name__ == "__main__" else [])


import numpy as np
import shapiq
import torch
from icml26_tnshap import FitConfig, GraphTN, MaskedGraphGame, fit_surrogate, shapley_values


def _emit(result: dict) -> None:
    """The JSON line on stdout, and in ``--out`` when given."""
    line = json.dumps(result)
    print(line)
    if ARGS.out is not None:
        ARGS.out.write_text(line + "\n")


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    n = 10
    edges = [(i, (i + 1) % 6) for i in range(6)] + [(2, 6), (6, 7), (7, 8), (3, 9)]
    e = torch.tensor(edges).T
    ei = torch.cat([e, e.flip(0)], 1)
    g = torch.Generator().manual_seed(0)
    w1 = torch.randn(4, 8, generator=g, dtype=torch.float64)
    w2 = torch.randn(8, generator=g, dtype=torch.float64)

    def model(x, edge_index, batch):
        h = torch.tanh(
            (x + torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])) @ w1
        )
        return torch.zeros(int(batch.max()) + 1, dtype=x.dtype).index_add_(0, batch, h @ w2)

    game = MaskedGraphGame(model, torch.randn(n, 4, generator=g, dtype=torch.float64), ei)
    sv = shapiq.ExactComputer(game, n)("SV", 1)
    exact = np.array([sv[(u,)] for u in range(n)])
    out = {}
    for name, cfg in (
        ("default", FitConfig()),
        ("released recipe (minibatch Adam, 100 epochs)", FitConfig.paper(val_queries=0)),
    ):
        tn = GraphTN(game, bond_dim=3)
        t = time.perf_counter()
        fit = fit_surrogate(tn, game, budget=1024, config=cfg)
        phi = shapley_values(tn)
        sec = time.perf_counter() - t
        cos = float(phi @ exact / np.linalg.norm(phi) / np.linalg.norm(exact))
        out[name] = {"seconds": sec, "cosine": cos, "solver": fit.solver}
    t = time.perf_counter()
    shapiq.KernelSHAP(n, random_state=0).approximate(1024, game)
    out["shapiq KernelSHAP"] = {"seconds": time.perf_counter() - t}
    d, p, k = (out[key]["seconds"] for key in out)
    out["ratio_released_over_default"] = p / d
    out["ratio_default_over_kernelshap"] = d / k
    _emit(out)


if __name__ == "__main__":
    main()
