"""Skill-MoE's two claims at small scale, without hub models; prints one JSON line.

Paper (Chen et al., arXiv 2503.05641): instance-level, skill-based recruitment of k = 3 experts
out of 16 LLMs, synthesised by an aggregator chosen on a synthetic 1-correct/2-incorrect test,
beats the best multi-agent baseline by +8.15 points on average; a batch scheduler that groups
instances by expert runs the 16 models on one GPU at the runtime of 4-GPU baselines.

(i) Routing, a real-data analogue on scikit-learn's digits (1797 8x8 images, 10 classes):
- 16 heterogeneous "experts" (logistic regression, k-NN, Gaussian NB, decision tree, random
  forest), each trained on a skewed subset: every training image of its 3 specialty classes,
  5% of the others. An expert's "response" is its class-probability vector.
- Skills: the annotator is k-means (30 clusters) on PCA(16) features, queried through
  ``LLMSkillAnnotator``: each of its 5 samples names 2 clusters drawn from softmax(-d^2 / tau)
  ("Keywords: c3, c17"); a keyword is kept iff it appears in >= 2 samples (the official
  filter). Test keywords are mapped with ``KeywordMapper`` (centroid embeddings).
- Profiles from validation correctness (``ProfileBank.from_validation``), recruitment with
  the official sampling (``recruit``: k = 3, with replacement, T = 0.5).
- Aggregator candidates: majority vote, mean probability, most confident response, and
  "expert m as aggregator" (m's own probabilities + the mean of the responses) for each of
  the 16 experts; chosen by ``select_aggregator`` on the synthetic test
  (``build_aggregator_benchmark``) built from the validation responses.
- Baselines, tuned on the same validation split (never on test): the best single expert;
  the best fixed ensemble of 3, brute force over all 560 triples x every aggregator candidate
  (strictly more tuning than the routed arm gets); and, as ablations, random recruitment
  (k = 3 uniform) and routing without global strength.
- Splits: expert-train 40% / validation 30% / test 30%, stratified, per seed; seeds are
  paired (every arm sees the same split, experts, clusters). 95% t-intervals of paired
  differences.

(ii) Scheduling, with real model-load costs: 16 tiny random-init LLaMA models saved to disk
(safetensors); the first N test instances' recruited experts from (i) decide the slots.
``BatchScheduler`` (each expert loaded once) vs ``run_naive`` (load per slot), greedy
decoding of 4 tokens; loads, outputs equal, wall-time ratio in the same run.

(iii) Options for the broad regime (labelled ablations on the same seeds; the headline keeps
upstream's defaults): ``recruit(..., mode="topk")`` (the 3 most relevant experts, no draw)
and the aggregator chosen on routed validation teams (``build_routed_aggregator_benchmark``,
2-fold cross-fitted) instead of the synthetic 1-correct / 2-incorrect test, alone and
together; with the oracle over the recruited experts (headroom) and the MDE of each paired
difference (2.8 SD / sqrt(n)).

    python benchmarks/reproduce.py --quick     # 8 + 16 seeds, N = 12 scheduling instances
    python benchmarks/reproduce.py             # 30 + 30 seeds, N = 48
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="8 + 16 seeds (specialist + broad), N = 12 scheduling instances",
    )
    ap.add_argument(
        "--table", metavar="JSON", help="print the README tables of a finished run and exit"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the JSON here (default: benchmarks/reproduce_quick.json or reproduce.json)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import numpy as np
from icml26_kernels import evidence as ev
from icml26_skillmoe import (
    BatchScheduler,
    KeywordMapper,
    LLMSkillAnnotator,
    ProfileBank,
    TransformersGenerator,
    build_aggregator_benchmark,
    build_routed_aggregator_benchmark,
    majority_vote,
    recruit,
    recruit_batch,
    recruitment_distribution,
    run_naive,
    select_aggregator,
)
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

HERE = Path(__file__).resolve().parent
N_EXPERTS, N_CLASSES, K = 16, 10, 3
PAPER_TARGET_PTS = 8.15  # the paper's gain over the best multi-agent baseline (4 benchmarks)


def mean_ci(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t interval (icml26_kernels.evidence)."""
    a = np.asarray(xs, dtype=np.float64)
    if a.size < 2:
        return float(a.mean()), 0.0
    m, _, hi = ev.t_interval(a)
    return m, hi - m


def mde(xs: list[float]) -> float:
    """Minimum detectable paired effect, 80% power at 5% (exact t quantiles, not 2.8)."""
    a = np.asarray(xs, dtype=np.float64)
    return ev.mde(float(a.std(ddof=1)), int(a.size)) if a.size > 1 else float("nan")


# ---------------------------------------------------------------------------- experts
def make_expert(e: int, seed: int):
    fam = e % 5
    if fam == 0:
        return LogisticRegression(max_iter=300, C=0.5)
    if fam == 1:
        return KNeighborsClassifier(n_neighbors=5)
    if fam == 2:
        return GaussianNB()
    if fam == 3:
        return DecisionTreeClassifier(max_depth=10, random_state=seed)
    return RandomForestClassifier(n_estimators=25, max_depth=10, random_state=seed, n_jobs=1)


def train_experts(
    x: np.ndarray, y: np.ndarray, rng: np.random.Generator, seed: int, n_spec: int, other: float
):
    """16 experts, each on all images of its ``n_spec`` specialty classes + ``other`` of the rest."""
    experts, specialties = [], []
    classes = np.arange(N_CLASSES)
    for e in range(N_EXPERTS):
        spec = rng.choice(classes, size=n_spec, replace=False)
        keep = np.isin(y, spec) | (rng.random(len(y)) < other)
        model = make_expert(e, seed).fit(x[keep], y[keep])
        experts.append(model)
        specialties.append(sorted(int(c) for c in spec))
    return experts, specialties


def probas(models, x: np.ndarray) -> np.ndarray:
    """(E, N, C) class probabilities, zero for classes an expert never saw."""
    out = np.zeros((len(models), len(x), N_CLASSES))
    for e, m in enumerate(models):
        out[e][:, m.classes_] = m.predict_proba(x)
    return out


# ---------------------------------------------------------------------------- aggregators
def aggregators(own: np.ndarray):
    """Candidates mapping (instance ids, responses) -> predicted classes. ``own``: (E, N, C)
    probabilities of every expert on the instances the ids index (the aggregator's own view)."""

    def resp_stack(responses):
        return [np.array([r for r in rs if r is not None]) for rs in responses]

    def majority(ids, responses):
        out = []
        for rs in responses:
            votes = [int(np.argmax(r)) if r is not None else -1 for r in rs]
            out.append(int(majority_vote(votes)))
        return out

    def mean_prob(ids, responses):
        return [int(np.argmax(s.sum(0))) if len(s) else -1 for s in resp_stack(responses)]

    def max_conf(ids, responses):
        out = []
        for s in resp_stack(responses):
            out.append(int(np.argmax(s[np.argmax(s.max(1))])) if len(s) else -1)
        return out

    cands = {"majority": majority, "mean-prob": mean_prob, "max-conf": max_conf}

    def expert_agg(e):
        def agg(ids, responses):
            out = []
            for i, s in zip(ids, resp_stack(responses)):
                mix = own[e, i] + (s.mean(0) if len(s) else 0.0)
                out.append(int(np.argmax(mix)))
            return out

        return agg

    for e in range(N_EXPERTS):
        cands[f"expert{e}"] = expert_agg(e)
    return cands


def fixed_ensemble_preds(p: np.ndarray, triple, agg: str) -> np.ndarray:
    """Vectorised fixed-ensemble predictions (same candidates as ``aggregators``)."""
    sub = p[list(triple)]  # (3, N, C)
    if agg == "mean-prob":
        return sub.sum(0).argmax(1)
    if agg == "max-conf":
        best = sub.max(2).argmax(0)  # (N,)
        return sub[best, np.arange(sub.shape[1])].argmax(1)
    if agg == "majority":
        votes = sub.argmax(2)  # (3, N); ties to the first, as majority_vote
        a, b, c = votes
        return np.where((b == c) & (a != b), b, a)
    e = int(agg.removeprefix("expert"))
    return (p[e] + sub.mean(0)).argmax(1)


# ---------------------------------------------------------------------------- one seed
def routing_seed(seed: int, n_spec: int = 2, other: float = 0.02, tau: float = 0.5) -> dict:
    rng = np.random.default_rng(seed)
    digits = load_digits()
    x, y = digits.data / 16.0, digits.target
    idx = np.arange(len(y))
    tr, rest = train_test_split(idx, train_size=0.4, stratify=y, random_state=seed)
    va, te = train_test_split(rest, train_size=0.5, stratify=y[rest], random_state=seed)
    experts, specialties = train_experts(x[tr], y[tr], rng, seed, n_spec, other)
    names = [f"expert{e}" for e in range(N_EXPERTS)]
    p_va, p_te = probas(experts, x[va]), probas(experts, x[te])
    ok_va = p_va.argmax(2) == y[va]  # (E, Nv)
    ok_te = p_te.argmax(2) == y[te]

    # skills: k-means "annotator" sampled 5 times through LLMSkillAnnotator
    pca = PCA(n_components=16, random_state=seed).fit(x[np.concatenate([tr, va])])
    km = KMeans(n_clusters=30, n_init=3, random_state=seed).fit(
        pca.transform(x[np.concatenate([tr, va])])
    )
    z_all = pca.transform(x)
    d2 = ((z_all[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1)  # (N, 30)
    logits = -(d2 - d2.min(1, keepdims=True)) / tau
    w = np.exp(logits)
    w /= w.sum(1, keepdims=True)
    ann_rng = np.random.default_rng(10_000 + seed)

    def annotator_model(prompts: list[str]) -> list[str]:
        out = []
        for prompt in prompts:
            i = int(prompt.split("image #")[1].split()[0])
            cl = ann_rng.choice(30, size=2, replace=False, p=w[i])
            out.append("Keywords: " + ", ".join(f"c{c}" for c in cl))
        return out

    annot = LLMSkillAnnotator(annotator_model)
    kw_va = annot.annotate([f"image #{i} ." for i in va])
    kw_te_raw = annot.annotate([f"image #{i} ." for i in te])
    bank = ProfileBank.from_validation(kw_va, {n: ok_va[e].tolist() for e, n in enumerate(names)})
    centroid = {f"c{c}": km.cluster_centers_[c] for c in range(30)}
    mapper = KeywordMapper(bank.vocabulary, embed=lambda ks: np.array([centroid[k] for k in ks]))
    kw_te = mapper.map_many(kw_te_raw)

    # aggregator chosen by the synthetic 1-correct / 2-incorrect test on validation
    va_pos = np.arange(len(va))
    outputs = {n: [p_va[e, q] for q in va_pos] for e, n in enumerate(names)}
    bench = build_aggregator_benchmark(
        list(va_pos),
        outputs,
        {n: ok_va[e].tolist() for e, n in enumerate(names)},
        list(y[va]),
        rng=seed,
        empty=None,
    )
    agg_name, agg_scores = select_aggregator(
        aggregators(p_va), bench, is_correct=lambda o, g: o == g
    )

    # routed k = 3 on test
    te_pos = list(range(len(te)))
    cands_te = aggregators(p_te)
    route_rng = random.Random(seed)
    assign = recruit_batch(kw_te, bank, K, route_rng)
    a_idx = [[int(n.removeprefix("expert")) for n in a] for a in assign]
    resp = [[p_te[e, i] for e in a] for i, a in zip(te_pos, a_idx)]
    routed = np.mean(np.array(cands_te[agg_name](te_pos, resp)) == y[te])
    routed_maj = np.mean(np.array(cands_te["majority"](te_pos, resp)) == y[te])
    routed_oracle = np.mean([ok_te[a, i].any() for i, a in zip(te_pos, a_idx)])

    # options (labelled ablations; upstream's defaults above are the headline):
    # recruit(..., mode="topk") and the aggregator chosen on routed validation teams
    # (build_routed_aggregator_benchmark: 2-fold cross-fitted, same recruitment as the arm)
    cands_va = aggregators(p_va)
    ok_va_lists = {n: ok_va[e].tolist() for e, n in enumerate(names)}

    def routed_agg(mode: str) -> tuple[str, dict[str, float]]:
        items = build_routed_aggregator_benchmark(
            list(va_pos), kw_va, outputs, ok_va_lists, list(y[va]), k=K, rng=seed, mode=mode
        )
        return select_aggregator(cands_va, items, is_correct=lambda o, g: o == g)

    assign_topk = recruit_batch(kw_te, bank, K, mode="topk")
    resp_topk = [
        [p_te[int(n.removeprefix("expert")), i] for n in a] for i, a in zip(te_pos, assign_topk)
    ]
    agg_routed, _ = routed_agg("sample")
    agg_routed_topk, _ = routed_agg("topk")

    def acc(agg: str, responses) -> float:
        return float(np.mean(np.array(cands_te[agg](te_pos, responses)) == y[te]))

    routed_topk = acc(agg_name, resp_topk)
    routed_routed_agg = acc(agg_routed, resp)
    routed_topk_routed_agg = acc(agg_routed_topk, resp_topk)
    routed_topk_oracle = np.mean(
        [
            ok_te[[int(n.removeprefix("expert")) for n in a], i].any()
            for i, a in zip(te_pos, assign_topk)
        ]
    )

    # ablation: routing without global strength (every p_m equal)
    flat = ProfileBank({n: dict(bank.profiles[n]) for n in names})
    flat.global_strength = lambda temperature=0.5: {n: 1.0 / N_EXPERTS for n in names}  # type: ignore[method-assign]
    assign_flat = recruit_batch(kw_te, flat, K, random.Random(seed))
    resp_flat = [
        [p_te[int(n.removeprefix("expert")), i] for n in a] for i, a in zip(te_pos, assign_flat)
    ]
    routed_nostrength = np.mean(np.array(cands_te[agg_name](te_pos, resp_flat)) == y[te])
    # ablation: k = 3 distinct experts (recruit(..., replacement=False); upstream samples with
    # replacement, so an expert often fills 2-3 of the slots)
    rd, assign_d = random.Random(seed), []
    for k in kw_te:  # fewer than 3 candidates: fill up with replacement
        dist = recruitment_distribution(k, bank)
        support = N_EXPERTS if dist is None else sum(w > 0 for w in dist.values())
        assign_d.append(recruit(k, bank, K, rd, replacement=support < K))
    resp_d = [[p_te[int(n.removeprefix("expert")), i] for n in a] for i, a in zip(te_pos, assign_d)]
    routed_distinct = np.mean(np.array(cands_te[agg_name](te_pos, resp_d)) == y[te])
    # ablation: random recruitment (k = 3 uniform, same aggregator)
    rr = random.Random(seed)
    resp_rand = [[p_te[rr.randrange(N_EXPERTS), i] for _ in range(K)] for i in te_pos]
    random_k3 = np.mean(np.array(cands_te[agg_name](te_pos, resp_rand)) == y[te])

    # baselines, tuned on validation
    acc_va = ok_va.mean(1)
    best_single = int(np.argmax(acc_va))
    single = float(ok_te[best_single].mean())
    agg_names = list(cands_te)
    best = (-1.0, None, None)
    fixed3_by_agg = dict.fromkeys(agg_names, -1.0)  # best val accuracy over triples, per agg
    for triple in itertools.combinations(range(N_EXPERTS), 3):
        for a in agg_names:
            acc = float(np.mean(fixed_ensemble_preds(p_va, triple, a) == y[va]))
            fixed3_by_agg[a] = max(fixed3_by_agg[a], acc)
            if acc > best[0]:
                best = (acc, triple, a)
    _, triple, fixed_agg = best
    fixed3 = float(np.mean(fixed_ensemble_preds(p_te, triple, fixed_agg) == y[te]))
    top3 = tuple(int(e) for e in np.argsort(-acc_va, kind="stable")[:3])
    top3_agg = max(
        agg_names, key=lambda a: float(np.mean(fixed_ensemble_preds(p_va, top3, a) == y[va]))
    )
    top3_acc = float(np.mean(fixed_ensemble_preds(p_te, top3, top3_agg) == y[te]))
    return dict(
        seed=seed,
        routed=float(routed),
        routed_majority=float(routed_maj),
        routed_oracle=float(routed_oracle),
        routed_topk=routed_topk,
        routed_routed_agg=routed_routed_agg,
        routed_topk_routed_agg=routed_topk_routed_agg,
        routed_topk_oracle=float(routed_topk_oracle),
        aggregator_routed=agg_routed,
        aggregator_routed_topk=agg_routed_topk,
        routed_no_strength=float(routed_nostrength),
        routed_distinct=float(routed_distinct),
        random_k3=float(random_k3),
        best_single=single,
        best_fixed3=fixed3,
        top3_by_val=top3_acc,
        oracle_any_expert=float(ok_te.any(0).mean()),
        aggregator=agg_name,
        aggregator_bench=round(agg_scores[agg_name], 4),
        aggregator_bench_majority=round(agg_scores["majority"], 4),
        aggregator_bench_scores={a: float(v) for a, v in agg_scores.items()},
        fixed3_val_by_aggregator=fixed3_by_agg,
        best_single_expert=best_single,
        expert_val_acc_exact=[float(a) for a in acc_va],
        fixed3=[list(triple), fixed_agg],
        expert_val_acc=[round(float(a), 3) for a in acc_va],
        specialties=specialties,
        no_keyword_test=int(sum(1 for k in kw_te if not k)),
        assignments_head=assign[:64],
    )


# ---------------------------------------------------------------------------- scheduling
def save_models(root: Path, n: int) -> dict[str, str]:
    import torch
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in "abcdefghijklmnopqrstuvwxyz0123456789 .,:?#()\n":
        vocab.setdefault(c, len(vocab))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
    )
    paths = {}
    for e in range(n):
        torch.manual_seed(e)
        cfg = LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=256,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=1,
        )
        path = root / f"expert{e}"
        LlamaForCausalLM(cfg).save_pretrained(path)
        tok.save_pretrained(path)
        paths[f"expert{e}"] = str(path)
    return paths


def scheduling(assignments: list[list[str]], n_inst: int) -> dict:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    assign = assignments[:n_inst]
    prompts = [f"question {i}: which digit is image #{i}?" for i in range(len(assign))]
    with tempfile.TemporaryDirectory() as tmp:
        paths = save_models(Path(tmp), N_EXPERTS)
        gens = {n: TransformersGenerator(p, device="cpu", batch_size=64) for n, p in paths.items()}

        def load(name):
            return gens[name].load()

        def unload(name, gen):
            gen.unload()

        # warm-up: import paths and first-load caches, outside both timings
        load("expert0").generate(["warm"], temperature=0.0, max_tokens=1)
        unload("expert0", gens["expert0"])
        reps = {"batched": [], "naive": []}
        outs = {}
        for rep in range(2):  # alternate the order, take each arm's median-of-2 (min)
            for arm in ("batched", "naive") if rep == 0 else ("naive", "batched"):
                t0 = time.perf_counter()
                if arm == "batched":
                    sched = BatchScheduler(
                        load,
                        unload,
                        memory_fn=lambda n, g: g.memory_bytes(),
                        temperature=0.0,
                        max_tokens=4,
                    )
                    outs[arm] = sched.run(assign, prompts)
                    stats_b = sched.stats
                else:
                    outs[arm], stats_n = run_naive(
                        assign, prompts, load, unload, temperature=0.0, max_tokens=4
                    )
                reps[arm].append(time.perf_counter() - t0)
    tb, tn = min(reps["batched"]), min(reps["naive"])
    return dict(
        instances=len(assign),
        k=K,
        loads_batched=stats_b.loads,
        loads_naive=stats_n.loads,
        distinct_experts=len({e for a in assign for e in a}),
        outputs_equal=outs["batched"] == outs["naive"],
        peak_bytes_per_model=stats_b.peak_memory,
        seconds_batched=round(tb, 3),
        seconds_naive=round(tn, 3),
        speedup=round(tn / tb, 2),
    )


def render_table(full: dict) -> str:
    """The README's results tables, from the JSON this script writes."""

    def pm(v: dict) -> str:
        return f"{100 * v['mean']:.1f} ± {100 * v['ci95']:.1f}"

    rows = [
        ("routed", "Skill-MoE routed k=3 (aggregator by the synthetic test)"),
        ("routed_majority", "routed k=3, majority vote"),
        ("best_fixed3", "best fixed 3-ensemble (560 triples × 19 aggregators, tuned on val)"),
        ("top3_by_val", "top-3 experts by val accuracy + best aggregator"),
        ("best_single", "best single expert (by val accuracy)"),
        ("random_k3", "ablation: 3 random experts, same aggregator"),
        ("routed_no_strength", "ablation: routed without global strength (p_m uniform)"),
        ("routed_distinct", "ablation: routed, 3 distinct experts (no replacement)"),
        ("routed_oracle", "headroom: any recruited expert right"),
        ("oracle_any_expert", "headroom: any of the 16 experts right"),
        ("routed_topk", 'option: top-3 by relevance (`mode="topk"`), synthetic-test aggregator'),
        ("routed_routed_agg", "option: sampled, aggregator chosen on routed val teams"),
        ("routed_topk_routed_agg", "option: top-3 + aggregator chosen on top-3 val teams"),
        ("routed_topk_oracle", "headroom: any top-3 expert right"),
    ]
    r = full["routing"]
    out = [
        "| test accuracy, % (mean ± 95% CI over seeds) | specialists "
        f"({r['specialist']['seeds']} seeds) | broad ({r['broad']['seeds']} seeds) |",
        "|---|---|---|",
    ]
    for key, label in rows:
        out.append(
            f"| {label} | {pm(r['specialist']['summary'][key])} | {pm(r['broad']['summary'][key])} |"
        )
    out += ["", "| paired difference, points | specialists | broad |", "|---|---|---|"]
    for key in (
        "routed-best_fixed3",
        "routed-best_single",
        "routed-random_k3",
        "routed-routed_no_strength",
    ):
        out.append(
            f"| {key.replace('-', ' − ')} | {pm(r['specialist']['paired_differences'][key])} "
            f"| {pm(r['broad']['paired_differences'][key])} |"
        )

    def mde(v: dict) -> str:
        return f"{100 * v['mde80']:.1f}"

    out += [
        "",
        "| options, paired difference, points (MDE at 80% power) | specialists | broad |",
        "|---|---|---|",
    ]
    for key in (
        "routed_topk-routed",
        "routed_routed_agg-routed",
        "routed_topk_routed_agg-routed",
        "routed_topk-best_fixed3",
        "routed_routed_agg-best_fixed3",
        "routed_topk_routed_agg-best_fixed3",
        "routed_oracle-best_fixed3",
        "routed_topk_oracle-best_fixed3",
    ):
        sp, br = r["specialist"]["paired_differences"][key], r["broad"]["paired_differences"][key]
        out.append(f"| {key.replace('-', ' − ')} | {pm(sp)} ({mde(sp)}) | {pm(br)} ({mde(br)}) |")
    sc = full["scheduling"]
    out += [
        "",
        f"| scheduling ({sc['instances']} instances × k={sc['k']}, 16 tiny LLaMA on disk, CPU) | batched | naive |",
        "|---|---|---|",
        f"| model loads | {sc['loads_batched']} (= distinct experts {sc['distinct_experts']}) | {sc['loads_naive']} |",
        f"| wall time, same run | 1 | {sc['speedup']}× |",
        f"| outputs equal slot for slot | {sc['outputs_equal']} | |",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------- evidence
HEADROOM_HOW = (
    "oracle routing: an instance counts as right when any of the 16 experts is right on it "
    "(test split, mean over seeds)"
)


def evidence_of(results: dict) -> dict:
    """The row's evidence (icml26_kernels.evidence): routed − best fixed 3 in both regimes and
    routed − best single (specialists), in points, with the oracle-routing headroom; every
    validation choice of the three arms per seed, with the score of every candidate."""
    comps, tuning = [], []
    for regime, against in (
        ("specialist", "best_fixed3"),
        ("specialist", "best_single"),
        ("broad", "best_fixed3"),
    ):
        runs = results[regime]["runs"]
        ceiling = 100 * float(np.mean([r["oracle_any_expert"] for r in runs]))
        baseline = 100 * float(np.mean([r[against] for r in runs]))
        comps.append(
            ev.comparison(
                f"routed k=3 - {against} ({regime} experts)",
                "test accuracy on sklearn digits, paired over seeds (points)",
                [100 * (r["routed"] - r[against]) for r in runs],
                target=PAPER_TARGET_PTS,
                target_source="paper: +8.15 points over the best multi-agent baseline, "
                "mean of 4 LLM benchmarks (an anchor: this is a digits analogue)",
                headroom=ev.headroom(ceiling, baseline, HEADROOM_HOW),
                unit="points",
            )
        )
    for regime in ("specialist", "broad"):
        for r in results[regime]["runs"]:
            if "aggregator_bench_scores" not in r:  # a run stored before every score was
                continue
            tag = f"({regime}s, seed {r['seed']})"
            sc = r["aggregator_bench_scores"]
            tuning.append(
                ev.tuned(
                    f"routed {tag}",
                    "aggregator",
                    list(sc),
                    list(sc.values()),
                    objective="synthetic 1-correct/2-incorrect test on validation (accuracy)",
                    chosen=r["aggregator"],
                )
            )
            fb = r["fixed3_val_by_aggregator"]
            tuning.append(
                ev.tuned(
                    f"best_fixed3 {tag}",
                    "aggregator (best of the 560 triples each)",
                    list(fb),
                    list(fb.values()),
                    objective="validation accuracy",
                    chosen=r["fixed3"][1],
                )
            )
            acc = r["expert_val_acc_exact"]
            tuning.append(
                ev.tuned(
                    f"best_single {tag}",
                    "expert",
                    [f"expert{e}" for e in range(len(acc))],
                    acc,
                    objective="validation accuracy",
                    chosen=f"expert{r['best_single_expert']}",
                )
            )
    return ev.evidence(comps, tuning)


def claim_of(results: dict, evid: dict, sched: dict) -> str:
    """The row's claim, every interval a comparison's 95% CI (points, one decimal)."""
    by = {c["name"]: c for c in evid["comparisons"]}
    n = {k: results[k]["seeds"] for k in ("specialist", "broad")}

    def ci(name: str) -> str:
        c = by[name]
        lo, hi = c["ci95"]
        word = "unresolved"
        if c["resolved"]:
            word = "resolved" if c["diff"] > 0 else "resolved: routing is worse"
        return f"{c['diff']:+.1f} pts [{lo:+.1f}, {hi:+.1f}] (95% CI, {word})"

    f3 = by["routed k=3 - best_fixed3 (specialist experts)"]
    h = f3["headroom"]
    return (
        "skill-routed k=3 (upstream defaults) vs the best fixed 3-expert ensemble (560 triples "
        "x 19 aggregators, tuned on validation), sklearn-digits test accuracy, specialist experts, "
        f"{n['specialist']} paired seeds: {ci(f3['name'])}; vs the best single expert "
        f"{ci('routed k=3 - best_single (specialist experts)')}; headroom: oracle routing "
        f"{h['ceiling']:.1f}%, {h['value']:+.1f} pts above the fixed triple (the paper's "
        f"+{PAPER_TARGET_PTS} {'fits' if f3['target_fits_headroom'] else 'does not fit'}); broad experts ({n['broad']} seeds) vs the fixed triple "
        f"{ci('routed k=3 - best_fixed3 (broad experts)')}; each expert loaded once "
        f"({sched['loads_batched']} vs {sched['loads_naive']} loads naive)"
    )


def main() -> None:
    args = _parser().parse_args()
    if args.table:
        print(render_table(json.loads(Path(args.table).read_text())))
        return
    pinned = ev.pin_threads(1)  # BLAS/OpenMP (threadpoolctl: numpy/sklearn already loaded), torch
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    t0 = time.time()
    cpu0 = time.process_time()
    # the headline regime is the paper's premise: specialists whose skills no fixed set of 3
    # covers (2 specialty classes each, 2% of the rest); "broad" experts (3 classes, 5% of the
    # rest) are the sensitivity check, reported beside it
    regimes = {"specialist": (2, 0.02), "broad": (3, 0.05)}
    n_seeds = {"specialist": 8 if args.quick else 30, "broad": 16 if args.quick else 30}
    arms = [
        "routed",
        "routed_majority",
        "routed_no_strength",
        "routed_distinct",
        "random_k3",
        "best_fixed3",
        "top3_by_val",
        "best_single",
        "routed_oracle",
        "oracle_any_expert",
        "routed_topk",
        "routed_routed_agg",
        "routed_topk_routed_agg",
        "routed_topk_oracle",
    ]
    baselines = (
        "best_fixed3",
        "top3_by_val",
        "best_single",
        "random_k3",
        "routed_no_strength",
        "routed_distinct",
        "routed_majority",
    )
    # the options against the fixed triple and against the headline (paired, same seeds)
    option_pairs = [
        (a, b)
        for a in ("routed_topk", "routed_routed_agg", "routed_topk_routed_agg")
        for b in ("best_fixed3", "routed")
    ] + [("routed_oracle", "best_fixed3"), ("routed_topk_oracle", "best_fixed3")]
    results = {}
    for regime, (n_spec, other) in regimes.items():
        runs = []
        for s in range(n_seeds[regime]):
            runs.append(routing_seed(s, n_spec=n_spec, other=other))
            r = runs[-1]
            if not args.quiet:  # progress per regime and seed
                print(
                    f"{regime} seed {s}: routed {r['routed']:.3f} fixed3 {r['best_fixed3']:.3f} "
                    f"single {r['best_single']:.3f} agg {r['aggregator']} ({time.time() - t0:.0f}s)",
                    file=sys.stderr,
                )
        summary = {a: mean_ci([r[a] for r in runs]) for a in arms}
        pairs = [("routed", b) for b in baselines] + option_pairs
        diffs = {f"{a}-{b}": mean_ci([r[a] - r[b] for r in runs]) for a, b in pairs}
        mdes = {f"{a}-{b}": mde([r[a] - r[b] for r in runs]) for a, b in pairs}
        results[regime] = dict(
            n_spec=n_spec,
            other=other,
            seeds=len(runs),
            summary={
                a: {"mean": round(m, 4), "ci95": round(c, 4)} for a, (m, c) in summary.items()
            },
            paired_differences={
                k: {"mean": round(m, 4), "ci95": round(c, 4), "mde80": round(mdes[k], 4)}
                for k, (m, c) in diffs.items()
            },
            runs=[{k: v for k, v in r.items() if k != "assignments_head"} for r in runs],
            assignments_head=runs[0]["assignments_head"],
        )
    head = results["specialist"]
    summary = {a: (v["mean"], v["ci95"]) for a, v in head["summary"].items()}
    diffs = {a: (v["mean"], v["ci95"]) for a, v in head["paired_differences"].items()}
    sched = scheduling(head.pop("assignments_head"), 12 if args.quick else 48)
    results["broad"].pop("assignments_head")
    if not args.quiet:
        print(f"scheduling: {sched}", file=sys.stderr)
    seconds = round(time.time() - t0, 1)
    cpu_seconds = round(time.process_time() - cpu0, 1)
    evid = evidence_of(results)
    ours = round(100 * summary["routed"][0], 2)
    base = round(100 * summary["best_fixed3"][0], 2)
    full = {
        "package": "skillmoe",
        "claim": claim_of(results, evid, sched),
        "paper": "+8.15 pts over the best multi-agent baseline (4 benchmarks); 16 LLMs on 1 GPU",
        "ours": ours,
        "baseline": base,
        "ratio": round(ours / base, 4),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "pinned_threads": pinned,
        "evidence": evid,
        "setup": dict(
            quick=args.quick,
            seeds={k: v for k, v in n_seeds.items()},
            data="sklearn digits, expert-train 40% / validation 30% / test 30% (stratified, per seed)",
            experts="16: LR, kNN, GaussianNB, tree, forest (cycled); specialist: 2 classes + 2% of others (headline); broad: 3 classes + 5%",
            annotator="k-means (30) on PCA(16), 5 samples of 2 clusters ~ softmax(-d^2/0.5), keep count >= 2",
            recruitment="official: k=3 with replacement, P ∝ r_m p_m, T=0.5",
            aggregator="chosen by the synthetic 1-correct/2-incorrect test on validation",
            options=(
                "labelled ablations, same seeds: recruit(mode='topk') (top-3 by relevance, ties "
                "by strength); aggregator chosen by select_aggregator on "
                "build_routed_aggregator_benchmark (validation teams routed with 2-fold "
                "cross-fitted profiles, same recruitment mode as the arm)"
            ),
            baselines="best single (val acc); best fixed 3 over 560 triples x 19 aggregators (val acc); top-3 by val acc + its best aggregator",
            scheduling="16 tiny LLaMA (2x64) on disk, greedy 4 tokens, CPU, 1 thread; times: min of 2 alternating reps",
        ),
        "routing": results,
        "scheduling": sched,
    }
    out = args.out or HERE / ("reproduce_quick.json" if args.quick else "reproduce.json")
    out.write_text(json.dumps(full, indent=1))
    print(
        json.dumps(
            {
                k: full[k]
                for k in (
                    "package", "claim", "paper", "ours", "baseline", "ratio", "seconds",
                    "evidence",
                )
            }
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
