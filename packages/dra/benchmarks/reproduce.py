"""DRA vs raw representation similarity: pre-registered arms, paired seeds, ΔAUPRC.

Paper claim (Pan, Shi, Zhao, Ma, arXiv 2502.11411): denoising training and target
representations improves attribution-based detection of unsafe training data ("up to 63.3%"
AUPRC gain) and retraining on the filtered data lowers the attack success rate ("up to 39.9%").

Task 1 (jailbreak injection). A training pool of generated benign instruction data (arithmetic,
capitals, benign how-to answered in the same "Sure, here is how to ... Step 1:" style, benign
requests wrapped in jailbreak framings, harmful requests refused) with 2% injected unsafe
samples: a pyrit jailbreak template framing + an AdvBench behaviour, answered compliantly with
unsafe-style content (one templated hazard step, placeholder vocabulary, among two benign filler
steps; the response does not restate the request: data.py). Targets: 10 held-out injected
samples (unseen behaviours, new hazard-step combinations). A tiny GPT-2 (random init, word-level
tokenizer built here) is trained on the pool; every arm then scores the pool.

PRE-REGISTERED (fixed in this file before the run that is reported; issue 45). Hidden-state
arms, last layer, mean over response tokens, no hyperparameter tuned on the reported data:

  RepSim                        raw cosine (the baseline)
  A  diag, k=auto (bare)        center + diag whitening + leave-target-out k, no fallback:
                                the 0.1.0 default (min_targets=2, margin=0)
  B  diag, k=all                center + diag whitening, all dims
  C  full, k=all                center + shrinkage full whitening (a = 0.1), all dims: PRIMARY
  D  full, k=auto               C with the robust leave-target-out k (fallback to all dims with
                                fewer than 20 targets: with 10 targets D == C by construction)
  D' full, k=auto (bare)        C with the bare leave-target-out k (no fallback)
  ablations: center only; token-level denoising (TokenDRA, kappa = 10, q = 0.95, hard) against
  an explicit benign reference (100 generated benign samples outside the pool) and against the
  pool's own tokens; pooled C with the same benign reference.

Primary test: C - RepSim AUPRC, paired over seeds, 95% Student-t interval; secondary: C - A
and C - B. Decision rule (the package default follows it): if C - RepSim and C - B both have
intervals above 0, the default becomes whiten="shrinkage"; otherwise it stays "diag".
Everything is reported as measured; MDE = (t_0.975 + t_0.8) x paired SD / sqrt(n), n - 1 df
(80% power, 5% level; icml26_kernels.evidence).

--quick (the committed reproduce.json and the REPRODUCTION row): task 1 only, hidden-state arms
only, 12 paired seeds, N = 500 (10 injected), 3 epochs.

Full mode (not quick; adds): gradient arms (GradSim, LESS on Adam-preconditioned gradients,
DRA-grad), a bag-of-words moderation baseline, retraining on the pool minus the top-B of
C, RepSim and an oracle (B = 2 x injected) with compliance on 100 held-out jailbreak prompts,
and task 2 (templated gender bias, 2% stereotyped). Headroom: N = 1000 at 1% injection (10
unsafe), where a ratio target is meaningful only if RepSim stays well below 1; the headline is
reported as ΔAUPRC, not a ratio. 10 seeds.

Seeds are paired: every arm of a seed sees the same data, model and projection.

    python benchmarks/reproduce.py --quick   # 12 seeds, N=500 (the committed reproduce.json)
    python benchmarks/reproduce.py --out benchmarks/reproduce_full.json  # 10 seeds, N=1000, 1%
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


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--quick", action="store_true", help="12 seeds, N=500 (the committed reproduce.json)"
    )
    ap.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "reproduce.json"),
        help="write the JSON here (default: benchmarks/reproduce.json)",
    )
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 12 / 10)")
    ap.add_argument(
        "--table", metavar="JSON", help="print the README table of a results JSON and exit"
    )
    ap.add_argument(
        "--row-from", action="store_true",
        help="resummarise the stored reproduce.json and reproduce_full.json (no training) and "
        "rewrite the row, keeping the quick run's machine, time and seconds",
    )  # fmt: skip
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

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
    TokenDRA,
    auprc,
    average_precision,
    extract_hidden_states,
    extract_token_states,
    filter_top,
    per_sample_grads,
    tokenize_pairs,
)
from icml26_kernels.evidence import comparison, evidence, headroom, mde, pin_threads, t_interval

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "reproduce.json"
PROJ_DIM = 2048


QUIET = False  # --quiet: no progress lines


def log(*a):
    if not QUIET:
        print(*a, file=sys.stderr, flush=True)


def interval(x):
    """Mean and 95% Student-t interval over seeds (icml26_kernels.evidence: exact t quantile)."""
    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if x.size < 2:
        return {"mean": m, "ci95": [m, m]}
    _, lo, hi = t_interval(x)
    return {"mean": m, "ci95": [lo, hi], "sd": float(x.std(ddof=1))}


def paired(a, b):
    """a - b over seeds: mean, 95% t interval, wins (a > b), MDE (80% power, 5% two-sided)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    out = interval(diff)
    out["wins"] = int((diff > 0).sum())
    out["n"] = int(diff.size)
    out["mde"] = mde(out.get("sd", 0.0), diff.size) if diff.size >= 2 else float("nan")
    return out


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
PRIMARY = "C full, k=all"


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


def hidden_arms(h_tr, h_tg, h_ref, tok_tr, tok_tg, tok_ref):
    """The pre-registered hidden-state arms (see the module docstring); returns scores, info."""
    bare = {"min_targets": 2, "margin": 0.0}
    full = {"whiten": "shrinkage", "shrinkage": 0.1}
    arms = {
        "A diag, k=auto (bare)": DRA(whiten="diag", k="auto", **bare),
        "B diag, k=all": DRA(whiten="diag", k="all"),
        PRIMARY: DRA(k="all", **full),
        "D full, k=auto": DRA(k="auto", **full),
        "D' full, k=auto (bare)": DRA(k="auto", **full, **bare),
        "center only": DRA(whiten="none", k="all"),
    }
    scores = {"RepSim": RepSim().fit(h_tr, h_tg).score()}
    info = {}
    for name, dra in arms.items():
        scores[name] = dra.fit(h_tr, h_tg).score()
        if dra.selection_ is not None:
            info[f"k {name}"] = int(dra.selection_.k)
    scores["C full, k=all, benign reference"] = (
        DRA(k="all", **full).fit(h_tr, h_tg, benign_reference=h_ref).score()
    )
    tok = TokenDRA().fit(tok_tr, tok_tg, benign_reference=tok_ref)
    scores["token-level, benign reference"] = tok.score()
    info["token kept fraction (pool)"] = float(tok.token_denoiser_.kept_fraction_.mean())
    scores["token-level, pool reference"] = TokenDRA().fit(tok_tr, tok_tg).score()
    return scores, info


def run_seed(task, seed, n_train, epochs, frac, full):
    t0 = time.time()
    build = data.build_jailbreak_injection if task == "jailbreak" else data.build_gender_bias
    d = build(seed, n_train=n_train, frac=frac)
    rows, y, targets = d["train"], d["labels"], d["targets"]
    ref = data.benign_reference(seed) if task == "jailbreak" else d["benign_reference"]
    texts = [p + " " + r for p, r in rows] + [p + " " + r for p, r in targets]
    tok = word_tokenizer(texts + d.get("eval_prompts", []))
    pairs = lambda xs: tokenize_pairs(tok, [p for p, _ in xs], [r for _, r in xs], max_length=128)
    b_tr, b_tg, b_ref = pairs(rows), pairs(targets), pairs(ref)
    model = tiny_gpt2(len(tok), seed)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    pre = train(model, b_tr, seed, epochs)
    hid = [extract_hidden_states(model, b) for b in (b_tr, b_tg, b_ref)]
    toks = [extract_token_states(model, b) for b in (b_tr, b_tg, b_ref)]
    scores, info = hidden_arms(*hid, *toks)
    if full:
        n_params = sum(p.numel() for p in model.parameters())
        proj = RandomProjector(n_params, PROJ_DIM, kind="sjlt", seed=seed)
        g_tr, g_pre = project_grads(model, b_tr, proj, pre)
        g_tg = per_sample_grads(model, b_tg, projector=proj)
        scores["GradSim"] = GradSim().fit(g_tr, g_tg).score()
        scores["LESS"] = LESS().fit(g_pre, g_tg).score()
        scores["DRA-grad (C config)"] = (
            DRA("gradient", whiten="shrinkage", k="all").fit(g_tr, g_tg).score()
        )
        scores["Moderation (BoW logistic regression)"] = moderation_scores(
            [p + " " + r for p, r in rows], [p + " " + r for p, r in targets], seed
        )
    res = {
        "auprc": {k: auprc(s, y) for k, s in scores.items()},
        "ap": {k: average_precision(s, y) for k, s in scores.items()},
        "info": info,
        "random_auprc": float(y.mean()),
    }
    if full and task == "jailbreak":
        budget = 2 * int(y.sum())
        comp = {"none": compliance(model, tok, d["eval_prompts"])}
        idx = np.arange(len(rows))
        for arm, s in (
            (PRIMARY, scores[PRIMARY]),
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
        f"[{task} seed {seed}] {res['seconds']:.1f}s",
        json.dumps({k: round(v, 3) for k, v in res["auprc"].items()}),
        json.dumps(info),
    )
    return res


def summarise(runs):
    arms = list(runs[0]["auprc"])
    col = lambda a, key="auprc": [r[key][a] for r in runs]
    out = {
        "summary": {a: {"auprc": interval(col(a)), "ap": interval(col(a, "ap"))} for a in arms},
        "minus_repsim": {a: paired(col(a), col("RepSim")) for a in arms if a != "RepSim"},
        "primary_minus": {
            b: paired(col(PRIMARY), col(b))
            for b in ("A diag, k=auto (bare)", "B diag, k=all", "token-level, benign reference")
        },
        "random_auprc": float(np.mean([r["random_auprc"] for r in runs])),
    }
    if "compliance" in runs[0]:
        out["compliance"] = {
            k: interval([r["compliance"][k] for r in runs]) for k in runs[0]["compliance"]
        }
        out["compliance_reduction_primary"] = interval(
            [1 - r["compliance"][PRIMARY] / max(r["compliance"]["none"], 1e-9) for r in runs]
        )
    return out


def markdown_table(full):
    """The README's results tables, from the JSON this script writes."""
    fmt = lambda v: f"{v['mean']:.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]"
    fm = lambda v: f"{v['mean']:.3f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]"
    out = []
    for task, t in full["tasks"].items():
        n = len(t["per_seed"])
        out += [
            f"**{task}** ({n} paired seeds, N = {full['n_train']}, {full['frac']:.0%} unsafe, "
            f"random AUPRC {t['random_auprc']:.3f})",
            "",
            "| arm | AUPRC | ΔAUPRC vs RepSim [95% CI] | wins | MDE |",
            "|---|---|---|---|---|",
        ]
        for a, v in t["summary"].items():
            if a == "RepSim":
                out.append(f"| RepSim | {fm(v['auprc'])} | | | |")
                continue
            dlt = t["minus_repsim"][a]
            out.append(
                f"| {a} | {fm(v['auprc'])} | {fmt(dlt)} | {dlt['wins']}/{dlt['n']} "
                f"| {dlt['mde']:.3f} |"
            )
        out.append("")
        out.append(
            "Primary (C full, k=all) minus: "
            + "; ".join(
                f"{b}: {fmt(v)}, {v['wins']}/{v['n']} wins" for b, v in t["primary_minus"].items()
            )
            + "."
        )
        if "compliance" in t:
            c = t["compliance"]
            out += ["", "| retrained on | compliance (held-out jailbreaks) | unsafe removed |"]
            out.append("|---|---|---|")
            out.append(f"| full pool | {fm(c['none'])} | 0 |")
            for arm in (PRIMARY, "RepSim", "oracle"):
                out.append(
                    f"| minus top-B of {arm} | {fm(c[arm])} "
                    f"| {c[arm + ' removed unsafe']['mean']:.1f} |"
                )
        out.append("")
    return "\n".join(out)


FULL_BASELINES = {
    "GradSim": "GradSim",
    "LESS": "LESS",
    "Moderation (BoW logistic regression)": "bag-of-words classifier",
}
TARGET_SOURCE = (
    "paper: 'up to 63.3%' AUPRC gain over the undenoised attribution, a maximum over its "
    "settings (relative or absolute not stated); no number for this setting"
)
FULL_JSON = HERE / "reproduce_full.json"
PROVENANCE = ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start")


def _col(task, arm):
    return np.array([r["auprc"][arm] for r in task["per_seed"]], dtype=float)


def _cmp(name, ours, base, base_name, target_source):
    return comparison(
        name, "AUPRC, paired by seed", ours - base, unit="AUPRC", target=None,
        target_source=target_source,
        headroom=headroom(1.0, float(base.mean()), f"metric maximum: AUPRC 1 over {base_name}"),
    )  # fmt: skip


def comparisons_of(res, label):
    """The row's comparisons of one results JSON: the primary C - RepSim on every task, and in
    the full mode C - GradSim, C - LESS, C - bag-of-words classifier (AUPRC, paired seeds)."""
    out = []
    for task, t in res["tasks"].items():
        c = _col(t, PRIMARY)
        out.append(_cmp(f"{label} {task}: DRA (C) - RepSim", c, _col(t, "RepSim"), "RepSim",
                        TARGET_SOURCE))  # fmt: skip
        for arm, short in FULL_BASELINES.items():
            if arm in t["per_seed"][0]["auprc"]:
                out.append(_cmp(f"{label} {task}: DRA (C) - {short}", c, _col(t, arm), short,
                                f"paper: no DRA - {short} number"))  # fmt: skip
    return out


def _d(c):
    flag = "" if c["resolved"] else " unresolved"
    return f"{c['diff']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]{flag}"


def make_row(quick, full=None):
    """The REPRODUCTION row: the quick run's primary test and, when the full-mode JSON exists,
    DRA against GradSim, LESS and the bag-of-words classifier there (labelled, its own n)."""
    jb = quick["tasks"]["jailbreak"]
    ours = jb["summary"][PRIMARY]["auprc"]["mean"]
    base = jb["summary"]["RepSim"]["auprc"]["mean"]
    dlt = jb["minus_repsim"][PRIMARY]
    comps = comparisons_of(quick, "quick")
    claim = (
        "DRA (hidden states; pre-registered primary arm C: center + shrinkage full whitening, "
        f"all dims) AUPRC vs raw RepSim, {quick['frac']:.0%} AdvBench+jailbreak injection with "
        f"unsafe-style content, tiny GPT-2, {len(quick['seeds'])} paired seeds; "
        f"ΔAUPRC {_d(comps[0])}, {dlt['wins']}/{dlt['n']} wins"
    )
    if full is not None:
        fc = comparisons_of(full, "full")
        comps += fc
        by = {c["name"]: c for c in fc}
        parts = []
        for task, t in full["tasks"].items():
            sm = t["summary"]
            levels = ", ".join(
                f"{short} {sm[arm]['auprc']['mean']:.3f}" for arm, short in FULL_BASELINES.items()
            )
            diffs = "; ".join(
                f"DRA − {short} {_d(by[f'full {task}: DRA (C) - {short}'])}"
                for short in FULL_BASELINES.values()
            )
            parts.append(
                f"{task.replace('_', ' ')}: DRA {sm[PRIMARY]['auprc']['mean']:.3f} vs {levels}; "
                f"DRA − RepSim {_d(by[f'full {task}: DRA (C) - RepSim'])}; {diffs}"
            )
        claim += (
            f". Against stronger baselines (full mode, benchmarks/reproduce_full.json, only "
            f"{len(full['seeds'])} paired seeds, N = {full['n_train']}, {full['frac']:.0%} unsafe): "
            + ". ".join(parts)
            + ". DRA does not beat gradient similarity (GradSim, LESS) or a bag-of-words "
            "classifier in that run; mean [95% t-interval], unresolved = interval holds 0"
        )
    return {
        "package": "dra",
        "claim": claim,
        "paper": "up to +63.3% AUPRC over the undenoised attribution; up to 39.9% lower ASR after filtering",
        "ours": round(ours, 4),
        "baseline": round(base, 4),
        "ratio": round(round(ours, 4) / round(base, 4), 4),
        "evidence": evidence(comps),
    }  # fmt: skip


def resummarise(path):
    """Recompute a stored results JSON's summaries from its per-seed AUPRCs (no training) and
    add its evidence object; returns the updated JSON."""
    res = json.loads(Path(path).read_text())
    for k in ("claim", "paper", "ours", "baseline", "ratio"):  # the row's keys: reproduce_row.json
        res.pop(k, None)
    for task, t in res["tasks"].items():
        res["tasks"][task] = {"per_seed": t["per_seed"], **summarise(t["per_seed"])}
    res["evidence"] = evidence(comparisons_of(res, res["mode"]))
    Path(path).write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    return res


def main():
    args = _parser().parse_args()
    global QUIET
    QUIET = args.quiet
    threads = pin_threads(1)  # 2 threads on 2 shared cores is ~10x slower
    if args.row_from:
        quick = resummarise(RESULTS)
        full = resummarise(FULL_JSON) if FULL_JSON.exists() else None
        row = make_row(quick, full)
        old = json.loads((HERE / "reproduce_row.json").read_text())
        row.update({k: old[k] for k in PROVENANCE if k in old})  # the same run, resummarised
        sys.path.insert(0, str(HERE.parents[2] / "tools"))
        from reproduce_table import write_row

        log(f"wrote {write_row(HERE.parents[2], row)}")
        print(json.dumps(row, ensure_ascii=False))
        return
    if args.table:
        print(markdown_table(json.loads(Path(args.table).read_text())))
        return
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    n_seeds = args.seeds or (12 if args.quick else 10)
    seeds = list(range(n_seeds))
    n_train, frac, epochs = (500, 0.02, 3) if args.quick else (1000, 0.01, 3)
    task_names = ("jailbreak",) if args.quick else ("jailbreak", "gender_bias")
    t0 = time.time()
    tasks = {}
    for task in task_names:
        runs = [run_seed(task, s, n_train, epochs, frac, full=not args.quick) for s in seeds]
        tasks[task] = {"per_seed": runs, **summarise(runs)}
    full = {
        "package": "dra",
        "seconds": round(time.time() - t0, 1),
        "mode": "quick" if args.quick else "full",
        "seeds": seeds,
        "n_train": n_train,
        "frac": frac,
        "threads": threads,
        "tasks": tasks,
    }
    full["evidence"] = evidence(comparisons_of(full, full["mode"]))
    Path(args.out).write_text(json.dumps(full, indent=1, ensure_ascii=False) + "\n")
    if args.quick:
        other = json.loads(FULL_JSON.read_text()) if FULL_JSON.exists() else None
        line = {**make_row(full, other), "seconds": full["seconds"]}
    else:
        quick = json.loads(RESULTS.read_text())
        line = {**make_row(quick, full), "seconds": quick["seconds"]}
    print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
