"""STP's experiment: Llama-3.2-1B-Instruct fine-tuned on NL-RX-SYNTH (natural language -> regex)
with plain NTP (λ = 0) and with NTP + λ·STP (λ = 0.02) through `STPSFTTrainer` (TRL), scored by
exact match of the greedy answer on the test split.

The paper (Huang, LeCun, Balestriero, arXiv 2602.22617) adds L_STP = 1 − cos(before + after,
patch) of a random span of the user→assistant hidden-state trajectory to the NTP loss,
L = γ·L_NTP + λ·L_STP, and reports that "STP allows LLMs to match baseline accuracy with 16×
less training data" on NL-RX-SYNTH (abstract; the curve's values were not retrievable). Its
predecessor LLM-JEPA reports NTP 57.29 ± 5.32 % exact match for this model and dataset (Table 12,
5 runs, 4 epochs).

Per seed this recipe trains three runs from the same checkpoint, same data order:

- ``ntp``: λ = 0 on the full train split (STPSFTTrainer at λ = 0 is TRL's SFTTrainer loss);
- ``stp``: λ = 0.02 on the full train split;
- ``stp_frac``: λ = 0.02 on a fraction (default 1/16, the paper's 16×) of the train split,

then generates greedily (≤ 128 new tokens) for every test prompt (system + user, generation
prompt on) and scores ``decoded.strip() == assistant content`` (upstream ``evaluate.py``:
exact string match for synth). Evidence, paired by seed: STP − NTP exact match (points) at full
data, and STP at the fraction − NTP at full data (the data-efficiency claim: ≥ 0 means STP
matched NTP with that fraction of the data).

Several GPUs (upstream ran 8-GPU torchrun): TRL's Trainer does DDP; the test prompts are
sharded over ranks and the scores gathered::

    accelerate launch --multi_gpu --num_processes 8 packages/stp/benchmarks/paper.py \\
        --dataset llm-jepa/datasets
    torchrun --nproc_per_node 2 --standalone packages/stp/benchmarks/paper.py --smoke  # CPU, gloo

Data: NL-RX-SYNTH as the official repo ships it, ``datasets/synth_train.jsonl`` /
``synth_test.jsonl`` of ``github.com/galilai-group/llm-jepa`` (8,000 / 2,000 rows), one JSON
object per line, ``{"messages": [{"role": "system", "content": "Convert natural language to
regular expression."}, {"role": "user", ...}, {"role": "assistant", "content": <regex>}]}``.
No hub dataset id is known: ``--dataset`` takes the directory (``synth_{split}.jsonl`` or
``{split}.jsonl``), or a hub id / ``datasets`` directory with the same ``messages`` column and
``train`` / ``test`` splits.

Hardware / cost: 8,000 short conversations (≈ 60–100 tokens) × 4 epochs is ≈ 2,000 optimizer
steps of 16 sequences per run on one H100 (≈ 15–20 min), the test decode ≈ 2,000 × ≤ 128
tokens batched (≈ 3–5 min); 5 seeds × (ntp + stp + stp at 1/16) ≈ 3–4 H100-hours (≈ 30 min on
8 GPUs), about 6 with a fraction sweep.

Known (official ``run_stp.py`` / ``stp.py`` / ``evaluate.py``): the model, the dataset files and
their schema, λ = 0.02, γ = 1, lr 2e-5, 4 epochs, per-device batch 4 × accumulation 4 (8 GPUs:
global 128; on fewer GPUs raise ``--grad-accum`` to keep it), max length 512, seeds {82, 23, 37,
84, 4}, the default span sampler at the last layer, greedy decoding and exact string match.
Reconstructions: the lr schedule (HF Trainer defaults: linear decay, no warmup), bf16 on CUDA,
how the 1/16 subset is drawn (a seeded shuffle of the train split, the first ⌈N/16⌉ rows, the
same rows for every arm of a seed), and the prompt tokenization at test time (the chat-templated
text without a second BOS, exactly as in training; upstream's eval tokenizer adds one).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "model": "meta-llama/Llama-3.2-1B-Instruct",  # run_stp.py
    "dataset": "llm-jepa/datasets",  # a clone of galilai-group/llm-jepa: synth_{train,test}.jsonl
    "dataset_name": "NL-RX-SYNTH (upstream file prefix 'synth')",
    "train_split": "train",
    "test_split": "test",
    "system_prompt": "Convert natural language to regular expression.",
    "stp_lambda": 0.02,  # run_stp.py --lbd (argparse default 0.1)
    "stp_gamma": 1.0,
    "learning_rate": 2e-5,
    "epochs": 4,
    "per_device_batch_size": 4,
    "grad_accum": 4,
    "max_length": 512,
    "seeds": [82, 23, 37, 84, 4],
    "data_fraction": 1 / 16,  # the abstract's "16x less training data"
    "max_new_tokens": 128,  # evaluate.py default; greedy (do_sample=False)
    "arms": ["ntp", "stp", "stp_frac"],
    "metric": "exact match of the stripped greedy answer with the assistant content, % of test",
    "reported": "STP matches NTP accuracy with 16x less data (abstract); LLM-JEPA Table 12: "
    "NTP 57.29 +- 5.32 % exact match (Llama-3.2-1B-Instruct, NL-RX-SYNTH)",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="STP's experiment: NTP vs NTP + 0.02*STP fine-tuning of Llama-3.2-1B-Instruct "
        "on NL-RX-SYNTH through STPSFTTrainer (TRL), exact match on the test split."
    )
    p.add_argument("--model", default=PAPER["model"], help="hub id or local dir of the model")
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="dir with synth_{split}.jsonl or {split}.jsonl (upstream's files), or a hub id / "
        "datasets dir with a 'messages' column",
    )
    p.add_argument("--train-split", default=PAPER["train_split"], help="training split")
    p.add_argument("--test-split", default=PAPER["test_split"], help="scored split")
    p.add_argument("--lbd", type=float, default=PAPER["stp_lambda"], help="λ of the STP arms")
    p.add_argument("--gamma", type=float, default=PAPER["stp_gamma"], help="γ (NTP weight)")
    p.add_argument("--lr", type=float, default=PAPER["learning_rate"], help="learning rate")
    p.add_argument("--epochs", type=float, default=PAPER["epochs"], help="training epochs")
    p.add_argument("--max-steps", type=int, default=-1, help="optimizer steps (-1: epochs)")
    p.add_argument(
        "--batch-size", type=int, default=PAPER["per_device_batch_size"], help="rows per device"
    )
    p.add_argument(
        "--grad-accum", type=int, default=PAPER["grad_accum"], help="gradient accumulation steps"
    )
    p.add_argument(
        "--max-length", type=int, default=PAPER["max_length"], help="max tokens per conversation"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=PAPER["seeds"], help="paired seeds")
    p.add_argument(
        "--fraction",
        type=float,
        default=PAPER["data_fraction"],
        help="train fraction of the stp_frac arm (the data-efficiency claim)",
    )
    p.add_argument(
        "--arms", nargs="+", default=PAPER["arms"], choices=PAPER["arms"], help="runs per seed"
    )
    p.add_argument(
        "--max-new-tokens", type=int, default=PAPER["max_new_tokens"], help="greedy decode length"
    )
    p.add_argument("--eval-batch-size", type=int, default=64, help="prompts per generate call")
    p.add_argument("--max-test", type=int, default=None, help="score the first N test rows only")
    p.add_argument("--output-dir", default=None, help="Trainer output dir (default: a tmp dir)")
    p.add_argument("--out", default="paper_stp.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: tiny LlamaConfig model + char tokenizer saved/loaded, rows in synth's schema",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_split(spec: str, split: str) -> list[dict[str, Any]]:
    """Rows ``{"messages": [...]}`` of one split: a local ``.jsonl``; a directory holding
    ``synth_{split}.jsonl`` or ``{split}.jsonl`` (read line by line); else
    ``datasets.load_dataset(spec, split=split)`` (hub id or datasets dir): the same column."""
    path = Path(spec)
    if path.is_file() and path.suffix == ".jsonl":
        return _read_jsonl(path)
    for name in (f"synth_{split}.jsonl", f"{split}.jsonl"):
        if (path / name).is_file():
            return _read_jsonl(path / name)
    import datasets

    ds = datasets.load_dataset(spec, split=split)
    return [{"messages": list(r["messages"])} for r in ds]


def subset(rows: list[Any], fraction: float, seed: int) -> list[Any]:
    """The first ⌈fraction·N⌉ rows of a seed's shuffle (the same rows for every arm of a seed)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    return [rows[i] for i in order[: max(1, math.ceil(fraction * len(rows)))]]


def write_smoke(root: Path) -> tuple[str, str]:
    """A tiny LlamaForCausalLM + char tokenizer with a chat template saved to root/model; 16
    train and 8 test rows in upstream's synth_{train,test}.jsonl schema (messages: system /
    user / assistant) from the package's NL-RX-style grammar."""
    import string

    import torch
    from icml26_stp.data import nl_regex_pairs, to_messages
    from tokenizers import Tokenizer, decoders, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special = [
        "<pad>",
        "<s>",
        "</s>",
        "<unk>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|end|>",
    ]
    vocab = {t: i for i, t in enumerate(special)}
    for c in string.printable:
        if c not in "\t\n\r\x0b\x0c":
            vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=special[4:],
    )
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    LlamaForCausalLM(cfg).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    pairs = nl_regex_pairs(24, seed=0)
    data = root / "data"
    data.mkdir()
    for split, part in (("train", pairs[:16]), ("test", pairs[16:])):
        with open(data / f"synth_{split}.jsonl", "w", encoding="utf-8") as f:
            for nl, rx in part:
                f.write(json.dumps({"messages": to_messages(nl, rx)}) + "\n")
    return str(root / "model"), str(data)


def _dist() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def exact_match(model: Any, tok: Any, rows: list[dict], args: argparse.Namespace) -> dict:
    """Greedy answers to rows[rank::world] (system + user, generation prompt), gathered; a row
    is correct when the stripped decoded answer equals its assistant content (evaluate.py)."""
    import torch
    import torch.distributed as dist

    rank, world = _dist()
    mine = list(range(rank, len(rows), world))
    side, tok.padding_side = tok.padding_side, "left"
    local: list[tuple[int, bool, str]] = []
    device = next(model.parameters()).device
    try:
        for b in range(0, len(mine), args.eval_batch_size):
            idx = mine[b : b + args.eval_batch_size]
            prompts = [
                tok.apply_chat_template(
                    [m for m in rows[i]["messages"] if m["role"] != "assistant"],
                    tokenize=False,
                    add_generation_prompt=True,
                )
                for i in idx
            ]
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(device) for k, v in enc.items()}
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    do_sample=False,
                    max_new_tokens=args.max_new_tokens,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=tok.eos_token_id,
                )
            for i, seq in zip(idx, out[:, enc["input_ids"].shape[1] :]):
                answer = tok.decode(seq, skip_special_tokens=True).strip()
                gold = [m for m in rows[i]["messages"] if m["role"] == "assistant"][-1]["content"]
                local.append((i, answer == gold, answer))
    finally:
        tok.padding_side = side
    if world > 1:
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, local)
        local = [x for part in parts for x in part]
    local.sort()
    return {
        "exact_match": 100.0 * sum(ok for _, ok, _ in local) / max(len(local), 1),
        "n_test": len(local),
        "n_ranks": world,
        "examples": [a for _, _, a in local[:3]],
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import datasets
    import torch
    from icml26_kernels.evidence import comparison, evidence, headroom
    from icml26_stp.trl import STPConfig, STPSFTTrainer
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from transformers.trainer_callback import PrinterCallback

    tmp = tempfile.TemporaryDirectory()
    cuda = torch.cuda.is_available() and not args.smoke
    if args.quiet:
        import transformers

        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    if args.smoke:
        torch.set_num_threads(1)
        args.model, args.dataset = write_smoke(Path(tmp.name))
        args.max_steps, args.batch_size, args.grad_accum, args.lr = 2, 4, 1, 1e-3
        args.max_new_tokens, args.eval_batch_size, args.max_length = 6, 8, 256
        args.seeds = args.seeds[:2] if len(args.seeds) >= 2 else [0, 1]
    fields = STPConfig.__dataclass_fields__  # transformers 5 renamed the checkpointing field
    ckpt_field = (
        "activation_checkpointing"
        if "activation_checkpointing" in fields
        else "gradient_checkpointing"
    )
    out_dir = args.output_dir or os.path.join(tmp.name, "runs")
    tok = AutoTokenizer.from_pretrained(args.model)
    if tok.pad_token is None:  # Llama-3: a reserved pad token exists; else eos
        pad = "<|finetune_right_pad_id|>"
        tok.pad_token = pad if pad in tok.get_vocab() else tok.eos_token
    train_rows = load_split(args.dataset, args.train_split)
    test_rows = load_split(args.dataset, args.test_split)
    if args.max_test is not None:
        test_rows = test_rows[: args.max_test]
    results: dict[str, Any] = {"runs": {}, "n_train": len(train_rows)}
    rank = 0
    for seed in args.seeds:
        for arm in args.arms:
            frac = args.fraction if arm == "stp_frac" else 1.0
            rows = subset(train_rows, frac, seed) if frac < 1 else train_rows
            lbd = 0.0 if arm == "ntp" else args.lbd
            set_seed(seed)  # same data order and span stream for every arm of a seed
            model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
            results["model_config"] = {
                k: getattr(model.config, k)
                for k in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
            }
            cfg = STPConfig(
                output_dir=os.path.join(out_dir, f"{arm}_s{seed}"),
                stp_lambda=lbd,
                stp_gamma=args.gamma,
                num_train_epochs=args.epochs,
                max_steps=args.max_steps,
                learning_rate=args.lr,
                per_device_train_batch_size=args.batch_size,
                gradient_accumulation_steps=args.grad_accum,
                max_length=args.max_length,
                bf16=cuda,
                use_cpu=not cuda,
                seed=seed,
                save_strategy="no",
                report_to="none",
                logging_steps=10,
                dataloader_num_workers=0,
                disable_tqdm=args.quiet,
                log_level="error" if args.quiet else "passive",
                ddp_find_unused_parameters=False,
                **{ckpt_field: False},
            )
            trainer = STPSFTTrainer(
                model=model,
                args=cfg,
                train_dataset=datasets.Dataset.from_list(rows),
                processing_class=tok,
            )
            if args.quiet:
                trainer.remove_callback(PrinterCallback)
            rank = trainer.accelerator.process_index
            out = trainer.train()
            lm = trainer.accelerator.unwrap_model(trainer.model).eval()
            res = exact_match(lm, tok, test_rows, args)
            logged = [h for h in trainer.state.log_history if "stp_loss" in h]
            res.update(
                train_loss=float(out.training_loss),
                steps=int(out.global_step),
                n_train_rows=len(rows),
                stp_lambda_logged=logged[-1]["stp_lambda"] if logged else None,
                stp_loss_last=logged[-1]["stp_loss"] if logged else None,
            )
            results["runs"][f"{arm}/seed{seed}"] = res
            if rank == 0 and not args.quiet:
                print(f"{arm} seed {seed}: EM {res['exact_match']:.2f}%", file=sys.stderr)
            del trainer, model, lm
            if cuda:
                torch.cuda.empty_cache()
    comps = []
    runs = results["runs"]
    if "ntp" in args.arms:
        ntp = [runs[f"ntp/seed{s}"]["exact_match"] for s in args.seeds]
        room = headroom(100.0, sum(ntp) / len(ntp), "exact-match ceiling 100%")
        for arm, name, stat, src in (
            (
                "stp",
                "stp_minus_ntp_exact_match",
                f"exact match on {args.test_split}, NTP+{args.lbd}*STP - NTP, full train split "
                "(points, paired by seed)",
                "the STP paper reports a data multiplier (16x), not a gap at full data",
            ),
            (
                "stp_frac",
                "stp_fraction_minus_ntp_full_exact_match",
                f"exact match on {args.test_split}, NTP+{args.lbd}*STP on {args.fraction:.4g} of "
                "the train split - NTP on all of it (points, paired by seed; >= 0: matched)",
                "abstract: STP matches NTP with 16x less data (a difference near 0, no number)",
            ),
        ):
            if arm in args.arms:
                ours = [runs[f"{arm}/seed{s}"]["exact_match"] for s in args.seeds]
                comps.append(
                    comparison(
                        name,
                        stat,
                        [a - b for a, b in zip(ours, ntp)],
                        target=None,
                        target_source=src,
                        headroom=room,
                        unit="points",
                    )
                )
    doc = {
        "recipe": "stp",
        "paper": PAPER,
        "config": vars(args),
        "smoke": bool(args.smoke),
        "hardware": {
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
            "world_size": _dist()[1] if torch.distributed.is_available() else 1,
        },
        "results": results,
        "evidence": evidence(comparisons=comps, tuning=[]),
    }
    if rank == 0:
        Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
        if not args.quiet:
            print(f"wrote {args.out}", file=sys.stderr)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
