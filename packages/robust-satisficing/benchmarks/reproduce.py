"""IRS vs ERM, GroupDRO and CVaR on three real-data group shifts (small scale, CPU).

Paper claim (ICML 2026): IRS "consistently improves performance on minority and worst-case
groups without sacrificing overall accuracy", at "a per-step computational cost similar to
standard SGD" (one forward and one backward pass).

Tasks (all data ship inside PyPI wheels; no network):
  spurious  scikit-learn digits, y = 1{digit >= 5}; a bright corner patch agrees with y on 95% of
            training rows and on 50% of validation/test rows; 4 groups (y, patch). Headline.
  lt        scikit-learn digits with a long-tailed training set (imbalance factor 20, classes
            0..9 from head to tail), balanced validation/test; groups = classes.
  randhie   statsmodels' RAND Health Insurance Experiment, target log(1 + mdvis) from the 9
            covariates; train on the healthier half (disea <= median), test on the sicker half
            (covariate shift); groups = target quintiles of the training set (as tabular.ipynb).

Protocol: the same MLP, optimiser (Adam, cosine), batch, epochs and ERM warm-up for every arm;
each robust arm tunes its one knob over 3 values (IRS target_tau, GroupDRO step size, CVaR
alpha) on the validation split at tuning seeds disjoint from the reported seeds; ERM has no knob.
Then 10 paired seeds (same split, init and batch order for every arm), metrics on the test split:
worst-group and average accuracy (MSE for randhie), paired differences with 95% t-intervals.
Step time: IRS vs ERM on the same model and batches, interleaved, in this run.

    python benchmarks/reproduce.py --quick    # ~1-2 min on 2 CPU cores
Progress to stderr; the last stdout line is one JSON object; full results in reproduce.json.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from icml26_robust_satisficing import GroupDRO, IRSLoss, cvar_loss, erm_loss

T975 = {4: 2.776, 9: 2.262, 19: 2.093}  # Student t quantiles for n-1 degrees of freedom
KNOBS = {
    "irs": {"clf": [0.03, 0.1, 0.3], "reg": [0.3, 1.0, 3.0]},  # target_tau (loss units)
    "irs_unscaled": {"clf": [0.03, 0.1, 0.3], "reg": [0.3, 1.0, 3.0]},  # ablation: no 1/KL
    "groupdro": {"clf": [0.001, 0.01, 0.1], "reg": [0.001, 0.01, 0.1]},  # step size eta
    "cvar": {"clf": [0.1, 0.3, 0.5], "reg": [0.1, 0.3, 0.5]},  # alpha
    "erm": {"clf": [None], "reg": [None]},
}
METHODS = ["erm", "groupdro", "cvar", "irs", "irs_unscaled"]


def log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# data: dict(train=(X, y, g), val=..., test=..., groups=G, kind="clf"|"reg", out=C)
# ---------------------------------------------------------------------------------------------
def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data.astype(np.float32) / 16.0, d.target.astype(np.int64)


def task_spurious(seed: int) -> dict:
    X, digit = _digits()
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    parts = {"train": idx[:1000], "val": idx[1000:1350], "test": idx[1350:]}
    out = {"groups": 4, "kind": "clf", "out": 2}
    for name, ix in parts.items():
        x, y = X[ix].copy(), (digit[ix] >= 5).astype(np.int64)
        agree = 0.95 if name == "train" else 0.5
        a = np.where(rng.random(len(ix)) < agree, y, 1 - y)
        x = x.reshape(-1, 8, 8)
        x[a == 1, :3, :3] = 1.0  # the spurious corner patch (9 pixels, mostly blank in digits)
        out[name] = (x.reshape(-1, 64), y, 2 * y + a)
    return out


def task_lt(seed: int, imbalance: float = 20.0) -> dict:
    X, y = _digits()
    rng = np.random.default_rng(seed)
    tr, va, te = [], [], []
    for c in range(10):
        ix = rng.permutation(np.flatnonzero(y == c))  # ~180 per class
        n_c = round(100 * imbalance ** (-c / 9))  # 100 ... 5
        tr.append(ix[:n_c])
        va.append(ix[100:130])
        te.append(ix[130:])
    out = {"groups": 10, "kind": "clf", "out": 10}
    for name, ix in (("train", tr), ("val", va), ("test", te)):
        i = np.concatenate(ix)
        out[name] = (X[i], y[i], y[i])
    return out


_RANDHIE = None


def task_randhie(seed: int, n_train: int = 3000, n_eval: int = 3000) -> dict:
    global _RANDHIE
    if _RANDHIE is None:
        import statsmodels.api as sm

        _RANDHIE = sm.datasets.randhie.load_pandas().data
    d = _RANDHIE
    y = np.log1p(d["mdvis"].to_numpy(np.float64))
    X = d.drop(columns=["mdvis"]).to_numpy(np.float64)
    healthy = d["disea"].to_numpy() <= np.median(d["disea"].to_numpy())
    rng = np.random.default_rng(seed)
    src = rng.permutation(np.flatnonzero(healthy))
    tgt = rng.permutation(np.flatnonzero(~healthy))
    parts = {"train": src[:n_train], "val": tgt[:n_eval], "test": tgt[n_eval : 2 * n_eval]}
    # validation from the target domain as a held-out shift set (as for digits: val has the test
    # distribution); test rows are disjoint from it
    mu, sd = X[parts["train"]].mean(0), X[parts["train"]].std(0) + 1e-8
    edges = np.unique(np.quantile(y[parts["train"]], [0.2, 0.4, 0.6, 0.8]))
    out = {"groups": len(edges) + 1, "kind": "reg", "out": 1}
    for name, ix in parts.items():
        g = np.searchsorted(edges, y[ix], side="right")  # target quintiles (ties at 0 merged)
        out[name] = (((X[ix] - mu) / sd).astype(np.float32), y[ix].astype(np.float32), g)
    return out


TASKS = {"spurious": task_spurious, "lt": task_lt, "randhie": task_randhie}


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------
def mlp(d_in: int, d_out: int, hidden: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, d_out)
    )


def per_sample(model, x, y, kind):
    out = model(x)
    if kind == "clf":
        return F.cross_entropy(out, y, reduction="none")
    return (out.squeeze(-1) - y) ** 2


def train(task: dict, method: str, knob, seed: int, cfg: dict) -> torch.nn.Module:
    X, y, g = (torch.as_tensor(a) for a in task["train"])
    G, kind = task["groups"], task["kind"]
    counts = torch.bincount(g, minlength=G).double()
    model = mlp(X.shape[1], task["out"], cfg["hidden"], seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=1e-4)
    steps_per_epoch = len(X) // cfg["batch"]
    total = cfg["steps"]
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, total)
    warm = int(cfg["warmup"] * total)  # plain ERM first, as the official schedule
    if method.startswith("irs"):
        prior = counts.clamp_min(1) / counts.clamp_min(1).sum()
        crit = IRSLoss(prior, target_tau=knob, scale_by_kl=method == "irs")
    elif method == "groupdro":
        crit = GroupDRO(counts.clamp_min(1), step_size=knob)
    gen = torch.Generator().manual_seed(seed)
    for step in range(total):
        if step % steps_per_epoch == 0:
            perm = torch.randperm(len(X), generator=gen)
        b = step % steps_per_epoch
        if True:
            ix = perm[b * cfg["batch"] : (b + 1) * cfg["batch"]]
            losses = per_sample(model, X[ix], y[ix], kind)  # (B,)
            if method == "erm" or step < warm:
                loss = erm_loss(losses)
            elif method.startswith("irs"):
                loss, _ = crit(losses, g[ix])
            elif method == "groupdro":
                loss = crit(losses, g[ix])
            else:
                loss = cvar_loss(losses, knob)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return model


@torch.no_grad()
def evaluate(model, task: dict, split: str) -> dict:
    X, y, g = (torch.as_tensor(a) for a in task[split])
    out = model(X)
    if task["kind"] == "clf":
        score = (out.argmax(-1) == y).double()  # accuracy, higher is better
    else:
        score = (out.squeeze(-1) - y).double() ** 2  # squared error, lower is better
    per_group = [float(score[g == k].mean()) for k in range(task["groups"]) if (g == k).any()]
    worst = min(per_group) if task["kind"] == "clf" else max(per_group)
    return {"avg": float(score.mean()), "worst": worst, "groups": per_group}


# ---------------------------------------------------------------------------------------------
# protocol
# ---------------------------------------------------------------------------------------------
def job(args: tuple) -> dict:
    """One training run (seeded by its arguments alone, so the pool's order does not matter)."""
    name, method, knob, seed, split, cfg = args
    torch.set_num_threads(1)
    task = TASKS[name](seed)
    return evaluate(train(task, method, knob, seed, cfg), task, split)


def tune(name: str, cfg: dict, tune_seeds: list[int], pool) -> dict:
    """Per method: the knob with the best mean validation worst-group metric."""
    kind = "clf" if name != "randhie" else "reg"
    sign = 1.0 if kind == "clf" else -1.0
    keys = [(m, k, s) for m in METHODS for k in KNOBS[m][kind] for s in tune_seeds]
    out = pool.map(job, [(name, m, k, s, "val", cfg) for m, k, s in keys])
    chosen, table = {}, {}
    for method in METHODS:
        scores = {
            str(k): float(
                np.mean([o["worst"] for (m, kk, _), o in zip(keys, out) if m == method and kk == k])
            )
            for k in KNOBS[method][kind]
        }
        best = max(KNOBS[method][kind], key=lambda k: sign * scores[str(k)])
        chosen[method], table[method] = best, scores
    return {"chosen": chosen, "val_worst": table}


def ci(diffs: list[float]) -> dict:
    d = np.asarray(diffs)
    n = len(d)
    half = T975.get(n - 1, 1.96) * d.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
    return {"mean": float(d.mean()), "lo": float(d.mean() - half), "hi": float(d.mean() + half)}


def run_task(name: str, cfg: dict, seeds: list[int], tune_seeds: list[int], pool) -> dict:
    t0 = time.time()
    tuned = tune(name, cfg, tune_seeds, pool)
    keys = [(m, s) for s in seeds for m in METHODS]
    out = pool.map(job, [(name, m, tuned["chosen"][m], s, "test", cfg) for m, s in keys])
    res: dict = {m: {"avg": [], "worst": []} for m in METHODS}
    for (m, _), e in zip(keys, out):
        res[m]["avg"].append(e["avg"])
        res[m]["worst"].append(e["worst"])
    summary = {m: {k: float(np.mean(v)) for k, v in r.items()} for m, r in res.items()}
    paired = {
        f"irs-{b}": {
            k: ci(np.subtract(res["irs"][k], res[b][k]).tolist()) for k in ("avg", "worst")
        }
        for b in ("erm", "groupdro", "cvar", "irs_unscaled")
    }
    log(f"[{name}] {time.time() - t0:.0f}s knobs={tuned['chosen']}")
    for m in METHODS:
        log(f"  {m:9s} worst={summary[m]['worst']:.4f} avg={summary[m]['avg']:.4f}")
    for k, v in paired.items():
        log(
            f"  {k:13s} worst {v['worst']['mean']:+.4f} [{v['worst']['lo']:+.4f}, {v['worst']['hi']:+.4f}]"
            f"  avg {v['avg']['mean']:+.4f} [{v['avg']['lo']:+.4f}, {v['avg']['hi']:+.4f}]"
        )
    return {
        "tuning": tuned,
        "per_seed": res,
        "mean": summary,
        "paired": paired,
        "metric": "accuracy" if TASKS[name] is not task_randhie else "mse",
    }


def step_time(hidden: int, blocks: int, block: int = 5) -> dict:
    """Per-step time of IRS vs ERM (forward + backward + Adam) on the same batches.

    Arms alternate block by block; each arm's time is its fastest block of `block` steps
    divided by `block` (timeit's convention: on a shared machine the minimum is the least
    disturbed measurement, the median is not reproducible)."""
    task = task_lt(0)
    X, y, g = (torch.as_tensor(a) for a in task["train"])
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, len(X), (blocks, block, 256), generator=gen)
    counts = torch.bincount(g, minlength=10).double()
    irs = IRSLoss(counts / counts.sum(), validate=False)
    times: dict = {"erm": [], "irs": []}
    models = {m: mlp(64, 10, hidden, 0) for m in times}
    opts = {m: torch.optim.Adam(models[m].parameters(), lr=1e-3) for m in times}
    for r in range(blocks):
        for m in ("erm", "irs") if r % 2 else ("irs", "erm"):
            t = time.perf_counter()
            for ix in idx[r]:
                losses = per_sample(models[m], X[ix], y[ix], "clf")
                loss = erm_loss(losses) if m == "erm" else irs(losses, g[ix])[0]
                opts[m].zero_grad(set_to_none=True)
                loss.backward()
                opts[m].step()
            times[m].append((time.perf_counter() - t) / block)
    best = {m: float(min(v[1:])) for m, v in times.items()}  # first block: warm-up
    return {
        "erm_s": best["erm"],
        "irs_s": best["irs"],
        "ratio": best["irs"] / best["erm"],
        "hidden": hidden,
        "batch": 256,
        "device": "cpu",
    }


def markdown(tasks: dict) -> str:
    """The README results table, generated from the JSON."""
    rows = [
        "| task (metric) | arm (knob) | worst group | average | IRS − arm, worst [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for name, t in tasks.items():
        met = "MSE, lower is better" if t["metric"] == "mse" else "accuracy"
        for m in METHODS:
            mean, knob = t["mean"][m], t["tuning"]["chosen"][m]
            pd = t["paired"].get(f"irs-{m}", {}).get("worst")
            diff = f"{pd['mean']:+.3f} [{pd['lo']:+.3f}, {pd['hi']:+.3f}]" if pd else ""
            rows.append(
                f"| {name} ({met}) | {m} ({knob}) | {mean['worst']:.3f} | "
                f"{mean['avg']:.3f} | {diff} |"
            )
    return "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).with_name("reproduce.json")))
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = {
        "hidden": 64,
        "lr": 1e-2,
        "batch": 64,
        "steps": 300 if args.quick else 1000,
        "warmup": 0.1,
    }
    seeds = list(range(args.seeds))
    tune_seeds = [1000] if args.quick else [1000, 1001]
    t0 = time.time()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.workers) as pool:
        tasks = {name: run_task(name, cfg, seeds, tune_seeds, pool) for name in TASKS}
    timing = [step_time(h, r if args.quick else 3 * r) for h, r in ((512, 60), (2048, 16))]
    for tm in timing:
        log(
            f"step time IRS/ERM = {tm['ratio']:.2f} ({tm['irs_s'] * 1e3:.2f} vs "
            f"{tm['erm_s'] * 1e3:.2f} ms, MLP 64-{tm['hidden']}-10, batch 256, CPU)"
        )
    head = tasks["spurious"]
    gain = head["paired"]["irs-erm"]
    un = {
        k: ci(
            np.subtract(
                head["per_seed"]["irs_unscaled"]["worst"], head["per_seed"]["erm"]["worst"]
            ).tolist()
        )
        for k in ("worst",)
    }
    result = {
        "package": "robust-satisficing",
        "claim": "worst-group test accuracy, spurious digits (4 groups, 10 paired seeds), IRS vs ERM: "
        f"{gain['worst']['mean']:+.3f} [95% CI {gain['worst']['lo']:+.3f}, {gain['worst']['hi']:+.3f}], "
        f"avg {gain['avg']['mean']:+.3f}; ablation IRS without 1/KL vs ERM {un['worst']['mean']:+.3f} "
        f"[{un['worst']['lo']:+.3f}, {un['worst']['hi']:+.3f}] (GroupDRO {head['mean']['groupdro']['worst']:.3f}, "
        f"CVaR {head['mean']['cvar']['worst']:.3f}); step time IRS/ERM {timing[0]['ratio']:.2f}x "
        f"(width 512) / {timing[1]['ratio']:.2f}x (width 2048)",
        "paper": "IRS improves minority / worst-case groups without sacrificing overall accuracy, "
        "at a per-step cost similar to SGD (no numeric anchor published)",
        "ours": round(head["mean"]["irs"]["worst"], 4),
        "baseline": f"ERM: {head['mean']['erm']['worst']:.4f}",
        "ratio": round(head["mean"]["irs"]["worst"] / head["mean"]["erm"]["worst"], 4),
        "seconds": round(time.time() - t0, 1),
    }
    full = {
        **result,
        "config": cfg,
        "seeds": seeds,
        "tune_seeds": tune_seeds,
        "tasks": tasks,
        "step_time": timing,
        "quick": args.quick,
    }
    Path(args.out).write_text(json.dumps(full, indent=1))
    Path(args.out).with_suffix(".md").write_text(markdown(tasks))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
