"""Deferred-RoPE paged kernels vs torch SDPA on the same work (GPU only).

Work: B requests over 8 cached documents of 512 tokens each (4096 context tokens), Llama-8B
heads (H=32, H_kv=8, D=128), bf16, 16-token blocks.

- decode: :func:`paged_decode` (Q de-rotated per document, KV read in place) vs
  ``scaled_dot_product_attention`` over contiguous, already re-rotated K/V (what a re-encoding
  engine attends to after materializing), and vs re-encoding + SDPA (the copy included).
  Reports achieved HBM bandwidth (K/V bytes read / time) as a fraction of the card's peak.
- prefill: :func:`paged_prefill` with 512 query tokens vs SDPA on the same context; TFLOP/s.

Ratios are measured in the same run. Without CUDA it prints that it was skipped.
"""

# gpu-check:  # tools/gpu_check.py runs this as is: on CUDA it times the real shapes above

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

import torch

PEAK_BW = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12, "L40S": 0.864e12, "A10": 0.6e12}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bench_decode(B, cfg, dims, dev, dt, peak, kernels):
    """Decode over B requests reading the same documents in their own orders."""
    import triton.testing

    apply_rope, pack_block_table, paged_decode, rope_table, plan_paged = kernels
    H, HKV, D, BS, DOC, NDOC = dims
    ctx = DOC * NDOC
    nb_doc = DOC // BS
    n_pool = NDOC * nb_doc + B * 1
    k_pool = torch.randn(n_pool, BS, HKV, D, device=dev, dtype=dt)
    v_pool = torch.randn_like(k_pool)
    # every request reads the same 8 documents, each in its own order
    rows = []
    for _ in range(B):
        perm = torch.randperm(NDOC).tolist()
        ids = [d * nb_doc + j for d in perm for j in range(nb_doc)]
        offs = [i * DOC for i in range(NDOC) for _ in range(nb_doc)]
        rows.append(pack_block_table(ids, offs, [0] * len(ids), block_size=BS))
    table = torch.stack(rows).to(dev)
    tab = rope_table(cfg, ctx + 1, dtype=dt, device=dev)
    # validated once per step (plan/run split); the timed call reads nothing back
    dplan = plan_paged(table, block_size=BS, n_pool_blocks=n_pool, cfg=cfg, table=tab)
    q = torch.randn(B, H, D, device=dev, dtype=dt)
    # materialized view for SDPA: per request, contiguous re-rotated keys
    k_mat = torch.empty(B, HKV, ctx, D, device=dev, dtype=dt)
    v_mat = torch.empty_like(k_mat)

    def materialize():
        for b in range(B):
            ids = (table[b] & 0xFFFFFFFF).long()
            k = k_pool[ids].flatten(0, 1)  # (ctx, HKV, D)
            pos = torch.arange(ctx, device=dev)
            k_mat[b] = apply_rope(k[None], pos[None], cfg, table=tab)[0].transpose(0, 1)
            v_mat[b] = v_pool[ids].flatten(0, 1).transpose(0, 1)

    materialize()
    lazy_ms = triton.testing.do_bench(
        lambda: paged_decode(q, k_pool, v_pool, table, cfg, plan=dplan, prefer="triton")
    )
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None], k_mat, v_mat, enable_gqa=True
    )
    sdpa_ms = triton.testing.do_bench(sdpa)
    re_ms = triton.testing.do_bench(lambda: (materialize(), sdpa()))
    kv_bytes = 2 * B * ctx * HKV * D * k_pool.element_size()
    bw = kv_bytes / (lazy_ms * 1e-3)
    r = {
        "lazy_decode_ms": lazy_ms,
        "sdpa_decode_ms": sdpa_ms,
        "reencode_plus_sdpa_ms": re_ms,
        "lazy_vs_sdpa": sdpa_ms / lazy_ms,
        "lazy_vs_reencode": re_ms / lazy_ms,
        "lazy_bw_fraction_of_peak": (bw / peak) if peak else None,
    }
    return r


def _emit(result: dict) -> None:
    """The JSON line on stdout, and in ``--out`` when given."""
    line = json.dumps(result)
    print(line)
    if ARGS.out is not None:
        ARGS.out.write_text(line + "\n")


def main() -> None:
    if not torch.cuda.is_available():
        log(
            "bench_kernels: skipped (no CUDA device; the Triton kernels are benchmarked on a GPU only)"
        )
        _emit({"package": "lazyattention", "bench": "kernels", "skipped": "no CUDA device"})
        return
    import triton.testing
    from icml26_kernels.attention import (
        Llama3Scaling,
        RopeConfig,
        apply_rope,
        pack_block_table,
        paged_decode,
        paged_prefill,
        plan_paged,
        rope_table,
    )

    dev, dt = "cuda", torch.bfloat16
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BW.items() if k in name), None)
    cfg = RopeConfig(head_dim=128, base=500000.0, llama3=Llama3Scaling())
    H, HKV, D, BS, DOC, NDOC = 32, 8, 128, 16, 512, 8
    ctx = DOC * NDOC
    nb_doc = DOC // BS
    results = {"package": "lazyattention", "bench": "kernels", "device": name}

    for B in (1, 16, 64):
        r = bench_decode(
            B,
            cfg,
            (H, HKV, D, BS, DOC, NDOC),
            dev,
            dt,
            peak,
            (apply_rope, pack_block_table, paged_decode, rope_table, plan_paged),
        )
        results[f"decode_B{B}"] = r
        log(f"decode B={B}: {r}")

    # prefill: one request, 512 query tokens over the 4096-token context
    T = 512
    q = torch.randn(1, T, H, D, device=dev, dtype=dt)
    kn = torch.randn(1, T, HKV, D, device=dev, dtype=dt)
    vn = torch.randn_like(kn)
    n_pool = NDOC * nb_doc
    k_pool = torch.randn(n_pool, BS, HKV, D, device=dev, dtype=dt)
    v_pool = torch.randn_like(k_pool)
    offs = [i * DOC for i in range(NDOC) for _ in range(nb_doc)]
    table = pack_block_table(list(range(n_pool)), offs, [0] * n_pool, block_size=BS)[None].to(dev)
    tab = rope_table(cfg, ctx + 1, dtype=dt, device=dev)
    pplan = plan_paged(table, block_size=BS, n_pool_blocks=n_pool, cfg=cfg, table=tab)
    k_all = torch.cat([k_pool.flatten(0, 1)[None], kn], 1).transpose(1, 2)  # (1, HKV, ctx+T, D)
    v_all = torch.cat([v_pool.flatten(0, 1)[None], vn], 1).transpose(1, 2)
    mask = torch.ones(T, ctx + T, dtype=torch.bool, device=dev)
    mask[:, ctx:] = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
    lazy_ms = triton.testing.do_bench(
        lambda: paged_prefill(
            q,
            kn,
            vn,
            k_pool,
            v_pool,
            table,
            cfg,
            plan=pplan,
            prefer="triton",
        )
    )
    sdpa_ms = triton.testing.do_bench(
        lambda: torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k_all, v_all, attn_mask=mask, enable_gqa=True
        )
    )
    flops = 4 * H * D * T * (ctx + T / 2)
    results["prefill_T512"] = {
        "lazy_prefill_ms": lazy_ms,
        "sdpa_prefill_ms": sdpa_ms,
        "lazy_vs_sdpa": sdpa_ms / lazy_ms,
        "lazy_tflops": flops / (lazy_ms * 1e-3) / 1e12,
    }
    log(f"prefill: {results['prefill_T512']}")
    _emit(results)


if __name__ == "__main__":
    main()
