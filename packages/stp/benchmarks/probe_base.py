"""Headroom probe for the benchmark: does the pretrained base have straight trajectories?

STP's Geodesic Hypothesis says NTP training already makes hidden trajectories locally
straight, and STP strengthens that. The issue-54 redesign asks for a base whose NTP-trained
trajectories score L_STP < 1 (iid random states score 1.5). This probe pretrains the
benchmark's model (`reproduce.TinyLM`, same data and optimiser as `reproduce.pretrain`, one
continuous run) and reports, at each checkpoint, the held-out LM loss on the last 5,000
`pydoc_data` tokens (not trained on; uniform = log V) and L_STP of the NL->regex test
conversations' last hidden states (128 rows, 4 spans each, fixed seed), beside L_STP of iid
Gaussian states on the same spans.

    python benchmarks/probe_base.py          # ~30 CPU-s; writes benchmarks/probe_base.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from pydoc_data.topics import topics

HERE = Path(__file__).resolve().parent


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=HERE / "probe_base.json",
        help="the JSON to write (default: benchmarks/probe_base.json)",
    )
    return ap


# --help and bad options exit here, before the heavy imports below
ARGS = _parser().parse_args(None if __name__ == "__main__" else [])


import torch
import torch.nn.functional as F
from icml26_stp import stp_loss
from icml26_stp.data import nl_regex_pairs

sys.path.insert(0, str(HERE))
import reproduce as R

torch.set_num_threads(1)
CHECKPOINTS = (0, 100, 500, 1000, 2000)


def main() -> None:
    t0 = time.time()
    test = nl_regex_pairs(300, seed=1)
    val = nl_regex_pairs(200, seed=2, exclude={nl for nl, _ in test})
    pool = nl_regex_pairs(512, seed=3, exclude={nl for nl, _ in test + val})
    docs = [v for _, v in sorted(topics.items())]
    tok = R.build_tokenizer(pool + val + test, docs)  # the benchmark's tokenizer
    pad, vocab = tok.token_to_id("<pad>"), tok.get_vocab_size()
    b = R.batchify([R.encode_pair(tok, nl, rx) for nl, rx in test[:128]], pad)
    stream = torch.tensor([i for d in docs for i in tok.encode(d).ids], dtype=torch.long)
    train, held = stream[:-5000], stream[-5000:]
    xs = torch.stack([held[i : i + 48] for i in range(0, held.numel() - 48, 48)])  # (N, 48)

    @torch.no_grad()
    def measure(model: R.TinyLM) -> dict[str, float]:
        model.eval()
        lg = model.logits(model.trunk(xs[:, :-1]))
        lm = F.cross_entropy(lg.reshape(-1, vocab), xs[:, 1:].reshape(-1))
        h = model.trunk(b["ids"])  # (128, T, 64)
        g = torch.Generator().manual_seed(0)
        ls = stp_loss(h, b["spans"], generator=g, times=4)
        model.train()
        return {"heldout_lm_nats": round(float(lm), 4), "L_STP": round(float(ls), 4)}

    torch.manual_seed(0)
    iid = torch.randn(b["ids"].shape[0], b["ids"].shape[1], 64)
    l_iid = float(stp_loss(iid, b["spans"], generator=torch.Generator().manual_seed(0), times=4))

    model = R.make_model(vocab, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)  # as R.pretrain
    g = torch.Generator().manual_seed(0)
    L, B = 48, 16
    rows, done = [], 0
    for ck in CHECKPOINTS:
        for _ in range(ck - done):
            starts = torch.randint(0, train.numel() - L - 1, (B,), generator=g)
            x = torch.stack([train[s : s + L] for s in starts.tolist()])
            logits = model.logits(model.trunk(x[:, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        done = ck
        rows.append({"pretrain_steps": ck, **measure(model)})
        print(rows[-1], f"({time.time() - t0:.0f}s)", file=sys.stderr)
    out = {
        "package": "stp",
        "what": "L_STP of the benchmark's base model on the NL->regex test conversations",
        "uniform_lm_nats": round(math.log(vocab), 4),
        "L_STP_iid_gaussian_states": round(l_iid, 4),
        "checkpoints": rows,
        "seconds": round(time.time() - t0, 1),
    }
    ARGS.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
