"""The low-budget sweep, rerun: is the 50-query gap the fitting recipe?

On the first 8 molecules of ``reproduce.py`` (same 3-layer GIN as ``--quick``), fit the surrogate
at budgets 50, 100 and 200 with χ ∈ {2, 3} and these recipes, all spending exactly ``budget``
queries:

- ``paper, 1/6 carved``: the released code's Adam recipe (minibatch 32, lr 1e-2, 100 epochs,
  plateau schedule, early stopping) with its validation queries carved out of the budget
  (``budget − budget // 6`` training + ``budget // 6`` validation): the package's old default;
- ``minibatch, no validation``: the same Adam, all queries training, 200 epochs;
- ``default (auto)``: ``FitConfig()`` (full-batch Adam, 300 steps, cosine decay, below twice the
  free parameters; L-BFGS above);
- ``ALS`` (ridge 1e-3) and ``L-BFGS`` (500 iterations): the exact/second-order solvers;
- the bond-pairwise least-squares ablation for reference.

Prints the mean / min cosine of φ to the exact Shapley values and the seconds per fit.
Run: ``python benchmarks/sweep_low_budget.py`` (a few minutes on 2 CPU cores).
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
        help="also write the table rows as JSON here (default: the table only)",
    )
    return ap


# --help and bad options exit here, before the heavy imports below
ARGS = _parser().parse_args(None if __name__ == "__main__" else [])


import numpy as np
import reproduce as R
import torch
from icml26_tnshap import FitConfig, GraphTN, MaskedGraphGame, fit_surrogate, shapley_values


def recipes(budget: int) -> dict[str, tuple[int, FitConfig]]:
    """name -> (training budget, config); every recipe spends ``budget`` queries in total."""
    return {
        "paper, 1/6 carved": (budget - budget // 6, FitConfig.paper(val_queries=budget // 6)),
        "minibatch, no validation": (budget, FitConfig.paper(val_queries=0, epochs=200)),
        "default (auto)": (budget, FitConfig()),
        "ALS": (budget, FitConfig(solver="als")),
        "L-BFGS": (budget, FitConfig(solver="lbfgs", lbfgs_iters=500)),
    }


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    data = R.freesolv()
    model = R.train_model(data, layers=3, epochs=15)
    games = []
    for _, x, ei, _ in R.choose_molecules(data, 20)[:8]:
        game = MaskedGraphGame(model, x.double(), ei, baseline=0.0, batch_size=1024)
        games.append((game, R.exact_reference(game)[0]))

    rows = []
    print("| budget | χ | recipe | mean cosine | min cosine | s / fit |")
    print("|---|---|---|---|---|---|")
    for budget in (50, 100, 200):
        for chi in (2, 3):
            for name, (train, cfg) in recipes(budget).items():
                t = time.perf_counter()
                cos = []
                for seed, (game, exact) in enumerate(games):
                    tn = GraphTN(game, bond_dim=chi, seed=seed)
                    cfg.seed = seed
                    fit_surrogate(tn, game, budget=train, config=cfg)
                    cos.append(R.cosine(shapley_values(tn), exact))
                sec = (time.perf_counter() - t) / len(games)
                rows.append(
                    dict(budget=budget, chi=chi, recipe=name, mean_cosine=float(np.mean(cos)),
                         min_cosine=float(np.min(cos)), seconds_per_fit=sec)
                )  # fmt: skip
                print(
                    f"| {budget} | {chi} | {name} | {np.mean(cos):.4f} | {np.min(cos):.3f} | {sec:.2f} |",
                    flush=True,
                )
        cos = [R.cosine(R.bond_pairwise_ls(g, budget, s)[0], e) for s, (g, e) in enumerate(games)]
        print(
            f"| {budget} | | bond-pairwise LS | {np.mean(cos):.4f} | {np.min(cos):.3f} | |",
            flush=True,
        )
        rows.append(
            dict(budget=budget, recipe="bond-pairwise LS", mean_cosine=float(np.mean(cos)),
                 min_cosine=float(np.min(cos)))
        )  # fmt: skip
    if ARGS.out is not None:
        ARGS.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
