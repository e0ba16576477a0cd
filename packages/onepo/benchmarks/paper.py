"""OnePO's experiment at one-GPU scale: SFT-free GRPO of a ~1B instruct model with transient
teacher guidance and DAPO dynamic sampling, through `OnePOGRPOTrainer` (TRL), on GSM8K.

The paper (Chen, Xie, Li and Wang, ICML 2026; OpenReview M8eyUQldfx; official verl code
FreedomIntelligence/HuatuoGPT-3) adapts Qwen3-8B-Base to medicine in one RL stage: teacher
completions replace a random member of a GRPO group only while they beat every student
(Teacher Retirement), and low-probability teacher tokens get an SFT-like objective (Adaptive
Objective Evolution, floor 0.1). Reported (abstract): HealthBench 67.2 with 20K samples, +2.7
over SFT+RL and +7.4 over pure RL; the retirement rate rises towards >= 0.9.

This recipe, per seed, runs two arms from the same student and prompt stream: ``grpo``
(``onepo_teacher_enabled=False``: pure RL, the same loss with no teacher token) and ``onepo``
(teacher injection + the OnePO loss). Both use OnePO.sh's constants (official code): GRPO
advantages, no KL, clip 0.2 / 0.28, dual-clip c = 10, token-mean, DAPO ``filter_groups`` on
``acc`` (at most 20 generation batches), soft overlong penalty 0.6 on half the response budget,
128 prompts x 8 rollouts per rollout step in mini-batches of 16 prompts (8 updates per rollout),
lr 2e-6, weight decay 0.1, 1 warm-up step, temperature 1.0. The teacher column is generated
before training by ``--teacher`` (greedy, any causal LM from ``from_pretrained``) or left empty
for ``--teacher-base-url`` (an OpenAI-compatible server, as OnePO.sh's TEACHER_API_URL).
Reward: exact match of the number inside ``<answer>...</answer>`` with GSM8K's ``#### N``
(the official multiple-choice reward's form). Measured: greedy test accuracy before and after
RL per arm, the paired onepo - grpo difference over seeds, the retirement-rate curve.

Hardware / cost: one GPU (``OnePOGRPOTrainer`` is single-process: retirement is decided per
group and TRL may split a group across ranks). With ``--vllm`` (TRL colocate generation)
about 40 s per rollout step for the 1B student at 1024 response tokens, so 200 rollout steps
x 2 arms x 3 seeds ≈ 12-15 H100-hours, plus minutes for the 8B teacher's column.

Known (OnePO.sh / the paper): every RL constant above; the paper's model, data and grader
(Qwen3-8B-Base, OnePO-Medical-20K, HealthBench with HuatuoGPT-3-Grader-8B) are not this
recipe's. Reconstructions: the ~1B instruct student (meta-llama/Llama-3.2-1B-Instruct), the
open teacher (meta-llama/Llama-3.1-8B-Instruct instead of the API model), GSM8K
(``openai/gsm8k``, config ``main``) as a verifiable domain, the prompt, 200 rollout steps
(≈ 3.4 epochs of the 7,473 problems), 1024 response tokens (OnePO.sh: 8000) with a 512-token
overlong buffer (the same ratio), and the paper's +7.4 over pure RL as the (cross-domain) target.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "model": "meta-llama/Llama-3.2-1B-Instruct",  # reconstruction: the ~1B instruct student
    "teacher": "meta-llama/Llama-3.1-8B-Instruct",  # reconstruction (OnePO.sh: an API model)
    "paper_model": "Qwen/Qwen3-8B-Base",
    "dataset": "openai/gsm8k",  # reconstruction: a verifiable domain
    "config": "main",
    "train_split": "train",
    "test_split": "test",
    # OnePO.sh (official code)
    "prompts_per_step": 128,
    "num_generations": 8,
    "mini_batch_prompts": 16,
    "learning_rate": 2e-6,
    "weight_decay": 0.1,
    "warmup_steps": 1,
    "temperature": 1.0,
    "val_temperature": 0.7,
    "floor": 0.1,
    "clip_low": 0.2,
    "clip_high": 0.28,
    "clip_c": 10.0,
    "loss_type": "dapo",  # verl token-mean
    "beta": 0.0,
    "filter_groups_metric": "acc",
    "max_num_gen_batches": 20,
    "overlong_penalty_factor": 0.6,
    "paper_response_length": 8000,
    "paper_overlong_buffer": 4000,
    # reconstructions
    "rollout_steps": 200,
    "max_completion_length": 1024,
    "overlong_buffer": 512,
    "paper_prompt_length": 4000,  # OnePO.sh; TRL 1.x keeps prompts whole
    "seeds": [0, 1, 2],
    "arms": ["grpo", "onepo"],
    "instruction": "Solve the problem. Give the final number as <answer>N</answer>.",
    # the paper's numbers (HealthBench, Qwen3-8B-Base)
    "reported_healthbench": {"onepo": 67.2, "sft_rl": 64.5, "pure_rl": 59.8},
    "reported_gain_over_pure_rl_points": 7.4,
    "reported_gain_over_sft_rl_points": 2.7,
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="OnePO's experiment at one-GPU scale: GRPO of a ~1B instruct model with a "
        "teacher and the DAPO filter through OnePOGRPOTrainer, pure RL as the baseline."
    )
    p.add_argument("--model", default=PAPER["model"], help="student: hub id or local dir")
    p.add_argument("--teacher", default=PAPER["teacher"], help="teacher: hub id or local dir")
    p.add_argument(
        "--teacher-base-url",
        default=None,
        help="OpenAI-compatible teacher server instead of --teacher (onepo_teacher_api_url)",
    )
    p.add_argument("--teacher-model-name", default="teacher", help="model name on that server")
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="GSM8K: hub id, local dir, or a directory with train.jsonl / test.jsonl",
    )
    p.add_argument("--rollout-steps", type=int, default=PAPER["rollout_steps"], help="RL steps")
    p.add_argument(
        "--prompts-per-step", type=int, default=PAPER["prompts_per_step"], help="prompts/rollout"
    )
    p.add_argument(
        "--num-generations", type=int, default=PAPER["num_generations"], help="group size"
    )
    p.add_argument(
        "--mini-batch-prompts",
        type=int,
        default=PAPER["mini_batch_prompts"],
        help="prompts per optimizer update",
    )
    p.add_argument(
        "--micro-batch", type=int, default=16, help="completions per forward pass (memory only)"
    )
    p.add_argument("--lr", type=float, default=PAPER["learning_rate"], help="learning rate")
    p.add_argument(
        "--max-completion-length",
        type=int,
        default=PAPER["max_completion_length"],
        help="response tokens",
    )
    p.add_argument(
        "--overlong-buffer", type=int, default=PAPER["overlong_buffer"], help="overlong buffer"
    )
    p.add_argument("--instruction", default=PAPER["instruction"], help="appended to every question")
    p.add_argument("--n-train", type=int, default=None, help="use the first N train problems")
    p.add_argument("--n-test", type=int, default=None, help="score the first N test problems")
    p.add_argument("--eval-batch-size", type=int, default=64, help="prompts per greedy batch")
    p.add_argument(
        "--arms", nargs="+", default=PAPER["arms"], choices=PAPER["arms"], help="arms to run"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=PAPER["seeds"], help="paired seeds")
    p.add_argument("--vllm", action="store_true", help="TRL's colocated vLLM for the rollouts")
    p.add_argument("--out", default="paper_onepo.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: tiny LlamaConfig student and teacher saved/loaded, GSM8K-schema rows",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def gold_answer(answer: str) -> str:
    """GSM8K's final answer: the text after ``####``, commas dropped."""
    return answer.split("####")[-1].strip().replace(",", "")


_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S)


def extract(text: str) -> str | None:
    m = _ANSWER.search(text)
    return None if m is None else m.group(1).replace(",", "").strip()


def same_number(pred: str | None, gold: str) -> bool:
    if pred is None:
        return False
    try:
        return float(pred) == float(gold)
    except ValueError:
        return pred == gold


def answer_reward(completions: list, gold: list, **kwargs: Any) -> list[float]:
    """1 when the number in <answer>...</answer> equals GSM8K's gold, else 0 (TRL reward)."""
    out = []
    for c, g in zip(completions, gold, strict=True):
        text = c[-1]["content"] if isinstance(c, list) else c
        out.append(float(same_number(extract(text), g)))
    return out


def load_split(spec: str, split: str) -> list[dict[str, Any]]:
    """GSM8K rows (question, answer): ``<spec>/<split>.jsonl`` read line by line when it
    exists, else ``datasets.load_dataset(spec, "main", split=split)`` (hub id or local dir)."""
    path = Path(spec) / f"{split}.jsonl"
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    import datasets

    ds = datasets.load_dataset(spec, PAPER["config"], split=split)
    return [dict(r) for r in ds]


def messages(row: dict[str, Any], instruction: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{row['question']}\n{instruction}"}]


def generate(model: Any, tok: Any, prompts: list, max_new: int, batch: int) -> list[str]:
    """Greedy completions of conversational prompts (left-padded batches)."""
    import torch

    tok.padding_side = "left"
    out: list[str] = []
    dev = next(model.parameters()).device
    for i in range(0, len(prompts), batch):
        texts = [
            tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
            for m in prompts[i : i + batch]
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(dev)
        with torch.no_grad():
            ids = model.generate(
                **enc, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id
            )
        out += tok.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return out


def accuracy(model: Any, tok: Any, rows: list[dict], args: argparse.Namespace) -> list[float]:
    prompts = [messages(r, args.instruction) for r in rows]
    texts = generate(model, tok, prompts, args.max_completion_length, args.eval_batch_size)
    return [float(same_number(extract(t), gold_answer(r["answer"]))) for t, r in zip(texts, rows)]


CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'-+=()<>/#\n"


def write_smoke(root: Path) -> tuple[str, str, str]:
    """A tiny LlamaForCausalLM, trained here to answer the smoke problems, saved part way as the
    student and at the end as the teacher (root/student, root/teacher: with a char tokenizer and
    a chat template); rows in GSM8K's schema (card openai/gsm8k, config main: question, answer
    ending ``#### N``; splits train / test) to root/data/{train,test}.jsonl."""
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'][0] + ':' + m['content'] + '\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ 'a:' }}{% endif %}"
    )

    def tiny(seed: int) -> Any:
        torch.manual_seed(seed)
        cfg = LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=None,
        )
        return LlamaForCausalLM(cfg)

    rows = []
    for i in range(12):
        a, b = 1 + (i * 7) % 9, 1 + (i * 5) % 8
        q = f"{a}+{b}?"
        rows.append({"question": q, "answer": f"{a}+{b}={a + b}\n#### {a + b}"})
    (root / "data").mkdir(parents=True)
    for split, part in (("train", rows[:8]), ("test", rows[8:])):
        with open(root / "data" / f"{split}.jsonl", "w") as f:
            for r in part:
                f.write(json.dumps(r) + "\n")
    # one tiny model learns "<answer>N</answer><eos>" after the smoke prompt: saved part way as
    # the student (its samples are sometimes right, so the DAPO filter keeps groups), at the
    # end as the teacher
    seqs = []
    for r in rows[:8]:
        prompt = tok.apply_chat_template(
            messages(r, SMOKE_INSTRUCTION), tokenize=False, add_generation_prompt=True
        )
        seqs.append(tok(prompt + f"<answer>{gold_answer(r['answer'])}</answer><eos>")["input_ids"])
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    labels = ids.masked_fill(ids == 0, -100)

    model = tiny(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(1, SMOKE_TEACHER_STEPS + 1):
        loss = model(input_ids=ids, attention_mask=(ids != 0).long(), labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in (SMOKE_STUDENT_STEPS, SMOKE_TEACHER_STEPS):
            name = "student" if step == SMOKE_STUDENT_STEPS else "teacher"
            model.save_pretrained(root / name)
            tok.save_pretrained(root / name)
    return str(root / "student"), str(root / "teacher"), str(root / "data")


SMOKE_INSTRUCTION = "<answer>?"  # short prompt for the tiny models
SMOKE_TEACHER_STEPS, SMOKE_STUDENT_STEPS = 120, 50


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    from icml26_kernels.evidence import comparison, evidence, headroom

    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    if args.quiet:
        import datasets
        import transformers

        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    import datasets
    from icml26_onepo.trl import OnePOConfig, OnePOGRPOTrainer
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from transformers.trainer_callback import PrinterCallback

    tmp = tempfile.TemporaryDirectory()
    cuda = torch.cuda.is_available() and not args.smoke
    if args.smoke:
        torch.set_num_threads(1)
        args.model, args.teacher, args.dataset = write_smoke(Path(tmp.name))
        args.instruction = SMOKE_INSTRUCTION
        args.rollout_steps, args.prompts_per_step, args.num_generations = 2, 4, 4
        args.mini_batch_prompts, args.micro_batch, args.lr = 2, 8, 1e-3
        args.max_completion_length, args.overlong_buffer = 20, 10
        args.eval_batch_size, args.vllm = 8, False
        args.seeds = args.seeds[:2] if len(args.seeds) >= 2 else [0, 1]
    train_rows = load_split(args.dataset, PAPER["train_split"])[: args.n_train]
    test_rows = load_split(args.dataset, PAPER["test_split"])[: args.n_test]
    dtype = torch.bfloat16 if cuda else torch.float32
    device = "cuda" if cuda else "cpu"
    tok = AutoTokenizer.from_pretrained(args.model)
    if tok.pad_token is None:
        pad = "<|finetune_right_pad_id|>"
        tok.pad_token = pad if pad in tok.get_vocab() else tok.eos_token
    # the teacher column: generated once by a local teacher, or left to the server
    prompts = [messages(r, args.instruction) for r in train_rows]
    results: dict[str, Any] = {"runs": {}}
    if args.teacher_base_url is None and "onepo" in args.arms:
        t_tok = AutoTokenizer.from_pretrained(args.teacher)
        if t_tok.pad_token is None:
            t_tok.pad_token = t_tok.eos_token
        teacher = AutoModelForCausalLM.from_pretrained(args.teacher, dtype=dtype).to(device)
        teachers = generate(
            teacher.eval(), t_tok, prompts, args.max_completion_length, args.eval_batch_size
        )
        results["teacher_config"] = _dims(teacher.config)
        del teacher
        if cuda:
            torch.cuda.empty_cache()
    else:
        teachers = [""] * len(prompts)  # empty cell: asked online
    golds = [gold_answer(r["answer"]) for r in train_rows]
    results["teacher_train_accuracy"] = sum(
        same_number(extract(t), g) for t, g in zip(teachers, golds)
    ) / max(len(golds), 1)
    log(f"teacher accuracy on the train problems: {results['teacher_train_accuracy']:.3f}")
    train = datasets.Dataset.from_dict({"prompt": prompts, "gold": golds, "teacher": teachers})

    n = args.num_generations
    gen_batch = args.prompts_per_step * n  # completions per rollout step
    step_batch = args.mini_batch_prompts * n  # completions per optimizer update
    micro = min(args.micro_batch, step_batch)
    accum = step_batch // micro
    updates = gen_batch // step_batch  # optimizer updates per rollout (OnePO.sh: 8)

    base = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(device)
    results["model_config"] = _dims(base.config)
    results["base_accuracy"] = _mean(accuracy(base.eval(), tok, test_rows, args))
    del base
    per_q: dict[str, list[float]] = {}
    fields = OnePOConfig.__dataclass_fields__
    ckpt_field = (
        "activation_checkpointing"
        if "activation_checkpointing" in fields
        else "gradient_checkpointing"
    )
    for seed in args.seeds:
        for arm in args.arms:
            set_seed(seed)
            model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
            cfg = OnePOConfig(
                output_dir=str(Path(tmp.name) / f"{arm}_s{seed}"),
                onepo_teacher_enabled=arm == "onepo",
                onepo_teacher_api_url=args.teacher_base_url,
                onepo_teacher_model=args.teacher_model_name,
                onepo_floor=PAPER["floor"],
                epsilon=PAPER["clip_low"],
                epsilon_high=PAPER["clip_high"],
                delta=PAPER["clip_c"],
                loss_type=PAPER["loss_type"],
                beta=PAPER["beta"],
                onepo_filter_groups=True,
                onepo_filter_groups_metric=PAPER["filter_groups_metric"],
                onepo_max_num_gen_batches=PAPER["max_num_gen_batches"],
                onepo_overlong_penalty=True,
                onepo_overlong_buffer_len=args.overlong_buffer,
                onepo_overlong_penalty_factor=PAPER["overlong_penalty_factor"],
                num_generations=n,
                per_device_train_batch_size=micro,
                gradient_accumulation_steps=accum,
                steps_per_generation=accum * updates,
                max_steps=args.rollout_steps * updates,
                learning_rate=args.lr,
                weight_decay=PAPER["weight_decay"],
                warmup_steps=PAPER["warmup_steps"],
                lr_scheduler_type="constant_with_warmup",
                temperature=PAPER["temperature"],
                max_completion_length=args.max_completion_length,
                use_vllm=args.vllm,
                **{ckpt_field: cuda},  # TRL's default on; transformers 5 renamed it
                vllm_mode="colocate",
                bf16=cuda,
                use_cpu=not cuda,
                seed=seed,
                save_strategy="no",
                report_to="none",
                logging_steps=1,
                dataloader_num_workers=0,
                disable_tqdm=args.quiet,
                log_level="error" if args.quiet else "passive",
            )
            trainer = OnePOGRPOTrainer(
                model=model,
                reward_funcs=answer_reward,
                args=cfg,
                train_dataset=train,
                processing_class=tok,
            )
            if args.quiet:
                trainer.remove_callback(PrinterCallback)
            out = trainer.train()
            hist = trainer.state.log_history
            acc = accuracy(trainer.model.eval(), tok, test_rows, args)
            per_q[f"{arm}/seed{seed}"] = acc
            results["runs"][f"{arm}/seed{seed}"] = {
                "test_accuracy": _mean(acc),
                "steps": int(out.global_step),
                "rollout_steps": int(out.global_step) // updates,
                "retirement_rate": [
                    h["onepo/retirement_rate"] for h in hist if "onepo/retirement_rate" in h
                ],
                "teacher_replaced": [
                    h["onepo/teacher_replaced"] for h in hist if "onepo/teacher_replaced" in h
                ],
                "num_gen_batches": [
                    h["onepo/num_gen_batches"] for h in hist if "onepo/num_gen_batches" in h
                ],
                "train_reward": [h["reward"] for h in hist if "reward" in h],
            }
            log(f"{arm} seed {seed}: test accuracy {_mean(acc):.3f}")
            del trainer, model
            if cuda:
                torch.cuda.empty_cache()
    comps = []
    if set(args.arms) == {"grpo", "onepo"}:
        diffs = [
            100 * (_mean(per_q[f"onepo/seed{s}"]) - _mean(per_q[f"grpo/seed{s}"]))
            for s in args.seeds
        ]
        base_pts = [100 * _mean(per_q[f"grpo/seed{s}"]) for s in args.seeds]
        comps.append(
            comparison(
                "onepo_minus_pure_rl_accuracy",
                "GSM8K test accuracy (greedy), OnePO - pure GRPO (points, paired by seed)",
                diffs,
                target=PAPER["reported_gain_over_pure_rl_points"],
                target_source="abstract: +7.4 HealthBench points over pure RL (another domain)",
                headroom=headroom(100.0, sum(base_pts) / len(base_pts), "accuracy ceiling 100"),
                unit="points",
            )
        )
    doc = {
        "recipe": "onepo",
        "paper": PAPER,
        "config": vars(args),
        "smoke": bool(args.smoke),
        "hardware": {
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        },
        "results": results,
        "evidence": evidence(comparisons=comps, tuning=[]),
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    log(f"wrote {args.out}")
    tmp.cleanup()
    return 0


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _dims(cfg: Any) -> dict[str, Any]:
    return {k: getattr(cfg, k) for k in ("model_type", "hidden_size", "num_hidden_layers")}


if __name__ == "__main__":
    raise SystemExit(main())
