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


def check_mlp(perm, xp, w1, w2, dtype) -> dict:
    """Correctness before timing: Triton in ``dtype`` against the fp32 reference on the same
    ``dtype``-rounded tokens, weights and output gradient.

    Error budget, relative to max|reference|: operands and h = gelu(x W1) are rounded to
    ``dtype`` (a few eps_dtype; bf16 eps = 2^-8) and every dot accumulates in fp32 over at most
    n terms (8 eps_fp32 sqrt(n)). An fp16/bf16 accumulator, a wrong tile or a wrong expert
    stride is far above 8 eps_dtype + 8 eps_fp32 sqrt(n). Raises, so the benchmark fails.
    """
    eps = torch.finfo(dtype).eps
    n = max(xp.shape[1], w1.shape[2], w2.shape[2], int(perm.offsets.diff().max()))
    tol = 8 * eps + 8 * torch.finfo(torch.float32).eps * n**0.5
    a = xp.detach().clone().requires_grad_()
    b, c = w1.detach().clone().requires_grad_(), w2.detach().clone().requires_grad_()
    y = grouped_mlp(a, b, c, perm, backend="triton")
    gen = torch.Generator("cuda").manual_seed(0)
    dy = torch.randn(y.shape, device="cuda", generator=gen).to(dtype).float()
    (y.float() * dy).sum().backward()
    r = [t.detach().to(dtype).float().requires_grad_() for t in (xp, w1, w2)]
    y32 = grouped_mlp(*r, perm, backend="torch")
    (y32 * dy).sum().backward()
    errs = {}
    for name, got, want in (
        ("y", y, y32),
        ("dx", a.grad, r[0].grad),
        ("dw1", b.grad, r[1].grad),
        ("dw2", c.grad, r[2].grad),
    ):
        errs[name] = float((got.float() - want).abs().max() / want.abs().max().clamp_min(1e-30))
    bad = {k: e for k, e in errs.items() if not e <= tol}
    if bad:
        raise AssertionError(f"grouped_mlp {dtype}: relative max error {bad} > {tol:.2e}")
    return errs | {"tolerance": tol}


def bench_mlp(N, D, E, k, M, DO, dtype):
    """Grouped expert MLP, tokens in ``dtype`` with fp32 master weights (the official setup)."""
    idx = torch.stack([torch.randperm(E, device="cuda")[:k] for _ in range(N)])
    perm = make_permutation(idx, E, 128)
    xp = torch.randn(perm.num_rows, D, device="cuda", dtype=dtype, requires_grad=True)
    w1 = (torch.randn(E, D, M, device="cuda") * 0.02).requires_grad_()
    w2 = (torch.randn(E, M, DO, device="cuda") * 0.02).requires_grad_()
    out = {"rel_err": check_mlp(perm, xp, w1, w2, dtype)}
    for be in ("triton", "torch"):
        # the torch peer: a per-expert loop of cuBLAS GEMMs on the same dtype
        cast = (lambda t: t.to(dtype)) if be == "torch" else (lambda t: t)
        fwd = lambda be=be, c=cast: grouped_mlp(xp, c(w1), c(w2), perm, backend=be)
        fb = lambda be=be, c=cast: grouped_mlp(xp, c(w1), c(w2), perm, backend=be).sum().backward()
        out[be] = (_time(fwd), _time(fb))
    flops = 2 * N * k * M * (D + DO)  # forward; the backward is ~2x
    return out, flops


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
    shapes = [  # N tokens, D, E, k, M, D_out, dtype
        (8192, 64, 64, 4, 256, 64, torch.float32),
        (65536, 128, 64, 8, 512, 128, torch.bfloat16),  # the 65k tokens, k = 8, E = 64
        (32768, 256, 32, 4, 512, 128, torch.bfloat16),  # D != D_out
    ]
    for N, D, E, k, M, DO, dt in shapes:
        r, flops = bench_mlp(N, D, E, k, M, DO, dt)
        sp = r["torch"][0] / r["triton"][0]
        tflops = flops / r["triton"][0] / 1e9
        rows.append({"kernel": "grouped_mlp", "shape": [N, D, E, k, M, DO], "dtype": str(dt),
                     "rel_err_vs_fp32": r["rel_err"],
                     "fwd_speedup": sp, "fwd_bwd_speedup": r["torch"][1] / r["triton"][1],
                     "triton_fwd_tflops": tflops})  # fmt: skip
        log(f"| grouped_mlp {dt} | N={N} D={D} E={E} k={k} M={M} D_out={DO} | {r['triton'][0]:.3f} | "
            f"{r['torch'][0]:.3f} | {r['triton'][1]:.3f} | {r['torch'][1]:.3f} | {sp:.2f}x "
            f"({tflops:.0f} TFLOP/s fwd) |")  # fmt: skip
    print(json.dumps({"bench": "kernels", "device": torch.cuda.get_device_name(), "rows": rows}))


if __name__ == "__main__":
    main()
