"""OnePO at small scale: SFT-free RL with transient, *imperfect* teacher guidance.

A tiny char-level decoder (2 layers, d = 64) is pretrained here on embedded English text, then
adapted by RL to string reversal of three digits ("472=" -> "274\\n": the digits reversed,
then EOS), where the pretrained model's pass@8 is 0. Reward: partial credit, the fraction of
the 4 answer positions (three digits, EOS) that match, so 1 only for the exact answer.

The teacher is beatable: on a fixed 40% of the 1000 problems (the same for every seed) its
first answer digit is wrong, so it scores 3/4 there and a student that learned to reverse beats
it. A persistent teacher keeps pulling the policy toward those wrong digits (the anchoring that
the paper's Teacher Retirement is for); a retired one does not.

Per seed, 200 of the 1000 strings are held out of RL; greedy accuracy is reported on them
(never an RL prompt), with the RL problems' accuracy split by whether the teacher is wrong
there. Arms, equal RL steps (rollout batches), paired seeds
(same pretrained model, same prompt stream, same split per seed):

- ``grpo``: pure GRPO (verl's dual-clip PPO loss, GRPO advantages), no teacher;
- ``sft_grpo``: SFT on the teacher's answers for the first quarter of the steps, then GRPO;
- ``naive``: the teacher replaces a random group member at every step, plain PPO loss;
- ``luffy``: same injection, LUFFY-style policy shaping on teacher tokens, -A·π/(π+0.1), unclipped;
- ``retire_only``: Teacher Retirement with the plain PPO loss (OnePO minus Adaptive Objective
  Evolution);
- ``aoe_only``: persistent teacher with the OnePO loss (OnePO minus Teacher Retirement);
- ``onepo``: Teacher Retirement + Adaptive Objective Evolution (`icml26_onepo`), the paper's
  constants (floor 0.1, clip 0.2 / 0.28, c = 10, token-mean).

Each step: 8 prompts x 8 rollouts (temperature 1), old log-probs once, then 8 mini-batch updates
of 8 rows (OnePO.sh: 128 x 8 rollouts in mini-batches of 16 prompts, 8 updates per rollout), so
a teacher token with tiny p_old is clipped by plain PPO once its ratio passes 1.28 while OnePO
clips it only at π = 0.128. Logged: the fraction of low-support (p_old < 0.1, A > 0) teacher
tokens whose gradient is clipped to zero at update time (``teacher_low_clipped``). Reported:
held-out greedy accuracy vs steps, pass@k (k = 1, 2, 4, 8; 8 samples at T = 1), greedy accuracy
on the RL problems split by whether the teacher is wrong there, the retirement-rate curve of
the OnePO arm, and paired-seed differences with 95% t-intervals and the minimum detectable
effect ((t_{0.975,n-1} + t_{0.8,n-1}) · paired SD / sqrt(seeds)), all from
``icml26_kernels.evidence``; the row's ``evidence`` object records each printed comparison with
its headroom (the metric maximum 1.0 minus the compared arm's accuracy).

The rollout loop is this file's own (batched sampling of a 4-token answer with a tiny model);
TRL's generation loop is built for HF models and would dominate the CPU budget, and the DAPO
filter / overlong penalty of `OnePOGRPOTrainer` are not used here (answers have a fixed
length, and the filter would change the number of generated batches per arm). The loss and
groups are the package's: `onepo_policy_loss`, `ppo_per_token_loss`, `grpo_advantages`,
`inject_teacher`.

    python benchmarks/reproduce.py --quick     # 3 seeds x 5 arms x 100 steps (CPU ~100 s)
    python benchmarks/reproduce.py             # 10 seeds x 7 arms x 100 steps (CPU ~7 min)
    python benchmarks/reproduce.py --row-from benchmarks/reproduce_quick.json   # no training:
        # resummarise a stored run (statistics, evidence) and rewrite its row
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--quick", action="store_true", help="3 seeds x 5 arms x 100 steps (CPU ~100 s)"
    )
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10; quick 3)")
    ap.add_argument("--seed0", type=int, default=0, help="first seed (to extend a run)")
    ap.add_argument("--steps", type=int, default=None, help="RL steps per run (default 100)")
    ap.add_argument(
        "--arms",
        default=None,
        help="comma list, a subset of grpo, sft_grpo, naive, luffy, retire_only, aoe_only, onepo",
    )
    ap.add_argument("--tag", default=None, help="write reproduce_<tag>.json")
    ap.add_argument(
        "--row-from",
        type=Path,
        default=None,
        help="no training: resummarise a stored run JSON in place (statistics and evidence) and, "
        "for the --quick JSON, rewrite benchmarks/reproduce_row.json keeping its provenance",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the JSON here (default: benchmarks/reproduce[_quick|_<tag>].json)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import numpy as np
import torch
import torch.nn.functional as F
from icml26_kernels.evidence import comparison, evidence, headroom, mde, pin_threads, t_interval
from icml26_onepo import grpo_advantages, inject_teacher, onepo_policy_loss, ppo_per_token_loss
from icml26_onepo.loss import aggregate_loss
from torch import nn

HERE = Path(__file__).resolve().parent

TEXT = """\
Sonnet 18. Shall I compare thee to a summer's day? Thou art more lovely and more temperate:
rough winds do shake the darling buds of May, and summer's lease hath all too short a date.
Sometime too hot the eye of heaven shines, and often is his gold complexion dimm'd;
and every fair from fair sometime declines, by chance or nature's changing course untrimm'd.
Sonnet 29. When, in disgrace with fortune and men's eyes, I all alone beweep my outcast state,
and trouble deaf heaven with my bootless cries, and look upon myself and curse my fate.
Sonnet 116. Let me not to the marriage of true minds admit impediments. Love is not love
which alters when it alteration finds, or bends with the remover to remove.
In 1609 the sonnets were printed, 154 of them, in a small quarto of 80 leaves.
The clock struck 12 and then 1; the year was 1599 and the Globe stood on the bank of the river.
There were 3 witches, 2 kings and 1 fool; act 4, scene 2, line 15 of the play.
To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer
the slings and arrows of outrageous fortune, or to take arms against a sea of troubles,
and by opposing end them. To die: to sleep; no more; and by a sleep to say we end
the heart-ache and the 1000 natural shocks that flesh is heir to.
All the world's a stage, and all the men and women merely players; they have their exits
and their entrances, and one man in his time plays many parts, his acts being 7 ages.
Now is the winter of our discontent made glorious summer by this sun of York.
Friends, Romans, countrymen, lend me your ears; I come to bury Caesar, not to praise him.
The quality of mercy is not strain'd; it droppeth as the gentle rain from heaven.
Tomorrow, and tomorrow, and tomorrow, creeps in this petty pace from day to day.
If music be the food of love, play on; give me excess of it, that, surfeiting,
the appetite may sicken, and so die. That strain again! it had a dying fall.
Page 42, chapter 9: he counted 36 sheep, 25 goats and 17 geese before the 8 bells rang.
"""
DIGITS = "0123456789"
EOS = "\n"
CHARS = sorted(set(TEXT) | set(DIGITS) | {"+", "="})
STOI = {c: i for i, c in enumerate(CHARS)}
V = len(CHARS)
PROMPT_LEN, ANS_LEN = 4, 4  # "472=" and "274\n"
CTX = 32


def encode(s: str) -> list[int]:
    return [STOI[c] for c in s]


def problem(x: str) -> tuple[str, str]:
    """A 3-digit string -> (prompt, gold answer): "472" -> ("472=", "274\\n")."""
    return x + "=", x[::-1] + EOS


class Block(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D/H)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, d: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, d), nn.Embedding(CTX, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, V, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def pretrain(seed: int, steps: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    model = TinyGPT()
    data = torch.tensor(encode(TEXT))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, len(data) - CTX - 1, (32,), generator=g)
        x = torch.stack([data[s : s + CTX] for s in start])
        y = torch.stack([data[s + 1 : s + CTX + 1] for s in start])
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.clone() for k, v in model.state_dict().items()}


def answer_logp(model: TinyGPT, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """(B, P), (B, A) -> (B, A) log π(answer token | prefix)."""
    seq = torch.cat([prompts, answers], 1)
    logits = model(seq[:, :-1])[:, PROMPT_LEN - 1 :]  # predicts answer tokens
    return torch.log_softmax(logits, -1).gather(-1, answers[..., None])[..., 0]


@torch.no_grad()
def sample(model: TinyGPT, prompts: torch.Tensor, greedy: bool, g: torch.Generator) -> torch.Tensor:
    seq = prompts
    for _ in range(ANS_LEN):
        logits = model(seq)[:, -1]
        nxt = (
            logits.argmax(-1)
            if greedy
            else torch.multinomial(torch.softmax(logits, -1), 1, generator=g)[:, 0]
        )
        seq = torch.cat([seq, nxt[:, None]], 1)
    return seq[:, PROMPT_LEN:]


EOS_ID = STOI[EOS]


def response_mask(ans: torch.Tensor) -> torch.Tensor:
    """Tokens up to and including the first EOS."""
    is_eos = ans == EOS_ID
    before = torch.cumsum(is_eos.int(), 1) - is_eos.int()  # EOS seen strictly before
    return before == 0


def reward(ans: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """(correct digits in the 3 positions + EOS at position 4) / 4; 1 only for the exact answer."""
    return (ans == gold).float().mean(-1)


PROBLEMS = [f"{i:03d}" for i in range(1000)]
N_HELD_OUT = 200  # evaluation-only strings, per seed
NOISE_FRACTION = 0.4


def make_split(seed: int) -> tuple[list[str], list[str]]:
    """RL problems and held-out problems: a per-seed draw of 200 of the 1000 digit strings is
    evaluation-only (never an RL prompt); the other 800 are the RL prompts."""
    held = set(np.random.default_rng(10_000 + seed).choice(len(PROBLEMS), N_HELD_OUT, False))
    train = [x for i, x in enumerate(PROBLEMS) if i not in held]
    test = [x for i, x in enumerate(PROBLEMS) if i in held]
    return train, test


def noisy_problems() -> dict[str, str]:
    """A fixed 40% of the 1000 problems (the same for every seed) -> the teacher's wrong first
    answer digit there (never the right one)."""
    rng = np.random.default_rng(2026)
    picked = rng.choice(len(PROBLEMS), int(NOISE_FRACTION * len(PROBLEMS)), replace=False)
    shift = rng.integers(1, 10, size=len(picked))  # 1..9: a wrong digit
    return {
        PROBLEMS[int(i)]: str((int(PROBLEMS[int(i)][-1]) + int(k)) % 10)
        for i, k in zip(picked, shift, strict=True)
    }


NOISY = noisy_problems()


def teacher_answer(x: str) -> str:
    """The teacher's answer: gold, except the first answer digit on the fixed noisy 40%."""
    gold = problem(x)[1]
    return NOISY[x] + gold[1:] if x in NOISY else gold


def tensors(xs: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    ps, ans = zip(*(problem(x) for x in xs), strict=True)
    return torch.tensor([encode(p) for p in ps]), torch.tensor([encode(a) for a in ans])


def teacher_tensor(xs: list[str]) -> torch.Tensor:
    return torch.tensor([encode(teacher_answer(x)) for x in xs])


@torch.no_grad()
def greedy_accuracy(model: TinyGPT, test: tuple[torch.Tensor, torch.Tensor]) -> float:
    prompts, gold = test
    greedy = sample(model, prompts, True, torch.Generator().manual_seed(0))
    return float((greedy == gold).all(-1).float().mean())


@torch.no_grad()
def evaluate(
    model: TinyGPT, test: tuple[torch.Tensor, torch.Tensor], seed: int
) -> dict[str, float]:
    prompts, gold = test
    acc = greedy_accuracy(model, test)
    g = torch.Generator().manual_seed(seed)
    n = 8
    correct = torch.stack(
        [(sample(model, prompts, False, g) == gold).all(-1) for _ in range(n)], 1
    ).sum(1)  # (N,)
    out = {"greedy_acc": acc}
    for k in (1, 2, 4, 8):
        est = [1.0 - math.comb(n - int(c), k) / math.comb(n, k) for c in correct]
        out[f"pass@{k}"] = float(np.mean(est))
    return out


def luffy_loss(old, logp, adv, resp, teacher, gamma=0.1):  # type: ignore[no-untyped-def]
    """LUFFY policy shaping on teacher tokens (-A·π/(π+γ), no clip); dual-clip PPO on the rest."""
    ppo, *_ = ppo_per_token_loss(old, logp, adv)
    p = torch.exp(logp)
    shaped = -adv * p / (p + gamma)
    return aggregate_loss(torch.where(teacher, shaped, ppo), resp)


TEACHER_ARMS = ("naive", "luffy", "retire_only", "aoe_only", "onepo")
RETIRING = ("onepo", "retire_only")
ONEPO_LOSS = ("onepo", "aoe_only")


def run_arm(arm: str, seed: int, init: dict, cfg: dict, train, test) -> dict:  # type: ignore[no-untyped-def]
    torch.manual_seed(seed)
    model = TinyGPT()
    model.load_state_dict(init)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=0.0)
    P, n, K, steps = cfg["prompts"], cfg["n"], cfg["minibatches"], cfg["steps"]
    floor, clip_high = 0.1, 0.28
    sft_steps = steps // 4 if arm == "sft_grpo" else 0
    data_rng = np.random.default_rng(seed)  # same prompt stream for every arm of a seed
    g = torch.Generator().manual_seed(seed)
    curve, retire = [], []
    low_tokens = low_clipped = 0
    for step in range(steps):
        idx = data_rng.choice(len(train), P, replace=False)
        xs = [train[i] for i in idx]
        prompts, gold = tensors(xs)  # (P, 4), (P, 4)
        teach = teacher_tensor(xs)  # (P, 4)
        if step % cfg["eval_every"] == 0:
            curve.append((step, greedy_accuracy(model, test)))
        if step < sft_steps:  # SFT on the teacher's answers, K updates
            for mb in torch.arange(P).chunk(K):
                loss = -answer_logp(model, prompts[mb], teach[mb]).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            continue
        rp, rg = prompts.repeat_interleave(n, 0), gold.repeat_interleave(n, 0)  # (B, ·)
        rt = teach.repeat_interleave(n, 0)  # (B, A)
        ans = sample(model, rp, False, g)  # (B, A)
        r = reward(ans, rg)
        teacher_rows = torch.zeros(P * n, dtype=torch.bool)
        if arm in TEACHER_ARMS:
            t_reward = reward(teach, gold)  # 1 or 3/4: scored by the same reward
            if arm in RETIRING:
                res = inject_teacher(r, t_reward, n, seed=seed * 100_003 + step)
                retire.append(res.retirement_rate)
                rows = [x for x in res.rows if x >= 0]
                r = res.rewards
            else:  # persistent teacher: always injected (own RNG: the prompt stream stays paired)
                row_rng = np.random.default_rng(seed * 100_003 + step)
                rows = [int(row_rng.integers(gi * n, gi * n + n)) for gi in range(P)]
                r = r.clone()
                r[rows] = t_reward[[x // n for x in rows]]
            teacher_rows[rows] = True
            ans = ans.clone()
            ans[rows] = rt[rows]
        adv = grpo_advantages(r, n)
        resp = response_mask(ans)
        teacher = resp & teacher_rows[:, None]
        with torch.no_grad():
            old = answer_logp(model, rp, ans)
        perm = torch.randperm(P * n, generator=g)
        for mb in perm.chunk(K):
            logp = answer_logp(model, rp[mb], ans[mb])
            with torch.no_grad():  # low-support teacher tokens whose gradient is clipped to 0
                low = teacher[mb] & (old[mb].exp() < floor) & (adv[mb] > 0)[:, None]
                if arm in ONEPO_LOSS:  # absolute trust region: π > f(1 + ε_high)
                    clipped = logp.exp() > floor * (1 + clip_high)
                elif arm == "luffy":  # unclipped shaping
                    clipped = torch.zeros_like(low)
                else:  # plain PPO: ratio > 1 + ε_high
                    clipped = (logp - old[mb]).exp() > 1 + clip_high
                low_tokens += int(low.sum())
                low_clipped += int((low & clipped).sum())
            if arm in ONEPO_LOSS:
                loss, _ = onepo_policy_loss(old[mb], logp, adv[mb], resp[mb], teacher[mb])
            elif arm == "luffy":
                loss = luffy_loss(
                    old[mb], logp, adv[mb][:, None].expand_as(logp), resp[mb], teacher[mb]
                )
            else:
                loss, _ = onepo_policy_loss(old[mb], logp, adv[mb], resp[mb], None)
            opt.zero_grad()
            loss.backward()
            opt.step()
    final = evaluate(model, test, seed)
    noisy = [p for p in train if p in NOISY]
    clean = [p for p in train if p not in NOISY]
    final["train_acc_teacher_wrong"] = greedy_accuracy(model, tensors(noisy))
    final["train_acc_teacher_right"] = greedy_accuracy(model, tensors(clean))
    curve.append((steps, final["greedy_acc"]))
    final["auc"] = float(np.mean([acc for _, acc in curve]))  # mean held-out acc over the run
    return {
        "curve": curve,
        "final": final,
        "retirement": retire,
        "teacher_low_tokens": low_tokens,
        "teacher_low_clipped": low_clipped / low_tokens if low_tokens else None,
    }


def ci95(x: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval over seeds (a single seed: its value, no interval)."""
    a = np.asarray(x, dtype=np.float64)
    if len(a) < 2:
        m = float(a.mean())
        return m, m, m
    return t_interval(a)


ARMS = ("grpo", "sft_grpo", "naive", "luffy", "retire_only", "aoe_only", "onepo")
QUICK_ARMS = ("grpo", "sft_grpo", "naive", "retire_only", "onepo")


def paired(a: list[dict], b: list[dict], key: str = "greedy_acc") -> dict[str, float]:
    """OnePO − arm over paired seeds: mean, 95% t-interval, SD, MDE (80% power, 5% level)."""
    d = [x["final"][key] - y["final"][key] for x, y in zip(a, b, strict=True)]
    m, lo, hi = ci95(d)
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else float("nan")
    return {"mean": m, "lo": lo, "hi": hi, "sd": sd, "mde": mde(sd, len(d)) if len(d) > 1 else sd}


# the paper's effect over SFT+RL: HealthBench 67.2 vs 64.5, +2.7 points = +0.027 as a fraction
PAPER_TARGETS: dict[str, tuple[float | None, str]] = {
    "sft_grpo": (
        0.027,
        "paper: HealthBench 67.2 vs SFT+RL 64.5, +2.7 points (0.027 as a fraction)",
    ),
    "grpo": (0.074, "paper: HealthBench 67.2 vs pure RL 59.8, +7.4 points (0.074 as a fraction)"),
}


def summarise(runs: dict[str, list[dict]], arms: list[str]) -> dict:
    """Every statistic of a run from its per-seed results (the same code for a fresh run and
    for ``--row-from``): per-arm summaries, paired OnePO − arm differences, the evidence."""
    summary: dict[str, dict] = {}
    for arm in arms:
        finals = [r["final"] for r in runs[arm]]
        summary[arm] = {k: ci95([f[k] for f in finals]) for k in finals[0]}
        curves = np.array([[acc for _, acc in r["curve"]] for r in runs[arm]])
        summary[arm]["curve_steps"] = [s for s, _ in runs[arm][0]["curve"]]
        summary[arm]["curve_mean"] = curves.mean(0).round(4).tolist()
        clipped = [
            r["teacher_low_clipped"] for r in runs[arm] if r["teacher_low_clipped"] is not None
        ]
        summary[arm]["teacher_low_clipped"] = float(np.mean(clipped)) if clipped else None
    out: dict = {"summary": summary}
    if "onepo" in runs and runs["onepo"][0]["retirement"]:
        rates = np.array([r["retirement"] for r in runs["onepo"]])
        out["retirement_curve_mean"] = rates.mean(0).round(4).tolist()
    if "onepo" not in arms:
        return out
    others = [o for o in arms if o != "onepo"]
    out["paired_diff_onepo_minus"] = {o: paired(runs["onepo"], runs[o]) for o in others}
    for key in ("auc", "train_acc_teacher_wrong"):
        out[f"paired_diff_onepo_minus_{key}"] = {
            o: paired(runs["onepo"], runs[o], key) for o in others
        }
    if len(runs["onepo"]) > 1:
        comps = []
        for o in others:
            target, source = PAPER_TARGETS.get(o, (None, f"paper gives no number for {o}"))
            comps.append(
                comparison(
                    f"onepo - {o}",
                    "held-out greedy exact-match accuracy, OnePO - arm, paired over seeds",
                    [
                        x["final"]["greedy_acc"] - y["final"]["greedy_acc"]
                        for x, y in zip(runs["onepo"], runs[o], strict=True)
                    ],
                    target=target,
                    target_source=source,
                    headroom=headroom(
                        1.0,
                        float(summary[o]["greedy_acc"][0]),
                        f"metric maximum 1.0 (exact match) minus {o}'s mean held-out accuracy",
                    ),
                    unit="fraction",
                )
            )
        out["evidence"] = evidence(comps)  # nothing tuned: one lr for every arm, fixed once
    return out


def main() -> None:
    args = _parser().parse_args()
    if args.row_from is not None:
        row_from(args.row_from)
        return
    threads = pin_threads(1)  # tiny matmuls; workers and BLAS inherit the pinning
    t0 = time.perf_counter()
    c0 = time.process_time()
    cfg = dict(
        prompts=8,
        n=8,
        minibatches=8,
        lr=2e-3,
        steps=args.steps or 100,
        eval_every=10,
        pretrain_steps=300,
        noise_fraction=NOISE_FRACTION,
        held_out_problems=N_HELD_OUT,
    )
    n_seeds = args.seeds or (3 if args.quick else 10)
    arms = (args.arms or ",".join(QUICK_ARMS if args.quick else ARMS)).split(",")
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise SystemExit(f"unknown arms {bad}; choose from {ARMS}")
    init = pretrain(0, cfg["pretrain_steps"])  # one pretrained model, shared by all arms and seeds
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    base = None
    seeds = list(range(args.seed0, args.seed0 + n_seeds))
    for seed in seeds:
        train, test_pairs = make_split(seed)
        test = tensors(test_pairs)
        if base is None:
            m = TinyGPT()
            m.load_state_dict(init)
            base = evaluate(m, test, 0)
        for arm in arms:
            runs[arm].append(run_arm(arm, seed, init, cfg, train, test))
            if not args.quiet:  # progress per arm and seed
                print(
                    arm,
                    seed,
                    {k: round(v, 3) for k, v in runs[arm][-1]["final"].items()},
                    runs[arm][-1]["teacher_low_clipped"],
                    f"{time.perf_counter() - t0:.1f}s",
                    file=sys.stderr,
                )
    full: dict = {
        "config": cfg,
        "seeds": n_seeds,
        "seed_list": seeds,
        "base_model": base,
        "noisy_problems": len(NOISY),
        "threads": threads,
        "runs": runs,
        **summarise(runs, arms),
    }
    seconds = time.perf_counter() - t0
    full["seconds"] = seconds
    full["cpu_seconds"] = time.process_time() - c0
    name = (
        f"reproduce_{args.tag}" if args.tag else ("reproduce_quick" if args.quick else "reproduce")
    )
    out = args.out or HERE / f"{name}.json"
    out.write_text(json.dumps(full, indent=1))
    row = headline_row(full)
    if row is not None:
        print(json.dumps(row))


def fd(c: dict) -> str:
    """A comparison as the claim prints it: diff [95% CI], and "unresolved" where it is."""
    lo, hi = c["ci95"]
    text = f"{c['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
    if not c["resolved"] or (c["seeds_for_target"] or 0) > c["n"]:
        text += " unresolved"
    return text


def headline_row(full: dict) -> dict | None:
    """The REPRODUCTION.md row of a run (None unless it ran the quick arms)."""
    summary = full["summary"]
    needed = ("grpo", "sft_grpo", "naive", "retire_only", "onepo")
    if not all(a in summary for a in needed) or "evidence" not in full:
        return None

    def acc(arm: str) -> float:
        return float(summary[arm]["greedy_acc"][0])

    comps = {c["name"].removeprefix("onepo - "): c for c in full["evidence"]["comparisons"]}
    ours = acc("onepo")
    best = max((a for a in summary if a != "onepo"), key=acc)
    baseline = acc(best)
    cb = comps[best]
    room_text = f"headroom 1 - {best} = {cb['headroom']['value']:.3f}"
    if cb["target"] is not None and not cb["target_fits_headroom"]:
        room_text += (
            f" < the paper's +{cb['target']:.3f}: this comparison cannot show the paper's effect"
        )
    shown = [best] + [a for a in ("naive", "retire_only") if a != best]
    diffs = ", ".join(f"OnePO - {a} {fd(comps[a])}" for a in shown)
    return {
        "package": "onepo",
        "claim": (
            "OnePO vs the strongest other arm at equal RL steps, held-out greedy exact-match "
            "accuracy on 200 unseen 3-digit reversal problems, tiny text-pretrained decoder "
            f"(base pass@8 {full['base_model']['pass@8']:.2f}), teacher wrong on a fixed 40% of "
            f"problems; {diffs} over {full['seeds']} paired seeds (95% t-intervals); "
            f"{room_text}; SFT->GRPO {acc('sft_grpo'):.3f}, pure GRPO {acc('grpo'):.3f}"
        ),
        "paper": "HealthBench 67.2 vs SFT+RL 64.5 (+2.7) and pure RL 59.8 (+7.4)",
        "ours": round(ours, 4),
        "baseline": round(baseline, 4),
        "ratio": round(ours / baseline, 4) if baseline > 0 else None,
        "pure_rl": round(acc("grpo"), 4),
        "seconds": round(full["seconds"], 1),
        "evidence": full["evidence"],
    }


def row_from(path: Path) -> None:
    """Resummarise a stored run without training: its statistics and evidence are recomputed
    from the per-seed results in place; the --quick JSON's row is rewritten, keeping the
    original run's machine, time and seconds (the same run, resummarised)."""
    path = path.resolve()
    full = json.loads(path.read_text())
    for key in [k for k in full if k.startswith("paired_diff_onepo_minus")]:
        del full[key]
    full.update(summarise(full["runs"], list(full["runs"])))
    path.write_text(json.dumps(full, indent=1))
    row = headline_row(full)
    if row is None or path.name != "reproduce_quick.json":
        return
    root = HERE.parents[2]
    sys.path.insert(0, str(root / "tools"))
    from reproduce_table import write_row

    old_path = HERE / "reproduce_row.json"
    old = json.loads(old_path.read_text()) if old_path.exists() else {}
    for key in ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start"):
        if key in old:
            row[key] = old[key]
    print(json.dumps(row))
    write_row(root, row)


if __name__ == "__main__":
    main()
