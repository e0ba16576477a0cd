"""Step-time overhead of NormBTRewardTrainer over TRL's RewardTrainer (same model, same batches).

One training step = compute_loss + backward + optimizer step, timed interleaved (TRL, NormBT,
TRL, NormBT, ...) so machine noise hits both alike; the ratio of medians is reported. Also the
loss function alone (normbt_loss vs bt_loss on given rewards and pooled states).

    python benchmarks/bench_overhead.py [--steps 30]
Last stdout line: one JSON object with the ratios. No absolute times are claimed: CPU only.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--steps", type=int, default=30, help="timed training steps per loss")
    p.add_argument("--hidden", type=int, default=128, help="hidden width of the reward model")
    p.add_argument("--layers", type=int, default=2, help="layers of the reward model")
    return p


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import numpy as np
import torch
from icml26_normbt import NormBTState, bt_loss, normbt_loss


def build(tmp, hidden, layers):
    import datasets
    from icml26_normbt.trl import NormBTConfig, NormBTRewardTrainer
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast
    from trl import RewardConfig, RewardTrainer

    chars = "abcdefghijklmnopqrstuvwxyz .,"
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
    )
    rng = np.random.default_rng(0)
    texts = ["".join(rng.choice(list(chars), rng.integers(40, 80))) for _ in range(64)]
    ds = datasets.Dataset.from_dict({"chosen": texts[:32], "rejected": texts[32:]})
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_labels=1,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    model = LlamaForSequenceClassification(cfg)
    common = dict(per_device_train_batch_size=8, report_to="none", bf16=False, use_cpu=True)
    trl_tr = RewardTrainer(
        model=model,
        args=RewardConfig(output_dir=f"{tmp}/a", **common),
        train_dataset=ds,
        processing_class=tok,
    )
    ours = NormBTRewardTrainer(
        model=copy.deepcopy(model),
        args=NormBTConfig(output_dir=f"{tmp}/b", **common),
        train_dataset=ds,
        processing_class=tok,
    )
    return trl_tr, ours


def step_time(trainer, batch, opt):
    model = trainer.model
    model.train()
    t = time.perf_counter()
    loss = trainer.compute_loss(model, dict(batch))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return time.perf_counter() - t


def main():
    args = _parser().parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        trl_tr, ours = build(tmp, args.hidden, args.layers)
        batches = list(trl_tr.get_train_dataloader())
        opt_a = torch.optim.AdamW(trl_tr.model.parameters(), 1e-4)
        opt_b = torch.optim.AdamW(ours.model.parameters(), 1e-4)
        ta, tb = [], []
        for i in range(args.steps + 3):
            b = batches[i % len(batches)]
            a_t, b_t = step_time(trl_tr, b, opt_a), step_time(ours, b, opt_b)
            if i >= 3:  # warm-up
                ta.append(a_t)
                tb.append(b_t)
    step_ratio = float(np.median(tb) / np.median(ta))

    # the loss alone, B=64 pairs, H=4096 (a 7B model's pooled width)
    g = torch.Generator().manual_seed(0)
    r_c, r_r = torch.randn(64, generator=g, requires_grad=True), torch.randn(64, generator=g)
    h_c, h_r = torch.randn(64, 4096, generator=g), torch.randn(64, 4096, generator=g)
    st = NormBTState()
    la, lb = [], []
    for _ in range(200):
        t = time.perf_counter()
        bt_loss(r_c, r_r).backward()
        la.append(time.perf_counter() - t)
        t = time.perf_counter()
        normbt_loss(r_c, r_r, h_c, h_r, state=st)[0].backward()
        lb.append(time.perf_counter() - t)
    print(
        f"step median: TRL {np.median(ta) * 1e3:.1f} ms, NormBT {np.median(tb) * 1e3:.1f} ms (CPU, 1 thread)",
        file=sys.stderr,
    )
    row = {
        "package": "normbt",
        "bench": "step-time overhead of NormBTRewardTrainer vs trl.RewardTrainer (tiny Llama, CPU)",
        "step_time_ratio": round(step_ratio, 4),
        "overhead_percent": round(100 * (step_ratio - 1), 2),
        "loss_only_ratio_B64_H4096": round(float(np.median(lb) / np.median(la)), 2),
        "steps": args.steps,
    }
    print(json.dumps(row))


if __name__ == "__main__":
    main()
