"""The paper's experiment: a small instruct LM, its MLPs upcycled into MoEs, trained task after
task on TRACE with CKA-guided selective growth vs random growth of equal size vs full upcycling.

The paper (ICML 2026 poster 64571, "Efficient Bilevel Optimization for CKA-Guided MoE
Upcycling"; abstract only, no code) reports on TRACE better average accuracy than standard
(full) upcycling, 80% less forgetting, and 60% of full upcycling's added parameters removed.

Per seed and arm, from the same ``--model`` (loaded with ``from_pretrained``):

1. sparse upcycling of every decoder MLP (``hf.replace_mlp(upcycle=True)``: ``--num-experts``
   SwiGLU copies, top ``--top-k``; logits unchanged); embeddings, attention, norms and the head
   are frozen [recon], the MoE layers train;
2. for each TRACE task t in order (``--tasks``; TRACE's ``<data>/<task>/{train,test}.json``
   rows ``{"prompt", "answer"}``), growth before training (``apply_plan``: one trainable copy
   per slot of each grown layer, its source frozen, function-preserving):

   * ``cka``: a probe copy of the model fine-tunes ``--probe-steps`` steps on task t; the
     layers whose MLP output has the *lowest* linear CKA between the model and the probe on
     replay inputs (the highest drift ``cka_drift``: the abstract's "instability" signal) grow,
     ``round(--grow-frac x L)`` of the L layers [recon: layer granularity, the budget 40% =
     the paper's "60% of the expansion eliminated"];
   * ``random``: as many layers, drawn uniformly (seeded by seed and task);
   * ``full``: every layer (standard upcycling);
   * ``replay``: no growth;

   then AdamW on the task's answer tokens plus the package's inner objective
   (``BilevelUpcycler.inner_loss``: λ_r x replay loss + λ_c x (1 - CKA) to the pre-task model on
   the deepest quarter of decoder layers, replay from a ``ReservoirBuffer``);
3. after task t, every task j <= t is scored on its test rows by greedy generation with
   TRACE's metric (accuracy; ROUGE-L for MeetingBank; edit similarity for Py150; 20Minuten's
   SARI is replaced by ROUGE-L [recon]): the matrix R, then ``cl_metrics``: average accuracy
   (TRACE's OP) and backward transfer (BWT).

Evidence (paired by seed): cka - random and cka - full average accuracy and BWT; cka - replay
BWT. Parameters added by cka and random are equal by construction (all layers the same size).

Hardware / cost [estimate]: Qwen2.5-0.5B-Instruct (24 layers, d 896, MLP 4864: 13M parameters
per MLP copy) with 2 slots grows to ~5.7B parameters under full upcycling over 8 tasks (fp32
weights; sources are frozen, so Adam holds only the task's new copies): one H100. Per arm and
seed ~800 optimizer steps of 256 sequences (TRACE's epochs 5,3,7,5,3,5,5,7 of 5000 rows) with
replay and a teacher forward, plus 36 evaluations of ``--max-eval`` rows: ~2-3 H100-hours; 4
arms x 3 seeds ≈ 30 H100-hours.

Known (TRACE repo, ``scripts/train_seq_naive.sh``, README): the 8 tasks and their order, the
row schema, lr 1e-5, no weight decay, cosine schedule without warmup, epochs per task, global
batch 256 (4 x 8 GPUs x 8 accumulation), prompt / answer limits 1024 / 512 tokens, OP and BWT.
Reconstructed: the model (a 0.5B instruct LM; the closest small-model anchor used Qwen3-0.6B),
layer-level growth and the CKA drift criterion, the 40% budget, 2 slots top-1, the replay buffer
(500 rows; TRACE replays a past-task ratio), λ_r = λ_c = 1, the CKA layers, the probe (8 steps,
lr 1e-4), 200 test rows per task, the answer-parsing of each metric, 3 seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TRACE_TASKS = [
    "C-STANCE",
    "FOMC",
    "MeetingBank",
    "Py150",
    "ScienceQA",
    "NumGLUE-cm",
    "NumGLUE-ds",
    "20Minuten",
]
PAPER: dict[str, Any] = {
    "model": "Qwen/Qwen2.5-0.5B-Instruct",  # [recon] a small instruct LM
    "data": "LLM-CL-Benchmark_5000",  # TRACE README: the processed data, one folder per task
    "tasks": TRACE_TASKS,  # TRACE scripts: --dataset_name order
    "epochs": [5, 3, 7, 5, 3, 5, 5, 7],  # TRACE scripts: --num_train_epochs
    "lr": 1e-5,  # TRACE scripts
    "weight_decay": 0.0,  # TRACE scripts
    "schedule": "cosine, no warmup",  # TRACE scripts
    "global_batch": 256,  # TRACE: 4 per device x 8 GPUs x 8 accumulation
    "max_prompt_len": 1024,  # TRACE scripts
    "max_ans_len": 512,  # TRACE scripts
    "train_split": "train",
    "test_split": "test",
    "prompt_column": "prompt",
    "answer_column": "answer",
    "metrics": {  # TRACE evaluations/; 20Minuten's SARI -> ROUGE-L here [recon]
        "C-STANCE": "accuracy",
        "FOMC": "accuracy",
        "MeetingBank": "rouge_l",
        "Py150": "edit_similarity",
        "ScienceQA": "accuracy_choice",
        "NumGLUE-cm": "accuracy_number",
        "NumGLUE-ds": "accuracy_number",
        "20Minuten": "rouge_l",
    },
    "max_new_tokens": {  # [recon] enough for each task's answer
        "C-STANCE": 8,
        "FOMC": 8,
        "MeetingBank": 256,
        "Py150": 64,
        "ScienceQA": 16,
        "NumGLUE-cm": 16,
        "NumGLUE-ds": 16,
        "20Minuten": 256,
    },
    "num_experts": 2,  # [recon] slots per upcycled MLP
    "top_k": 1,  # [recon]
    "grow_frac": 0.4,  # abstract: 60% of full upcycling's expansion eliminated -> 40% kept
    "lambda_replay": 1.0,  # [recon] package default
    "lambda_cka": 1.0,  # [recon] package default
    "cka_layers_frac": 0.25,  # [recon] the deepest quarter of decoder layers ("deep layers")
    "replay_size": 500,  # [recon] TRACE replays a past-task ratio
    "probe_steps": 8,  # [recon]
    "probe_lr": 1e-4,  # [recon]
    "max_eval": 200,  # [recon] of TRACE's 2000 test rows per task
    "seeds": [0, 1, 2],  # [recon]
    "arms": ["cka", "random", "full", "replay"],
    "reported": {
        "forgetting_reduction": 0.8,  # abstract: "80% forgetting reduction"
        "expansion_removed": 0.6,  # abstract: "eliminating 60% of redundant parameter expansion"
        "average_accuracy": "better than standard upcycling (no number in the abstract)",
    },
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument("--model", default=PAPER["model"], help="hub id or local dir (causal LM)")
    p.add_argument(
        "--data",
        default=PAPER["data"],
        help="TRACE folder with <task>/<split>.json (or .jsonl) rows {prompt, answer}, or a hub "
        "dataset id (config = task; needs `datasets`)",
    )
    p.add_argument("--tasks", nargs="+", default=PAPER["tasks"], help="task sequence, in order")
    p.add_argument("--epochs", type=int, nargs="+", default=PAPER["epochs"], help="epochs per task")
    p.add_argument(
        "--max-steps", type=int, default=-1, help="optimizer steps per task (-1: epochs)"
    )
    p.add_argument("--lr", type=float, default=PAPER["lr"], help="AdamW learning rate")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per micro-batch")
    p.add_argument(
        "--global-batch", type=int, default=PAPER["global_batch"], help="sequences per step"
    )
    p.add_argument("--max-prompt-len", type=int, default=PAPER["max_prompt_len"], help="tokens")
    p.add_argument("--max-ans-len", type=int, default=PAPER["max_ans_len"], help="tokens")
    p.add_argument("--max-train", type=int, default=None, help="first N training rows per task")
    p.add_argument("--max-eval", type=int, default=PAPER["max_eval"], help="test rows per task")
    p.add_argument("--eval-batch", type=int, default=16, help="prompts per generate() call")
    p.add_argument("--num-experts", type=int, default=PAPER["num_experts"], help="MoE slots")
    p.add_argument("--top-k", type=int, default=PAPER["top_k"], help="slots per token")
    p.add_argument(
        "--grow-frac",
        type=float,
        default=PAPER["grow_frac"],
        help="layers grown per task (cka, random)",
    )
    p.add_argument("--lambda-replay", type=float, default=PAPER["lambda_replay"], help="λ_r")
    p.add_argument("--lambda-cka", type=float, default=PAPER["lambda_cka"], help="λ_c")
    p.add_argument(
        "--replay-size", type=int, default=PAPER["replay_size"], help="reservoir capacity (rows)"
    )
    p.add_argument("--probe-steps", type=int, default=PAPER["probe_steps"], help="cka probe steps")
    p.add_argument("--probe-lr", type=float, default=PAPER["probe_lr"], help="cka probe Adam lr")
    p.add_argument(
        "--arms", nargs="+", default=PAPER["arms"], choices=PAPER["arms"], help="arms to run"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=PAPER["seeds"], help="paired seeds")
    p.add_argument("--out", default="paper_cka_upcycling.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: tiny Qwen2 saved/loaded, 3 TRACE tasks of a few rows in TRACE's schema",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


# ---------------------------------------------------------------------------- data
def _read_rows(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return list(json.loads(text))  # TRACE: a JSON list of {"prompt", "answer"}


def load_task(spec: str, task: str, split: str) -> list[dict]:
    """Rows of one TRACE task split: ``<spec>/<task>/<split>.json`` (or ``.jsonl``) when that
    file exists (TRACE's layout), else ``datasets.load_dataset(spec, task, split=split)``."""
    for ext in (".json", ".jsonl"):
        path = Path(spec) / task / f"{split}{ext}"
        if path.is_file():
            return _read_rows(path)
    if Path(spec).is_dir():
        raise FileNotFoundError(f"--data {spec!r} has no {task}/{split}.json(l) (TRACE's layout)")
    try:
        import datasets
    except ImportError as e:
        raise ImportError(
            f"--data {spec!r} is not a local TRACE folder, and loading it from the hub needs the "
            "`datasets` package: run with `uv run --with datasets ...` or pip install datasets"
        ) from e
    return [dict(r) for r in datasets.load_dataset(spec, task, split=split)]


# ---------------------------------------------------------------------------- metrics
def _tokens(s: str) -> list[str]:
    # Chinese has no spaces: each CJK character is a token, other text splits on whitespace
    out: list[str] = []
    for w in s.split():
        if any("\u4e00" <= c <= "\u9fff" for c in w):
            out.extend(w)
        else:
            out.append(w)
    return out


def rouge_l(pred: str, ref: str) -> float:
    """ROUGE-L F1 from the token LCS (β = 1)."""
    a, b = _tokens(pred), _tokens(ref)
    if not a or not b:
        return float(a == b)
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


def edit_similarity(pred: str, ref: str) -> float:
    """1 - Levenshtein distance / max length, on characters (TRACE's Py150 uses fuzz.ratio)."""
    a, b = pred.strip(), ref.strip()
    if not a and not b:
        return 1.0
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return 1.0 - prev[-1] / max(len(a), len(b))


def _choice(s: str) -> str | None:
    import re

    m = re.search(r"Answer:\s*([A-Z])", s)
    return m.group(1) if m else None


def _number(s: str) -> float | None:
    import re

    m = re.search(r"-?\d+(?:\.\d+)?", s.replace(",", ""))
    return float(m.group(0)) if m else None


def score(metric: str, pred: str, ref: str) -> float:
    """One prediction's score in [0, 1] under a TRACE metric name (``PAPER["metrics"]``)."""
    if metric == "accuracy":  # the first line of the answer, exactly
        return float(pred.strip().split("\n")[0].strip() == ref.strip())
    if metric == "accuracy_choice":  # ScienceQA: "Answer: X"
        return float(_choice(pred) is not None and _choice(pred) == _choice(ref))
    if metric == "accuracy_number":  # NumGLUE: the first number
        p, r = _number(pred), _number(ref)
        return float(p is not None and r is not None and abs(p - r) < 1e-6)
    if metric == "rouge_l":
        return rouge_l(pred, ref)
    if metric == "edit_similarity":
        return edit_similarity(pred, ref)
    raise ValueError(f"unknown metric {metric!r}")


# ---------------------------------------------------------------------------- method pieces
def grow_count(frac: float, n_layers: int) -> int:
    """Layers grown per task by the selective arms: round(frac x L), at least 1."""
    return max(1, min(n_layers, round(frac * n_layers)))


def layer_cka(before: Any, after: Any, batches: list, layers: list[str], forward: Any) -> dict:
    """Linear CKA between the two models' outputs at each named module on the same inputs
    (1 - the package's ``cka_drift``): 1 = the representation did not change."""
    from icml26_cka_upcycling import cka_drift

    drift = cka_drift(before, after, batches, layers, forward=forward)
    return {k: 1.0 - v for k, v in drift.items()}


def select_lowest_cka(cka: dict[str, float], n: int) -> list[str]:
    """The n layers whose output changed most under the probe: the lowest CKA (ties: earlier)."""
    names = list(cka)
    ranked = sorted(names, key=lambda k: (cka[k], names.index(k)))
    return [k for k in names if k in ranked[:n]]


def select_random(layers: list[str], n: int, seed: int, task: int) -> list[str]:
    import numpy as np

    pick = np.random.default_rng([seed, task, 7]).choice(len(layers), size=n, replace=False)
    return [layers[i] for i in sorted(pick.tolist())]


SMOKE_ROWS = {
    # Py150 first: its edit similarity is > 0 even for a tiny model, so BWT reads a signal
    "Py150": [
        ("Complete the next line of the following Python code.\n<s> import os <EOL> def main ( "
         ") : <EOL> path = os . getcwd ( ) <EOL>", "return path"),
        ("Complete the next line of the following Python code.\n<s> class A ( object ) : <EOL> "
         "def __init__ ( self , x ) : <EOL>", "self . x = x"),
    ],
    "C-STANCE": [
        ("判断以下文本对指定对象的态度。输出支持、反对或中立。\n文本：\n我很喜欢这个产品\n对象：\n产品\n态度：\n", "支持"),
        ("判断以下文本对指定对象的态度。输出支持、反对或中立。\n文本：\n这个政策很糟糕\n对象：\n政策\n态度：\n", "反对"),
        ("判断以下文本对指定对象的态度。输出支持、反对或中立。\n文本：\n今天开会讨论\n对象：\n会议\n态度：\n", "中立"),
    ],
    "FOMC": [
        ("What is the monetary policy stance for the following text? Please answer 'dovish', "
         "'hawkish' or 'neutral'.\nText:\nInflation remains elevated.\nStance:\n", "hawkish"),
        ("What is the monetary policy stance for the following text? Please answer 'dovish', "
         "'hawkish' or 'neutral'.\nText:\nRates may be lowered.\nStance:\n", "dovish"),
        ("What is the monetary policy stance for the following text? Please answer 'dovish', "
         "'hawkish' or 'neutral'.\nText:\nThe committee met.\nStance:\n", "neutral"),
    ],
}  # fmt: skip


def write_smoke(root: Path, n_layers: int = 4) -> tuple[str, str, list[str]]:
    """A tiny random Qwen2ForCausalLM (d 32, ``n_layers`` layers, char vocabulary) saved with its
    tokenizer to root/model, and 8 train / 4 test rows of three TRACE tasks in TRACE's layout
    and schema (``<task>/{train,test}.json``: a JSON list of {"prompt", "answer"})."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    # byte-level BPE without merges (Qwen2's tokenizer class re-applies its byte-level
    # pre-tokenizer on load): every UTF-8 byte is a token, Chinese included
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    cfg = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    for task, rows in SMOKE_ROWS.items():
        (root / "trace" / task).mkdir(parents=True)
        for split, n in (("train", 8), ("test", 4)):
            out = [
                {"prompt": rows[i % len(rows)][0], "answer": rows[i % len(rows)][1]}
                for i in range(n)
            ]
            (root / "trace" / task / f"{split}.json").write_text(
                json.dumps(out, ensure_ascii=False), encoding="utf-8"
            )
    return str(root / "model"), str(root / "trace"), list(SMOKE_ROWS)


# ---------------------------------------------------------------------------- tokenisation
def encode(tok: Any, rows: list[dict], max_prompt: int, max_ans: int) -> list[tuple[list, list]]:
    """(prompt ids, answer ids + EOS) per row; the prompt keeps its last ``max_prompt`` tokens."""
    out = []
    for r in rows:
        p = tok(str(r[PAPER["prompt_column"]]), add_special_tokens=False)["input_ids"]
        a = tok(str(r[PAPER["answer_column"]]), add_special_tokens=False)["input_ids"]
        out.append((p[-max_prompt:], [*a[: max_ans - 1], tok.eos_token_id]))
    return out


def pack(pairs: list[tuple[list, list]], length: int, pad: int) -> tuple[Any, Any, Any]:
    """Right-padded (input_ids, attention_mask, labels) of shape (n, length); labels are -100 on
    the prompt and the padding (the loss is on the answer tokens)."""
    import torch

    n = len(pairs)
    ids = torch.full((n, length), pad, dtype=torch.long)
    att = torch.zeros((n, length), dtype=torch.long)
    lab = torch.full((n, length), -100, dtype=torch.long)
    for i, (p, a) in enumerate(pairs):
        seq = (p + a)[:length]
        ids[i, : len(seq)] = torch.tensor(seq)
        att[i, : len(seq)] = 1
        ans = seq[len(p) :]
        lab[i, len(p) : len(p) + len(ans)] = torch.tensor(ans, dtype=torch.long)
    return ids, att, lab


def _batches(data: tuple[Any, Any, Any], g: Any, size: int):
    """Endless shuffled micro-batches (input_ids, attention_mask, labels) of one task."""
    import torch

    ids, att, lab = data
    while True:
        for idx in torch.randperm(ids.shape[0], generator=g).split(size):
            yield ids[idx], att[idx], lab[idx]


def _frozen_sums(mods: dict[str, Any]) -> list[float]:
    """Σ w² of the frozen copies of each MoE layer (fp64): unchanged iff they did not train."""
    return [
        float(
            (m.w1.detach()[m.frozen].double() ** 2).sum()
            + (m.w2.detach()[m.frozen].double() ** 2).sum()
        )
        for m in mods.values()
    ]


# ---------------------------------------------------------------------------- one run
def run_arm(arm: str, seed: int, ctx: dict, args: argparse.Namespace, log: Any) -> dict:
    """Train one arm over the task sequence for one seed; returns R, growth and its facts."""
    import copy

    import numpy as np
    import torch
    from icml26_cka_upcycling import (
        BilevelUpcycler,
        ReservoirBuffer,
        UpcyclePlan,
        apply_plan,
        cl_metrics,
        find_moe_layers,
    )
    from icml26_cka_upcycling.hf import replace_mlp
    from transformers import AutoModelForCausalLM

    device, cuda, tok = ctx["device"], ctx["cuda"], ctx["tok"]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device)
    model.requires_grad_(False)  # backbone frozen [recon]; the MoE layers train
    gen = torch.Generator().manual_seed(seed)
    replace_mlp(
        model,
        num_experts=args.num_experts,
        top_k=args.top_k,
        upcycle=True,
        router_init="normal",
        generator=gen,
    )
    layers = list(find_moe_layers(model))
    for name in layers:
        model.get_submodule(name).requires_grad_(True)
    n_dec = len(layers)
    cka_layers = [
        f"{n.rsplit('.', 1)[0]}"
        for n in layers[n_dec - max(1, round(PAPER["cka_layers_frac"] * n_dec)) :]
    ]  # the decoder layers holding the deepest quarter of the MLPs
    keys = ("input_ids", "attention_mask", "labels")

    def loss_fn(m: Any, b: Any) -> Any:
        b = dict(zip(keys, b)) if isinstance(b, (tuple, list)) else b
        t = int(b["attention_mask"].sum(1).max())
        b = {k: v[:, :t].to(device) for k, v in b.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            return m(**b).loss.float()

    up = BilevelUpcycler(
        model,
        loss_fn,
        cka_layers=cka_layers,
        lambda_replay=args.lambda_replay,
        lambda_cka=args.lambda_cka,
    )
    buf = ReservoirBuffer(args.replay_size, seed=seed)
    T = len(args.tasks)
    R = np.full((T, T), np.nan)
    n_grow = grow_count(args.grow_frac, n_dec)
    out: dict[str, Any] = {"grown": [], "added_params": [], "cka": [], "n_frozen": []}
    out["frozen_change"], out["steps"] = [], []
    data_gen = torch.Generator().manual_seed(seed + 1)
    for t, task in enumerate(args.tasks):
        ids, att, lab = ctx["train"][task]
        n = ids.shape[0]

        # ---- growth
        if arm == "cka":
            pgen = torch.Generator().manual_seed(seed * 1000 + t)
            probe = copy.deepcopy(model).train()
            popt = torch.optim.Adam(
                [p for p in probe.parameters() if p.requires_grad], lr=args.probe_lr
            )
            pit = _batches(ctx["train"][task], pgen, args.batch_size)
            for _ in range(args.probe_steps):
                popt.zero_grad()
                loss_fn(probe, next(pit)).backward()
                popt.step()
            if len(buf) > 0:  # old-task inputs; at the first task, the task's own inputs
                # drawn with the probe's generator, not the buffer's: the replay batches of
                # the training below stay those of the other arms (paired)
                cols = buf.stacked()
                pick = torch.randperm(len(buf), generator=pgen)[: 2 * args.batch_size]
                old = [tuple(c[i] for c in cols) for i in pick.split(args.batch_size)]
            else:
                old = [next(pit) for _ in range(2)]
            cka = layer_cka(model, probe, old, layers, loss_fn)
            del probe, popt
            grow = select_lowest_cka(cka, n_grow)
            out["cka"].append(cka)
        elif arm == "random":
            grow = select_random(layers, n_grow, seed, t)
        elif arm == "full":
            grow = list(layers)
        else:
            grow = []
        slots = {name: list(range(model.get_submodule(name).num_experts)) for name in grow}
        added = apply_plan(model, UpcyclePlan(grow=slots)) if grow else 0
        out["grown"].append(grow)
        out["added_params"].append(int(added))
        mods = find_moe_layers(model)
        out["n_frozen"].append(int(sum(int(m.frozen.sum()) for m in mods.values())))

        before = _frozen_sums(mods)
        # ---- training
        up.snapshot_teacher()
        if cuda:  # the teacher only gives CKA features: bf16 halves its memory
            up.teacher.to(torch.bfloat16)
        per_step = max(1, args.global_batch // args.batch_size)
        epochs = args.epochs[t] if t < len(args.epochs) else args.epochs[-1]
        steps = (
            args.max_steps
            if args.max_steps > 0
            else epochs * math.ceil(n / (per_step * args.batch_size))
        )
        opt = torch.optim.AdamW(up.trainable(), lr=args.lr, weight_decay=PAPER["weight_decay"])
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s, n=steps: 0.5 * (1 + math.cos(math.pi * min(s, n) / n))
        )
        it = _batches(ctx["train"][task], data_gen, args.batch_size)
        model.train()
        for _ in range(steps):
            opt.zero_grad()
            for _ in range(per_step):
                rb = buf.sample(args.batch_size) if len(buf) > 0 else None
                (up.inner_loss(next(it), rb) / per_step).backward()
            opt.step()
            sched.step()
        model.eval()
        up.end_task()
        out["steps"].append(steps)
        out["frozen_change"].append(
            max([abs(a - b) for a, b in zip(_frozen_sums(mods), before)] or [0.0])
        )
        buf.add(ids, att, lab)
        # ---- evaluation of every task so far
        for j in range(t + 1):
            R[t, j] = evaluate(model, tok, ctx["test"][args.tasks[j]], args.tasks[j], args, device)
        log(
            f"[{arm} seed {seed}] after {task}: {[round(float(v), 3) for v in R[t, : t + 1]]} (grew {grow})"
        )
    out["R"] = R.tolist()
    out["metrics"] = cl_metrics(R)
    out["total_added_params"] = int(sum(out["added_params"]))
    out["cka_layers"] = cka_layers
    del model, up
    if cuda:
        torch.cuda.empty_cache()
    return out


def evaluate(model: Any, tok: Any, rows: list[dict], task: str, args: Any, device: Any) -> float:
    """Mean TRACE score of greedy answers to the task's test prompts (left-padded batches)."""
    import torch

    metric = PAPER["metrics"].get(task, "rouge_l")
    new = PAPER["max_new_tokens"].get(task, 64) if not args.smoke else 8
    pad = tok.pad_token_id
    scores = []
    with torch.no_grad():
        for i in range(0, len(rows), args.eval_batch):
            chunk = rows[i : i + args.eval_batch]
            ps = [
                tok(str(r[PAPER["prompt_column"]]), add_special_tokens=False)["input_ids"][
                    -args.max_prompt_len :
                ]
                for r in chunk
            ]
            L = max(len(p) for p in ps)
            ids = torch.tensor([[pad] * (L - len(p)) + p for p in ps], device=device)
            att = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in ps], device=device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                g = model.generate(
                    input_ids=ids,
                    attention_mask=att,
                    max_new_tokens=new,
                    do_sample=False,
                    pad_token_id=pad,
                    eos_token_id=tok.eos_token_id,
                )
            for r, row in zip(g[:, L:], chunk):
                pred = tok.decode(r, skip_special_tokens=True)
                scores.append(score(metric, pred, str(row[PAPER["answer_column"]])))
    return float(sum(scores) / len(scores))


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.grow_frac <= 1:
        raise ValueError(f"--grow-frac must be in (0, 1]; got {args.grow_frac}")
    if len(args.seeds) < 2:
        raise ValueError(f"--seeds needs at least 2 seeds for paired intervals; got {args.seeds}")
    import numpy as np
    import torch
    from icml26_kernels.evidence import comparison, evidence, headroom
    from transformers import AutoConfig, AutoTokenizer

    t0 = time.time()
    tmp = tempfile.TemporaryDirectory()
    cuda = torch.cuda.is_available() and not args.smoke
    device = torch.device("cuda" if cuda else "cpu")
    if args.quiet:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    if args.smoke:
        torch.set_num_threads(1)
        args.model, args.data, args.tasks = write_smoke(Path(tmp.name))
        args.max_steps, args.batch_size, args.global_batch, args.lr = 2, 4, 4, 3e-2
        args.probe_steps, args.probe_lr, args.replay_size, args.max_eval = 2, 3e-3, 16, 4
        args.max_prompt_len, args.max_ans_len, args.eval_batch = 256, 48, 4
        args.seeds = args.seeds[:2]

    def log(*a: Any) -> None:
        if not args.quiet:
            print(*a, file=sys.stderr, flush=True)

    tok = AutoTokenizer.from_pretrained(args.model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    train_pairs = {}
    test_rows = {}
    for task in args.tasks:
        rows = load_task(args.data, task, PAPER["train_split"])[: args.max_train]
        train_pairs[task] = encode(tok, rows, args.max_prompt_len, args.max_ans_len)
        test_rows[task] = load_task(args.data, task, PAPER["test_split"])[: args.max_eval]
    length = max(len(p) + len(a) for ps in train_pairs.values() for p, a in ps)
    ctx = {
        "device": device,
        "cuda": cuda,
        "tok": tok,
        "train": {k: pack(v, length, tok.pad_token_id) for k, v in train_pairs.items()},
        "test": test_rows,
    }
    mc = AutoConfig.from_pretrained(args.model)
    runs: dict[str, dict[str, Any]] = {}
    for seed in args.seeds:
        for arm in args.arms:
            runs[f"{arm}/seed{seed}"] = run_arm(arm, seed, ctx, args, log)
    n_layers = int(mc.num_hidden_layers)
    results: dict[str, Any] = {
        "model_config": {
            k: getattr(mc, k, None)
            for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers")
        },
        "tasks": list(args.tasks),
        "n_train": {k: len(v) for k, v in train_pairs.items()},
        "n_test": {k: len(v) for k, v in test_rows.items()},
        "seq_len": length,
        "grow_count": grow_count(args.grow_frac, n_layers),
        "runs": runs,
    }

    def per_seed(arm: str, key: str) -> list[float]:
        return [runs[f"{arm}/seed{s}"]["metrics"][key] for s in args.seeds]

    comps = []
    names = {"average_accuracy": "average accuracy (TRACE OP)", "bwt": "backward transfer"}
    for base in ("random", "full", "replay"):
        if not {"cka", base} <= set(args.arms):
            continue
        for key in ("average_accuracy", "bwt") if base != "replay" else ("bwt",):
            ours, theirs = per_seed("cka", key), per_seed(base, key)
            ceiling = 1.0 if key == "average_accuracy" else 0.0
            comps.append(
                comparison(
                    f"cka_minus_{base}_{key}",
                    f"{names[key]} over the task sequence, CKA-selected growth - {base} "
                    "(paired by seed)",
                    [a - b for a, b in zip(ours, theirs)],
                    target=None,
                    target_source="abstract: better average accuracy than standard upcycling and "
                    "80% less forgetting, no absolute numbers",
                    headroom=headroom(
                        ceiling,
                        float(np.mean(theirs)),
                        f"metric maximum {ceiling:g} over the {base} arm's mean",
                    ),
                    unit="score (0-1)",
                )
            )
    if not comps:
        raise ValueError("--arms must include cka and at least one of random, full, replay")
    if {"cka", "full"} <= set(args.arms):
        a = [runs[f"cka/seed{s}"]["total_added_params"] for s in args.seeds]
        b = [runs[f"full/seed{s}"]["total_added_params"] for s in args.seeds]
        results["added_params_cka_over_full"] = float(np.mean(a) / np.mean(b))
    doc = {
        "recipe": "cka-upcycling",
        "paper": PAPER,
        "config": vars(args),
        "smoke": bool(args.smoke),
        "hardware": {
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
            "wall_s": round(time.time() - t0, 1),
        },
        "results": results,
        "evidence": evidence(comparisons=comps, tuning=[]),
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str, ensure_ascii=False))
    log(f"wrote {args.out} ({time.time() - t0:.0f} s)")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
