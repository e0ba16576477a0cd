"""RC-FCL vs FedAvg + generative replay under asynchronous concept drift (scikit-learn digits,
10 clients, 5 tasks of 2 classes), with the headroom visible: the no-drift ceiling and an oracle
that drops drifted clients. The full mode adds FedAvg, a FedDrift-style baseline, more ablations
and a second scenario on river's SEA concept-drift stream (StreamDriftScenario.river_sea).

    python benchmarks/reproduce.py --quick   # 10 paired seeds, 2 rounds/task, 2 validation seeds
    python benchmarks/reproduce.py           # 20 paired seeds, 3 rounds/task, 3 validation seeds,
                                             # + FedAvg, FedDrift, 4 more ablations, river SEA

Protocol
* Drift reading (stated): a drifting client's data stays drifted from its onset on (label swap
  or pixel inversion, magnitude U(0.6, 1)) while the test set is the clean concept: drifted
  clients are corrupted, and down-weighting them is the right response. The first round of a
  task cannot be tested (no reference of its classes exists yet); RC-FCL carries a client's last
  magnitude over that round (RCFCLConfig.carry_magnitude), so a flagged client stays held out of
  the classifier's and the generator's aggregation until it is tested again. The other reading
  the issue names, drift that ends at the task boundary, is measured as a headroom check
  (``task_end``): there drift costs FedAvg + GR nothing measurable, so no method can gain.
* Headroom: "ceiling" is FedAvg + GR on the same scenario with no drifting client; "oracle" is
  FedAvg + GR where every client whose data is drifted at a round sits that round out.
* 25% of digits is held out once as the reported test set; scenarios train on the rest.
* Equal tuning: every arm (ceiling, oracle and the ablations included) picks its local learning
  rate by mean validation accuracy on validation scenarios (other seeds, a validation split of
  the training pool, never the held-out test set), from the grid {0.1, 0.2, 0.4}; when an arm's
  best value is at an edge of its grid the grid is extended by a factor 2 past that edge (at
  most twice), so every chosen lr is bracketed unless the JSON says otherwise. The same rule
  and validation seeds for every arm. RC-FCL's knobs are fixed a priori (tolerance 0.5, test
  level 0.01, beta 5, lambda_0 1; FedDrift's threshold 1.0).
* Reported: final average accuracy over the 5 tasks, forgetting, event-level detection F1 and
  delay, over paired seeds (same scenario and init for every arm); the headline is the paired
  difference RC-FCL - (FedAvg + GR) with a 95% t-interval and its minimum detectable effect
  MDE = 2.8 * paired SD / sqrt(n) (80% power, 5% two-sided).

Prints one JSON line (package, claim, paper, ours, baseline, ratio, seconds) and writes the
full JSON next to this file (results_quick.json / results.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROUNDS_PER_TASK = {True: 2, False: 3}  # --quick: 2 rounds per task (10 rounds), full: 3
SEA_ROUNDS = 10  # river SEA scenario: one task (2 classes), 10 rounds, 100 samples per client-round
LR_GRID = [0.1, 0.2, 0.4]  # every arm, both modes; extended x2 past an edge optimum
MAX_EXTENSIONS = 2
DRIFT_UNTIL = "persistent"  # the headline reading (see the docstring)

RCFCL = {"method": "rcfcl", "tolerance": 0.5, "alpha": 0.01}
# arm -> (config overrides, scenario: "drift" | "no-drift", oracle drop of drifted clients)
ARMS: dict[str, tuple[dict, str, bool]] = {
    "fedavg_gr": ({"method": "fedavg_gr"}, "drift", False),
    "rcfcl": (RCFCL, "drift", False),
    "rcfcl-no-detection": ({**RCFCL, "detect": False}, "drift", False),
    "ceiling": ({"method": "fedavg_gr"}, "no-drift", False),
    "oracle": ({"method": "fedavg_gr"}, "drift", True),
}
FULL_ARMS: dict[str, tuple[dict, str, bool]] = {
    "fedavg": ({"method": "fedavg"}, "drift", False),
    "feddrift": ({"method": "feddrift", "cluster_threshold": 1.0}, "drift", False),
    "rcfcl-no-carry": ({**RCFCL, "carry_magnitude": False}, "drift", False),
    "rcfcl-no-weights": ({**RCFCL, "weighting": False}, "drift", False),
    "rcfcl-no-kd": ({**RCFCL, "kd": 0.0}, "drift", False),
    "rcfcl-no-drift-aggregation": ({**RCFCL, "beta": 0.0}, "drift", False),
}
SEA_ARMS = {k: ARMS[k] for k in ("fedavg_gr", "rcfcl", "rcfcl-no-detection", "ceiling", "oracle")}
# two-sided 95% t quantiles by degrees of freedom
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    24: 2.064,
    29: 2.045,
}


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # 2 threads on 2 shared cores is ~10x slower


def _data():
    from icml26_rcfcl import load_digits_xy

    x, y = load_digits_xy()
    perm = np.random.default_rng(12345).permutation(len(y))
    n_hold = len(y) // 4
    return (x[perm[n_hold:]], y[perm[n_hold:]]), (x[perm[:n_hold]], y[perm[:n_hold]])


def _scenario(data: str, seed: int, validation: bool, rpt: int, drift: str, until: str):
    from icml26_rcfcl import AsyncDriftScenario, StreamDriftScenario

    if data == "sea":  # river's SEA stream: validation and reported runs use other seeds
        n_drifting = 0 if drift == "no-drift" else 5  # the clean clients' streams are unchanged
        return StreamDriftScenario.river_sea(
            n_rounds=SEA_ROUNDS, per_round=100, n_drifting=n_drifting, seed=seed
        )
    (xp, yp), hold = _data()
    if validation:  # train and validate inside the pool; the held-out set is never seen
        kw: dict = {"test_fraction": 0.3}
    else:
        kw = {"test": hold}
    sc = AsyncDriftScenario.make(xp, yp, rounds_per_task=rpt, drift_until=until, seed=seed, **kw)
    return sc.without_drift() if drift == "no-drift" else sc


# job: (data, arm, overrides, seed, validation, rounds per task, drift_until)
Job = tuple[str, str, dict, int, bool, int, str]


def _run(job: Job) -> dict:
    from icml26_rcfcl import RCFCLConfig, detection_scores, simulate

    data, arm, overrides, seed, validation, rpt, until = job
    _, drift, oracle = {**ARMS, **FULL_ARMS}[arm]
    sc = _scenario(data, seed, validation, rpt, drift, until)
    shape = {"x_dim": 3, "n_classes": 2} if data == "sea" else {}
    cfg = replace(RCFCLConfig(), **shape, **overrides)
    t0 = time.process_time()
    res = simulate(sc, cfg, seed=seed, oracle_drop=oracle)
    det = detection_scores(res.flags, sc)
    return {
        "data": data,
        "arm": arm,
        "seed": seed,
        "validation": validation,
        "drift_until": until,
        "overrides": overrides,
        "accuracy": res.final_accuracy,
        "forgetting": res.forgetting,
        "f1": det["f1"],
        "precision": det["precision"],
        "recall": det["recall"],
        "delay": det["delay"],
        "cpu_s": time.process_time() - t0,
    }


def _t975(df: int) -> float:
    return T975.get(df) or T975[max(k for k in T975 if k <= df)] if df >= 1 else float("nan")


def _mean_ci(v: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its two-sided 95% t-interval."""
    a = np.asarray(v, dtype=float)
    if len(a) < 2:
        return float(a.mean()), float("nan")
    return float(a.mean()), float(_t975(len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a)))


def _paired(a: np.ndarray, b: np.ndarray) -> dict:
    d = np.asarray(a, float) - np.asarray(b, float)
    mean, half = _mean_ci(list(d))
    sd = float(d.std(ddof=1)) if len(d) > 1 else float("nan")
    return {
        "mean": mean,
        "ci95": [mean - half, mean + half],
        "half_width": half,
        "sd": sd,
        "n": len(d),
        "mde": 2.8 * sd / math.sqrt(len(d)),  # 80% power, 5% two-sided
        "per_seed": d.tolist(),
    }


def _tune(pool, data: str, arms: dict, val_seeds, rpt: int) -> tuple[dict, dict]:
    """Every arm's lr by mean validation accuracy over the same validation seeds; a grid whose
    best value is at an edge is extended by x2 past it (at most MAX_EXTENSIONS times)."""
    grids = {arm: list(LR_GRID) for arm in arms}
    done: dict[str, dict[float, list[dict]]] = {arm: {} for arm in arms}
    extensions = dict.fromkeys(arms, 0)
    todo = {arm: list(LR_GRID) for arm in arms}
    while any(todo.values()):
        jobs: list[Job] = [
            (data, arm, {**arms[arm][0], "lr": lr}, s, True, rpt, DRIFT_UNTIL)
            for arm, lrs in todo.items()
            for lr in lrs
            for s in val_seeds
        ]
        for r in pool.map(_run, jobs):
            done[r["arm"]].setdefault(r["overrides"]["lr"], []).append(r)
        todo = {}
        for arm in arms:
            grid = sorted(grids[arm])
            best = max(grid, key=lambda lr: float(np.mean([r["accuracy"] for r in done[arm][lr]])))
            if extensions[arm] < MAX_EXTENSIONS and best in (grid[0], grid[-1]):
                new = round(best / 2 if best == grid[0] else best * 2, 6)
                grids[arm].append(new)
                extensions[arm] += 1
                todo[arm] = [new]
    chosen, tuning = {}, {}
    for arm in arms:
        grid = sorted(grids[arm])
        val = {lr: float(np.mean([r["accuracy"] for r in done[arm][lr]])) for lr in grid}
        best = max(grid, key=lambda lr: val[lr])
        chosen[arm] = {**arms[arm][0], "lr": best}
        tuning[arm] = {
            "grid": grid,
            "val_accuracy": {str(lr): val[lr] for lr in grid},
            "val_accuracy_per_seed": {
                str(lr): [r["accuracy"] for r in sorted(done[arm][lr], key=lambda r: r["seed"])]
                for lr in grid
            },
            "chosen_lr": best,
            "bracketed": grid[0] < best < grid[-1],
            "cpu_s": sum(r["cpu_s"] for rs in done[arm].values() for r in rs),
        }
    return chosen, tuning


def _summary(runs: list[dict], arms) -> dict:
    out: dict[str, dict] = {}
    for arm in arms:
        rs = sorted((r for r in runs if r["arm"] == arm), key=lambda r: r["seed"])
        out[arm] = {
            k: _mean_ci([r[k] for r in rs if not math.isnan(r[k])] or [float("nan")])
            for k in ("accuracy", "forgetting", "f1", "delay")
        }
        out[arm]["per_seed_accuracy"] = [r["accuracy"] for r in rs]
    return out


def _benchmark(pool, data: str, arms: dict, seeds, val_seeds, rpt: int) -> dict:
    """Tune every arm's lr on the validation seeds, then run every arm on the reported seeds."""
    chosen, tuning = _tune(pool, data, arms, val_seeds, rpt)
    jobs: list[Job] = [
        (data, arm, chosen[arm], s, False, rpt, DRIFT_UNTIL) for arm in arms for s in seeds
    ]
    runs = pool.map(_run, jobs)
    summary = _summary(runs, arms)
    acc = {a: np.array(summary[a]["per_seed_accuracy"]) for a in arms}
    paired = {a: _paired(acc["rcfcl"], acc[a]) for a in arms if a != "rcfcl"}
    gr = acc["fedavg_gr"]
    headroom = {
        "ceiling_minus_fedavg_gr": _paired(acc["ceiling"], gr),
        "oracle_minus_fedavg_gr": _paired(acc["oracle"], gr),
        "rcfcl_minus_fedavg_gr": paired["fedavg_gr"],
        "rcfcl_no_detection_minus_fedavg_gr": _paired(acc["rcfcl-no-detection"], gr),
        # share of the drift's cost that RC-FCL wins back (ratio of mean differences)
        "recovered_fraction": float((acc["rcfcl"] - gr).mean() / (acc["ceiling"] - gr).mean()),
    }
    return {
        "chosen": chosen,
        "tuning": tuning,
        "summary": summary,
        "paired": paired,
        "headroom": headroom,
        "runs": runs,
    }


def _task_end_check(pool, chosen: dict, seeds, rpt: int) -> dict:
    """The other reading: drift ends at the task boundary. Ceiling, FedAvg + GR and RC-FCL at
    the lrs chosen for the headline (no separate tuning: a headroom check, not a comparison)."""
    arms = ("ceiling", "fedavg_gr", "rcfcl")
    jobs: list[Job] = [
        ("digits", a, chosen[a], s, False, rpt, "task_end") for a in arms for s in seeds
    ]
    runs = pool.map(_run, jobs)
    summary = _summary(runs, arms)
    acc = {a: np.array(summary[a]["per_seed_accuracy"]) for a in arms}
    return {
        "seeds": list(seeds),
        "summary": summary,
        "ceiling_minus_fedavg_gr": _paired(acc["ceiling"], acc["fedavg_gr"]),
        "rcfcl_minus_fedavg_gr": _paired(acc["rcfcl"], acc["fedavg_gr"]),
        "runs": runs,
    }


def _diagnostic(pool, names: list[str], quick: bool, seeds, val_seeds, rpt: int, out: Path) -> None:
    """``--arms a,b``: only these arms, tuned and run exactly as in the headline (same grid rule,
    seeds and validation seeds), each compared with FedAvg + GR (paired); no row line."""
    every = {**ARMS, **FULL_ARMS}
    arms = {a: every[a] for a in dict.fromkeys(["fedavg_gr", *names])}
    chosen, tuning = _tune(pool, "digits", arms, val_seeds, rpt)
    jobs: list[Job] = [
        ("digits", a, chosen[a], s, False, rpt, DRIFT_UNTIL) for a in arms for s in seeds
    ]
    runs = pool.map(_run, jobs)
    summary = _summary(runs, arms)
    acc = {a: np.array(summary[a]["per_seed_accuracy"]) for a in arms}
    res = {
        "quick": quick,
        "drift_until": DRIFT_UNTIL,
        "seeds": list(seeds),
        "validation_seeds": list(val_seeds),
        "rounds_per_task": rpt,
        "chosen": chosen,
        "tuning": tuning,
        "summary": summary,
        "paired_minus_fedavg_gr": {
            a: _paired(acc[a], acc["fedavg_gr"]) for a in arms if a != "fedavg_gr"
        },
        "runs": runs,
    }
    out.write_text(json.dumps(res, indent=1, default=float) + "\n")
    for a, p in res["paired_minus_fedavg_gr"].items():
        print(
            f"# {a}: lr {chosen[a]['lr']:g}, acc {100 * summary[a]['accuracy'][0]:.1f}, "
            f"minus FedAvg+GR {100 * p['mean']:+.1f} [{100 * p['ci95'][0]:+.1f}, "
            f"{100 * p['ci95'][1]:+.1f}]",
            file=sys.stderr,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--arms", help="diagnostic: only these arms (comma list) vs FedAvg + GR")
    ap.add_argument("--out", help="diagnostic: the JSON file --arms writes")
    args = ap.parse_args()
    t0 = time.time()
    quick = args.quick
    seeds = list(range(10)) if quick else list(range(20))
    val_seeds = [100, 101] if quick else [100, 101, 102]
    rpt = ROUNDS_PER_TASK[quick]
    arms = dict(ARMS) if quick else {**ARMS, **FULL_ARMS}

    pool = get_context("spawn").Pool(args.workers, initializer=_init_worker)
    if args.arms:
        out = Path(args.out) if args.out else HERE / "results_diagnostic.json"
        names = [a.strip() for a in args.arms.split(",") if a.strip()]
        unknown = [a for a in names if a not in {**ARMS, **FULL_ARMS}]
        if unknown:
            raise SystemExit(f"--arms: unknown arm(s) {unknown}")
        _diagnostic(pool, names, quick, seeds, val_seeds, rpt, out)
        pool.close()
        return
    digits = _benchmark(pool, "digits", arms, seeds, val_seeds, rpt)
    task_end = _task_end_check(pool, digits["chosen"], seeds[:5] if quick else seeds, rpt)
    sea = None if quick else _benchmark(pool, "sea", SEA_ARMS, seeds, val_seeds, SEA_ROUNDS)
    pool.close()
    # CPU seconds of the simulations (workers' process time; excludes start-up and imports)
    cpu_s = sum(r["cpu_s"] for r in digits["runs"] + task_end["runs"])
    cpu_s += sum(t["cpu_s"] for t in digits["tuning"].values())
    if sea is not None:
        cpu_s += sum(r["cpu_s"] for r in sea["runs"])
        cpu_s += sum(t["cpu_s"] for t in sea["tuning"].values())
    summary, head = digits["summary"], digits["headroom"]
    d = head["rcfcl_minus_fedavg_gr"]
    ceil, orac = head["ceiling_minus_fedavg_gr"], head["oracle_minus_fedavg_gr"]
    ours, base = summary["rcfcl"]["accuracy"][0], summary["fedavg_gr"]["accuracy"][0]
    seconds = time.time() - t0
    line = {
        "package": "rcfcl",
        "claim": (
            f"final avg accuracy, digits, 10 clients, 5 persistently drifting, {len(seeds)} "
            f"paired seeds: RC-FCL - (FedAvg+GR) = {100 * d['mean']:+.1f} "
            f"[{100 * d['ci95'][0]:+.1f}, {100 * d['ci95'][1]:+.1f}] pts (95% CI, MDE "
            f"{100 * d['mde']:.1f}); headroom: ceiling {100 * ceil['mean']:+.1f}, oracle "
            f"{100 * orac['mean']:+.1f}; detection F1 {summary['rcfcl']['f1'][0]:.2f}"
        ),
        "paper": (
            "competitive with FCL baselines (no numbers public); targets: >= +3 pts over "
            "FedAvg+GR, F1 >= 0.8"
        ),
        "ours": round(ours, 4),
        "baseline": round(base, 4),
        "ratio": round(ours / base, 3),
        "seconds": round(seconds, 1),
    }
    full = {
        **line,
        "quick": quick,
        "drift_until": DRIFT_UNTIL,
        "seeds": seeds,
        "validation_seeds": val_seeds,
        "rounds_per_task": rpt,
        "lr_grid": LR_GRID,
        "simulation_cpu_s": round(cpu_s, 1),
        "chosen": digits["chosen"],
        "tuning": digits["tuning"],
        "summary": summary,
        "paired_rcfcl_minus": digits["paired"],
        "headroom": head,
        "runs": digits["runs"],
        "task_end": task_end,
        "sea": sea,
    }
    out = HERE / ("results_quick.json" if quick else "results.json")
    out.write_text(json.dumps(full, indent=1, default=float) + "\n")
    for data, res in (("digits", digits), ("sea", sea)):
        if res is None:
            continue
        for arm in res["chosen"]:
            s = res["summary"][arm]
            print(
                f"# {data:6s} {arm:28s} lr {res['chosen'][arm]['lr']:.3g}  "
                f"acc {100 * s['accuracy'][0]:5.1f} ± {100 * s['accuracy'][1]:4.1f}  "
                f"forget {100 * s['forgetting'][0]:5.1f}  F1 {s['f1'][0]:.2f}  "
                f"delay {s['delay'][0]:.2f}",
                file=sys.stderr,
            )
    print(json.dumps(line))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
