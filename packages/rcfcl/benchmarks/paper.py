"""RC-FCL's experiment: federated class-incremental learning on split CIFAR-100 under asynchronous
concept drift, on Flower's simulation engine, RC-FCL against FedAvg and FedAvg + generative
replay, paired per seed.

One Flower run (``flwr.simulation.run_simulation``: a ``ServerApp`` and a ``ClientApp`` on
``--clients`` virtual SuperNodes) executes every (arm, seed): the ServerApp starts one
``icml26_rcfcl.flower.RCFCLStrategy`` per (arm, seed) on the same Grid, sends the arm and seed in
the train ``ConfigRecord``, and evaluates the global model centrally (``evaluate_fn``) on the
clean test images of every task learned so far at the end of each task: the per-task accuracy
matrix acc[i, j] (task j after task i), whose last row's mean is the final average accuracy and
whose column drops are the forgetting (``icml26_rcfcl.SimulationResult``'s definitions). Each
ClientApp node runs ``icml26_rcfcl.flower.RCFCLClient`` (the package's ``local_update``:
generator reference, drift test, weighted adaptation) on its shard, building the scenario once
per process from the dataset (``AsyncDriftScenario.make``: tasks of consecutive classes, half the
clients drifting at their own round by their own magnitude, label swap or intensity inversion).
Per seed every arm sees the same scenario and initialisation: the paired comparisons are RC-FCL
- arm per seed (final average accuracy and forgetting, in points, 95% t-intervals).

Run (a machine with 16 cores; ``datasets`` fetches ``uoft-cs/cifar100``; GPU not used: the
package's models are CPU torch)::

    uv run --package icml26-rcfcl --group dev --with "flwr[simulation]==1.42.0" \\
        --with ray==2.55.1 --with datasets --with pillow python packages/rcfcl/benchmarks/paper.py
    python packages/rcfcl/benchmarks/paper.py --smoke   # offline, 2 clients, 2 rounds, < 60 s

Cost [estimate, from one client round measured per task stage, CPU time, 1 thread, on the
shared 2-core dev machine]: a client round at the default sizes (100 images, 5 local epochs of
the 3072-256-100 MLP, the 3072-dim CVAE refit for 10 epochs on them + 20 replayed images per
old class) costs RC-FCL 1.3 / 3.5 / 5.5 CPU-s after 1 / 5 / 9 tasks, FedAvg + GR 0.9 / 2.6 /
5.4, FedAvg 0.07; one seed (3 arms x 50 clients x 50 rounds) is about 4.3 CPU-hours, the
default 5 seeds about 22 CPU-hours (about 1.5 h wall on 16 cores); no GPU-hours.

The paper (ICML 2026 poster 64573) has no public code or text beyond the abstract, which
reports only "competitive performance": **every constant here is a reconstruction [recon]**
(research notes, ../shared/papers/rcfcl.md): split CIFAR-100 as 10 tasks x 10 classes (the FCL
anchors FedSpace / FedDAA use CIFAR-100), 50 clients (FedSpace's smallest CIFAR-100 setting), 5
rounds per task, 5 local epochs and batch 32 (the package's defaults), local SGD lr 0.01
(the package's 0.1 diverges on 3072-dim pixels: measured on the smoke images), the generator's
z 100 and Adam lr 1e-3 (an MFCL server's constants in the notes), 25 of 50 clients
drifting with magnitude U(0.6, 1) (the package's scenario), lambda_0 = 0.1 (chosen on
validation in the package's digits benchmark), 5 paired seeds (the notes' benchmark size). The
model is the package's MLP classifier + CVAE on flattened pixels, not a ResNet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "dataset": "uoft-cs/cifar100",  # [recon] split CIFAR-100 (the FCL anchors' benchmark)
    "image_column": "img",  # uoft-cs/cifar100's card: img (32x32 RGB), fine_label, coarse_label
    "label_column": "fine_label",
    "train_split": "train",
    "test_split": "test",
    "n_tasks": 10,  # [recon] 10 tasks x 10 classes
    "n_clients": 50,  # [recon] FedSpace's smallest CIFAR-100 federation
    "rounds_per_task": 5,  # [recon]
    "n_drifting": 25,  # [recon] half the clients (the package's scenario)
    "magnitude_range": [0.6, 1.0],  # [recon] the package's scenario
    "drift_until": "persistent",  # [recon] the package benchmark's reading
    "local_epochs": 5,  # [recon] the package default
    "lr": 0.01,  # [recon] local SGD; the package's 0.1 diverges on 3072-dim pixels (smoke data)
    "batch_size": 32,  # [recon] the package default
    "hidden": 256,  # [recon] MLP 3072-256-100 (the package's architecture, widened)
    "z_dim": 100,  # notes: an MFCL server's generator z_dim
    "gen_lr": 1e-3,  # notes: the same server's Adam lr
    "gen_epochs": 10,  # [recon] the package default (local CVAE epochs per round)
    "replay_per_class": 20,  # [recon] the package default
    "ref_per_class": 60,  # [recon] the package default
    "kd": 0.1,  # [recon] lambda_0, the package's digits benchmark's validation choice
    "beta": 5.0,  # [recon] the package default: alpha_k ~ n_k exp(-beta m_k)
    "alpha": 0.01,  # [recon] the package default test level
    "tolerance": 0.5,  # [recon] the package default
    "arms": ["rcfcl", "fedavg", "fedavg_gr"],
    "seeds": [0, 1, 2, 3, 4],  # [recon] the notes' benchmark: 5 seeds
    "reported": "none: the abstract says only 'competitive performance against state-of-the-art'",
    "metric": "final average accuracy (mean of the last row of the per-task accuracy matrix) and "
    "average forgetting (mean over tasks j < T-1 of max_{i<T-1} acc[i, j] - acc[T-1, j]), on the "
    "clean test images",
}
NOT_RECON = (
    "image_column",
    "label_column",
    "train_split",
    "test_split",
    "arms",
    "reported",
    "metric",
)
RECON = [k for k in PAPER if k not in NOT_RECON]  # the dataset's schema is its card's
BASELINE_NAMES = {"fedavg": "FedAvg", "fedavg_gr": "FedAvg + generative replay"}
SMOKE = {
    "n_tasks": 2,
    "n_clients": 2,
    "rounds_per_task": 1,
    "n_drifting": 1,
    "local_epochs": 3,
    "batch_size": 8,
    "hidden": 8,
    "z_dim": 2,
    "gen_epochs": 1,
    "replay_per_class": 4,
    "ref_per_class": 8,
    "seeds": [0, 1],
    "num_cpus": 2,
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="hub id (datasets.load_dataset) or a local dir with train.jsonl / test.jsonl rows",
    )
    p.add_argument("--image-column", default=PAPER["image_column"], help="image column")
    p.add_argument("--label-column", default=PAPER["label_column"], help="class label column")
    p.add_argument("--n-tasks", type=int, default=PAPER["n_tasks"], help="tasks (class groups)")
    p.add_argument("--clients", type=int, default=PAPER["n_clients"], help="Flower SuperNodes")
    p.add_argument(
        "--rounds-per-task", type=int, default=PAPER["rounds_per_task"], help="rounds per task"
    )
    p.add_argument("--drifting", type=int, default=PAPER["n_drifting"], help="clients that drift")
    p.add_argument(
        "--local-epochs", type=int, default=PAPER["local_epochs"], help="local SGD epochs"
    )
    p.add_argument("--lr", type=float, default=PAPER["lr"], help="local SGD learning rate")
    p.add_argument("--batch-size", type=int, default=PAPER["batch_size"], help="local batch")
    p.add_argument("--hidden", type=int, default=PAPER["hidden"], help="MLP / CVAE hidden width")
    p.add_argument("--z-dim", type=int, default=PAPER["z_dim"], help="CVAE latent size")
    p.add_argument("--gen-lr", type=float, default=PAPER["gen_lr"], help="CVAE Adam lr")
    p.add_argument("--gen-epochs", type=int, default=PAPER["gen_epochs"], help="CVAE epochs")
    p.add_argument(
        "--replay-per-class",
        type=int,
        default=PAPER["replay_per_class"],
        help="replayed samples per old class",
    )
    p.add_argument(
        "--ref-per-class",
        type=int,
        default=PAPER["ref_per_class"],
        help="reference samples per class for the drift test",
    )
    p.add_argument("--kd", type=float, default=PAPER["kd"], help="lambda_0 of the calibrated KD")
    p.add_argument("--beta", type=float, default=PAPER["beta"], help="aggregation temperature")
    p.add_argument("--alpha", type=float, default=PAPER["alpha"], help="drift test level")
    p.add_argument(
        "--tolerance", type=float, default=PAPER["tolerance"], help="drift test tolerance"
    )
    p.add_argument(
        "--arms",
        nargs="+",
        default=PAPER["arms"],
        choices=PAPER["arms"],
        help="methods (rcfcl first: the others are its baselines)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=PAPER["seeds"], help="paired seeds")
    p.add_argument(
        "--num-cpus", type=int, default=None, help="ray CPUs (default: all); 1 per client"
    )
    p.add_argument(
        "--check-simulator",
        action="store_true",
        help="also run the in-process simulate() per (arm, seed) and record the difference "
        "(on with --smoke)",
    )
    p.add_argument("--out", default="paper_rcfcl.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: generated CIFAR-100-schema images (4 classes), tiny model, 2 clients, "
        "2 rounds, 2 seeds",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


# ---------------------------------------------------------------------------- data


def _read_rows(spec: str, split: str) -> list[dict] | Any:
    """Rows of ``split``: ``spec/<split>.jsonl`` for a local dir, else the hub dataset."""
    local = Path(spec)
    if local.is_dir():
        path = local / f"{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"--dataset {spec}: no {path.name} in the directory")
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(
            f"--dataset {spec}: loading a hub dataset needs the 'datasets' package (and "
            "'pillow' for its images): uv run --with datasets --with pillow ...; or pass a "
            "local dir with train.jsonl / test.jsonl"
        ) from exc
    return datasets.load_dataset(spec, split=split)


def load_images(spec: str, split: str, image_column: str, label_column: str) -> tuple[Any, Any]:
    """(x, y): images flattened to float32 in [0, 1] (N, H*W*C) and int64 labels (N,)."""
    import numpy as np

    rows = _read_rows(spec, split)
    first = rows[0]
    for col in (image_column, label_column):
        if col not in first:
            raise KeyError(f"--dataset {spec}: split {split!r} has no column {col!r}")
    imgs = np.stack([np.asarray(r[image_column], dtype=np.uint8) for r in rows])
    y = np.asarray([int(r[label_column]) for r in rows], dtype=np.int64)
    return (imgs.reshape(len(imgs), -1) / 255.0).astype(np.float32), y


def write_smoke(root: Path, per_class: int = 24, n_classes: int = 4) -> str:
    """Generated rows in uoft-cs/cifar100's schema (img: 32x32x3 uint8, fine_label, coarse_label;
    splits train / test) for ``n_classes`` classes: each class a colour + a bar, plus noise."""
    import numpy as np

    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", per_class), ("test", per_class // 2)):
        with open(root / f"{split}.jsonl", "w") as f:
            for c in range(n_classes):
                for _ in range(n):
                    img = rng.normal(0.3, 0.1, (32, 32, 3))
                    img[..., c % 3] += 0.4
                    img[8 * c : 8 * c + 8, :, :] += 0.3
                    px = (255 * img.clip(0, 1)).astype(np.uint8)
                    row = {"img": px.tolist(), "fine_label": c, "coarse_label": c // 2}
                    f.write(json.dumps(row) + "\n")
    return str(root)


def scenario_spec(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "dataset": args.dataset,
        "image_column": args.image_column,
        "label_column": args.label_column,
        "n_tasks": args.n_tasks,
        "n_clients": args.clients,
        "rounds_per_task": args.rounds_per_task,
        "n_drifting": args.drifting,
        "magnitude_range": tuple(PAPER["magnitude_range"]),
        "drift_until": PAPER["drift_until"],
    }


def _process_cache() -> dict:
    """A dict that lives once per process. Not a module global: Flower ships the ClientApp's
    handler to its ray actors by value (cloudpickle), with the globals it references, so a
    global cache would travel, data and all, with every message."""
    import types

    mod = sys.modules.get("_icml26_rcfcl_paper_cache")
    if mod is None:
        mod = sys.modules["_icml26_rcfcl_paper_cache"] = types.ModuleType(
            "_icml26_rcfcl_paper_cache"
        )
        mod.cache = {}  # type: ignore[attr-defined]
    return mod.cache  # type: ignore[attr-defined]


def build_scenario(spec: dict[str, Any], seed: int) -> Any:
    """The seed's scenario, built once per process (ServerApp and every ClientApp actor)."""
    from icml26_rcfcl import AsyncDriftScenario

    cache = _process_cache()
    key = ("scenario", tuple(sorted(spec.items())), seed)
    if key not in cache:
        dkey = ("data", spec["dataset"], spec["image_column"], spec["label_column"])
        if dkey not in cache:
            cache[dkey] = tuple(
                load_images(spec["dataset"], split, spec["image_column"], spec["label_column"])
                for split in (PAPER["train_split"], PAPER["test_split"])
            )
        (x, y), test = cache[dkey]
        for k in [k for k in cache if k[0] == "scenario"]:
            del cache[k]  # one scenario at a time (seeds run in turn): 0.6 GB each at CIFAR-100
        cache[key] = AsyncDriftScenario.make(
            x,
            y,
            test=test,
            n_clients=spec["n_clients"],
            n_tasks=spec["n_tasks"],
            rounds_per_task=spec["rounds_per_task"],
            n_drifting=spec["n_drifting"],
            magnitude_range=spec["magnitude_range"],
            drift_until=spec["drift_until"],
            seed=seed,
        )
    return cache[key]


def arm_config(args: argparse.Namespace, arm: str, x_dim: int, n_classes: int) -> Any:
    from icml26_rcfcl import RCFCLConfig

    return RCFCLConfig(
        method=arm,
        x_dim=x_dim,
        n_classes=n_classes,
        hidden=args.hidden,
        lr=args.lr,
        local_epochs=args.local_epochs,
        batch_size=args.batch_size,
        replay_per_class=args.replay_per_class,
        ref_per_class=args.ref_per_class,
        gen_epochs=args.gen_epochs,
        gen_lr=args.gen_lr,
        z_dim=args.z_dim,
        kd=args.kd,
        beta=args.beta,
        alpha=args.alpha,
        tolerance=args.tolerance,
    )


# ---------------------------------------------------------------------------- Flower apps


def client_train(spec: dict[str, Any], cfgs: dict[str, Any], msg: Any, context: Any) -> Any:
    """The ClientApp's train handler: reads (arm, seed) from the train ConfigRecord and runs the
    package's ``RCFCLClient`` on this node's shard (``partition-id``) of that seed's scenario.
    A node serves every (arm, seed) in turn: at a run's first round its carried drift magnitude
    (``context.state["rcfcl"]``, the previous run's) is dropped, as ``simulate`` starts at 0."""
    from icml26_rcfcl.flower import RCFCLClient

    conf = msg.content["config"]
    arm, seed = str(conf["arm"]), int(conf["seed"])
    if int(conf["server-round"]) == 1 and "rcfcl" in context.state:
        del context.state["rcfcl"]
    client = RCFCLClient(build_scenario(spec, seed), cfgs[arm], seed=seed)
    return client.train(msg, context)


def make_client_app(spec: dict[str, Any], cfgs: dict[str, Any]) -> Any:
    """The ClientApp (``client_train`` for every train message)."""
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train()
    def train(msg: Any, context: Any) -> Any:
        return client_train(spec, cfgs, msg, context)

    return app


def make_server_app(
    spec: dict[str, Any], cfgs: dict[str, Any], seeds: list[int], log: Any
) -> tuple[Any, dict]:
    """The ServerApp: one ``RCFCLStrategy`` per (arm, seed), run one after another on the Grid,
    with central evaluation at the end of every task. Fills and returns ``runs``."""
    import numpy as np
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
    from flwr.serverapp import ServerApp
    from icml26_rcfcl.flower import RCFCLStrategy
    from icml26_rcfcl.rcfcl import init_params

    runs: dict[str, dict] = {}
    app = ServerApp()

    @app.main()
    def main(grid: Any, context: Any) -> None:
        for seed in seeds:
            sc = build_scenario(spec, seed)
            n_tasks = len(sc.tasks)
            for arm, cfg in cfgs.items():
                t0 = time.perf_counter()
                strategy = RCFCLStrategy(
                    beta=cfg.beta if cfg.uses_drift else 0.0,
                    fraction_train=1.0,
                    min_train_nodes=sc.n_clients,
                    min_available_nodes=sc.n_clients,
                )
                acc = np.zeros((n_tasks, n_tasks))  # as simulate()
                evaluated: list[int] = []

                def evaluate_fn(
                    server_round: int, arrays: Any, sc=sc, cfg=cfg, acc=acc, evaluated=evaluated
                ) -> Any:
                    evaluated.append(server_round)
                    row = end_of_task_eval(sc, cfg, acc, server_round, arrays.to_numpy_ndarrays())
                    return None if row is None else MetricRecord(row)

                result = strategy.start(
                    grid=grid,
                    initial_arrays=ArrayRecord(init_params(cfg, seed)),
                    num_rounds=sc.n_rounds,
                    train_config=ConfigRecord({"arm": arm, "seed": seed}),
                    evaluate_fn=evaluate_fn,
                )
                runs[f"{arm}/seed{seed}"] = {
                    "arm": arm,
                    "seed": seed,
                    "acc": acc,
                    "strategy": strategy,
                    "evaluated_rounds": evaluated,
                    "final": result.arrays.to_numpy_ndarrays(),
                    "wall_s": time.perf_counter() - t0,
                }
                log(
                    f"{arm} seed {seed}: final acc {acc[-1].mean():.4f} "
                    f"({time.perf_counter() - t0:.1f} s)"
                )

    return app, runs


# ---------------------------------------------------------------------------- metrics


def end_of_task_eval(
    sc: Any, cfg: Any, acc: Any, server_round: int, params: list
) -> dict[str, float] | None:
    """Flower's ``evaluate_fn`` body: after the last round of task t (server round
    (t + 1) x rounds_per_task) fill acc[t, j] for j <= t with the global model's accuracy on
    task j's clean test images; None at every other round (and at round 0, before training)."""
    import numpy as np
    from icml26_rcfcl.rcfcl import accuracy

    if server_round == 0 or server_round % sc.rounds_per_task:
        return None
    t = sc.task_of(server_round - 1)
    for j in range(t + 1):
        xs, ys = sc.test_data(j)
        mask = np.isin(ys, sc.tasks[j])
        acc[t, j] = accuracy(params, xs[mask], ys[mask], cfg)
    return {"task": t, "average-accuracy": float(acc[t, : t + 1].mean())}


def summarize(run: dict, sc: Any) -> dict[str, Any]:
    """Per-run facts: the accuracy matrix, its final average accuracy and forgetting (the
    package's ``SimulationResult`` definitions), rounds and clients per round, drift flags."""
    import numpy as np
    from icml26_rcfcl import SimulationResult, detection_scores

    strategy = run["strategy"]
    K, R = sc.n_clients, sc.n_rounds
    flags, mags = np.zeros((K, R), dtype=bool), np.zeros((K, R))
    for rnd, per in strategy.drift.items():
        for k, (flag, m) in per.items():
            flags[k, rnd - 1], mags[k, rnd - 1] = flag, m
    res = SimulationResult(run["final"], run["acc"], flags, mags, mags)
    out = {
        "acc": run["acc"].tolist(),
        "final_accuracy": res.final_accuracy,
        "forgetting": res.forgetting,
        "rounds": sorted(strategy.drift),
        "clients_per_round": [len(strategy.drift[r]) for r in sorted(strategy.drift)],
        "rejected": {str(r): v for r, v in strategy.rejected.items() if v},
        "evaluated_rounds": run["evaluated_rounds"],
        "flags": flags.astype(int).tolist(),
        "magnitudes": mags.tolist(),
        "wall_s": round(run["wall_s"], 2),
    }
    if run["arm"] == "rcfcl":
        out["detection"] = detection_scores(flags, sc)
    return out


def comparisons_of(results: dict[str, dict], arms: list[str], seeds: list[int]) -> list[dict]:
    """RC-FCL - baseline per seed, in points: final average accuracy (higher is better) and
    forgetting (lower is better)."""
    import numpy as np
    from icml26_kernels.evidence import comparison, headroom

    comps = []
    for base in [a for a in arms if a != "rcfcl"]:
        b_acc = [100 * results[f"{base}/seed{s}"]["final_accuracy"] for s in seeds]
        b_fgt = [100 * results[f"{base}/seed{s}"]["forgetting"] for s in seeds]
        o_acc = [100 * results[f"rcfcl/seed{s}"]["final_accuracy"] for s in seeds]
        o_fgt = [100 * results[f"rcfcl/seed{s}"]["forgetting"] for s in seeds]
        name = BASELINE_NAMES[base]
        comps.append(
            comparison(
                f"rcfcl_minus_{base}_final_accuracy",
                f"final average accuracy over the tasks, RC-FCL - {name}, paired per seed",
                np.subtract(o_acc, b_acc),
                target=None,
                target_source=PAPER["reported"],
                headroom=headroom(100.0, float(np.mean(b_acc)), "metric maximum 100 %"),
                unit="pts",
            )
        )
        comps.append(
            comparison(
                f"rcfcl_minus_{base}_forgetting",
                f"average forgetting, RC-FCL - {name}, paired per seed (lower is better)",
                np.subtract(o_fgt, b_fgt),
                target=None,
                target_source=PAPER["reported"],
                headroom=headroom(
                    float(np.mean(b_fgt)), 0.0, "the baseline's forgetting over the minimum 0"
                ),
                unit="pts",
                higher_is_better=False,
            )
        )
    return comps


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tmp = None
    if args.smoke:
        tmp = tempfile.TemporaryDirectory()
        args.dataset = write_smoke(Path(tmp.name) / "cifar100_schema")
        for k, v in SMOKE.items():
            if k == "num_cpus" and args.num_cpus is not None:
                continue  # an explicit --num-cpus wins
            setattr(args, {"n_clients": "clients", "n_drifting": "drifting"}.get(k, k), v)
        args.check_simulator = True
    if args.arms[0] != "rcfcl" or len(args.arms) < 2 or len(set(args.arms)) != len(args.arms):
        raise ValueError(f"--arms: expected rcfcl first and at least one baseline; got {args.arms}")
    if len(args.seeds) < 2:
        raise ValueError(f"--seeds: the paired 95% CI needs at least 2 seeds; got {args.seeds}")

    def log(*a: Any) -> None:
        if not args.quiet:
            print(*a, file=sys.stderr, flush=True)

    from icml26_kernels.evidence import evidence, pin_threads

    threads = pin_threads(1)  # one thread per client actor (ray workers inherit the env)
    import numpy as np
    import torch

    try:
        import flwr
        from flwr.simulation import run_simulation
    except ImportError as exc:
        raise ImportError(
            "paper.py runs on Flower's simulation engine: uv run --with "
            '"flwr[simulation]==1.42.0" --with ray==2.55.1 ... (the package\'s tested pins)'
        ) from exc
    from icml26_rcfcl import simulate

    if args.quiet:  # Flower's own INFO log (rounds, metrics) too; set after flwr's import
        import logging

        logging.getLogger("flwr").setLevel(logging.WARNING)

    t0 = time.perf_counter()
    spec = scenario_spec(args)
    sc0 = build_scenario(spec, args.seeds[0])
    x_dim, n_classes = sc0.x_train.shape[1], sc0.n_classes
    cfgs = {arm: arm_config(args, arm, x_dim, n_classes) for arm in args.arms}
    log(
        f"{args.dataset}: {len(sc0.x_train)} train / {len(sc0.x_test)} test images, x_dim "
        f"{x_dim}, {n_classes} classes in {len(sc0.tasks)} tasks, {args.clients} clients, "
        f"{sc0.n_rounds} rounds"
    )
    server, runs = make_server_app(spec, cfgs, args.seeds, log)
    num_cpus = args.num_cpus or os.cpu_count() or 1
    run_simulation(
        server_app=server,
        client_app=make_client_app(spec, cfgs),
        num_supernodes=args.clients,
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": num_cpus},
        },
    )
    expected = {f"{a}/seed{s}" for a in args.arms for s in args.seeds}
    if set(runs) != expected:
        raise RuntimeError(
            f"the Flower run finished {sorted(runs)} of {sorted(expected)} (see the Flower log)"
        )
    results = {key: summarize(run, build_scenario(spec, run["seed"])) for key, run in runs.items()}
    simulator = {}
    if args.check_simulator:
        for key, run in runs.items():
            ref = simulate(build_scenario(spec, run["seed"]), cfgs[run["arm"]], seed=run["seed"])
            simulator[key] = {
                "acc": ref.acc.tolist(),
                "max_abs_param_diff": max(
                    float(np.max(np.abs(a - b))) for a, b in zip(run["final"], ref.params)
                ),
            }
    summary = {
        arm: {
            "final_accuracy_mean": float(
                np.mean([results[f"{arm}/seed{s}"]["final_accuracy"] for s in args.seeds])
            ),
            "forgetting_mean": float(
                np.mean([results[f"{arm}/seed{s}"]["forgetting"] for s in args.seeds])
            ),
        }
        for arm in args.arms
    }
    for arm, s in summary.items():
        log(f"{arm}: accuracy {s['final_accuracy_mean']:.4f} forgetting {s['forgetting_mean']:.4f}")
    config = {k: v for k, v in vars(args).items()}
    config["rcfcl_config"] = {arm: asdict(cfg) for arm, cfg in cfgs.items()}
    config["scenario"] = {
        "tasks": [list(t) for t in sc0.tasks],
        "n_rounds": sc0.n_rounds,
        "x_dim": int(x_dim),
        "n_classes": int(n_classes),
        "onset_seed0": {str(k): v for k, v in sc0.onset.items()},
    }
    doc = {
        "recipe": "rcfcl",
        "paper": PAPER | {"reconstructed": RECON},
        "config": config,
        "smoke": bool(args.smoke),
        "hardware": {
            "device": "cpu",
            "cpus": os.cpu_count(),
            "ray_num_cpus": num_cpus,
            "platform": platform.platform(),
            "torch": torch.__version__,
            "flwr": flwr.__version__,
            "threads": threads,
            "note": "the package's models are CPU torch; Flower simulation, 1 CPU per client",
        },
        "results": {
            "engine": "flwr.simulation.run_simulation (ServerApp + ClientApp, ray backend)",
            "runs": results,
            "summary": summary,
            "simulator_check": simulator,
            "wall_s": round(time.perf_counter() - t0, 2),
        },
        "evidence": evidence(comparisons=comparisons_of(results, args.arms, args.seeds)),
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, default=_jsonable))
    log(f"wrote {args.out} ({doc['results']['wall_s']} s)")
    if tmp is not None:
        tmp.cleanup()
    return 0


def _jsonable(o: Any) -> Any:
    if isinstance(o, tuple):
        return list(o)
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


if __name__ == "__main__":
    raise SystemExit(main())
