"""RAG serving simulation: LazyAttention vs re-encoding, prefix caching and full recompute.

Corpus: the 79 help topics that ship with CPython (``pydoc_data.topics``), byte-tokenized and
truncated. Requests: 4-8 documents drawn by Zipf(a=1.5) popularity (without replacement), in
random order, plus a short question. Every policy runs the same requests through the same
tiny random-init Llama (d=256, 4 layers, GQA 8/4 heads) and the same kernels, with the same
KV-pool budget (cache and per-request blocks share it). Requests are interleaved across the
policies so machine noise hits all of them alike.

Per policy: document cache hit ratio, KV bytes prefilled for documents, KV bytes copied on
reuse, mean TTFT and decode throughput. Claim checked: lazy copies 0 bytes on reuse and its
TTFT beats re-encoding at equal budget (paper: 1.37x TTFT, 1.40x throughput vs Block-Attention
on GPU).

Prints progress and a table on stderr, and one JSON line on stdout (last line).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pydoc_data.topics import topics

import numpy as np
import torch
from icml26_lazyattention import POLICIES, LazyRAGPipeline
from transformers import LlamaConfig, LlamaForCausalLM


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def corpus(max_tokens: int) -> tuple[list[str], list[list[int]]]:
    names = sorted(topics)
    return names, [list(topics[n].encode("utf-8")[:max_tokens]) for n in names]


def zipf_requests(n_docs: int, n_requests: int, seed: int, a: float = 1.5):
    """(doc ids in request order, query text) per request; popularity ∝ rank^(−a)."""
    rng = np.random.default_rng(seed)
    rank_to_doc = rng.permutation(n_docs)
    p = 1.0 / np.arange(1, n_docs + 1) ** a
    p /= p.sum()
    out = []
    for _ in range(n_requests):
        k = int(rng.integers(4, 9))
        ranks = rng.choice(n_docs, size=k, replace=False, p=p)
        docs = [int(rank_to_doc[r]) for r in ranks]
        rng.shuffle(docs)
        out.append(docs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests, shorter documents")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument(
        "--doc-tokens", type=int, default=None, help="truncate documents to this many bytes"
    )
    ap.add_argument(
        "--budget-docs", type=float, default=18.0, help="KV pool budget, in full documents"
    )
    ap.add_argument("--new-tokens", type=int, default=4)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    n_req = args.requests or (40 if args.quick else 200)
    doc_tokens = args.doc_tokens or (256 if args.quick else 512)
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()

    names, docs = corpus(doc_tokens)
    reqs = zipf_requests(len(docs), n_req, args.seed)
    cfg = LlamaConfig(
        vocab_size=256,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=8192,
    )
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(cfg).eval()
    bs = args.block_size
    per_doc = -(-doc_tokens // bs)
    # equal budget: room for `budget_docs` cached documents plus one request's private blocks
    n_blocks = int(args.budget_docs * per_doc) + 8
    pipes = {
        p: LazyRAGPipeline(model, block_size=bs, n_blocks=n_blocks, policy=p, backend="torch")
        for p in POLICIES
    }
    log(
        f"{len(docs)} documents (<= {doc_tokens} tokens), {n_req} requests, pool {n_blocks} blocks of {bs}"
    )

    ttft = {p: [] for p in POLICIES}
    total = dict.fromkeys(POLICIES, 0.0)
    gen_tokens = dict.fromkeys(POLICIES, 0)
    hits = dict.fromkeys(POLICIES, 0)
    misses = dict.fromkeys(POLICIES, 0)
    agree = 0
    for i, ids in enumerate(reqs):
        query = list(
            f"Question {i}: how does '{names[ids[0]]}' relate to '{names[ids[-1]]}'?".encode()
        )
        order = (
            POLICIES[i % len(POLICIES) :] + POLICIES[: i % len(POLICIES)]
        )  # rotate who goes first
        outs = {}
        for p in order:
            g = pipes[p].generate(query, [docs[j] for j in ids], max_new_tokens=args.new_tokens)
            ttft[p].append(g.ttft_s)
            total[p] += g.total_s
            gen_tokens[p] += len(g.tokens)
            hits[p] += g.doc_hits
            misses[p] += g.doc_misses
            outs[p] = g.tokens
        agree += len({tuple(t) for t in outs.values()}) == 1
        if (i + 1) % 10 == 0:
            log(
                f"  {i + 1}/{n_req} "
                + " ".join(f"{p}={1e3 * np.mean(ttft[p]):.1f}ms" for p in POLICIES)
            )

    rows = {}
    for p in POLICIES:
        bw = pipes[p].pool.bytes_written
        rows[p] = {
            "hit_ratio": hits[p] / max(1, hits[p] + misses[p]),
            "doc_prefill_MB": bw["document"] / 1e6,
            "copied_on_reuse_MB": bw["copy"] / 1e6,
            "mean_ttft_ms": 1e3 * float(np.mean(ttft[p])),
            "throughput_tok_s": gen_tokens[p] / total[p],
            "requests_s": n_req / total[p],
        }
    log(
        f"\n{'policy':10s} {'hit':>6s} {'prefill MB':>10s} {'copied MB':>10s} {'TTFT ms':>8s} {'tok/s':>7s} {'req/s':>6s}"
    )
    for p, r in rows.items():
        log(
            f"{p:10s} {r['hit_ratio']:6.3f} {r['doc_prefill_MB']:10.1f} {r['copied_on_reuse_MB']:10.1f} "
            f"{r['mean_ttft_ms']:8.1f} {r['throughput_tok_s']:7.1f} {r['requests_s']:6.2f}"
        )
    lazy, re = rows["lazy"], rows["reencode"]
    ttft_ratio = re["mean_ttft_ms"] / lazy["mean_ttft_ms"]
    thr_ratio = lazy["throughput_tok_s"] / re["throughput_tok_s"]
    log(
        f"\nlazy vs reencode: TTFT {ttft_ratio:.2f}x, throughput {thr_ratio:.2f}x; "
        f"vs prefix TTFT {rows['prefix']['mean_ttft_ms'] / lazy['mean_ttft_ms']:.2f}x; "
        f"vs recompute TTFT {rows['recompute']['mean_ttft_ms'] / lazy['mean_ttft_ms']:.2f}x; "
        f"lazy copied {lazy['copied_on_reuse_MB']:.1f} MB on reuse; "
        f"identical outputs across policies in {agree}/{n_req} requests"
    )
    print(
        json.dumps(
            {
                "package": "lazyattention",
                "claim": "TTFT speedup of lazy (zero-copy, deferred RoPE) over Block-Attention-style re-encoding "
                "at equal KV budget; Zipf(1.5) RAG over pydoc topics, tiny Llama, 2-core CPU",
                "paper": "1.37x TTFT and 1.40x throughput vs Block-Attention (GPU, vLLM)",
                "ours": round(lazy["mean_ttft_ms"], 2),
                "baseline": round(re["mean_ttft_ms"], 2),
                "ratio": round(ttft_ratio, 3),
                "seconds": round(time.perf_counter() - t_start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
