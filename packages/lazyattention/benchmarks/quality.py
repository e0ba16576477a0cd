"""Answer quality of position-agnostic reuse on a model trained here: continuation
log-likelihood under full prefill of the concatenated context vs lazy reuse (and re-encoding).

Lazy reuse encodes every document alone (block-diagonal attention; the query sees all of them),
so its outputs equal Block-Attention re-encoding exactly (the test suite checks 1e-12 in fp64)
and differ from a full prefill of ``[doc₀]…[doc_{n−1}][query]``, where later documents attend to
earlier ones. The paper therefore serves Block-Attention fine-tuned checkpoints. This script
measures that cost on a retrieval task a tiny model can learn on a CPU:

* corpus: the ``pydoc_data.topics`` help texts (bytes); 60 topics train, the other 19 are held
  out for evaluation (so memorised text does not help: the answer must be copied from context);
* example: K documents (random 32-byte windows of distinct topics), then the query
  ``"Q:" + 6 bytes of one of them``; the target is the 6 bytes that follow in that document;
* two models from the same init, trained on the same batches: **full** (causal attention over
  the whole sequence, a standard LM) and **block** (block-diagonal document attention, as
  Block-Attention fine-tuning does), both at contiguous positions;
* metric: mean continuation negative log-likelihood (nats/byte) and teacher-forced top-1 byte
  accuracy over held-out examples, under **full prefill** (the model's own forward, causal),
  **lazy** (``LazyRAGPipeline(policy="lazy")``: documents prefilled once at position 0, cached,
  read in place with Q de-rotated), **reencode** (``policy="reencode"``), and **no context**
  (the query alone: the floor that shows the documents matter). Paired differences per example
  with a seeded bootstrap 95% interval.

Writes ``quality.json`` beside this file and prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--steps", type=int, default=1200, help="training steps")
    ap.add_argument("--batch", type=int, default=16, help="examples per step")
    ap.add_argument("--hidden", type=int, default=64, help="model width")
    ap.add_argument("--docs", type=int, default=3, help="documents per example (K)")
    ap.add_argument("--lr", type=float, default=3e-3, help="learning rate")
    ap.add_argument("--eval", type=int, default=200, help="held-out examples")
    ap.add_argument("--block-size", type=int, default=16, help="KV-cache block size")
    ap.add_argument("--seed", type=int, default=0, help="init and data seed")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument(
        "--out",
        default=str(Path(__file__).with_name("quality.json")),
        help="write the JSON here (default: benchmarks/quality.json)",
    )
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

from pydoc_data.topics import topics

import numpy as np
import torch
import torch.nn.functional as F
from icml26_kernels.provenance import machine_info
from icml26_lazyattention import LazyRAGPipeline, block_diagonal_mask
from transformers import LlamaConfig, LlamaForCausalLM

DOC_LEN = 32  # bytes per document window
PROMPT = 6  # bytes of the target document quoted in the query
CONT = 6  # bytes to continue
HEAD = list(b"Q:")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def split_corpus(seed: int) -> tuple[list[list[int]], list[list[int]]]:
    texts = [list(topics[n].encode("utf-8")) for n in sorted(topics)]
    texts = [t for t in texts if len(t) >= DOC_LEN + 64]
    perm = np.random.default_rng(seed).permutation(len(texts))
    n_train = round(0.76 * len(texts))
    return [texts[i] for i in perm[:n_train]], [texts[i] for i in perm[n_train:]]


def make_example(rng: np.random.Generator, texts: list[list[int]], k: int):
    """(docs, query, continuation): K windows of distinct topics; the query quotes PROMPT bytes
    of one window and the continuation is the CONT bytes after them in that window."""
    idx = rng.choice(len(texts), size=k, replace=False)
    docs = []
    for i in idx:
        s = int(rng.integers(0, len(texts[i]) - DOC_LEN + 1))
        docs.append(texts[i][s : s + DOC_LEN])
    j = int(rng.integers(k))
    s = int(rng.integers(0, DOC_LEN - PROMPT - CONT + 1))
    quote = docs[j][s : s + PROMPT + CONT]
    return docs, HEAD + quote[:PROMPT], quote[PROMPT:]


def tiny_model(seed: int, device: str, hidden: int) -> LlamaForCausalLM:
    cfg = LlamaConfig(
        vocab_size=256, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        attn_implementation="sdpa", tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(device)


def train(model, texts, *, block: bool, steps: int, batch: int, k: int, lr: float, seed: int):
    """Next-byte loss on every position (documents and query) plus the continuation's own mean
    loss (the retrieval target, 6 of ~110 positions, weighted up); `block`: block-diagonal
    document attention (additive 4-D mask), else plain causal. Same batches for both arms."""
    device = next(model.parameters()).device
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    t = k * DOC_LEN + len(HEAD) + PROMPT + CONT
    if block:
        allowed = block_diagonal_mask([DOC_LEN] * k, t - k * DOC_LEN, device=device)
        mask = torch.zeros(allowed.shape, device=device).masked_fill(~allowed, float("-inf"))
        mask = mask[None, None].expand(batch, 1, t, t)  # (B, 1, T, T)
    else:
        mask = None
    pos = torch.arange(t, device=device)[None].expand(batch, t)
    model.train()
    losses = []
    for step in range(steps):
        rows = []
        for _ in range(batch):
            docs, q, c = make_example(rng, texts, k)
            rows.append([x for d in docs for x in d] + q + c)
        ids = torch.tensor(rows, device=device)  # (B, T)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        lm = F.cross_entropy(logits[:, :-1].reshape(-1, 256), ids[:, 1:].reshape(-1))
        # the continuation (the copy from context) again on its own, so it is learned in few steps
        cont = F.cross_entropy(
            logits[:, -CONT - 1 : -1].reshape(-1, 256), ids[:, -CONT:].reshape(-1)
        )
        loss = lm + cont
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if (step + 1) % max(1, steps // 10) == 0:
            log(
                f"  {'block' if block else 'full '} step {step + 1}/{steps} loss {np.mean(losses[-20:]):.3f}"
            )
    model.eval()
    return losses


def continuation_scores(logits: torch.Tensor, cont: list[int]) -> tuple[float, float]:
    """logits (Tq, V) at the query positions of ``q + cont[:-1]``: the last CONT rows predict
    the continuation. Returns (mean NLL in nats/byte, top-1 accuracy)."""
    lp = torch.log_softmax(logits[-len(cont) :].double(), dim=-1)  # (CONT, V)
    tgt = torch.tensor(cont, device=logits.device)
    nll = -lp[torch.arange(len(cont)), tgt].mean()
    acc = (lp.argmax(-1) == tgt).double().mean()
    return float(nll), float(acc)


@torch.no_grad()
def evaluate(model, examples, block_size: int):
    """Per example and condition: (NLL, accuracy) of the continuation, teacher-forced."""
    device = next(model.parameters()).device
    pipes = {
        p: LazyRAGPipeline(model, block_size=block_size, n_blocks=4096, policy=p, backend="torch")
        for p in ("lazy", "reencode")
    }
    out = {c: [] for c in ("full", "lazy", "reencode", "block_dense", "no_context")}
    for docs, q, c in examples:
        query = q + c[:-1]  # teacher forcing: the last CONT query rows predict c
        flat = [x for d in docs for x in d]
        ids = torch.tensor([flat + query], device=device)
        full = model(input_ids=ids).logits[0, len(flat) :]
        out["full"].append(continuation_scores(full, c))
        for p, pipe in pipes.items():
            out[p].append(continuation_scores(pipe.logits(query, docs), c))
        dense = pipes["lazy"].dense_block_diagonal_logits(query, docs)
        out["block_dense"].append(continuation_scores(dense, c))
        alone = model(input_ids=torch.tensor([query], device=device)).logits[0]
        out["no_context"].append(continuation_scores(alone, c))
    return {k: np.asarray(v) for k, v in out.items()}  # each (N, 2)


def paired_diff(a: np.ndarray, b: np.ndarray, seed: int, n_boot: int = 4000) -> dict:
    """mean(a − b) over examples with a seeded bootstrap 95% interval."""
    d = a - b
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(1)
    return {
        "mean": float(d.mean()),
        "ci95": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))],
    }


def main() -> None:
    args = _parser().parse_args()
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    train_texts, test_texts = split_corpus(args.seed)
    log(f"{len(train_texts)} training topics, {len(test_texts)} held out; K={args.docs}")

    models, curves = {}, {}
    for arm in ("full", "block"):
        model = tiny_model(args.seed, args.device, args.hidden)  # same init for both arms
        curves[arm] = train(
            model, train_texts, block=arm == "block", steps=args.steps, batch=args.batch,
            k=args.docs, lr=args.lr, seed=args.seed + 1,
        )  # fmt: skip
        models[arm] = model.double()  # evaluate in fp64: lazy == block-diagonal to ~1e-12

    rng = np.random.default_rng(args.seed + 2)
    examples = [make_example(rng, test_texts, args.docs) for _ in range(args.eval)]
    result: dict = {"config": vars(args) | {"doc_len": DOC_LEN, "prompt": PROMPT, "cont": CONT}}
    for arm, model in models.items():
        sc = evaluate(model, examples, args.block_size)
        nll = {c: v[:, 0] for c, v in sc.items()}
        acc = {c: v[:, 1] for c, v in sc.items()}
        result[f"trained_{arm}"] = {
            "final_train_loss": float(np.mean(curves[arm][-20:])),
            "nll_nats_per_byte": {c: float(v.mean()) for c, v in nll.items()},
            "top1_accuracy": {c: float(v.mean()) for c, v in acc.items()},
            "lazy_minus_full_nll": paired_diff(nll["lazy"], nll["full"], args.seed),
            "lazy_minus_full_accuracy": paired_diff(acc["lazy"], acc["full"], args.seed),
            "no_context_minus_full_nll": paired_diff(nll["no_context"], nll["full"], args.seed),
            "max_abs_nll_lazy_vs_reencode": float(np.abs(nll["lazy"] - nll["reencode"]).max()),
            "max_abs_nll_lazy_vs_block_dense": float(
                np.abs(nll["lazy"] - nll["block_dense"]).max()
            ),
        }
        r = result[f"trained_{arm}"]
        log(
            f"model trained {arm}: NLL full {r['nll_nats_per_byte']['full']:.3f} lazy "
            f"{r['nll_nats_per_byte']['lazy']:.3f} no-context "
            f"{r['nll_nats_per_byte']['no_context']:.3f}; acc full "
            f"{r['top1_accuracy']['full']:.3f} lazy {r['top1_accuracy']['lazy']:.3f} no-context "
            f"{r['top1_accuracy']['no_context']:.3f}"
        )
    result["seconds"] = round(time.perf_counter() - t_start, 1)
    result["machine"] = machine_info()
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    summary = {
        k: {
            "nll_full": result[k]["nll_nats_per_byte"]["full"],
            "nll_lazy": result[k]["nll_nats_per_byte"]["lazy"],
            "lazy_minus_full": result[k]["lazy_minus_full_nll"],
        }
        for k in ("trained_full", "trained_block")
    }
    print(json.dumps(summary | {"seconds": result["seconds"]}))


if __name__ == "__main__":
    main()
