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
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="3 seeds, both sequences, fixed lr 3e-3")
    ap.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (results do not depend on it)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="write the JSON here (default: benchmarks/reproduce_quick.json or reproduce.json)",
    )
    ap.add_argument(
        "--row-from", action="store_true",
        help="print the row from the stored reproduce_quick.json and reproduce.json, no training",
    )  # fmt: skip
    ap.add_argument(
        "--extend-grid", action="store_true",
        help="extend the stored full run's lr grids past edge optima (reproduce.json)",
    )  # fmt: skip
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import numpy as np
import torch
import torch.nn.functional as F
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
from icml26_kernels.evidence import (
    comparison,
    evidence,
    headroom,
    mde,
    pin_threads,
    t_interval,
    t_quantile,
    tuned,
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
    t_start = time.time()
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
    if not os.environ.get("CKA_REPRO_QUIET"):  # progress per arm and seed (--quiet: none)
        print(
            f"[{name} {arm} seed {seed} lr {lr:g} {split}] avg acc "
            f"{cl_metrics(np.nan_to_num(R, nan=0.0))['average_accuracy']:.3f}, "
            f"{time.time() - t_start:.1f}s",
            file=sys.stderr,
            flush=True,
        )
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
def interval(values: list[float]) -> list[float]:
    """[mean, low, high]: the 95% t-interval (exact t quantile, icml26_kernels.evidence)."""
    return [float(v) for v in t_interval(values)]


def mde_from_interval(iv: list[float], n: int) -> float:
    """The MDE (80% power, 5% two-sided; icml26_kernels.evidence.mde) at the paired SD that a
    stored 95% t-interval's half-width t_{0.975, n-1} SD/√n implies."""
    sd = (iv[2] - iv[0]) * n**0.5 / t_quantile(0.975, n - 1)
    return mde(sd, n)


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


GRID = [1e-3, 3e-3, 1e-2, 3e-2]  # lr per arm; an optimum on an edge extends it (--extend-grid)
SWEEP_SEEDS = (100, 101)  # validation seeds, disjoint from the reported ones
TUNED_ARMS = [a for a in ARMS if a != "random"]  # random uses selective's lr


def sweep_scores(sweep: list[dict], seq: str, arm: str, grid: list[float]) -> list[float]:
    """Validation average accuracy (mean over the sweep seeds) at every grid point."""
    return [
        float(np.mean([
            cl_metrics(np.nan_to_num(np.array(r["R"]), nan=0.0))["average_accuracy"]
            for r in sweep if r["seq"] == seq and r["arm"] == arm and r["lr"] == lr
        ]))
        for lr in grid
    ]  # fmt: skip


def random_jobs(runs: list[dict], seqs: list[str], seeds: list[int], lrs: dict, cfg: dict):
    """The random-growth ablation: as many growths per task as selective made, per seed."""
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
    return rjobs


def acc_pts(data: dict, seq: str, arm: str) -> np.ndarray:
    """Per-seed average accuracy (%) of one arm, in the order of ``data["seeds"]``."""
    by = {(r["arm"], r["seed"]): r for r in data["runs"] if r["seq"] == seq}
    return np.array([
        100 * cl_metrics(np.nan_to_num(np.array(by[(arm, s)]["R"]), nan=0.0))["average_accuracy"]
        for s in data["seeds"]
    ])  # fmt: skip


def forgetting_pts(data: dict, seq: str, arm: str) -> np.ndarray:
    by = {(r["arm"], r["seed"]): r for r in data["runs"] if r["seq"] == seq}
    return np.array([
        100 * cl_metrics(np.nan_to_num(np.array(by[(arm, s)]["R"]), nan=0.0))["forgetting"]
        for s in data["seeds"]
    ])  # fmt: skip


SEQ_NAMES = {"split": "Split-Digits", "permuted": "Permuted-Digits"}


def comparisons(data: dict, label: str) -> list[dict]:
    """The row's comparisons of one run (every seed paired), in accuracy / forgetting points."""
    out = []
    for seq in ("split", "permuted"):
        sel, full, rnd = (acc_pts(data, seq, a) for a in ("selective", "full", "random"))
        f_sel, f_seq = forgetting_pts(data, seq, "selective"), forgetting_pts(data, seq, "seqft")
        name = f"{label} {SEQ_NAMES[seq]}"
        out.append(comparison(
            f"{name}: avg acc, selective - full", "average accuracy (pts), paired by seed",
            sel - full, unit="pts", target=None,
            target_source="paper (TRACE): 'better average accuracy than full upcycling', no number",
            headroom=headroom(100.0, float(full.mean()), "metric maximum: 100% average accuracy"),
        ))  # fmt: skip
        out.append(comparison(
            f"{name}: avg acc, selective - random growth of equal size",
            "average accuracy (pts), paired by seed", sel - rnd, unit="pts", target=None,
            target_source="paper: none (the ablation is ours)",
            headroom=headroom(
                float(full.mean()), float(rnd.mean()),
                "placement headroom: full upcycling (every slot grown) as the ceiling, "
                "minus random growth of equal size",
            ),
        ))  # fmt: skip
        out.append(comparison(
            f"{name}: forgetting, selective - SeqFT", "forgetting (pts), paired by seed",
            f_sel - f_seq, unit="pts", higher_is_better=False,
            target=-0.8 * float(f_seq.mean()),
            target_source="paper: 80% less forgetting than SeqFT, applied to this run's SeqFT",
            headroom=headroom(0.0, float(f_seq.mean()), "metric minimum: forgetting 0"),
        ))  # fmt: skip
    return out


def tuning(data: dict) -> list[dict]:
    """One entry per tuned arm and sequence: the validation score at every lr of its grid."""
    if data["quick"]:
        return []
    grids = data.get("lr_grid") or {s: {a: GRID for a in TUNED_ARMS} for s in data["lr"]}
    return [
        tuned(
            f"{s}/{arm}", "lr", grids[s][arm], sweep_scores(data["sweep"], s, arm, grids[s][arm]),
            objective=f"validation average accuracy, seeds {list(SWEEP_SEEDS)}",
            chosen=data["lr"][s][arm],
        )
        for s in ("split", "permuted")
        for arm in TUNED_ARMS
    ]  # fmt: skip


def evidence_of(data: dict, label: str) -> dict:
    return evidence(comparisons(data, label), tuning(data))


def _ci(c: dict) -> str:
    return f"{c['diff']:+.1f} pts [{c['ci95'][0]:+.1f}, {c['ci95'][1]:+.1f}]"


def _verdict(c: dict) -> str:
    if c["resolved"]:
        return ""
    h = c["headroom"]["value"]
    if abs(h) < c["mde"] and "placement" in c["headroom"]["how"]:
        return f" unresolved (placement headroom {h:+.1f} pts < MDE {c['mde']:.1f})"
    return f" unresolved (MDE {c['mde']:.1f})"


def brief(data: dict, ev: dict, label: str) -> str:
    """One run's part of the claim, printed from its evidence comparisons."""
    cs = {c["name"]: c for c in ev["comparisons"]}
    parts = []
    for seq in ("split", "permuted"):
        r = data["summary"][seq]
        nm = f"{label} {SEQ_NAMES[seq]}"
        full, rnd = (
            cs[f"{nm}: avg acc, selective - full"],
            cs[f"{nm}: avg acc, selective - random growth of equal size"],
        )
        fg = cs[f"{nm}: forgetting, selective - SeqFT"]
        parts.append(
            f"{SEQ_NAMES[seq]}: forgetting -{100 * r['forgetting_reduction_vs_seqft']:.0f}% vs "
            f"SeqFT ({_ci(fg)}), added params {100 * r['added_params_fraction_of_full']:.0f}% "
            f"of full, avg acc vs full {_ci(full)}{_verdict(full)}, vs equal-size random growth "
            f"{_ci(rnd)}{_verdict(rnd)}"
        )
    return "; ".join(parts)


def _extension(data: dict) -> str:
    ext = data.get("grid_extension")
    if not ext or not ext.get("moved"):
        return ""
    moved = ", ".join(
        f"{m} to {data['lr'][m.split('/')[0]][m.split('/')[1]]:g}" for m in ext["moved"]
    )
    host, here = (ext.get("machine") or {}), (data.get("machine") or {})
    other = ""
    if isinstance(host, dict) and isinstance(here, dict):
        a, b = host.get("cpu_capability"), here.get("cpu_capability")
        if a and b and a != b:
            other = f"; the extension ran on {a} kernels, the rest on {b}"
    return f" after extending edge-optimum grids (moved: {moved}{other})"


def make_row(full_data: dict, quick_data: dict) -> dict:
    """The REPRODUCTION row: the 10-seed full run (reproduce.json) is the claim; the 3-seed
    quick run (this row's run, which ``nox -s reproduce`` times) is quoted beside it, labelled."""
    ev_full, ev_quick = evidence_of(full_data, "full"), evidence_of(quick_data, "quick")
    n_full, n_quick = len(full_data["seeds"]), len(quick_data["seeds"])
    sp = full_data["summary"]["split"]["arms"]
    ours = round(100 * sp["selective"]["average_accuracy"][0], 2)
    base = round(100 * sp["full"]["average_accuracy"][0], 2)
    claim = (
        "selective (bilevel search, every candidate trained in the inner step) vs full MoE "
        f"upcycling in continual learning. Full run ({n_full} paired seeds, lr per arm tuned on "
        f"validation seeds, every chosen lr interior{_extension(full_data)}, "
        f"benchmarks/reproduce.json, {full_data['seconds']:.0f} s wall): "
        f"{brief(full_data, ev_full, 'full')}. Quick run ({n_quick} paired seeds, lr 3e-3 fixed; "
        f"this row's seconds): {brief(quick_data, ev_quick, 'quick')}. Mean [95% t-interval]; "
        "ours/baseline = full run's Split-Digits avg acc % selective/full"
    )
    return {
        "package": "cka-upcycling",
        "claim": claim,
        "paper": "TRACE (LLM, 8 tasks): 80% forgetting reduction, 60% of full upcycling's expansion removed (40% kept), better avg acc than full",
        "ours": ours,
        "baseline": base,
        "ratio": round(ours / base, 4),
        "evidence": {
            **ev_full,
            "comparisons": ev_full["comparisons"] + ev_quick["comparisons"],
        },
    }  # fmt: skip


def _next_lr(lr: float, direction: int) -> float:
    """The next point of the 1-3-10 grid pattern below (-1) or above (+1) ``lr``."""
    e = math.floor(math.log10(lr) + 1e-9)
    one = round(lr / 10**e) == 1
    if direction < 0:
        return float(f"{3 * 10 ** (e - 1) if one else 10**e:.0e}")
    return float(f"{3 * 10**e if one else 10 ** (e + 1):.0e}")


def extend_grid(data: dict, workers: int) -> dict:
    """Extend each arm's lr grid past an edge optimum (one point at a time, x1/√10 or x√10 of
    the decade pattern) until every optimum is interior; rerun the test seeds of an arm whose
    choice moved (and random's, when selective's did). Returns the updated full-run JSON."""
    cfg = dict(data["config"])
    seqs, seeds = list(data["lr"]), data["seeds"]
    grids = data.get("lr_grid") or {s: {a: list(GRID) for a in TUNED_ARMS} for s in seqs}
    lrs = {s: dict(v) for s, v in data["lr"].items()}
    sweep = list(data["sweep"])
    moved: set[tuple[str, str]] = set()
    while True:
        jobs = []
        for s in seqs:
            for arm in TUNED_ARMS:
                g = sorted(grids[s][arm])
                best = lrs[s][arm]
                if best == g[0]:
                    new = _next_lr(g[0], -1)
                elif best == g[-1]:
                    new = _next_lr(g[-1], +1)
                else:
                    continue
                grids[s][arm] = sorted([*g, new])
                jobs += [(s, arm, sd, new, "val", cfg) for sd in SWEEP_SEEDS]
        if not jobs:
            break
        print(f"extend-grid: {len(jobs)} sweep runs", file=sys.stderr)
        sweep += [
            {k: r[k] for k in ("seq", "arm", "seed", "lr", "R")} for r in pool_map(jobs, workers)
        ]
        for s in seqs:
            for arm in TUNED_ARMS:
                sc = sweep_scores(sweep, s, arm, grids[s][arm])
                best = grids[s][arm][int(np.argmax(sc))]
                if best != lrs[s][arm]:
                    lrs[s][arm] = best
                    moved.add((s, arm))
    runs = list(data["runs"])
    if moved:
        for s, arm in moved:
            if arm == "selective":
                lrs[s]["random"] = lrs[s]["selective"]
        redo = {(s, arm) for s, arm in moved} | {
            (s, "random") for s, a in moved if a == "selective"
        }
        runs = [r for r in runs if (r["seq"], r["arm"]) not in redo]
        jobs = [
            (s, arm, sd, lrs[s][arm], "test", cfg)
            for s, arm in sorted(redo)
            if arm != "random"
            for sd in seeds
        ]
        runs += pool_map(jobs, workers)
        rseqs = sorted({s for s, a in redo if a == "random"})
        runs += pool_map(random_jobs(runs, rseqs, seeds, lrs, cfg), workers)
    out = {**data, "lr": lrs, "lr_grid": grids, "sweep": sweep, "runs": runs}
    out["summary"] = summarize(runs, seeds)
    out["grid_extension"] = {
        "moved": sorted(f"{s}/{a}" for s, a in moved),
        "machine": machine_info(),  # the extension's host: compare with data["machine"]
    }
    return out  # fmt: skip


def main() -> None:
    a = _parser().parse_args()
    if a.quiet:
        os.environ["CKA_REPRO_QUIET"] = "1"  # inherited by the spawned workers
    threads = pin_threads(1)  # every worker trains with one thread (torch.set_num_threads(1))
    if a.row_from:
        stored = {}
        for name, label in (("reproduce_quick.json", "quick"), ("reproduce.json", "full")):
            path = HERE / name  # resummarise the stored runs (exact t) and add the evidence
            data = json.loads(path.read_text())
            for k in ("claim", "paper", "ours", "baseline", "ratio"):  # the row's: reproduce_row
                data.pop(k, None)
            data["summary"] = summarize(data["runs"], data["seeds"])
            data["evidence"] = evidence_of(data, label)
            path.write_text(json.dumps(data, indent=1) + "\n")
            stored[label] = data
        row = make_row(stored["full"], stored["quick"])
        old = json.loads((HERE / "reproduce_row.json").read_text())
        keep = ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start")
        row.update({k: old[k] for k in keep if k in old})  # the same quick run, resummarised
        sys.path.insert(0, str(HERE.parents[2] / "tools"))
        from reproduce_table import write_row

        print(f"wrote {write_row(HERE.parents[2], row)}", file=sys.stderr)
        print(json.dumps(row, ensure_ascii=False))
        return
    if a.extend_grid:
        t0 = time.time()
        path = HERE / "reproduce.json"
        data = extend_grid(json.loads(path.read_text()), a.workers)
        data["grid_extension"]["seconds"] = round(time.time() - t0, 1)
        data["grid_extension"]["threads"] = threads
        data["evidence"] = evidence_of(data, "full")
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(json.dumps({"lr": data["lr"], "lr_grid": data["lr_grid"]}))
        return
    t0 = time.time()
    load0 = [round(v, 1) for v in os.getloadavg()]
    cfg = dict(CFG)
    seqs = ["split", "permuted"]
    seeds = [0, 1, 2] if a.quick else list(range(10))
    lrs = {s: {arm: 3e-3 for arm in ARMS} for s in seqs}
    sweep = []
    if not a.quick:  # lr per arm on the validation split, seeds 100, 101 (disjoint from reported)
        jobs = [
            (s, arm, sd, lr, "val", cfg)
            for s in seqs
            for arm in TUNED_ARMS
            for lr in GRID
            for sd in SWEEP_SEEDS
        ]
        sweep = pool_map(jobs, a.workers)
        for s in seqs:
            for arm in TUNED_ARMS:
                score = sweep_scores(sweep, s, arm, GRID)
                lrs[s][arm] = GRID[int(np.argmax(score))]
            lrs[s]["random"] = lrs[s]["selective"]
    jobs = [
        (s, arm, sd, lrs[s][arm], "test", cfg) for s in seqs for arm in TUNED_ARMS for sd in seeds
    ]
    runs = pool_map(jobs, a.workers)
    runs += pool_map(random_jobs(runs, seqs, seeds, lrs, cfg), a.workers)
    summary = summarize(runs, seeds)
    seconds = round(time.time() - t0, 1)
    full = {
        "package": "cka-upcycling", "seconds": seconds, "quick": a.quick, "seeds": seeds,
        "config": cfg, "lr": lrs, "summary": summary, "runs": runs,
        "sweep": [{k: r[k] for k in ("seq", "arm", "seed", "lr", "R")} for r in sweep],
        "torch": torch.__version__, "threads": threads, "load_avg_at_start": load0,
    }  # fmt: skip
    if not a.quick:
        full["lr_grid"] = {s: {arm: list(GRID) for arm in TUNED_ARMS} for s in seqs}
    full["evidence"] = evidence_of(full, "quick" if a.quick else "full")
    out = Path(a.out) if a.out else HERE / ("reproduce_quick.json" if a.quick else "reproduce.json")
    full["machine"] = machine_info()  # CPU, kernel level, threads, versions
    out.write_text(json.dumps(full, indent=1) + "\n")
    other = HERE / ("reproduce.json" if a.quick else "reproduce_quick.json")
    if other.exists():  # the row: full run's claim, quick run beside it
        o = json.loads(other.read_text())
        line = make_row(*((o, full) if a.quick else (full, o)))
        line["seconds"] = seconds if a.quick else o["seconds"]
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
