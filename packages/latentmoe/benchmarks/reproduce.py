"""Reproduce the paper's two CPU-checkable claims at small scale.

1. **Communication** (gloo, W ranks on 127.0.0.1, k = 2, 4, 8): bytes per token per layer
   forward, *read off the tensors handed to* ``dist.all_to_all_single`` (a wrapper around the
   collective, not the package's counter), for
   - Head Parallel (MH-LatentMoE layer),
   - naive Expert Parallel (top-k MoE layer: one row per (token, remote expert)),
   - de-duplicated EP (DeepEP-style: one row per (token, remote *rank*), partial sums combined
     on the expert rank; its top-k ids and gates travel as metadata).
2. **Quality at matched compute**: a byte-level LM on ``pydoc_data.topics``. The headline arm
   pair is MH-LatentMoE (H = 4, E = 32 per head, k = 4) vs the top-k MoE with the same total
   parameters **and** the same active parameters / FLOPs per token (E = 32, k = 7). Every arm
   gets the same tuning grid (peak lr; the same seeds), chosen on the *tune* half of the
   held-out 10 % and reported on the other *test* half; 3 paired seeds (same init seed and
   batches in every arm), mean and the 95 % t-interval of the paired difference. The paper's
   own init (every weight N(0, 0.02), W_out 0.02/sqrt(2L)) is its own arm.

``--quick`` (what ``nox -s reproduce`` runs): d = 64, 2 layers, T = 64, 120 steps x 8
sequences, W = 2 and 4; one torch thread. Writes ``reproduce_quick.json`` (``reproduce.json``
without ``--quick``); ``--readme`` rewrites the README results block from those files.
Progress on stderr; one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

import icml26_latentmoe as L
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp
from icml26_kernels.moe import topk_router
from icml26_kernels.provenance import machine_info

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
KS = (2, 4, 8)
COMM_D, COMM_H, COMM_DH, COMM_E, COMM_TOKENS = 128, 4, 32, 32, 256
SEEDS = (1, 2, 3)
# arm -> init family. "wide": every FFN weight N(0, 0.1), MH routers N(0, 1/d_h) (both layer
# types alike); "paper": the official code's N(0, 0.02) (W_out 0.02/sqrt(2L)), MH only.
ARMS_QUICK = {"moe_k7": "wide", "latent": "wide", "latent_official": "paper"}
ARMS_FULL = ARMS_QUICK | {"moe_k4": "wide", "latent_2x": "wide"}
# model shapes: MH d_h = d / H; MoE experts are wider (m_moe in build) so that total FFN
# parameters are equal; k = 7 then also matches MH's active parameters (and FLOPs) per token.
# the same tuning grid (peak AdamW lr; bias rate u = 50·lr, the paper's rule) for every arm
QUICK = dict(
    d=64, layers=2, T=64, H=4, E=32, m=16, steps=120, batch=8, windows=192, lrs=(3e-3, 1e-2)
)
FULL = dict(
    d=64, layers=2, T=64, H=4, E=32, m=16, steps=300, batch=8, windows=256, lrs=(1e-3, 3e-3, 1e-2)
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# 1. communication
# ------------------------------------------------------------------------------------------
class Wire:
    """Record the bytes each functional ``all_to_all_single`` call sends to *other* ranks (the
    package's HP / EP collectives and this script's de-duplicated EP all go through it)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.calls = 0
        self._real = funcol.all_to_all_single

    def __enter__(self) -> Wire:
        def wrapped(input, output_split_sizes, input_split_sizes, group, *args, **kw):
            world, me = dist.get_world_size(group), dist.get_rank(group)
            rows = input.shape[0]
            splits = input_split_sizes or [rows // world] * world
            row_bytes = input[0].numel() * input.element_size() if rows else 0
            self.bytes += input.numel() * input.element_size() - splits[me] * row_bytes
            self.calls += 1
            return self._real(input, output_split_sizes, input_split_sizes, group, *args, **kw)

        funcol.all_to_all_single = wrapped
        return self

    def __exit__(self, *exc) -> None:
        funcol.all_to_all_single = self._real


def _a2a(x: torch.Tensor, send: list[int], recv: list[int]) -> torch.Tensor:
    out = funcol.all_to_all_single(x.contiguous(), recv, send, dist.group.WORLD)
    return out.wait() if isinstance(out, funcol.AsyncCollectiveTensor) else out


def ep_dedup_forward(x: torch.Tensor, idx: torch.Tensor, gates: torch.Tensor, num_experts: int):
    """The traffic of a de-duplicated EP dispatcher: token n goes once to each remote rank that
    owns one of its k experts; that rank returns one partial sum (Σ over its experts) per token.
    Returns (token bytes, metadata bytes) read off the wire; the expert compute is omitted."""
    world = dist.get_world_size()
    owner = idx // (num_experts // world)  # (N, k)
    to_rank = torch.zeros(x.shape[0], world, dtype=torch.bool)
    to_rank.scatter_(1, owner, True)  # (N, W): token n needs rank r
    order = [torch.nonzero(to_rank[:, r]).squeeze(1) for r in range(world)]
    send = [len(o) for o in order]
    with Wire() as meta:
        recv = _a2a(torch.tensor(send)[:, None], [1] * world, [1] * world).view(-1).tolist()
        sel = torch.cat(order)
        _a2a(idx[sel], send, recv)  # the k expert ids of each row
        _a2a(gates[sel], send, recv)  # and its k gates
    with Wire() as data:
        got = _a2a(x[sel], send, recv)  # dispatch, one row per (token, rank)
        _a2a(got, recv, send)  # combine: one partial sum per (token, rank)
    return data.bytes, meta.bytes


def _comm_worker(rank: int, world: int, port: int, out_path: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    group, n = dist.group.WORLD, COMM_TOKENS
    rows = []
    for k in KS:
        torch.manual_seed(k)
        hp = L.MultiHeadLatentMoE(
            COMM_D, COMM_H, COMM_DH, COMM_E, k, 64, process_group=group,
            check_token_counts=False, backend="torch",
        )  # fmt: skip
        torch.manual_seed(k)
        ep = L.MoE(COMM_D, COMM_E, k, 64, init_std=0.3, process_group=group, backend="torch")
        acc = dict(hp=0, hp_calls=0, ep=0, ep_calls=0, dedup=0, dedup_meta=0)
        with torch.no_grad():
            for step in range(3):
                x = torch.randn(
                    n, COMM_D, generator=torch.Generator().manual_seed(97 * rank + step)
                )
                with Wire() as w:
                    hp(x)
                acc["hp"] += w.bytes
                acc["hp_calls"] = w.calls
                with Wire() as w:
                    ep(x)
                acc["ep"] += w.bytes
                acc["ep_calls"] = w.calls
                idx, g = topk_router(x, ep.router, ep.router_bias, k=k, backend="torch")
                b, m = ep_dedup_forward(x, idx, g, COMM_E)
                acc["dedup"] += b
                acc["dedup_meta"] += m
        t = torch.tensor(
            [acc["hp"], acc["ep"], acc["dedup"], acc["dedup_meta"]], dtype=torch.float64
        )
        dist.all_reduce(t)
        per_tok = (t / (3 * world * n)).tolist()  # mean over ranks and batches
        rows.append(
            dict(
                k=k,
                hp_bytes_per_token=per_tok[0],
                ep_naive_bytes_per_token=per_tok[1],
                ep_dedup_bytes_per_token=per_tok[2],
                ep_dedup_metadata_per_token=per_tok[3],
                hp_collectives=acc["hp_calls"],
                ep_naive_collectives=acc["ep_calls"],
                hp_formula=L.hp_bytes_formula(n, COMM_H, COMM_DH, world) / n,
                ep_naive_formula=L.ep_bytes_formula(n, k, COMM_D, world) / n,
            )
        )
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def measure_comm(world: int) -> list[dict]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "comm.json")
        mp.start_processes(
            _comm_worker, args=(world, port, out), nprocs=world, start_method="spawn"
        )
        with open(out) as f:
            return json.load(f)


# ------------------------------------------------------------------------------------------
# 2. quality
# ------------------------------------------------------------------------------------------
def build(arm: str, init: str, cfg: dict, seed: int) -> L.ByteLM:
    """arm in moe_k7, moe_k4, latent, latent_official, latent_2x; init "paper" or "wide"."""
    torch.manual_seed(seed)
    d, H, E, m, nl = cfg["d"], cfg["H"], cfg["E"], cfg["m"], cfg["layers"]
    dh = d // H
    std = 0.02 if init == "paper" else 0.1
    # MH's extra dense W_in, W_out (2·d·H·d_h) paid for by wider MoE experts: equal totals
    m_moe = m + (2 * d * H * dh + H * dh * E - d * E) // (2 * d * E)
    if arm.startswith("moe"):
        k = int(arm[-1])
        ffn = lambda i: L.MoE(d, E, k, m_moe, num_layers=nl, init_std=std, backend="torch")
    else:
        e, k, width = (2 * E, 8, m // 2) if arm == "latent_2x" else (E, 4, m)
        r_std = 0.02 if init == "paper" else dh**-0.5
        ffn = lambda i: L.MultiHeadLatentMoE(
            d, H, dh, e, k, width, num_layers=nl, init_std=std, router_init_std=r_std,
            backend="torch",
        )  # fmt: skip
    return L.ByteLM(d, nl, 4, cfg["T"], ffn)


def ffn_params(model: L.ByteLM) -> tuple[int, int]:
    """(total, active per token) parameters of the feed-forward layers (∝ FLOPs per token)."""
    total = active = 0
    for mod in model.modules():
        if isinstance(mod, L.MoE):
            per_expert = mod.w1[0].numel() + mod.w2[0].numel()
            total += mod.router.numel() + mod.num_experts * per_expert
            active += mod.router.numel() + mod.top_k * per_expert
        elif isinstance(mod, L.MultiHeadLatentMoE):
            per_expert = mod.w1[0, 0].numel() + mod.w2[0, 0].numel()
            dense = mod.w_in.numel() + mod.w_out.numel() + mod.router.numel()
            total += dense + mod.num_heads * mod.num_experts * per_expert
            active += dense + mod.num_heads * mod.top_k * per_expert
    return total, active


def _t95(xs: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95 % t-interval."""
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}.get(n, 2.0)
    return mean, t * sd / math.sqrt(n)


def run_arm(arm: str, init: str, cfg: dict, train, tune, test) -> dict:
    """Every lr of the grid with every seed; choose on tune, report test of the chosen lr."""
    points = []
    for lr in cfg["lrs"]:
        runs = []
        for seed in SEEDS:
            model = build(arm, init, cfg, seed)
            res = L.train_byte_lm(
                model, train, tune, steps=cfg["steps"], batch_size=cfg["batch"], lr=lr,
                warmup=10, bias_update_rate=50 * lr, seed=seed, eval_windows=cfg["windows"],
            )  # fmt: skip
            test_bpb = L.evaluate_bpb(model, test, cfg["T"], max_windows=cfg["windows"])
            runs.append(dict(seed=seed, tune_bpb=res.val_bpb, test_bpb=test_bpb))
        tune_mean = sum(r["tune_bpb"] for r in runs) / len(runs)
        points.append(dict(lr=lr, init=init, tune_bpb=tune_mean, runs=runs))
        log(
            f"[{arm}] lr {lr:g} init {init}: tune {tune_mean:.4f}  test {[round(r['test_bpb'], 4) for r in runs]}"
        )
    best = min(points, key=lambda p: p["tune_bpb"])
    total, active = ffn_params(build(arm, best["init"], cfg, 0))
    test = [r["test_bpb"] for r in best["runs"]]
    mean, hw = _t95(test)
    return dict(arm=arm, chosen=dict(lr=best["lr"], init=best["init"]), test_bpb=test,
                test_mean=mean, test_ci95=hw, ffn_total=total, ffn_active=active, grid=points)  # fmt: skip


def paired(a: dict, b: dict) -> dict:
    """Relative difference a/b − 1 per seed (paired), mean and 95 % t half-width, in %."""
    diffs = [100 * (x / y - 1) for x, y in zip(a["test_bpb"], b["test_bpb"])]
    mean, hw = _t95(diffs)
    return dict(per_seed=diffs, mean=mean, ci95=hw)


# ------------------------------------------------------------------------------------------
# README block, generated from the JSON
# ------------------------------------------------------------------------------------------
def readme_block(res: dict) -> str:
    cfg = res["config"]
    lines = [
        f"`reproduce.py{' --quick' if res['quick'] else ''}`: byte-level LM, d = {cfg['d']}, "
        f"{cfg['layers']} layers, T = {cfg['T']}, {cfg['steps']} steps × {cfg['batch']} sequences "
        f"({cfg['steps'] * cfg['batch'] * cfg['T']:,} training bytes), seeds {list(SEEDS)}, one "
        f"torch thread. Grid per arm: peak lr in {list(cfg['lrs'])}; chosen on the tune half of the "
        f"held-out bytes, reported on the test half ({cfg['windows']} windows). Total "
        f"{res['seconds']:.0f} s.",
        "",
        "| arm | FFN params total | active / token | init, chosen lr | test bits/byte, per seed | mean ± 95% CI |",
        "|---|---|---|---|---|---|",
    ]
    for a in res["arms"].values():
        lines.append(
            f"| {a['arm']} | {a['ffn_total']:,} | {a['ffn_active']:,} | {a['chosen']['init']}, "
            f"{a['chosen']['lr']:g} | {', '.join(f'{x:.4f}' for x in a['test_bpb'])} | "
            f"{a['test_mean']:.4f} ± {a['test_ci95']:.4f} |"
        )
    lines.append("")
    for name, p in res["paired"].items():
        lines.append(
            f"- {name}: {p['mean']:+.2f}% ± {p['ci95']:.2f}% (paired over seeds: "
            f"{', '.join(f'{d:+.2f}%' for d in p['per_seed'])})"
        )
    lines += [
        "",
        "| W | k | HP B/token (formula) | EP naive B/token (formula) | EP de-dup B/token (+ metadata) | naive / HP | de-dup / HP |",
        "|---|---|---|---|---|---|---|",
    ]
    for w, rows in res["comm"].items():
        for r in rows:
            hp = r["hp_bytes_per_token"]
            lines.append(
                f"| {w} | {r['k']} | {hp:.0f} ({r['hp_formula']:.0f}) | "
                f"{r['ep_naive_bytes_per_token']:.0f} ({r['ep_naive_formula']:.0f}) | "
                f"{r['ep_dedup_bytes_per_token']:.0f} (+{r['ep_dedup_metadata_per_token']:.0f}) | "
                f"{r['ep_naive_bytes_per_token'] / hp:.2f} | {r['ep_dedup_bytes_per_token'] / hp:.2f} |"
            )
    return "\n".join(lines)


def write_readme() -> None:
    text = README.read_text()
    for name, tag in (("reproduce_quick.json", "quick"), ("reproduce.json", "full")):
        path = HERE / name
        start, end = f"<!-- results:{tag}:start -->", f"<!-- results:{tag}:end -->"
        if path.exists() and start in text:
            block = readme_block(json.loads(path.read_text()))
            new = f"{start}\n{block}\n{end}"
            text = re.sub(
                re.escape(start) + ".*?" + re.escape(end), lambda _, n=new: n, text, flags=re.S
            )
    README.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="<= 2 minutes on 2 idle CPU cores")
    ap.add_argument("--readme", action="store_true", help="only rewrite the README block")
    args = ap.parse_args()
    if args.readme:
        write_readme()
        return
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    cfg = QUICK if args.quick else FULL
    comm = {}
    for w in (2, 4):
        comm[w] = measure_comm(w)
        for r in comm[w]:
            log(f"W={w} k={r['k']}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items() if k != "k"))
    train, val = L.load_corpus()
    tune, test = val[: len(val) // 2], val[len(val) // 2 :]
    arms = ARMS_QUICK if args.quick else ARMS_FULL
    res_arms = {a: run_arm(a, init, cfg, train, tune, test) for a, init in arms.items()}
    lat, official = res_arms["latent"], res_arms["latent_official"]
    pairs = {
        "MH-LatentMoE vs MoE k=7 (matched total + active)": paired(lat, res_arms["moe_k7"]),
        "MH-LatentMoE (paper init) vs MoE k=7": paired(official, res_arms["moe_k7"]),
    }
    if "moe_k4" in res_arms:
        pairs["MH-LatentMoE vs MoE k=4 (matched total, 1.7x fewer active)"] = paired(
            lat, res_arms["moe_k4"]
        )
        pairs["MH-LatentMoE 2x granularity vs MoE k=7"] = paired(
            res_arms["latent_2x"], res_arms["moe_k7"]
        )
    seconds = time.perf_counter() - t0
    full = dict(
        quick=args.quick, config=cfg, seconds=seconds, arms=res_arms, paired=pairs, comm=comm
    )
    out = HERE / ("reproduce_quick.json" if args.quick else "reproduce.json")
    full["machine"] = machine_info()  # CPU, kernel level, threads, versions
    out.write_text(json.dumps(full, indent=1) + "\n")
    for name, p in pairs.items():
        log(f"{name}: {p['mean']:+.2f}% ± {p['ci95']:.2f}%")
    k8 = comm[4][-1]
    h = pairs["MH-LatentMoE vs MoE k=7 (matched total + active)"]
    print(
        json.dumps(
            {
                "package": "latentmoe",
                "claim": (
                    "MH-LatentMoE test bits/byte vs FLOP- and active-parameter-matched MoE (k=7), "
                    f"3 paired seeds, lr/init tuned per arm on a separate split: "
                    f"{h['mean']:+.2f}% ± {h['ci95']:.2f}%; HP bytes/token constant in k; at W=4, "
                    f"k=8 naive EP/HP {k8['ep_naive_bytes_per_token'] / k8['hp_bytes_per_token']:.2f}x, "
                    f"de-duplicated EP/HP {k8['ep_dedup_bytes_per_token'] / k8['hp_bytes_per_token']:.2f}x"
                ),
                "paper": "equal or better quality than MoE, 1.82x faster training than MoE+EP; O(1)-in-k communication",
                "ours": round(lat["test_mean"], 4),
                "baseline": round(res_arms["moe_k7"]["test_mean"], 4),
                "ratio": round(lat["test_mean"] / res_arms["moe_k7"]["test_mean"], 4),
                "seconds": round(seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
