"""Headroom probe, part 2: can a cheap change give the base straight trajectories (L_STP < 1)?

`probe_base.py` showed that the benchmark's base (2 layers x 64, pretrained on
`pydoc_data.topics`) scores L_STP ~ 1.5 at every pretraining length, the value for iid
states. This probe tries two cheap changes and reads L_STP at every layer of the residual
stream (embeddings, after each block, after the final norm = upstream's hidden_states[-1]),
on the NL->regex test conversations (128 rows, 4 spans each, fixed seed):

- `task`: the same 2x64 model pretrained on 1,000 NL->regex conversations in the chat format
  (disjoint from the benchmark's test, validation and pool pairs): structured text with
  strong local regularities. Not usable as the benchmark's base: it has seen the task.
- `wide`: 4 layers x 128, pretrained on pydoc text plus those conversations. About 4x the
  benchmark's cost per step, so not affordable in `--quick`.

    python benchmarks/probe_variants.py task   # ~45 CPU-s
    python benchmarks/probe_variants.py wide   # ~25 CPU-s [--out rows.json]

Each prints one line per checkpoint: `name steps loss {layer: L_STP} cpu` (``--out``: the same
rows as JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from pydoc_data.topics import topics


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "variant",
        nargs="?",
        default="task",
        choices=("task", "wide"),
        help="which base to probe: 'task' (2x64 on NL->regex chats) or 'wide' (4x128)",
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="also write the rows as JSON here (default: none)"
    )
    return ap


# --help and bad options exit here, before the heavy imports below
ARGS = _parser().parse_args(None if __name__ == "__main__" else [])

import torch
import torch.nn.functional as F
from icml26_stp import stp_loss
from icml26_stp.data import nl_regex_pairs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reproduce as R

torch.set_num_threads(1)


def main() -> None:
    which = ARGS.variant
    rows = []
    test = nl_regex_pairs(300, seed=1)
    val = nl_regex_pairs(200, seed=2, exclude={nl for nl, _ in test})
    pool = nl_regex_pairs(512, seed=3, exclude={nl for nl, _ in test + val})
    pre = nl_regex_pairs(1000, seed=4, exclude={nl for nl, _ in test + val + pool})
    docs = [v for _, v in sorted(topics.items())]
    tok = R.build_tokenizer(pool + val + test, docs)  # the benchmark's tokenizer
    pad, vocab = tok.token_to_id("<pad>"), tok.get_vocab_size()
    b = R.batchify([R.encode_pair(tok, nl, rx) for nl, rx in test[:128]], pad)
    docs_ids = [i for d in docs for i in tok.encode(d).ids]
    task_ids = [i for nl, rx in pre for i in R.encode_pair(tok, nl, rx)[0]]
    if which == "task":
        stream, d, layers, steps, ckpts = torch.tensor(task_ids), 64, 2, 1500, (100, 300, 600, 1000)
    else:
        stream, d, layers, steps, ckpts = torch.tensor(docs_ids + task_ids), 128, 4, 300, (100,)

    def states(model: R.TinyLM, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        T = ids.shape[1]
        x = model.emb(ids) + model.pos.weight[:T]  # (B, T, d)
        out = {"emb": x}
        causal = torch.nn.Transformer.generate_square_subsequent_mask(T)
        for i, layer in enumerate(model.blocks.layers):
            x = layer(x, src_mask=causal, is_causal=True)
            out[f"block{i + 1}"] = x  # residual stream after block i+1
        out["final_norm"] = model.norm(x)
        return out

    @torch.no_grad()
    def measure(model: R.TinyLM) -> dict[str, float]:
        model.eval()
        hs = states(model, b["ids"])
        model.train()
        return {
            k: round(float(stp_loss(h, b["spans"], generator=torch.Generator().manual_seed(0), times=4)), 3)
            for k, h in hs.items()
        }  # fmt: skip

    t = time.process_time()
    torch.manual_seed(0)
    m = R.TinyLM(vocab, d=d, layers=layers)
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.0)  # as R.pretrain
    L, B = 48, 16
    for s in range(1, steps + 1):
        starts = torch.randint(0, stream.numel() - L - 1, (B,), generator=g)
        x = torch.stack([stream[q : q + L] for q in starts.tolist()])
        logits = m.logits(m.trunk(x[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s in ckpts or s == steps:
            cpu = time.process_time() - t
            layers = measure(m)
            rows.append({"variant": which, "steps": s, "loss": float(loss), "L_STP": layers})
            print(which, s, f"loss {float(loss):.3f}", layers, f"cpu {cpu:.1f}", flush=True)
    if ARGS.out is not None:
        ARGS.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
