"""Is IRS's 1/KL(p*‖π) loss scale the cause of its miss in reproduce.py? Vary the optimiser.

Spurious digits (reproduce.py's headline task), seeds 0-2, 300 steps, test worst-group and
average accuracy for ERM, IRS (official loss (p*·L)/KL) and IRS without the 1/KL factor, under
Adam at the official lr 1e-3, Adam at reproduce.py's lr 1e-2, and SGD + momentum 0.9 (lr 0.05).

    python benchmarks/ablation_optimizer.py     # ~1 min on 2 CPU cores; prints one JSON line
"""

from __future__ import annotations

import argparse
import json
import sys
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
import torch

sys.path.insert(0, str(Path(__file__).parent))
import reproduce as R

ARMS = [("erm", 1e-4), ("irs", 0.03), ("irs", 0.1), ("irs", 0.3), ("irs_unscaled", 0.3)]


def _emit(result: dict) -> None:
    """The JSON line on stdout, and in ``--out`` when given."""
    line = json.dumps(result)
    print(line)
    if ARGS.out is not None:
        ARGS.out.write_text(line + "\n")


def sgd(params, lr, weight_decay):
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)


def main() -> None:
    torch.set_num_threads(1)
    adam = torch.optim.Adam
    out = {}
    for opt_name, opt, lr in (
        ("adam_1e-3", adam, 1e-3),
        ("adam_1e-2", adam, 1e-2),
        ("sgd_0.05", sgd, 0.05),
    ):
        torch.optim.Adam = (
            opt  # reproduce.train builds torch.optim.Adam(params, lr=, weight_decay=)
        )
        cfg = {"hidden": 64, "batch": 64, "steps": 300, "eval_every": 300, "warmup": 0.1}
        for m, knob in ARMS:
            ev = [
                R.train(R.task_spurious(s), m, knob, lr, s, cfg)["checkpoints"][-1]["test"]
                for s in range(3)
            ]
            out[f"{opt_name}/{m}({knob})"] = {
                "worst": round(float(np.mean([e["worst"] for e in ev])), 3),
                "avg": round(float(np.mean([e["avg"] for e in ev])), 3),
            }
            print(opt_name, m, knob, out[f"{opt_name}/{m}({knob})"], file=sys.stderr, flush=True)
    torch.optim.Adam = adam
    _emit(out)


if __name__ == "__main__":
    main()
