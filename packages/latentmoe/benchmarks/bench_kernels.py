"""Fused IO-aware router and grouped expert MLP (Triton) vs their torch references.

Needs a CUDA GPU: the Triton kernels compile for CUDA only (the CPU interpreter is a
correctness tool, far too slow to time). Without one, the script says so and reports the
memory the fused router avoids: the (G, N, E) fp32 logits (and their gradient) it never writes.

Peers: ``topk_router_ref`` (``matmul`` + ``topk`` + ``softmax`` with materialized logits, what a
user writes by default) and ``grouped_mlp_ref`` (a per-expert loop of cuBLAS GEMMs).
Prints one JSON line on stdout; the table on stderr.
"""

# gpu-check:  # tools/gpu_check.py runs this as is: on CUDA it times the real shapes above

from __future__ import annotations

import json
import sys

import torch
from icml26_kernels.moe import grouped_mlp, make_permutation, topk_router


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _time(fn, reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def bench_router(G, N, D, E, k):
    x = torch.randn(G, N, D, device="cuda", requires_grad=True)
    w = (torch.randn(G, D, E, device="cuda") * 0.02).requires_grad_()
    b = torch.randn(G, E, device="cuda") * 0.01
    out = {}
    for be in ("triton", "torch"):
        fwd = lambda be=be: topk_router(x, w, b, k=k, backend=be)
        fb = lambda be=be: topk_router(x, w, b, k=k, backend=be)[1].sum().backward()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out[be] = (_time(fwd), _time(fb), torch.cuda.max_memory_allocated() - base)
    return out


def bench_mlp(G, N, D, E, k, M):
    idx = torch.stack([torch.randperm(E, device="cuda")[:k] for _ in range(N)])
    perm = make_permutation(idx, E, 64)
    xp = torch.randn(perm.num_rows, D, device="cuda", requires_grad=True)
    w1 = (torch.randn(E, D, M, device="cuda") * 0.02).requires_grad_()
    w2 = (torch.randn(E, M, D, device="cuda") * 0.02).requires_grad_()
    out = {}
    for be in ("triton", "torch"):
        fwd = lambda be=be: grouped_mlp(xp, w1, w2, perm, backend=be)
        fb = lambda be=be: grouped_mlp(xp, w1, w2, perm, backend=be).sum().backward()
        out[be] = (_time(fwd), _time(fb))
    return out


def main() -> None:
    if not torch.cuda.is_available():
        G, N, E = 8, 16384, 256
        saved = 2 * G * N * E * 4  # logits + their gradient, fp32
        log("no CUDA device: Triton kernels cannot be timed here (run this on a GPU)")
        log(f"fused router avoids {saved / 2**20:.0f} MiB of logits (+grad) at G={G}, N={N}, E={E}")
        print(
            json.dumps(
                {
                    "bench": "kernels",
                    "device": "cpu",
                    "skipped": "no CUDA",
                    "router_logits_mib_avoided": saved / 2**20,
                }
            )
        )
        return
    rows = []
    log(
        "| kernel | shape | triton fwd ms | torch fwd ms | triton fwd+bwd ms | torch fwd+bwd ms | fwd speedup |"
    )
    log("|---|---|---|---|---|---|---|")
    for G, N, D, E, k in [(8, 16384, 64, 64, 4), (8, 16384, 128, 256, 8), (1, 16384, 1024, 64, 8)]:
        r = bench_router(G, N, D, E, k)
        sp = r["torch"][0] / r["triton"][0]
        rows.append({"kernel": "router", "shape": [G, N, D, E, k], "fwd_speedup": sp,
                     "peak_mem_ratio": r["triton"][2] / max(1, r["torch"][2])})  # fmt: skip
        log(f"| router | G={G} N={N} D={D} E={E} k={k} | {r['triton'][0]:.3f} | {r['torch'][0]:.3f} | "
            f"{r['triton'][1]:.3f} | {r['torch'][1]:.3f} | {sp:.2f}x |")  # fmt: skip
    for G, N, D, E, k, M in [(1, 8192, 64, 64, 4, 256), (1, 8192, 128, 32, 4, 512)]:
        r = bench_mlp(G, N, D, E, k, M)
        sp = r["torch"][0] / r["triton"][0]
        rows.append({"kernel": "grouped_mlp", "shape": [N, D, E, k, M], "fwd_speedup": sp})
        log(f"| grouped_mlp | N={N} D={D} E={E} k={k} M={M} | {r['triton'][0]:.3f} | {r['torch'][0]:.3f} | "
            f"{r['triton'][1]:.3f} | {r['torch'][1]:.3f} | {sp:.2f}x |")  # fmt: skip
    print(json.dumps({"bench": "kernels", "device": torch.cuda.get_device_name(), "rows": rows}))


if __name__ == "__main__":
    main()
