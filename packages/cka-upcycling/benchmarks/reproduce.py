"""Selective vs full MoE upcycling for continual learning, at small scale; prints one JSON line.

Paper (ICML 2026 poster 64571, abstract): on TRACE, selective upcycling by bilevel search gives
better average accuracy than standard (full) upcycling, 80% less forgetting, and removes 60% of
the parameter expansion full upcycling adds. TRACE is an 8-task LLM benchmark not runnable here;
this is the same protocol on two small sequences of real data (scikit-learn's bundled digits):

* Split-Digits, task-incremental: 5 tasks of 2 classes, (0,1), (2,3), ..., (8,9), the logits
  masked to the task's classes (its label is known at test time);
* Permuted-Digits, domain-incremental: 4 tasks, all 10 classes, task t sees the images under a
  fixed pixel permutation π_t (π_0 = identity); no masking.

Model: a residual MLP over the 64 pixels, ``embed -> 3 x [h + FFN(LN(h))] -> head``, width 32,
pretrained densely on task 0, then each FFN upcycled into an MoE of 4 slots, top-2
(:func:`upcycle_ffn`, function-preserving). The embedding is frozen after pretraining (all arms).
Arms (same model, data order, steps and optimizer per seed; paired seeds):

* ``seqft``: sequential fine-tuning of the MoE layers and head;
* ``replay``: + λ_r · loss on a reservoir replay buffer (50 examples);
* ``full``: at every task, every slot of every layer grows one copy (sources frozen), trained
  with the same inner objective as ours (task + replay + CKA on the last block);
* ``selective`` (ours): :class:`BilevelUpcycler` search during the first ``search`` steps of each
  task (outer loop on 25% of the task's training data), then the selected architecture trains for
  the remaining steps with the same inner objective. The search's inner step trains every
  candidate (``inner_presence="all"``, the default since issue 47; the GDAS-style
  ``"sampled"`` inner step and a diagnostics-scored plan are compared in ``search_signal.py``);
* ``random`` (ablation): grows as many randomly chosen slots per task as ``selective`` did, same
  objective. Tells whether the search's choice matters or only the amount of growth.

Metrics on the test split, from the accuracy matrix R (row 0 = after pretraining): average
accuracy, forgetting (Chaudhry et al.), BWT, parameters added over the sequence. Intervals are
t-intervals over seeds (95%) of per-seed paired differences.

Hyperparameters: the learning rate of every arm is chosen from {1e-3, 3e-3, 1e-2, 3e-2} on a
validation split (disjoint from the test split) with seeds 100, 101 (disjoint from the reported
ones); ``random`` uses ``selective``'s (full run only; ``--quick`` uses 3e-3 for every arm, fixed
a priori; the full run's JSON records what the sweep picked). λ_r = 1, λ_c = 1, λ_p = 0.02 and
the search settings are fixed a priori.

Speed: the CKA term's teacher features of the (fixed) replay buffer are computed once per task
(:meth:`BilevelUpcycler.cache_teacher`), and the dense pretraining of a (sequence, seed) once
per worker process and reused by its other arms (RNG states restored: the same run as a fresh
pretraining).

    python benchmarks/reproduce.py --quick     # 3 seeds, both sequences, fixed lr
    python benchmarks/reproduce.py             # 10 seeds, lr chosen on validation
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from cistats import interval
from icml26_cka_upcycling import (
    BilevelUpcycler,
    ReservoirBuffer,
    UpcyclePlan,
    apply_plan,
    cl_metrics,
    diagnostic_plan,
    exponential_tau,
    find_moe_layers,
    upcycle_ffn,
)
from icml26_kernels.provenance import machine_info
from sklearn.datasets import load_digits
from torch import nn

HERE = Path(__file__).resolve().parent
ARMS = ["seqft", "replay", "full", "selective", "random"]
CFG = dict(
    d=32, m=32, layers=3, slots=4, top_k=2, pre_steps=200, steps=100, search=40, batch=32,
    replay_cap=50, lambda_replay=1.0, lambda_cka=1.0, lambda_param=0.02, outer_lr=0.1,
)  # fmt: skip


# ---------------------------------------------------------------------------- data
def make_sequence(name: str) -> list[dict]:
    """Per task: train / val / test tensors (x, y, task id); a fixed split (data seed 0)."""
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    rng = np.random.default_rng(0)
    if name == "split":
        groups = [np.flatnonzero(np.isin(y.numpy(), [2 * t, 2 * t + 1])) for t in range(5)]
        perms = [np.arange(64)] * 5
    else:
        groups = [np.arange(len(y))] * 4
        perms = [np.arange(64)] + [rng.permutation(64) for _ in range(3)]
    tasks = []
    for t, (idx, pi) in enumerate(zip(groups, perms)):
        idx = rng.permutation(idx)
        n = len(idx)
        parts = {
            "train": idx[: int(0.6 * n)],
            "val": idx[int(0.6 * n) : int(0.8 * n)],
            "test": idx[int(0.8 * n) :],
        }
        task = {}
        for k, ii in parts.items():
            ii = torch.tensor(ii)
            task[k] = (X[ii][:, torch.tensor(pi)], y[ii], torch.full((len(ii),), t))
        tasks.append(task)
    return tasks


def class_mask(name: str, task_ids: torch.Tensor) -> torch.Tensor:
    """(B, 10) additive logit mask: the task's two classes (Split) or none (Permuted)."""
    if name != "split":
        return torch.zeros(len(task_ids), 10)
    allowed = torch.zeros(len(task_ids), 10, dtype=torch.bool)
    allowed[torch.arange(len(task_ids)), 2 * task_ids] = True
    allowed[torch.arange(len(task_ids)), 2 * task_ids + 1] = True
    return torch.zeros(len(task_ids), 10).masked_fill(~allowed, float("-inf"))


# ---------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, d: int, m: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ffn: nn.Module = nn.Sequential(nn.Linear(d, m, bias=False), nn.GELU(), nn.Linear(m, d))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.ffn(self.norm(h))


class Net(nn.Module):
    def __init__(self, d: int, m: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Linear(64, d)
        self.blocks = nn.Sequential(*[Block(d, m) for _ in range(layers)])
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(x)))


def make_loss(name: str):
    def loss_fn(model: nn.Module, batch) -> torch.Tensor:
        x, y, t = batch
        return F.cross_entropy(model(x) + class_mask(name, t), y)

    return loss_fn


@torch.no_grad()
def accuracy(model: nn.Module, name: str, data) -> float:
    x, y, t = data
    return float(((model(x) + class_mask(name, t)).argmax(-1) == y).float().mean())


def batches(data, batch: int, gen: torch.Generator):
    x, y, t = data
    while True:
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y) - batch + 1, batch):
            j = perm[i : i + batch]
            yield x[j], y[j], t[j]


# ---------------------------------------------------------------------------- one run
_PRETRAINED: dict[tuple, tuple] = {}  # per worker process: (seq, seed, shape) -> pretrained state


def pretrain(name: str, seed: int, cfg: dict) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Dense pretraining on task 0, identical for every arm of a (sequence, seed): computed once
    per worker process and reused. Returns the weights and the RNG states after it (the data
    generator's and torch's), so a reused pretraining continues exactly as a fresh one would."""
    key = (name, seed, cfg["d"], cfg["m"], cfg["layers"], cfg["pre_steps"], cfg["batch"])
    if key not in _PRETRAINED:
        torch.manual_seed(seed)
        tasks = make_sequence(name)
        loss_fn = make_loss(name)
        gen = torch.Generator().manual_seed(seed)
        model = Net(cfg["d"], cfg["m"], cfg["layers"])
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        it = batches(tasks[0]["train"], cfg["batch"], gen)
        for _ in range(cfg["pre_steps"]):
            opt.zero_grad()
            loss_fn(model, next(it)).backward()
            opt.step()
        if len(_PRETRAINED) >= 8:
            _PRETRAINED.clear()
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        _PRETRAINED[key] = (state, gen.get_state(), torch.get_rng_state())
    return _PRETRAINED[key]


def run(args: tuple) -> dict:
    """One (sequence, arm, seed, lr, eval split) run; returns R, added params and plans."""
    name, arm, seed, lr, split, cfg = args
    torch.set_num_threads(1)
    tasks = make_sequence(name)
    loss_fn = make_loss(name)
    state, gen_state, rng_state = pretrain(name, seed, cfg)
    model = Net(cfg["d"], cfg["m"], cfg["layers"])
    model.load_state_dict(state)
    gen = torch.Generator()
    gen.set_state(gen_state)
    torch.set_rng_state(rng_state)
    ug = torch.Generator().manual_seed(seed)
    for blk in model.blocks:
        blk.ffn = upcycle_ffn(
            blk.ffn,
            cfg["slots"],
            top_k=cfg["top_k"],
            router_init="orthogonal",
            init_std=0.5,
            generator=ug,
        )
    model.embed.requires_grad_(False)
    T = len(tasks)
    R = np.full((T, T), np.nan)
    R[0] = [accuracy(model, name, tk[split]) for tk in tasks]
    buf = ReservoirBuffer(cfg["replay_cap"], seed=seed)
    x0, y0, t0 = tasks[0]["train"]
    buf.add(x0, y0, t0)
    use_replay = arm != "seqft"
    up = BilevelUpcycler(
        model, loss_fn, cka_layers=[f"blocks.{cfg['layers'] - 1}"],
        lambda_replay=cfg["lambda_replay"], lambda_cka=cfg["lambda_cka"] if arm in ("full", "selective", "random", "diagnostic") else 0.0,
        lambda_param=cfg["lambda_param"], tau=exponential_tau(1.0, 0.2, cfg["search"]), outer_lr=cfg["outer_lr"],
        inner_presence=cfg.get("inner_presence", "all"),
    )  # fmt: skip
    use_cka = up.lambda_cka > 0
    rng = np.random.default_rng(seed + 1000)
    added, plans, searches = 0, [], []
    for t in range(1, T):
        tr = tasks[t]["train"]
        if arm == "selective":  # the outer loop's D_t^val: 25% of the task's training data
            n_in = int(0.75 * len(tr[1]))
            inner_data = tuple(a[:n_in] for a in tr)
            outer_it = batches(tuple(a[n_in:] for a in tr), cfg["batch"], gen)
        else:
            inner_data = tr
        it = batches(inner_data, cfg["batch"], gen)
        steps = cfg["steps"]
        if arm == "selective":
            up.begin_task()
            up.cache_teacher(buf)  # H^old of the fixed buffer, once per task
            opt = torch.optim.Adam(up.trainable(), lr=lr)
            for _ in range(cfg["search"]):
                rb, ri = buf.sample(cfg["batch"], return_index=True)
                up.search_step(next(it), next(outer_it), rb, opt, replay_index=ri)
            plan = up.end_search()
            searches.append({"p_grow": plan.p_grow, "drawn": plan.drawn})
            steps -= cfg["search"]
        elif arm == "diagnostic":  # [recon] the paper's diagnostics as the growth score
            probe = [next(it) for _ in range(cfg.get("probe_steps", 20))]
            old = [buf.sample(cfg["batch"]) for _ in range(4)]
            plan = diagnostic_plan(model, loss_fn, probe, old, budget=cfg["diag_budget"], lr=lr)
            plan.added_params = apply_plan(model, plan)
            searches.append({"p_grow": plan.p_grow})
            up.snapshot_teacher()
            up.cache_teacher(buf)
        elif arm in ("full", "random"):
            layers = find_moe_layers(model)
            if arm == "full":
                grow = {n: list(range(cfg["slots"])) for n in layers}
            else:  # the same number of growths as selective made at this task (passed in cfg)
                k = cfg["random_counts"][t - 1]
                cands = [(n, s) for n in layers for s in range(cfg["slots"])]
                pick = sorted(rng.choice(len(cands), size=k, replace=False).tolist())
                grow = {n: [] for n in layers}
                for i in pick:
                    grow[cands[i][0]].append(cands[i][1])
            plan = UpcyclePlan(grow=grow)
            plan.added_params = apply_plan(model, plan)
            up.snapshot_teacher()
            up.cache_teacher(buf)
        else:
            plan = UpcyclePlan(grow={})
            up.snapshot_teacher()
        added += plan.added_params
        plans.append({k: v for k, v in plan.grow.items() if v})
        opt = torch.optim.Adam(up.trainable(), lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            batch = next(it)
            if use_replay:
                rb, ri = buf.sample(cfg["batch"], return_index=True)
                loss = up.inner_loss(batch, rb, ri if use_cka else None)
            else:
                loss = up.inner_loss(batch, None)
            loss.backward()
            opt.step()
        up.end_task()
        buf.add(*tr)
        R[t] = [
            accuracy(model, name, tk[split]) if j <= t else np.nan for j, tk in enumerate(tasks)
        ]
    return {
        "seq": name,
        "arm": arm,
        "seed": seed,
        "lr": lr,
        "R": R.tolist(),
        "added": added,
        "plans": plans,
        "searches": searches,
    }


# ---------------------------------------------------------------------------- statistics
def summarize(runs: list[dict], seeds: list[int]) -> dict:
    out = {}
    for seq in sorted({r["seq"] for r in runs}):
        by = {(r["arm"], r["seed"]): r for r in runs if r["seq"] == seq}
        arms = [a for a in ARMS if all((a, s) in by for s in seeds)]
        met = {
            a: [cl_metrics(np.nan_to_num(np.array(by[(a, s)]["R"]), nan=0.0)) for s in seeds]
            for a in arms
        }
        added = {a: [by[(a, s)]["added"] for s in seeds] for a in arms}
        res: dict = {"arms": {}}
        for a in arms:
            res["arms"][a] = {
                "average_accuracy": interval([m["average_accuracy"] for m in met[a]]),
                "forgetting": interval([m["forgetting"] for m in met[a]]),
                "bwt": interval([m["bwt"] for m in met[a]]),
                "added_params": interval(added[a]),
                "plans": [by[(a, s)]["plans"] for s in seeds],
            }
        f_seq = np.array([m["forgetting"] for m in met["seqft"]])
        f_sel = np.array([m["forgetting"] for m in met["selective"]])
        a_full = np.array([m["average_accuracy"] for m in met["full"]])
        a_sel = np.array([m["average_accuracy"] for m in met["selective"]])
        p_full, p_sel = np.array(added["full"], float), np.array(added["selective"], float)
        res["forgetting_reduction_vs_seqft"] = float(1 - f_sel.mean() / f_seq.mean())
        res["added_params_fraction_of_full"] = float(p_sel.mean() / p_full.mean())
        res["acc_selective_minus_full_pts"] = interval(list(100 * (a_sel - a_full)))
        res["forgetting_selective_minus_seqft_pts"] = interval(list(100 * (f_sel - f_seq)))
        if "replay" in met:
            f_rep = np.array([m["forgetting"] for m in met["replay"]])
            a_rep = np.array([m["average_accuracy"] for m in met["replay"]])
            res["forgetting_selective_minus_replay_pts"] = interval(list(100 * (f_sel - f_rep)))
            res["acc_selective_minus_replay_pts"] = interval(list(100 * (a_sel - a_rep)))
        if "random" in met:
            a_rnd = np.array([m["average_accuracy"] for m in met["random"]])
            res["acc_selective_minus_random_pts"] = interval(list(100 * (a_sel - a_rnd)))
        res["targets"] = {
            "forgetting_reduction_ge_50pct": res["forgetting_reduction_vs_seqft"] >= 0.5,
            "added_params_le_40pct_of_full": res["added_params_fraction_of_full"] <= 0.4,
            "acc_within_1pt_of_full": res["acc_selective_minus_full_pts"][0] >= -1.0,
        }
        out[seq] = res
    return out


def pool_map(jobs: list[tuple], workers: int) -> list[dict]:
    if workers <= 1:
        return [run(j) for j in jobs]
    with mp.get_context("spawn").Pool(workers) as pool:
        return pool.map(run, jobs, chunksize=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    t0 = time.time()
    load0 = [round(v, 1) for v in os.getloadavg()]
    cfg = dict(CFG)
    seqs = ["split", "permuted"]
    seeds = [0, 1, 2] if a.quick else list(range(10))
    lrs = {s: {arm: 3e-3 for arm in ARMS} for s in seqs}
    sweep = []
    if not a.quick:  # lr per arm on the validation split, seeds 100, 101 (disjoint from reported)
        grid = [1e-3, 3e-3, 1e-2, 3e-2]
        jobs = [
            (s, arm, sd, lr, "val", cfg)
            for s in seqs
            for arm in ARMS
            if arm != "random"
            for lr in grid
            for sd in (100, 101)
        ]
        sweep = pool_map(jobs, a.workers)
        for s in seqs:
            for arm in ARMS:
                if arm == "random":
                    continue
                score = {lr: np.mean([cl_metrics(np.nan_to_num(np.array(r["R"]), nan=0.0))["average_accuracy"] for r in sweep if r["seq"] == s and r["arm"] == arm and r["lr"] == lr]) for lr in grid}  # fmt: skip
                lrs[s][arm] = max(grid, key=lambda lr: score[lr])
            lrs[s]["random"] = lrs[s]["selective"]
    jobs = [
        (s, arm, sd, lrs[s][arm], "test", cfg)
        for s in seqs
        for arm in ARMS
        if arm != "random"
        for sd in seeds
    ]
    runs = pool_map(jobs, a.workers)
    # random-growth ablation: as many growths per task as selective made, per seed
    rjobs = []
    for s in seqs:
        for sd in seeds:
            sel = next(
                r for r in runs if r["seq"] == s and r["arm"] == "selective" and r["seed"] == sd
            )
            counts = [sum(len(v) for v in p.values()) for p in sel["plans"]]
            rjobs.append(
                (s, "random", sd, lrs[s]["random"], "test", {**cfg, "random_counts": counts})
            )
    runs += pool_map(rjobs, a.workers)
    summary = summarize(runs, seeds)
    seconds = round(time.time() - t0, 1)
    sp, pm = summary["split"], summary["permuted"]

    def brief(r: dict) -> str:
        return (
            f"forgetting -{100 * r['forgetting_reduction_vs_seqft']:.0f}% vs SeqFT, "
            f"added params {100 * r['added_params_fraction_of_full']:.0f}% of full, "
            f"avg acc vs full {r['acc_selective_minus_full_pts'][0]:+.1f} pts "
            f"[{r['acc_selective_minus_full_pts'][1]:+.1f}, {r['acc_selective_minus_full_pts'][2]:+.1f}], "
            f"vs equal-size random growth {r['acc_selective_minus_random_pts'][0]:+.1f} pts "
            f"[{r['acc_selective_minus_random_pts'][1]:+.1f}, {r['acc_selective_minus_random_pts'][2]:+.1f}]"
        )

    line = {
        "package": "cka-upcycling",
        "claim": (
            f"selective (bilevel search, every candidate trained in the inner step) vs full MoE upcycling in continual learning, {len(seeds)} paired seeds; "
            f"Split-Digits (5 tasks): {brief(sp)}; Permuted-Digits (4 tasks): {brief(pm)}; "
            "ours/baseline = Split-Digits avg acc % selective/full, ratio = added params selective/full"
        ),
        "paper": "TRACE (LLM, 8 tasks): 80% forgetting reduction, 60% of full upcycling's expansion removed (40% kept), better avg acc than full",
        "ours": round(100 * sp["arms"]["selective"]["average_accuracy"][0], 2),
        "baseline": round(100 * sp["arms"]["full"]["average_accuracy"][0], 2),
        "ratio": round(sp["added_params_fraction_of_full"], 3),
        "seconds": seconds,
    }
    full = {
        **line, "quick": a.quick, "seeds": seeds, "config": cfg, "lr": lrs, "summary": summary,
        "runs": runs, "sweep": [{k: r[k] for k in ("seq", "arm", "seed", "lr", "R")} for r in sweep],
        "torch": torch.__version__, "machine": f"{os.cpu_count()} CPUs, {a.workers} workers, load {load0}",
    }  # fmt: skip
    out = Path(a.out) if a.out else HERE / ("reproduce_quick.json" if a.quick else "reproduce.json")
    full["machine"] = machine_info()  # CPU, kernel level, threads, versions
    out.write_text(json.dumps(full, indent=1) + "\n")
    print(json.dumps(line))


if __name__ == "__main__":
    sys.exit(main())
