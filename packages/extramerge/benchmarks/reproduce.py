"""Extra-Merge vs SMA / EMA vs the last checkpoint on a small char-level GPT (small scale).

Paper claim (Zhou et al., arXiv 2605.26484): in late-stage pre-training the raw checkpoints
oscillate but consecutive merged checkpoints lie on a near rank-1 line (one component explains
> 94% of the variance); extrapolating the merge along that line (Extra-Merge) lowers the loss
below standard merging, without gradient updates, for AdamW and for Muon.

Here: a GPT (quick: 2 layers x 64, 0.11M parameters, block 32; full: 4 x 192, ~1.8M, block 128)
on character-level English text that ships with CPython (`pydoc_data.topics`), split BY TOPIC into
train / select / report. Warmup-stable-decay schedule: checkpoints every `every` steps in the last
part of the constant-LR stable phase (late-stage oscillation), then the true decay branch
(LR -> 0) from the last stable checkpoint as the oracle. Arms, all from the same run (paired by
seed):

  last       the last stable checkpoint
  sma        mean of the last W checkpoints, W chosen on `select` from windows_for(n_ckpt)
             (WINDOWS below n_ckpt - 1, and n_ckpt - 1)
  ema        EMA over the checkpoints, decay chosen on `select` from DECAYS (6 candidates)
  extra      Extra-Merge [recon], direction "diff", on the SMA trajectory of the chosen W; alpha
             chosen on `select` from {0} U ALPHAS (6 candidates + alpha = 0, the SMA itself)
  extra_pc1  the same with direction "pc1"
  extra_lag  ablation without a line search: alpha = (W - 1) / 2 (lag compensation), W on `select`
  extra_ema, extra_ema_pc1
             Extra-Merge on the EMA trajectory (not in the paper; issue 46): the last TRAJ EMA
             states with the chosen decay, direction "diff" / "pc1", alpha on `select`
  decay      the decay-branch model (extra gradient steps: the headroom, not a competitor)

All numbers are cross-entropy (nats / char) on `report`, which nothing is tuned on. 95% intervals
are Student-t over paired seed differences. Everything is seeded (torch deterministic algorithms).

    python benchmarks/reproduce.py --quick       # AdamW, 3 seeds (see README for the time)
    python benchmarks/reproduce.py               # AdamW and Muon, 3 seeds, bigger model
    python benchmarks/reproduce.py --scale --device cuda --seeds 4  # (--seed-start N to add)
                                                 # scale study: 0.1M..11M GPTs on the CPython
                                                 # stdlib sources (a GPU; ~165 s per seed on H200)
    python benchmarks/reproduce.py --tables      # the README's results from the committed JSON
Progress goes to stderr; the last stdout line is one JSON object; the full JSON is written to
benchmarks/reproduce_results.json (reproduce_results_quick.json with --quick).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import zlib
from dataclasses import dataclass


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="short schedule, small model (CPU)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per optimizer (paired)")
    ap.add_argument("--seed-start", type=int, default=0, help="scale: first seed")
    ap.add_argument("--optimizers", default=None, help="comma list of adamw,muon")
    ap.add_argument(
        "--lr", type=float, default=None, help="--quick: peak learning rate (default 1e-2)"
    )
    ap.add_argument("--device", default="cpu", help="cpu or cuda (training and evaluation)")
    ap.add_argument(
        "--scale", action="store_true", help="the scale study (sizes x seeds; meant for a GPU)"
    )
    ap.add_argument("--sizes", default=None, help="scale study sizes (comma list; default: all)")
    ap.add_argument("--smoke", action="store_true", help="scale study code path, tiny schedule")
    ap.add_argument("--time-budget", type=float, default=None, help="scale: no new seed after")
    ap.add_argument(
        "--out",
        default=None,
        help="results JSON path (default: benchmarks/reproduce_results[_quick].json; scale: its own)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument(
        "--row-from", help="print the headline row of a saved results JSON (no training)"
    )
    ap.add_argument("--tables", action="store_true", help="print the README's results (no run)")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import numpy as np
import torch
import torch.nn.functional as F
from icml26_extramerge import (
    ema,
    ema_trajectory,
    extra_merge,
    merged_trajectory,
    rank1_report,
    sma,
)
from icml26_kernels.evidence import (
    comparison,
    evidence,
    headroom,
    pin_threads,
    t_interval,
    tuned,
)
from torch import nn

# SMA windows (checkpoints). issue 61: (2, 4, 8, 12, 16, 24) left the window on its upper edge in
# 13 of the scale study's 16 runs; the grid now runs up to n_ckpt - 1, the largest window whose SMA
# trajectory still has the two merged points Extra-Merge's direction needs (windows_for)
WINDOWS = (2, 4, 8, 12, 16, 24, 32, 40, 48, 64)
DECAYS = (0.5, 0.75, 0.875, 0.9, 0.9375, 0.96)  # EMA decays (horizons ~2..25 checkpoints)
ALPHAS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # Extra-Merge line-search coefficients (merged steps)
TRAJ = 16  # merged checkpoints in the trajectory Extra-Merge reads (for "pc1"; "diff" uses 2)
ARMS = (
    "last",
    "sma",
    "ema",
    "extra",
    "extra_pc1",
    "extra_ema",
    "extra_ema_pc1",
    "extra_lag",
    "decay",
)


def windows_for(n_ckpt: int) -> tuple[int, ...]:
    """The SMA window grid of a run with ``n_ckpt`` checkpoints: WINDOWS below n_ckpt - 1, and
    n_ckpt - 1 itself (a hard bound: W = n_ckpt leaves a one-point SMA trajectory, no direction)."""
    return (*tuple(w for w in WINDOWS if w < n_ckpt - 1), n_ckpt - 1)


PINNED: dict = {}  # what pin_threads set at the start of main(), recorded in every JSON


QUIET = False  # --quiet: no progress lines


def log(*a):
    if not QUIET:
        print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# data: pydoc_data.topics split by topic
# ---------------------------------------------------------------------------------------------
def load_text() -> tuple[dict[str, torch.Tensor], int]:
    import pydoc_data.topics as topics

    parts: dict[str, list[str]] = {"train": [], "select": [], "report": []}
    for name, text in sorted(topics.topics.items()):
        h = zlib.crc32(name.encode()) % 10  # deterministic topic split 8 / 1 / 1 (by bytes)
        split = "select" if h == 0 else "report" if h == 1 else "train"
        parts[split].append(" ".join(text.split()))
    text = {k: "\n".join(v) for k, v in parts.items()}
    chars = sorted({c for t in text.values() for c in t if c.isascii()})
    idx = {c: i for i, c in enumerate(chars)}
    ids = {
        k: torch.tensor([idx[c] for c in t if c in idx], dtype=torch.long) for k, t in text.items()
    }
    return ids, len(chars)


def load_stdlib_text() -> tuple[dict[str, torch.Tensor], int]:
    """The scale study's larger corpus: CPython's own standard-library sources (*.py, no tests),
    split BY FILE into train / select / report (8 / 1 / 1 by a hash of the relative path).
    Depends on the Python version that runs it (recorded in the JSON)."""
    import sysconfig

    root = sysconfig.get_paths()["stdlib"]
    parts: dict[str, list[bytes]] = {"train": [], "select": [], "report": []}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in ("test", "tests", "idle_test", "site-packages", "dist-packages")
            and not d.startswith(("__", "."))
        )
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, fn))
            with open(os.path.join(dirpath, fn), "rb") as f:
                raw = f.read()
            h = zlib.crc32(rel.encode()) % 10
            split = "select" if h == 0 else "report" if h == 1 else "train"
            parts[split].append(raw)
    data = {k: b"\n".join(v) for k, v in parts.items()}
    table = torch.full((256,), -1, dtype=torch.long)
    present = sorted(set().union(*(set(v) for v in data.values())) & set(range(9, 127)))
    table[torch.tensor(present)] = torch.arange(len(present))
    ids = {}
    for k, v in data.items():
        x = table[torch.frombuffer(bytearray(v), dtype=torch.uint8).long()]
        ids[k] = x[x >= 0]  # non-ASCII / control bytes dropped
    return ids, len(present)


def windows(data: torch.Tensor, n: int, block: int, g: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(data) - block - 1, (n,), generator=g)
    return data[starts[:, None] + torch.arange(block + 1)]  # (n, block + 1)


# ---------------------------------------------------------------------------------------------
# model: a minimal GPT (pre-LN, tied embeddings, SDPA causal attention)
# ---------------------------------------------------------------------------------------------
@dataclass
class GPTConfig:
    vocab: int
    block: int = 64
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.n_embd), nn.LayerNorm(c.n_embd)
        self.qkv = nn.Linear(c.n_embd, 3 * c.n_embd, bias=False)
        self.proj = nn.Linear(c.n_embd, c.n_embd, bias=False)
        self.fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=False)
        self.out = nn.Linear(4 * c.n_embd, c.n_embd, bias=False)
        self.h = c.n_head

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (
            z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v)
        )  # (B,H,T,hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(c.vocab, c.n_embd)
        self.wpe = nn.Embedding(c.block, c.n_embd)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln = nn.LayerNorm(c.n_embd)
        self.head = nn.Linear(c.n_embd, c.vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):  # (B, T) -> (B, T, V)
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def loss_on(model: nn.Module, batches: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        tot = 0.0
        for xy in batches:  # (b, block + 1)
            logits = model(xy[:, :-1])
            tot += float(
                F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xy[:, 1:].reshape(-1))
            )
    model.train()
    return tot / len(batches)


def make_eval(model: nn.Module, batches: torch.Tensor):
    def eval_fn(sd):
        model.load_state_dict(sd)
        return loss_on(model, batches)

    return eval_fn


def optimizers(model: nn.Module, kind: str, lr: float):
    if kind == "adamw":
        return [torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)]
    # Muon for the hidden matrices, AdamW for embeddings / head / LayerNorm (Jordan et al.)
    hidden = [p for n, p in model.named_parameters() if p.ndim == 2 and n.startswith("blocks")]
    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and n.startswith("blocks"))]
    return [
        torch.optim.Muon(
            hidden, lr=lr, momentum=0.95, weight_decay=0.1, adjust_lr_fn="match_rms_adamw"
        ),
        torch.optim.AdamW(rest, lr=lr, betas=(0.9, 0.95), weight_decay=0.1),
    ]


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """CPU copy without the tied head key (merging runs on the CPU, training on `device`)."""
    return {
        k: v.detach().to("cpu", copy=True)
        for k, v in model.state_dict().items()
        if k != "head.weight"
    }


def paired(a: np.ndarray, b: np.ndarray) -> dict:
    """a - b per paired seed: mean, 95% t-interval (icml26_kernels.evidence), wins (a < b)."""
    d = a - b
    mean, lo, hi = t_interval(d) if len(d) > 1 else (float(d.mean()), math.nan, math.nan)
    return {
        "mean": float(mean),
        "ci95": [float(lo), float(hi)],
        "wins": int((d < 0).sum()),
        "n": len(d),
        "per_seed": [float(v) for v in d],
    }


# ---------------------------------------------------------------------------------------------
# one run
# ---------------------------------------------------------------------------------------------
def run(
    seed: int, opt_kind: str, cfg: GPTConfig, sched: dict, data, evals, device: str = "cpu"
) -> dict:
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(1000 + seed)
    model = GPT(cfg).to(device)
    opts = optimizers(model, opt_kind, sched["lr"])
    base_lr = [[pg["lr"] for pg in o.param_groups] for o in opts]
    warm, stable, every, n_ck, dec = (
        sched[k] for k in ("warmup", "stable", "every", "n_ckpt", "decay")
    )
    first_ck = warm + stable - (n_ck - 1) * every

    def step(t: int, lr_mult: float, gen: torch.Generator) -> float:
        for o, lrs in zip(opts, base_lr):
            for pg, lr0 in zip(o.param_groups, lrs):
                pg["lr"] = lr0 * lr_mult
        xy = windows(data["train"], sched["batch"], cfg.block, gen).to(device)
        logits = model(xy[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xy[:, 1:].reshape(-1))
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for o in opts:
            o.step()
        return float(loss.detach())

    ckpts = []
    for t in range(1, warm + stable + 1):
        step(t, min(1.0, t / warm), g)
        if t >= first_ck and (t - first_ck) % every == 0:
            ckpts.append(snapshot(model))
    assert len(ckpts) == n_ck
    # oracle: the decay branch (linear LR -> 0) from the last stable checkpoint
    opt_state = [o.state_dict() for o in opts]
    gd = torch.Generator().manual_seed(2000 + seed)
    for t in range(1, dec + 1):
        step(t, 1.0 - t / (dec + 1), gd)
    decay_sd = snapshot(model)
    for o, s in zip(opts, opt_state):
        o.load_state_dict(s)

    ev_model = GPT(cfg).to(device)
    sel, rep = make_eval(ev_model, evals["select"]), make_eval(ev_model, evals["report"])

    def load(sd):  # state dicts without the tied head key
        return {**sd, "head.weight": sd["wte.weight"]}

    out: dict = {"seed": seed}
    out["last"] = rep(load(ckpts[-1]))
    out["decay"] = rep(load(decay_sd))
    wins = windows_for(n_ck)
    sma_sel = {w: sel(load(sma(ckpts[-w:]))) for w in wins}
    w_best = min(sma_sel, key=sma_sel.get)
    out["sma"], out["sma_window"] = rep(load(sma(ckpts[-w_best:]))), w_best
    out["sma_select_curve"] = {str(w): v for w, v in sma_sel.items()}
    ema_sel = {d: sel(load(ema(ckpts, d))) for d in DECAYS}
    d_best = min(ema_sel, key=ema_sel.get)
    out["ema"], out["ema_decay"] = rep(load(ema(ckpts, d_best))), d_best
    out["ema_select_curve"] = {str(d): v for d, v in ema_sel.items()}

    # Extra-Merge (the paper's recipe as reconstructed): the SMA trajectory of the chosen W,
    # alpha by a forward-only line search on `select` over {0} U ALPHAS (alpha = 0 is the SMA)
    traj = merged_trajectory(ckpts[-(w_best + TRAJ - 1) :], window=w_best)
    for name, direction in (("extra", "diff"), ("extra_pc1", "pc1")):
        r = extra_merge(traj, direction=direction, eval_fn=lambda sd: sel(load(sd)), alphas=ALPHAS)
        out[name], out[f"{name}_alpha"] = rep(load(r.state_dict)), r.alpha
        out[f"{name}_select_curve"] = {str(a): v for a, v in r.losses.items()}
    # Extra-Merge on the EMA trajectory (issue 46; not in the paper, which extrapolates an SMA):
    # the last TRAJ states m_k of the EMA with the decay chosen above, g = m_K - m_{K-1}
    # = (1 - b)(theta_K - m_{K-1}) ("diff") or the slope-scaled PC1 of the states ("pc1"),
    # alpha on `select` over {0} U ALPHAS (alpha = 0 is the EMA itself)
    etraj = ema_trajectory(ckpts, d_best, last=TRAJ)
    for name, direction in (("extra_ema", "diff"), ("extra_ema_pc1", "pc1")):
        r = extra_merge(etraj, direction=direction, eval_fn=lambda sd: sel(load(sd)), alphas=ALPHAS)
        out[name], out[f"{name}_alpha"] = rep(load(r.state_dict)), r.alpha
        out[f"{name}_select_curve"] = {str(a): v for a, v in r.losses.items()}
    # ablation, no line search: alpha = (W - 1) / 2 moves the SMA's centroid (which lags the
    # newest checkpoint by (W - 1) / 2 intervals) to the newest checkpoint along g; W chosen on
    # `select` from the SMA's six windows
    cand = {}
    for w in wins:
        r = extra_merge(
            merged_trajectory(ckpts[-(w + 1) :], window=w), alpha=(w - 1) / 2, direction="diff"
        )
        cand[w] = (sel(load(r.state_dict)), r.state_dict)
    w_x = min(cand, key=lambda w: cand[w][0])
    out["extra_lag"], out["extra_lag_window"] = rep(load(cand[w_x][1])), w_x
    out["extra_lag_select_curve"] = {str(w): v[0] for w, v in cand.items()}
    # rank-1 structure: merged trajectory vs raw checkpoints over the same span
    traj = merged_trajectory(ckpts[-(8 + TRAJ - 1) :], window=8)
    span = ckpts[-TRAJ:]
    out["evr_merged"] = rank1_report(traj).explained_variance_ratio
    out["evr_raw"] = rank1_report(span).explained_variance_ratio
    out["evr_raw_all"] = rank1_report(ckpts).explained_variance_ratio
    log(
        f"[{opt_kind} seed {seed}] last {out['last']:.4f} sma(W={w_best}) {out['sma']:.4f} "
        f"ema({d_best}) {out['ema']:.4f} extra(a={out['extra_alpha']}) {out['extra']:.4f} "
        f"extra_pc1(a={out['extra_pc1_alpha']}) {out['extra_pc1']:.4f} "
        f"extra_lag(W={out['extra_lag_window']}) {out['extra_lag']:.4f} "
        f"extra_ema(a={out['extra_ema_alpha']}) {out['extra_ema']:.4f} "
        f"extra_ema_pc1(a={out['extra_ema_pc1_alpha']}) {out['extra_ema_pc1']:.4f} "
        f"decay {out['decay']:.4f} "
        f"EVR merged {out['evr_merged']:.3f} raw {out['evr_raw']:.3f}"
    )
    return out


def summarise(runs: list[dict]) -> dict:
    arr = {k: np.array([r[k] for r in runs]) for k in ARMS}
    best_merge = np.minimum(
        arr["sma"], arr["ema"]
    )  # the better standard merge, per seed (on report)
    s = {k: float(v.mean()) for k, v in arr.items()}
    s["extra_minus_sma"] = paired(arr["extra"], arr["sma"])
    s["extra_minus_ema"] = paired(arr["extra"], arr["ema"])
    s["extra_minus_best_merge_oracle_pick"] = paired(arr["extra"], best_merge)
    s["extra_pc1_minus_sma"] = paired(arr["extra_pc1"], arr["sma"])
    s["extra_pc1_minus_ema"] = paired(arr["extra_pc1"], arr["ema"])
    s["extra_lag_minus_ema"] = paired(arr["extra_lag"], arr["ema"])
    s["extra_lag_minus_sma"] = paired(arr["extra_lag"], arr["sma"])
    s["extra_ema_minus_ema"] = paired(arr["extra_ema"], arr["ema"])
    s["extra_ema_pc1_minus_ema"] = paired(arr["extra_ema_pc1"], arr["ema"])
    s["sma_minus_last"] = paired(arr["sma"], arr["last"])
    s["extra_minus_decay"] = paired(arr["extra"], arr["decay"])
    gap = arr["last"] - arr["decay"]
    s["headroom_closed_by_extra"] = float(((arr["last"] - arr["extra"]) / gap).mean())
    s["headroom_closed_by_sma"] = float(((arr["last"] - arr["sma"]) / gap).mean())
    s["order_extra_lt_sma_lt_last_every_seed"] = bool(
        np.all(arr["extra"] < arr["sma"]) and np.all(arr["sma"] < arr["last"])
    )
    for k in ("evr_merged", "evr_raw"):
        s[k] = float(np.mean([r[k] for r in runs]))
    return s


# the comparisons the row prints: (summary key, label); every extrapolation variant against EMA
VS_EMA = (
    ("extra_minus_ema", "Extra-Merge (SMA, diff) - EMA"),
    ("extra_pc1_minus_ema", "Extra-Merge (SMA, pc1) - EMA"),
    ("extra_lag_minus_ema", "lag rule (SMA, diff, alpha = (W-1)/2) - EMA"),
    ("extra_ema_minus_ema", "Extra-Merge on EMA (diff) - EMA"),
    ("extra_ema_pc1_minus_ema", "Extra-Merge on EMA (pc1) - EMA"),
)
TARGET_SOURCE = (
    "the paper reports Extra-Merge below standard merging at 124M-2B parameters but no loss "
    "difference that transfers to a 0.1M char GPT: no numeric target"
)
# (arm, hyper-parameter, select-curve key, chosen key); alpha = 0 is the merge itself
TUNED = (
    ("sma", "window", "sma_select_curve", "sma_window"),
    ("ema", "decay", "ema_select_curve", "ema_decay"),
    ("extra", "alpha", "extra_select_curve", "extra_alpha"),
    ("extra_pc1", "alpha", "extra_pc1_select_curve", "extra_pc1_alpha"),
    ("extra_ema", "alpha", "extra_ema_select_curve", "extra_ema_alpha"),
    ("extra_ema_pc1", "alpha", "extra_ema_pc1_select_curve", "extra_ema_pc1_alpha"),
    ("extra_lag", "window", "extra_lag_select_curve", "extra_lag_window"),
)


def _bound(param: str, chosen: float, grid: list, n_ckpt: int) -> str | None:
    if param == "alpha" and chosen == 0:
        return "alpha = 0 is the merge itself; Extra-Merge extrapolates forward (alpha >= 0)"
    if param == "window" and chosen == n_ckpt - 1 == max(grid):
        return (
            f"W = n_ckpt - 1 = {chosen}: the largest window whose SMA trajectory has the two "
            f"points Extra-Merge's direction needs (the run stores {n_ckpt} checkpoints)"
        )
    return None


def evidence_of(results: dict) -> dict:
    """The evidence object (icml26_kernels.evidence) of one optimizer's quick/full results."""
    kind = next(k for k in results if k in ("adamw", "muon"))
    runs = results[kind]["runs"]
    head = summarise(runs)
    n_ckpt = results["config"]["schedule"]["n_ckpt"]
    arr = {k: np.array([r[k] for r in runs]) for k in ARMS}
    oracle = "decay branch (LR -> 0, extra gradient steps) from the last stable checkpoint"
    comps = [
        comparison(
            label,
            "report-split cross-entropy, paired over seeds (nats/char)",
            (arr[key.split("_minus_")[0]] - arr["ema"]).tolist(),
            target=None,
            target_source=TARGET_SOURCE,
            headroom=headroom(head["decay"], head["ema"], oracle),
            unit="nats/char",
            higher_is_better=False,
        )
        for key, label in VS_EMA
    ]
    comps.append(
        comparison(
            "Extra-Merge (SMA, diff) - SMA",
            "report-split cross-entropy, paired over seeds (nats/char)",
            (arr["extra"] - arr["sma"]).tolist(),
            target=None,
            target_source=TARGET_SOURCE,
            headroom=headroom(head["decay"], head["sma"], oracle),
            unit="nats/char",
            higher_is_better=False,
        )
    )
    tuning = []
    for r in runs:
        for arm, param, curve, key in TUNED:
            if curve not in r:  # a run stored before the select curves were
                continue
            grid = [float(g) if param != "window" else int(g) for g in r[curve]]
            t = tuned(
                f"{arm} ({kind}, seed {r['seed']})", param, grid, list(r[curve].values()),
                objective="select-split cross-entropy (nats/char, lower is better)",
                higher_is_better=False, chosen=r[key],
                hard_bound=_bound(param, r[key], grid, n_ckpt),
            )  # fmt: skip
            tuning.append(t)
    return evidence(comps, tuning)


def scale_evidence(res: dict) -> dict:
    """The scale study's evidence: every size's paired comparisons and select curves, the names
    prefixed by the size (the same builder as the headline's, one size at a time)."""
    comps, tuning = [], []
    for size, s in res["sizes"].items():
        ev = evidence_of({"adamw": {"runs": s["runs"]}, "config": res["config"]})
        comps += [{**c, "name": f"{size}: {c['name']}"} for c in ev["comparisons"]]
        tuning += [{**t, "arm": f"{size} {t['arm']}"} for t in ev["tuning"]]
    return evidence(comps, tuning)


def headline_row(results: dict) -> dict:
    """The REPRODUCTION.md row: Extra-Merge against EMA, the stronger standard merge, and every
    extrapolation variant against EMA, each with its 95% interval (and "unresolved" where it
    holds 0); Extra-Merge against SMA, the merge it extrapolates."""
    kind = next(k for k in results if k not in ("config", "seconds", "machine", "pinned_threads"))
    head = summarise(results[kind]["runs"])  # recomputed: a stored summary may predate keys
    n_params = results["config"]["params"]
    seeds = results["config"]["seeds"]
    ev = evidence_of(results)
    by = {c["name"]: c for c in ev["comparisons"]}
    wins = {label: head[key]["wins"] for key, label in VS_EMA}

    def ci(name: str) -> str:
        c = by[name]
        word = "" if c["resolved"] else ", unresolved"
        return f"{c['diff']:+.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}]{word}"

    first, *rest = VS_EMA
    beaten = [label for _, label in VS_EMA if by[label]["ci95"][1] < 0]
    worse = [label for _, label in VS_EMA if by[label]["ci95"][0] > 0]
    sma = by["Extra-Merge (SMA, diff) - SMA"]
    return {
        "package": "extramerge",
        "claim": (
            f"Extra-Merge vs EMA (strongest standard merge), report-split val loss (nats/char), "
            f"char GPT {n_params / 1e6:.2f}M, {kind}, {seeds} paired seeds, 95% t-intervals: "
            f"{first[1]} {ci(first[1])}, lower on {wins[first[1]]}/{seeds}; "
            + "; ".join(f"{label} {ci(label)}" for _, label in rest)
            + f" (EMA beaten by {len(beaten)} of {len(VS_EMA)} extrapolation variants, "
            f"resolved better than {len(worse)}); "
            f"Extra-Merge - SMA {ci(sma['name'])}, lower on {head['extra_minus_sma']['wins']}/"
            f"{seeds}; last {head['last']:.4f}, decay oracle {head['decay']:.4f} (headroom "
            f"below EMA {head['decay'] - head['ema']:+.4f}); "
            f"EVR(PC1) merged {head['evr_merged']:.2f} vs raw {head['evr_raw']:.2f}"
        ),
        "paper": "Extra-Merge < standard merging (GPT-2/LLaMA 124M-2B); PC1 > 94% of merged variance",
        "ours": round(head["extra"], 4),
        "baseline": round(head["ema"], 4),
        "ratio": round(round(head["extra"], 4) / round(head["ema"], 4), 4),
        "seconds": results["seconds"],
        "evidence": ev,
    }


# ---------------------------------------------------------------------------------------------
# scale study (issue 46): the same protocol at several model sizes, on the stdlib corpus
# ---------------------------------------------------------------------------------------------
SCALE_SIZES = {  # name: (n_layer, n_embd, n_head); parameters ~ 12 L d^2 + embeddings
    "0.1M": (2, 64, 4),
    "0.8M": (4, 128, 4),
    "3.2M": (4, 256, 8),
    "11M": (6, 384, 6),
}
SCALE_SCHED = dict(warmup=100, stable=2000, every=10, n_ckpt=48, decay=400, batch=64)
SCALE_BLOCK, SCALE_EVAL = 128, 8


def scale_lr(n_embd: int) -> float:
    """AdamW peak LR per width (fixed before any run: 1e-2 at width 64, ~ 1/sqrt(width))."""
    return 1e-2 * (64 / n_embd) ** 0.5


def ci95(x: np.ndarray) -> list[float]:
    """[low, high] of the 95% t-interval (icml26_kernels.evidence); NaNs below two runs."""
    if len(x) < 2:
        return [float("nan"), float("nan")]
    _, lo, hi = t_interval(x)
    return [lo, hi]


def scale_summary(runs: list[dict]) -> dict:
    s = summarise(runs)
    evr = np.array([r["evr_merged"] for r in runs])
    s["evr_merged_ci95"] = ci95(evr)
    s["evr_merged_above_0.94_runs"] = int((evr > 0.94).sum())
    s["alphas_extra"] = [r["extra_alpha"] for r in runs]
    s["alphas_extra_ema"] = [r["extra_ema_alpha"] for r in runs]
    return s


def machine(device: str) -> dict:
    import platform

    m = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "device": device,
    }
    if device.startswith("cuda"):
        m["gpu"] = torch.cuda.get_device_name(0)
    return m


def main_scale(args) -> None:
    t0 = time.time()
    data, vocab = load_stdlib_text()
    sched = dict(SCALE_SCHED)
    block, n_eval = SCALE_BLOCK, SCALE_EVAL
    if args.smoke:  # a CPU check of the code path only (not a result)
        sched.update(warmup=10, stable=480, decay=20, batch=8)
        block, n_eval = 32, 2
    sizes = (args.sizes or ",".join(SCALE_SIZES)).split(",")
    ge = torch.Generator().manual_seed(12345)
    evals = {
        k: windows(data[k], n_eval * 64, block, ge).view(n_eval, 64, block + 1).to(args.device)
        for k in ("select", "report")
    }
    log(
        f"stdlib corpus chars {[len(data[k]) for k in ('train', 'select', 'report')]}, vocab {vocab}"
    )
    res: dict = {
        "config": {
            "corpus": "CPython stdlib *.py (no tests), split by file 8/1/1",
            "chars": {k: len(v) for k, v in data.items()},
            "vocab": vocab,
            "block": block,
            "n_eval_batches": n_eval,
            "schedule": sched,
            "sizes": {},
            "windows": windows_for(sched["n_ckpt"]),
            "decays": DECAYS,
            "alphas": ALPHAS,
            "smoke": args.smoke,
        },
        "machine": machine(args.device),
        "pinned_threads": PINNED,
        "sizes": {},
    }
    out_path = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "reproduce_results_scale.json"
    )
    cfgs = {}
    for name in sizes:
        n_layer, n_embd, n_head = SCALE_SIZES[name]
        cfgs[name] = GPTConfig(
            vocab=vocab, block=block, n_layer=n_layer, n_embd=n_embd, n_head=n_head
        )
        n_params = sum(p.numel() for p in GPT(cfgs[name]).parameters())
        res["config"]["sizes"][name] = {
            **cfgs[name].__dict__,
            "params": n_params,
            "lr": scale_lr(n_embd),
        }
        res["sizes"][name] = {"runs": []}
    # seeds outer, sizes inner: a time budget that runs out leaves every size with equal seeds
    for seed in range(args.seed_start, args.seed_start + args.seeds):
        if args.time_budget and time.time() - t0 > args.time_budget:
            log(f"time budget {args.time_budget} s reached before seed {seed}")
            break
        for name in sizes:
            ts = time.time()
            sch = {**sched, "lr": scale_lr(cfgs[name].n_embd)}
            r = run(seed, "adamw", cfgs[name], sch, data, evals, device=args.device)
            r["seconds"] = round(time.time() - ts, 1)
            res["sizes"][name]["runs"].append(r)
            log(f"[{name}] seed {seed} in {r['seconds']} s")
        for name in sizes:
            runs = res["sizes"][name]["runs"]
            if len(runs) >= 2:
                res["sizes"][name]["summary"] = scale_summary(runs)
        res["seconds"] = round(time.time() - t0, 1)
        if all(len(res["sizes"][n]["runs"]) >= 2 for n in sizes):
            res["evidence"] = scale_evidence(res)
        with open(out_path, "w") as f:  # after every seed: a killed run keeps what it finished
            json.dump(res, f, indent=1)
    for name in sizes:
        sm = res["sizes"][name].get("summary")
        if sm:
            log(
                f"{name}: EVR merged {sm['evr_merged']:.3f} {sm['evr_merged_ci95']}, "
                f"extra-ema {sm['extra_minus_ema']}, extra_ema-ema {sm['extra_ema_minus_ema']}"
            )
    print(json.dumps({"scale_results": out_path, "seconds": res.get("seconds")}))


def _ci(d: dict) -> str:
    lo, hi = d["ci95"]
    word = "" if lo > 0 or hi < 0 else " (unresolved)"
    return f"{d['mean']:+.4f} [{lo:+.4f}, {hi:+.4f}]{word}, lower on {d['wins']}/{d['n']}"


def tables(quick_path: str, scale_path: str) -> str:
    """The README's result lines, generated from the committed JSON files."""
    lines = []
    if os.path.exists(quick_path):
        with open(quick_path) as f:
            q = json.load(f)
        runs = q["adamw"]["runs"]
        s = summarise(runs)
        lines += [
            "Quick run (`reproduce_results_quick.json`), paired differences, mean [95% t-interval]:",
            "",
            f"- Extra-Merge (SMA, diff) − EMA (headline): {_ci(s['extra_minus_ema'])}",
            f"- Extra-Merge (SMA, pc1) − EMA: {_ci(s['extra_pc1_minus_ema'])}",
            f"- lag-rule ablation − EMA: {_ci(s['extra_lag_minus_ema'])}",
            f"- Extra-Merge (SMA, diff) − SMA: {_ci(s['extra_minus_sma'])}",
            f"- Extra-Merge (SMA, pc1) − SMA: {_ci(s['extra_pc1_minus_sma'])}",
            f"- Extra-Merge on EMA (diff) − EMA: {_ci(s['extra_ema_minus_ema'])}",
            f"- Extra-Merge on EMA (pc1) − EMA: {_ci(s['extra_ema_pc1_minus_ema'])}",
            f"- lag-rule ablation − SMA: {_ci(s['extra_lag_minus_sma'])}",
            f"- SMA − last: {_ci(s['sma_minus_last'])}",
            f"- Extra-Merge − decay oracle: {_ci(s['extra_minus_decay'])}",
            f"- EVR(PC1): merged {s['evr_merged']:.3f} vs raw {s['evr_raw']:.3f}",
            "",
            "| arm | report loss (mean) | per seed (chosen hyperparameter) |",
            "|---|---|---|",
        ]
        for arm, label, hp in (
            ("last", "last checkpoint", None),
            ("sma", "SMA", "sma_window"),
            ("ema", "EMA", "ema_decay"),
            ("extra", "**Extra-Merge** (SMA, diff, α search)", "extra_alpha"),
            ("extra_pc1", "Extra-Merge (SMA, pc1, α search)", "extra_pc1_alpha"),
            ("extra_ema", "Extra-Merge on EMA (diff, α search)", "extra_ema_alpha"),
            ("extra_ema_pc1", "Extra-Merge on EMA (pc1, α search)", "extra_ema_pc1_alpha"),
            ("extra_lag", "ablation: diff, α = (W−1)/2", "extra_lag_window"),
            ("decay", "decay branch (oracle)", None),
        ):
            per = ", ".join(
                f"{r[arm]:.4f}" + (f" ({hp.split('_')[-1]} {r[hp]})" if hp else "") for r in runs
            )
            lines.append(f"| {label} | {s[arm]:.4f} | {per} |")
        lines += [""]
    if os.path.exists(scale_path):
        with open(scale_path) as f:
            sc = json.load(f)
        cfgs = sc["config"]["sizes"]
        lines += [
            "| size (params) | seeds | EVR(PC1) merged [95%] | EVR raw | SMA − last | "
            "Extra-Merge − EMA | Extra-Merge − SMA | Extra-Merge on EMA − EMA | α chosen (SMA / EMA) | "
            "SMA window chosen (grid top) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, v in sc["sizes"].items():
            s = v.get("summary")
            if not s:
                continue
            e = s["evr_merged_ci95"]
            top = max(sc["config"]["windows"])
            ws = [r["sma_window"] for r in v["runs"]]
            lines.append(
                f"| {name} ({cfgs[name]['params'] / 1e6:.2f}M) | {len(v['runs'])} | "
                f"{s['evr_merged']:.3f} [{e[0]:.3f}, {e[1]:.3f}] | {s['evr_raw']:.3f} | "
                f"{_ci(s['sma_minus_last'])} | {_ci(s['extra_minus_ema'])} | "
                f"{_ci(s['extra_minus_sma'])} | {_ci(s['extra_ema_minus_ema'])} | "
                f"{s['alphas_extra']} / {s['alphas_extra_ema']} | {ws} ({top}; at it in "
                f"{sum(w == top for w in ws)}/{len(ws)}) |"
            )
    return "\n".join(lines)


def main():
    global QUIET
    args = _parser().parse_args()
    QUIET = args.quiet
    if args.tables:
        here = os.path.dirname(os.path.abspath(__file__))
        print(
            tables(
                os.path.join(here, "reproduce_results_quick.json"),
                os.path.join(here, "reproduce_results_scale.json"),
            )
        )
        return
    if args.row_from:
        with open(args.row_from) as f:
            print(json.dumps(headline_row(json.load(f))))
        return
    if args.device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
        torch.use_deterministic_algorithms(True, warn_only=True)
        PINNED.update(pin_threads(torch.get_num_threads()))  # the host threads it always used
    else:
        # tiny matmuls: a second thread on 2 shared cores only adds waits; BLAS/OpenMP too
        PINNED.update(pin_threads(1))
        torch.use_deterministic_algorithms(True)
    if args.scale:
        main_scale(args)
        return
    t0 = time.time()
    data, vocab = load_text()
    if args.quick:
        cfg = GPTConfig(vocab=vocab, block=32, n_layer=2, n_embd=64, n_head=4)
        sched = dict(
            lr=args.lr or 1e-2, warmup=20, stable=400, every=4, n_ckpt=40, decay=80, batch=32
        )
        opt_kinds = (args.optimizers or "adamw").split(",")
        n_eval = 4
    else:
        cfg = GPTConfig(vocab=vocab, block=128, n_layer=4, n_embd=192, n_head=6)
        sched = dict(lr=3e-3, warmup=50, stable=900, every=10, n_ckpt=48, decay=200, batch=32)
        opt_kinds = (args.optimizers or "adamw,muon").split(",")
        n_eval = 24
    ge = torch.Generator().manual_seed(12345)
    evals = {
        k: windows(data[k], n_eval * 64, cfg.block, ge)
        .view(n_eval, 64, cfg.block + 1)
        .to(args.device)
        for k in ("select", "report")
    }
    n_params = sum(p.numel() for p in GPT(cfg).parameters())
    log(
        f"GPT {n_params / 1e6:.2f}M params, train/select/report chars "
        f"{[len(data[k]) for k in ('train', 'select', 'report')]}"
    )
    results = {
        "config": {
            "model": cfg.__dict__,
            "params": n_params,
            "schedule": sched,
            "windows": windows_for(sched["n_ckpt"]),
            "decays": DECAYS,
            "alphas": ALPHAS,
            "quick": args.quick,
            "seeds": args.seeds,
        },
        "machine": machine(args.device),
        "pinned_threads": PINNED,
    }
    for kind in opt_kinds:
        runs = [
            run(s, kind, cfg, sched, data, evals, device=args.device) for s in range(args.seeds)
        ]
        results[kind] = {"runs": runs, "summary": summarise(runs)}
        log(json.dumps(results[kind]["summary"], indent=1))
    results["seconds"] = round(time.time() - t0, 1)
    if len(opt_kinds) == 1:
        results["evidence"] = evidence_of(results)
    name = "reproduce_results_quick.json" if args.quick else "reproduce_results.json"
    with open(args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "w") as f:
        json.dump(results, f, indent=1)

    print(json.dumps(headline_row(results)))


if __name__ == "__main__":
    main()
