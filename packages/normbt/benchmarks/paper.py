"""NormBT's experiment: a reward model trained with BT and with NormBT on a public preference
set through `NormBTRewardTrainer` (TRL), scored RewardBench-style (per-subset accuracy, sections).

The paper (Xie et al., arXiv 2512.06343, OpenReview MBk6Pur6RX) shows that the BT head gradient
per pair is σ(−Δr)·‖h_c − h_r‖ (prediction error × representation distance) and reweights each
pair by w = sg(m / d); it reports "over 5%" gain on RewardBench's Reasoning section "across
various LLM backbones and datasets" (abstract; "two backbones and two datasets"). Metric: a pair
is correct when r_chosen > r_rejected; a section is the count-weighted mean of its subsets'
accuracies (RewardBench's weights, `icml26_normbt.REWARDBENCH_EXAMPLE_COUNTS`); the score is the
mean of Chat, Chat Hard, Safety and Reasoning.

This recipe, per seed, trains the same initialisation twice (``normbt_enabled=False``: TRL's BT
loss; ``True``: NormBT with the package defaults, decay 0.99, ε 0.05·m), same data order, and
scores both on ``allenai/reward-bench`` split ``filtered`` (columns prompt/chosen/rejected/
subset; rows sharded over ranks and gathered). Reported: per arm and seed the subset accuracies
and sections; paired NormBT − BT differences over seeds on Reasoning (the paper's 5 points as
target) and on the score.

Run on several GPUs with ``accelerate launch`` (TRL's Trainer does DDP; for an 8B backbone give
``--config_file`` with FSDP/DeepSpeed); ``torchrun`` sets the same environment::

    accelerate launch --multi_gpu --num_processes 8 packages/normbt/benchmarks/paper.py
    torchrun --nproc_per_node 2 --standalone packages/normbt/benchmarks/paper.py --smoke  # CPU, gloo

(``accelerate launch --cpu`` starts one process unless given an MPI hostfile, so the 2-process
CPU check goes through ``torchrun``; ``use_cpu`` then gives a gloo group.)

Hardware / cost: 1 epoch of the 80K pairs at max 2048 tokens with a 1B backbone is about one
H100-hour per (arm, seed), so the default 2 arms × 3 seeds ≈ 6–8 H100-hours (≈ 1 hour on 8
GPUs); with ``meta-llama/Llama-3.1-8B-Instruct`` about 8× that (≈ 50–60 H100-hours).

Known: the loss and the evaluation (RewardBench, Reasoning +5 points). Reconstructions (no
code, no readable full text): the backbone (``meta-llama/Llama-3.2-1B-Instruct``; the 8B as the
second), the training set (``Skywork/Skywork-Reward-Preference-80K-v0.2``, columns chosen /
rejected as message lists + source, split train), and the usual reward-model recipe constants:
1 epoch, lr 2e-6, cosine schedule with 3% warmup, global batch 128 (4 per device × 4
accumulation × 8 GPUs), max length 2048, bf16, 3 seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "model": "meta-llama/Llama-3.2-1B-Instruct",  # reconstruction
    "large_model": "meta-llama/Llama-3.1-8B-Instruct",  # reconstruction: the second backbone
    "dataset": "Skywork/Skywork-Reward-Preference-80K-v0.2",  # reconstruction
    "split": "train",
    "eval_dataset": "allenai/reward-bench",
    "eval_split": "filtered",
    "epochs": 1,  # reconstruction
    "learning_rate": 2e-6,  # reconstruction
    "per_device_batch_size": 4,  # reconstruction: 4 x 4 accumulation x 8 GPUs = 128
    "grad_accum": 4,
    "max_length": 2048,  # reconstruction
    "warmup_ratio": 0.03,  # reconstruction
    "lr_scheduler": "cosine",  # reconstruction
    "normbt_decay": 0.99,  # the package default (EMA stabilisation: paper summary)
    "normbt_eps": 0.05,  # the package default (relative to m)
    "seeds": [0, 1, 2],
    "arms": ["bt", "normbt"],
    "reported_reasoning_gain_points": 5.0,  # abstract: "over 5%" on RewardBench Reasoning
    "metric": "RewardBench accuracy per subset; sections weighted by the nominal counts",
}

SECTIONS = ("Chat", "Chat Hard", "Safety", "Reasoning", "score")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="NormBT's experiment: BT vs NormBT reward models trained through "
        "NormBTRewardTrainer (TRL) on a preference set, scored RewardBench-style."
    )
    p.add_argument("--model", default=PAPER["model"], help="hub id or local dir of the backbone")
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="training pairs: hub id, local dir, or a .jsonl with chosen/rejected columns",
    )
    p.add_argument("--split", default=PAPER["split"], help="training split")
    p.add_argument(
        "--eval-dataset",
        default=PAPER["eval_dataset"],
        help="RewardBench: hub id, local dir, or a .jsonl with prompt/chosen/rejected/subset",
    )
    p.add_argument("--eval-split", default=PAPER["eval_split"], help="RewardBench split")
    p.add_argument("--epochs", type=float, default=PAPER["epochs"], help="training epochs")
    p.add_argument("--max-steps", type=int, default=-1, help="optimizer steps (-1: epochs)")
    p.add_argument("--lr", type=float, default=PAPER["learning_rate"], help="learning rate")
    p.add_argument(
        "--batch-size", type=int, default=PAPER["per_device_batch_size"], help="pairs per device"
    )
    p.add_argument(
        "--grad-accum", type=int, default=PAPER["grad_accum"], help="gradient accumulation steps"
    )
    p.add_argument(
        "--max-length", type=int, default=PAPER["max_length"], help="max tokens per sequence"
    )
    p.add_argument(
        "--warmup-ratio", type=float, default=PAPER["warmup_ratio"], help="lr warmup fraction"
    )
    p.add_argument("--scheduler", default=PAPER["lr_scheduler"], help="lr schedule")
    p.add_argument("--decay", type=float, default=PAPER["normbt_decay"], help="NormBT EMA decay")
    p.add_argument("--eps", type=float, default=PAPER["normbt_eps"], help="NormBT ε (× m)")
    p.add_argument(
        "--arms", nargs="+", default=PAPER["arms"], choices=PAPER["arms"], help="losses to train"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=PAPER["seeds"], help="paired seeds")
    p.add_argument("--max-train", type=int, default=None, help="use the first N pairs only")
    p.add_argument("--eval-batch-size", type=int, default=8, help="pairs per scoring batch")
    p.add_argument("--no-gradient-checkpointing", action="store_true", help="keep all activations")
    p.add_argument("--output-dir", default=None, help="Trainer output dir (default: a tmp dir)")
    p.add_argument("--out", default="paper_normbt.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: tiny LlamaConfig reward model saved/loaded, rows in the real schemas",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def load_rows(spec: str, split: str) -> Any:
    """Rows of a preference set: a local .jsonl read line by line (list of dicts), else
    ``datasets.load_dataset(spec, split=split)`` (hub id or local dir): the same columns."""
    if spec.endswith(".jsonl") and Path(spec).is_file():
        with open(spec, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    import datasets

    return datasets.load_dataset(spec, split=split)


def _as_dataset(rows: Any, n: int | None) -> Any:
    import datasets

    ds = rows if isinstance(rows, datasets.Dataset) else datasets.Dataset.from_list(list(rows))
    if n is not None:
        ds = ds.select(range(min(n, len(ds))))
    return ds.select_columns(["chosen", "rejected"])


CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'-+=()\n"
SMOKE_SUBSETS = ("alpacaeval-easy", "mt-bench-hard", "refusals-dangerous", "math-prm", "hep-python")


def write_smoke(root: Path) -> tuple[str, str, str]:
    """Tiny LlamaForSequenceClassification + char tokenizer with a chat template saved to
    root/model; 16 rows in Skywork-Reward-Preference-80K-v0.2's schema (card: chosen / rejected
    message lists, source; split train) and 10 in reward-bench's (card: prompt, chosen,
    chosen_model, rejected, rejected_model, subset, id; split filtered)."""
    import random

    import torch
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'][0] + ':' + m['content'] + '\n' }}{% endfor %}"
        "{{ eos_token }}"
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
        num_labels=1,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    LlamaForSequenceClassification(cfg).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    rng = random.Random(0)

    def pair() -> tuple[str, str, str]:
        a, b = rng.randrange(10), rng.randrange(10)
        return f"{a}+{b}=?", f"{a + b}", f"{a + b + rng.choice((-1, 1))}"

    with open(root / "train.jsonl", "w") as f:
        for _ in range(16):
            q, good, bad = pair()
            user = {"role": "user", "content": q}
            f.write(
                json.dumps(
                    {
                        "chosen": [user, {"role": "assistant", "content": good}],
                        "rejected": [user, {"role": "assistant", "content": bad}],
                        "source": "smoke",
                    }
                )
                + "\n"
            )
    with open(root / "rewardbench.jsonl", "w") as f:
        for i in range(10):
            q, good, bad = pair()
            row = {"prompt": q, "chosen": good, "chosen_model": "a", "rejected": bad}
            row.update({"rejected_model": "b", "subset": SMOKE_SUBSETS[i % 5], "id": i})
            f.write(json.dumps(row) + "\n")
    return str(root / "model"), str(root / "train.jsonl"), str(root / "rewardbench.jsonl")


def _dist() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def evaluate(model: Any, tok: Any, rows: list[dict], args: argparse.Namespace) -> dict[str, Any]:
    """RewardBench scores; each rank scores rows[rank::world], the rewards are gathered."""
    import torch.distributed as dist
    from icml26_normbt import pairwise_accuracy, rewardbench_scores, score_pairs

    rank, world = _dist()
    mine = list(range(rank, len(rows), world))
    r_c, r_r = score_pairs(
        model,
        tok,
        [rows[i] for i in mine],
        batch_size=args.eval_batch_size,
        max_length=args.max_length,
    )
    local = list(zip(mine, r_c.tolist(), r_r.tolist()))
    if world > 1:
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, local)
        local = [x for part in parts for x in part]
    local.sort()
    chosen = [c for _, c, _ in local]
    rejected = [r for _, _, r in local]
    acc = pairwise_accuracy(chosen, rejected, [rows[i]["subset"] for i, _, _ in local])
    overall = acc.pop("overall")
    return {
        "accuracy": overall,
        "subsets": acc,
        "sections": rewardbench_scores(acc),
        "n_pairs": len(local),
        "n_ranks": world,
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    from icml26_kernels.evidence import comparison, evidence, headroom
    from icml26_normbt.trl import NormBTConfig, NormBTRewardTrainer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from transformers.trainer_callback import PrinterCallback

    tmp = tempfile.TemporaryDirectory()
    cuda = torch.cuda.is_available() and not args.smoke
    if args.quiet:
        import datasets
        import transformers

        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    if args.smoke:
        torch.set_num_threads(1)
        args.model, args.dataset, args.eval_dataset = write_smoke(Path(tmp.name))
        args.max_steps, args.batch_size, args.grad_accum, args.lr = 3, 4, 1, 1e-3
        args.max_length, args.warmup_ratio, args.eval_batch_size = 64, 0.0, 4
        args.no_gradient_checkpointing = True
        args.seeds = args.seeds[:2] if len(args.seeds) >= 2 else [0, 1]
    ckpt = cuda and not args.no_gradient_checkpointing
    # TRL turns checkpointing on by default; transformers 5 renamed the field
    fields = NormBTConfig.__dataclass_fields__
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
    train = _as_dataset(load_rows(args.dataset, args.split), args.max_train)
    bench = [dict(r) for r in load_rows(args.eval_dataset, args.eval_split)]
    results: dict[str, Any] = {"runs": {}}
    rank = 0
    for seed in args.seeds:
        for arm in args.arms:
            set_seed(seed)  # same score-head init and data order for both arms of a seed
            model = AutoModelForSequenceClassification.from_pretrained(
                args.model, num_labels=1, dtype=torch.float32
            )
            model.config.pad_token_id = tok.pad_token_id
            results["model_config"] = {
                k: getattr(model.config, k)
                for k in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
            }
            cfg = NormBTConfig(
                output_dir=os.path.join(out_dir, f"{arm}_s{seed}"),
                normbt_enabled=arm == "normbt",
                normbt_decay=args.decay,
                normbt_eps=args.eps,
                num_train_epochs=args.epochs,
                max_steps=args.max_steps,
                learning_rate=args.lr,
                per_device_train_batch_size=args.batch_size,
                gradient_accumulation_steps=args.grad_accum,
                max_length=args.max_length,
                warmup_steps=args.warmup_ratio,  # transformers 5: a float < 1 is a ratio
                lr_scheduler_type=args.scheduler,
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
                **{ckpt_field: ckpt},
            )
            trainer = NormBTRewardTrainer(
                model=model, args=cfg, train_dataset=train, processing_class=tok
            )
            if args.quiet:
                trainer.remove_callback(PrinterCallback)
            rank = trainer.accelerator.process_index
            out = trainer.train()
            rm = trainer.accelerator.unwrap_model(trainer.model).eval()
            res = evaluate(rm, tok, bench, args)
            res["train_loss"] = float(out.training_loss)
            res["steps"] = int(out.global_step)
            # NormBT's running mean m (all-reduced over ranks); BT never moves it
            res["normbt_updates"] = int(trainer.normbt_state.num_updates)
            res["normbt_m"] = float(trainer.normbt_state.mean_distance)
            results["runs"][f"{arm}/seed{seed}"] = res
            if rank == 0 and not args.quiet:
                print(f"{arm} seed {seed}: {res['sections']}", file=sys.stderr)
            del trainer, model, rm
            if cuda:
                torch.cuda.empty_cache()
    comps = []
    if set(args.arms) == {"bt", "normbt"}:
        for key, target, src in (
            (
                "Reasoning",
                PAPER["reported_reasoning_gain_points"],
                "abstract: over 5% on Reasoning",
            ),
            ("score", None, "abstract: 'consistent' gains, no number"),
        ):
            runs = results["runs"]
            bt = [100 * runs[f"bt/seed{s}"]["sections"].get(key, float("nan")) for s in args.seeds]
            nb = [
                100 * runs[f"normbt/seed{s}"]["sections"].get(key, float("nan")) for s in args.seeds
            ]
            diffs = [a - b for a, b in zip(nb, bt)]
            comps.append(
                comparison(
                    f"normbt_minus_bt_{key.lower().replace(' ', '_')}",
                    f"RewardBench {key} accuracy, NormBT - BT (points, paired by seed)",
                    diffs,
                    target=target,
                    target_source=src,
                    headroom=headroom(100.0, sum(bt) / len(bt), "accuracy ceiling 100"),
                    unit="points",
                )
            )
    doc = {
        "recipe": "normbt",
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
