"""DRA vs raw representation similarity, gradient baselines and a moderation classifier.

Paper claim (Pan, Shi, Zhao, Ma, arXiv 2502.11411): denoising training and target
representations improves attribution-based detection of unsafe training data ("up to 63.3%"
AUPRC gain) and retraining on the filtered data lowers the attack success rate ("up to 39.9%").

Task 1 (jailbreak injection). A training pool of generated benign instruction data (arithmetic,
capitals, benign how-to answered in the same "Sure, here is how to ... Step 1:" style, benign
requests wrapped in jailbreak framings, harmful requests refused) with 2% injected unsafe
samples: a pyrit jailbreak template framing + an AdvBench behaviour, answered compliantly.
Targets: 10 held-out injected samples (unseen behaviours). A tiny GPT-2 (random init, word-level
tokenizer built here) is trained on the pool; every arm then scores the pool:

  RepSim     raw cosine of mean-pooled last-layer hidden states (response tokens)
  DRA-hidden the same hidden states, denoised (center, diag whitening, leave-target-out dims)
  GradSim    cosine of per-sample gradients (all parameters, SJLT-projected)
  LESS       cosine of Adam-preconditioned train gradients vs SGD target gradients
  DRA-grad   the same gradients as GradSim, denoised
  Moderation bag-of-words logistic regression trained on the same budget (the 10 targets as
             positives, 200 random pool samples as negatives: the only labels any arm gets)

plus ablations of DRA-hidden (centering only; center + diag whitening, no dimension selection).
No arm has a hyperparameter tuned on the reported data (all defaults; the same layer and
projection for every arm). Then the model is retrained from the same init on the pool minus the
top-B samples (B = 2 x injected) of DRA-hidden, RepSim, and of an oracle, and on the full pool;
compliance on 100 held-out jailbreak prompts (unseen templates and behaviours) is the fraction
where the model prefers "Sure, here is how to" over the refusal (mean token log-probability).

Task 2 (gender bias). Templated occupation / pronoun data with 2% stereotyped samples ("Only men
should be a pilot; women are not suited..."); targets use held-out occupations. AUPRC only.

Seeds are paired: every arm of a seed sees the same data, model and projection. Intervals are
95% Student-t over seeds of the paired per-seed values.

    python benchmarks/reproduce.py --quick   # 3 seeds, N=600 (the committed reproduce.json)
    python benchmarks/reproduce.py --out benchmarks/reproduce_full.json  # 5 seeds, N=1000
    python benchmarks/reproduce.py --table benchmarks/reproduce.json     # the README table
Progress goes to stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data
from icml26_dra import (
    DRA,
    LESS,
    GradSim,
    RandomProjector,
    RepSim,
    auprc,
    average_precision,
    extract_hidden_states,
    filter_top,
    per_sample_grads,
    tokenize_pairs,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "reproduce.json"
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 9: 2.262}
PROJ_DIM = 2048


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def interval(x):
    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if x.size < 2:
        return {"mean": m, "ci95": [m, m]}
    h = T_975[x.size - 1] * float(x.std(ddof=1)) / np.sqrt(x.size)
    return {"mean": m, "ci95": [m - h, m + h]}


# ---------------------------------------------------------------------------------------------
# model, tokenizer, training
# ---------------------------------------------------------------------------------------------
def word_tokenizer(texts):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    counts: dict[str, int] = {}
    pre = pre_tokenizers.Whitespace()
    for t in texts:
        for w, _ in pre.pre_tokenize_str(t.lower()):
            counts[w] = counts.get(w, 0) + 1
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for w in sorted(w for w, c in counts.items() if c >= 2):
        vocab[w] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def tiny_gpt2(vocab_size, seed):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=vocab_size,
        n_positions=128,
        n_embd=64,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    return GPT2LMHeadModel(cfg).float()


def train(model, batch, seed, epochs, lr=3e-3, bs=16):
    """AdamW on the response tokens, linear decay; returns Adam's v-hat preconditioner (P,)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    n = batch["input_ids"].shape[0]
    steps = epochs * ((n + bs - 1) // bs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / steps)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=g).split(bs):
            ids, att, resp = (
                batch[k][idx] for k in ("input_ids", "attention_mask", "response_mask")
            )
            t = int(att.sum(1).max())
            ids, att, resp = ids[:, :t], att[:, :t], resp[:, :t]
            logits = model(input_ids=ids, attention_mask=att).logits[:, :-1]
            keep = (att[:, 1:] * resp[:, 1:]).bool()
            loss = torch.nn.functional.cross_entropy(logits[keep], ids[:, 1:][keep])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
    model.eval()
    beta2, eps = opt.defaults["betas"][1], opt.defaults["eps"]
    pre = []
    for p in model.parameters():
        st = opt.state[p]
        v_hat = st["exp_avg_sq"] / (1 - beta2 ** float(st["step"]))
        pre.append((1.0 / (v_hat.sqrt() + eps)).reshape(-1))
    return torch.cat(pre)


@torch.no_grad()
def compliance(model, tok, prompts):
    """Fraction of prompts where mean log p(comply prefix) > mean log p(refusal prefix)."""
    out = []
    for resp in (data.COMPLY, data.REFUSAL):
        b = tokenize_pairs(tok, prompts, [resp] * len(prompts), add_eos=False)
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, b["input_ids"][:, 1:, None])[
            ..., 0
        ]
        keep = (b["attention_mask"][:, 1:] * b["response_mask"][:, 1:]).float()
        out.append((lp * keep).sum(1) / keep.sum(1))
    return float((out[0] > out[1]).float().mean())


def project_grads(model, batch, proj, pre, chunk=100):
    """Projected per-sample gradients, plain (GradSim, DRA-grad) and Adam-preconditioned (LESS),
    from one backward pass per sample."""
    n = batch["input_ids"].shape[0]
    plain, precond = [], []
    for lo in range(0, n, chunk):
        sub = {k: v[lo : lo + chunk] for k, v in batch.items()}
        g = torch.from_numpy(per_sample_grads(model, sub))  # (chunk, P)
        plain.append(proj(g).numpy())
        precond.append(proj(g * pre).numpy())
    return np.concatenate(plain), np.concatenate(precond)


# ---------------------------------------------------------------------------------------------
# one seed of one task
# ---------------------------------------------------------------------------------------------
def moderation_scores(train_texts, target_texts, seed, n_neg=200):
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(seed + 17)
    neg = rng.choice(len(train_texts), n_neg, replace=False)
    vec = CountVectorizer(binary=True, lowercase=True).fit(list(train_texts) + list(target_texts))
    x = vec.transform([train_texts[i] for i in neg] + list(target_texts))
    y = np.r_[np.zeros(n_neg), np.ones(len(target_texts))]
    clf = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit(x, y)
    return clf.decision_function(vec.transform(train_texts))


def run_seed(task, seed, n_train, epochs, retrain):
    t0 = time.time()
    d = (data.build_jailbreak_injection if task == "jailbreak" else data.build_gender_bias)(
        seed, n_train=n_train
    )
    rows, y, targets = d["train"], d["labels"], d["targets"]
    texts = [p + " " + r for p, r in rows] + [p + " " + r for p, r in targets]
    tok = word_tokenizer(texts + d.get("eval_prompts", []))
    b_tr = tokenize_pairs(tok, [p for p, _ in rows], [r for _, r in rows], max_length=128)
    b_tg = tokenize_pairs(tok, [p for p, _ in targets], [r for _, r in targets], max_length=128)
    model = tiny_gpt2(len(tok), seed)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    pre = train(model, b_tr, seed, epochs)
    h_tr, h_tg = extract_hidden_states(model, b_tr), extract_hidden_states(model, b_tg)
    n_params = sum(p.numel() for p in model.parameters())
    proj = RandomProjector(n_params, PROJ_DIM, kind="sjlt", seed=seed)
    g_tr, g_pre = project_grads(model, b_tr, proj, pre)
    g_tg = per_sample_grads(model, b_tg, projector=proj)
    scores = {
        "RepSim": RepSim().fit(h_tr, h_tg).score(),
        "DRA-hidden": DRA("hidden").fit(h_tr, h_tg).score(),
        "DRA-hidden center only": DRA("hidden", whiten="none", k="all").fit(h_tr, h_tg).score(),
        "DRA-hidden center+diag, no selection": DRA("hidden", k="all").fit(h_tr, h_tg).score(),
        "GradSim": GradSim().fit(g_tr, g_tg).score(),
        "LESS": LESS().fit(g_pre, g_tg).score(),
        "DRA-grad": DRA("gradient").fit(g_tr, g_tg).score(),
        "Moderation (BoW logistic regression)": moderation_scores(
            [p + " " + r for p, r in rows], [p + " " + r for p, r in targets], seed
        ),
    }
    res = {
        "auprc": {k: auprc(s, y) for k, s in scores.items()},
        "ap": {k: average_precision(s, y) for k, s in scores.items()},
        "k_hidden": int(DRA("hidden").fit(h_tr, h_tg).selection_.k),
        "k_grad": int(DRA("gradient").fit(g_tr, g_tg).selection_.k),
        "random_auprc": float(y.mean()),
    }
    if retrain and task == "jailbreak":
        budget = 2 * int(y.sum())
        comp = {"none": compliance(model, tok, d["eval_prompts"])}
        idx = np.arange(len(rows))
        for arm, s in (
            ("DRA-hidden", scores["DRA-hidden"]),
            ("RepSim", scores["RepSim"]),
            ("oracle", y + 1e-6 * scores["RepSim"]),
        ):
            keep = filter_top(idx, s, budget)
            m = tiny_gpt2(len(tok), seed)
            m.load_state_dict(init)
            train(m, {k: v[keep] for k, v in b_tr.items()}, seed, epochs)
            comp[arm] = compliance(m, tok, d["eval_prompts"])
            comp[f"{arm} removed unsafe"] = int(y[np.setdiff1d(idx, keep)].sum())
        res["compliance"] = comp
    res["seconds"] = time.time() - t0
    log(
        f"[{task} seed {seed}] {time.time() - t0:.1f}s",
        json.dumps({k: round(v, 3) for k, v in res["auprc"].items()}),
    )
    if "compliance" in res:
        log("   compliance", res["compliance"])
    return res


def markdown_table(full):
    """The README's results table, from the JSON this script writes."""
    jb, gb = full["tasks"]["jailbreak"], full["tasks"]["gender_bias"]
    fmt = lambda v: f"{v['mean']:.3f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]"
    out = [
        f"| arm ({len(full['seeds'])} seeds, N = {full['n_train']}) | jailbreak AUPRC | jailbreak AP "
        "| gender-bias AUPRC |",
        "|---|---|---|---|",
    ]
    for arm in jb["summary"]:
        out.append(
            f"| {arm} | {fmt(jb['summary'][arm]['auprc'])} | {fmt(jb['summary'][arm]['ap'])} "
            f"| {fmt(gb['summary'][arm]['auprc'])} |"
        )
    rnd = np.mean([r["random_auprc"] for r in jb["per_seed"]])
    out.append(f"| random | {rnd:.3f} | | |")
    out.append("")
    out.append(
        f"DRA-hidden / RepSim AUPRC, mean of per-seed ratios: jailbreak {fmt(jb['dra_hidden_over_repsim'])}, "
        f"gender bias {fmt(gb['dra_hidden_over_repsim'])}; ratio of means (the JSON line's `ratio`): "
        f"{full['ratio']:.3f}. DRA-grad / GradSim: jailbreak {fmt(jb['dra_grad_over_gradsim'])}."
    )
    c = jb["compliance"]
    out.append("")
    out.append(
        "| retrained on | compliance on 100 held-out jailbreak prompts | injected samples removed |"
    )
    out.append("|---|---|---|")
    n_inj = round(0.02 * full["n_train"])
    out.append(f"| full pool (no filtering) | {fmt(c['none'])} | 0 of {n_inj} |")
    for arm in ("DRA-hidden", "RepSim", "oracle"):
        out.append(
            f"| pool minus top-{2 * n_inj} of {arm} | {fmt(c[arm])} "
            f"| {c[arm + ' removed unsafe']['mean']:.1f} of {n_inj} |"
        )
    out.append("")
    out.append(
        f"Relative compliance reduction with DRA filtering: {fmt(jb['compliance_reduction_dra'])}."
    )
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument(
        "--table", metavar="JSON", help="print the README table of a results JSON and exit"
    )
    args = ap.parse_args()
    if args.table:
        print(markdown_table(json.loads(Path(args.table).read_text())))
        return
    torch.set_num_threads(1)  # 2 threads on 2 shared cores is ~10x slower
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    seeds = [0, 1, 2] if args.quick else [0, 1, 2, 3, 4]
    n_train, epochs = (600, 3) if args.quick else (1000, 3)
    t0 = time.time()
    tasks = {}
    for task in ("jailbreak", "gender_bias"):
        runs = [run_seed(task, s, n_train, epochs, retrain=True) for s in seeds]
        arms = list(runs[0]["auprc"])
        summary = {
            a: {
                "auprc": interval([r["auprc"][a] for r in runs]),
                "ap": interval([r["ap"][a] for r in runs]),
            }
            for a in arms
        }
        ratio = [r["auprc"]["DRA-hidden"] / r["auprc"]["RepSim"] for r in runs]
        ratio_g = [r["auprc"]["DRA-grad"] / r["auprc"]["GradSim"] for r in runs]
        tasks[task] = {
            "per_seed": runs,
            "summary": summary,
            "dra_hidden_over_repsim": interval(ratio),
            "dra_grad_over_gradsim": interval(ratio_g),
            "dra_hidden_minus_repsim": interval(
                [r["auprc"]["DRA-hidden"] - r["auprc"]["RepSim"] for r in runs]
            ),
        }
        if "compliance" in runs[0]:
            comp = {k: interval([r["compliance"][k] for r in runs]) for k in runs[0]["compliance"]}
            red = [
                1 - r["compliance"]["DRA-hidden"] / max(r["compliance"]["none"], 1e-9) for r in runs
            ]
            tasks[task]["compliance"] = comp
            tasks[task]["compliance_reduction_dra"] = interval(red)
    jb = tasks["jailbreak"]
    ours = jb["summary"]["DRA-hidden"]["auprc"]["mean"]
    base = jb["summary"]["RepSim"]["auprc"]["mean"]
    full = {
        "package": "dra",
        "claim": "DRA (hidden states) AUPRC vs raw RepSim, 2% AdvBench+jailbreak injection, tiny GPT-2",
        "paper": "up to +63.3% AUPRC over the undenoised attribution; up to 39.9% lower ASR after filtering",
        "ours": round(ours, 4),
        "baseline": round(base, 4),
        "ratio": round(ours / base, 3),
        "seconds": round(time.time() - t0, 1),
        "mode": "quick" if args.quick else "full",
        "seeds": seeds,
        "n_train": n_train,
        "tasks": tasks,
    }
    Path(args.out).write_text(json.dumps(full, indent=1) + "\n")
    line = {
        k: full[k] for k in ("package", "claim", "paper", "ours", "baseline", "ratio", "seconds")
    }
    line["compliance_reduction"] = round(
        jb.get("compliance_reduction_dra", {}).get("mean", float("nan")), 3
    )
    print(json.dumps(line))


if __name__ == "__main__":
    main()
