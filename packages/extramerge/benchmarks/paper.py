"""Extra-Merge's experiment on public pre-training trajectories: Pythia checkpoints at ``stepN``.

The paper (Zhou et al., ICML 2026, arXiv 2605.26484) merges late pre-training checkpoints with a
moving average, finds that the merged trajectory M_k = (1/W) sum_{j=k-W+1..k} theta_j lies on an
approximately one-dimensional line (">94% of the optimization trajectory variance is captured by
a single linear component": EVR(PC1) = lambda_1 / sum(lambda) of the centred Gram matrix), and
extrapolates along it, theta_EM = M_K + alpha g (no gradient update), beating the standard merges
(SMA / EMA) on held-out loss for GPT-2 / LLaMA models of 124M-2B that the authors trained, and on
Pythia-12B zero-shot tasks (abstract; the paper's tables could not be read, so no number is
retrieved: ``target=None`` in the evidence).

This recipe needs forward passes only. It loads the public Pythia checkpoints of one size
(``GPTNeoXForCausalLM.from_pretrained(model, revision=f"step{N}")``; a local directory laid out
as ``<dir>/step{N}/`` takes the same ``from_pretrained`` call), saves each state dict to
``.safetensors`` and merges through the package (``merged_trajectory``, ``ema``,
``rank1_report``, ``extra_merge``), and reports

- EVR(PC1) of the merged trajectory vs the raw checkpoints over the same span;
- held-out language-modelling loss (nats/token) of the last checkpoint, the SMA M_K, the EMA
  (decay chosen on ``validation``) and Extra-Merge (``diff`` and ``pc1`` directions, alpha chosen
  by line search on ``validation``), all on ``test``;
- evidence paired per held-out text chunk (``--block`` tokens): Extra-Merge - EMA (headline),
  Extra-Merge (pc1) - EMA, Extra-Merge - SMA, Extra-Merge - last, SMA - last (lower is better).

Data: WikiText-103 (``Salesforce/wikitext``, config ``wikitext-103-raw-v1``, column ``text``,
splits ``validation`` / ``test``; dataset card), rows joined by blank lines, tokenised by the
model's tokenizer and cut into ``--block``-token chunks. The paper's held-out set is not known
(Pythia trained on the Pile, whose hub copy was withdrawn): WikiText is a reconstruction. A local
directory holding ``validation.jsonl`` / ``test.jsonl`` (one ``{"text": ...}`` per line) is read
by the same loader.

Reconstructions (no code, no readable experiment section): the revisions (Pythia saves every
1000 steps up to step143000; the last 24, step120000..step143000, stand for "late-stage"; note
Pythia's cosine schedule decays throughout, unlike the WSD stable phase the paper analyses), the
window W = 8, the EMA decay grid, the alpha grid (the package's ``DEFAULT_ALPHAS``), block 1024
and the data set. Default size pythia-160m (inside the paper's 124M-2B range); ``--model
EleutherAI/pythia-410m`` / ``-1.4b`` run the same protocol.

Hardware / cost (estimates, not measured): one GPU; the cost is the download (24 x 0.3 GB for
160m, 24 x 2.9 GB for 1.4b) and ~30 forward passes (24 on validation for the decay / alpha
choices, 5 on test) over ~0.25M tokens each: ~0.2 GPU-hours for 160m, ~1 GPU-hour for 1.4b. CPU
memory peaks at about (N + 3) x |theta| x 4 bytes for N revisions (the N - W + 1 merged
checkpoints, the SMA window and the arms; the raw-EVR pass runs first and is freed): ~17 GB for
160m, ~45 GB for 410m, ~150 GB for 1.4b (there pass fewer ``--steps``, e.g. the last 12 with
``--window 4``). Disk: the hub cache plus N float32 state dicts in ``--workdir`` (~16 GB for
160m, ~135 GB for 1.4b; a hub revision already there is reused). Pythia-12B's zero-shot
evaluation is not run by this recipe.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "model": "EleutherAI/pythia-160m",  # Pythia suite (GPT-NeoX); paper's sizes 124M-2B
    "sizes": ["EleutherAI/pythia-160m", "EleutherAI/pythia-410m", "EleutherAI/pythia-1.4b"],
    "revision_every": 1000,  # Pythia saves step0..step143000 every 1000 steps (model card)
    "steps": list(range(120000, 143001, 1000)),  # reconstruction: the last 24 checkpoints
    "window": 8,  # SMA window W, reconstruction
    "ema_decays": [0.5, 0.7, 0.8, 0.9, 0.95],  # EMA decay grid (chosen on validation), recon
    "alphas": [0.5, 1.0, 2.0, 4.0, 8.0, 16.0],  # line-search grid (package DEFAULT_ALPHAS)
    "directions": ["diff", "pc1"],
    "dataset": "Salesforce/wikitext",  # reconstruction (the paper's held-out set is unknown)
    "dataset_config": "wikitext-103-raw-v1",
    "select_split": "validation",
    "report_split": "test",
    "block": 1024,  # tokens per held-out chunk, reconstruction
    "metric": "held-out cross-entropy (nats/token) per chunk; EVR(PC1) of merged vs raw",
    "reported": "EVR(PC1) > 0.94 of the merged trajectory; Extra-Merge < SMA/EMA loss "
    "(abstract; no table number retrieved)",
    "evr_claim": 0.94,
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Extra-Merge on Pythia's stepN checkpoints: EVR(PC1) of the merged "
        "trajectory and held-out loss of last / SMA / EMA / Extra-Merge, paired per chunk."
    )
    p.add_argument(
        "--model",
        default=PAPER["model"],
        help="hub id with stepN revisions, or a local dir holding step{N}/ subdirs",
    )
    p.add_argument(
        "--steps",
        type=int,
        nargs="+",
        default=PAPER["steps"],
        help="checkpoint steps (revision step{N}), oldest first",
    )
    p.add_argument("--window", type=int, default=PAPER["window"], help="SMA window W")
    p.add_argument(
        "--ema-decays",
        type=float,
        nargs="+",
        default=PAPER["ema_decays"],
        help="EMA decay grid (chosen on the select split)",
    )
    p.add_argument(
        "--alphas",
        type=float,
        nargs="+",
        default=PAPER["alphas"],
        help="Extra-Merge line-search grid (alpha = 0, the merge itself, is always tried)",
    )
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="hub dataset id, or a local dir with <split>.jsonl files ({'text': ...} rows)",
    )
    p.add_argument(
        "--dataset-config", default=PAPER["dataset_config"], help="hub dataset config name"
    )
    p.add_argument(
        "--select-split", default=PAPER["select_split"], help="split for decay / alpha choice"
    )
    p.add_argument("--report-split", default=PAPER["report_split"], help="split reported")
    p.add_argument("--block", type=int, default=PAPER["block"], help="tokens per chunk")
    p.add_argument(
        "--n-chunks", type=int, default=0, help="chunks per split (0: all), drawn with the seeds"
    )
    p.add_argument("--batch-size", type=int, default=8, help="chunks per forward pass")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0],
        help="seeds of the chunk sample when --n-chunks > 0 (union of the draws); the "
        "protocol is otherwise deterministic",
    )
    p.add_argument("--device", default=None, help="torch device (default cuda if available)")
    p.add_argument(
        "--workdir",
        default=None,
        help="where state dicts (and the --smoke fixture, under smoke/) are written (default tmp)",
    )
    p.add_argument("--out", default="paper_extramerge.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: a tiny GPTNeoX saved as <workdir>/smoke/model/step{N}/ (8 revisions on a "
        "noisy line down to a briefly trained model), WikiText-schema rows as jsonl",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def revision_source(model: str, step: int) -> tuple[str, dict[str, Any]]:
    """(path_or_id, kwargs) for ``from_pretrained``: ``<dir>/step{N}`` locally, else the hub id
    with ``revision="step{N}"``."""
    if Path(model).is_dir():
        return str(Path(model) / f"step{step}"), {}
    return model, {"revision": f"step{step}"}


def load_revision(model: str, step: int):
    """GPTNeoXForCausalLM of one checkpoint (float32, eval mode): the one loading path."""
    import torch
    import transformers
    from transformers import GPTNeoXForCausalLM

    src, kw = revision_source(model, step)
    # transformers >= 4.56 names the argument dtype (5.x defaults to the checkpoint's dtype)
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    kw["dtype" if (major, minor) >= (4, 56) else "torch_dtype"] = torch.float32
    return GPTNeoXForCausalLM.from_pretrained(src, **kw).eval()


def load_tokenizer(model: str, step: int):
    from transformers import AutoTokenizer

    src, kw = revision_source(model, step)
    return AutoTokenizer.from_pretrained(src, **kw)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_texts(dataset: str, config: str | None, split: str) -> list[str]:
    """The ``text`` column of one split: a local ``<dir>/<split>.jsonl`` or the hub dataset."""
    path = Path(dataset)
    if path.is_dir():
        rows = read_jsonl(path / f"{split}.jsonl")
    else:
        try:
            from datasets import load_dataset
        except ImportError as exc:  # not a runtime dependency of the package
            raise ImportError(
                f"--dataset {dataset!r}: reading a hub dataset needs the 'datasets' package "
                "(uv run --with datasets ...), or pass a local dir of <split>.jsonl files"
            ) from exc
        rows = load_dataset(dataset, config, split=split)
    return [r["text"] for r in rows]


def chunk_tokens(tok, texts: list[str], block: int, n_chunks: int, seeds: list[int]):
    """Rows joined by blank lines, tokenised, cut into non-overlapping ``block``-token chunks;
    with ``n_chunks`` > 0 the union of ``n_chunks`` drawn per seed (sorted)."""
    import numpy as np
    import torch

    ids = tok("\n\n".join(t for t in texts), return_tensors=None)["input_ids"]
    n = len(ids) // block
    if n < 2:
        raise ValueError(f"only {len(ids)} tokens: fewer than two chunks of {block}")
    idx = list(range(n))
    if 0 < n_chunks < n:
        pick: set[int] = set()
        for s in seeds:
            pick |= set(np.random.default_rng(s).permutation(n)[:n_chunks].tolist())
        idx = sorted(pick)
    x = torch.tensor(ids[: n * block], dtype=torch.long).view(n, block)
    return x[idx]


def chunk_losses(model, chunks, batch_size: int, device) -> list[float]:
    """Mean next-token cross-entropy (nats/token) of each chunk."""
    import torch
    import torch.nn.functional as F

    out: list[float] = []
    with torch.no_grad():
        for i in range(0, len(chunks), batch_size):
            x = chunks[i : i + batch_size].to(device)
            logits = model(input_ids=x).logits[:, :-1].float()
            ce = F.cross_entropy(
                logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), reduction="none"
            )
            out += ce.view(x.size(0), -1).mean(-1).tolist()
    return out


SMOKE_WORDS = (
    "the river valley runs down to a sea of hills where merged checkpoints lie on one line "
    "and noisy steps oscillate"
).split()  # 20 words: a Markov chain over them is the smoke's language
SMOKE_T = [0.3 + 0.05 * (k + 1) for k in range(8)]  # position of revision k on init -> trained
SMOKE_NOISE = 0.008  # per-weight std of the off-river noise of each saved revision


def _smoke_rows(n: int, rng) -> list[dict[str, str]]:
    """WikiText-schema rows: every third one empty (WikiText has blank rows), the others 14
    words of a chain w_{i+1} = words[(3 i + r) mod 20], r in {0, 1} (learnable, entropy ln 2)."""
    import torch

    rows = []
    for j in range(n):
        if j % 3 == 2:
            rows.append({"text": ""})
            continue
        i = int(torch.randint(len(SMOKE_WORDS), (1,), generator=rng))
        seq = [i]
        for _ in range(13):
            seq.append(
                (3 * seq[-1] + int(torch.randint(2, (1,), generator=rng))) % len(SMOKE_WORDS)
            )
        rows.append({"text": " " + " ".join(SMOKE_WORDS[k] for k in seq) + " \n"})
    return rows


def write_smoke(root: Path, steps: list[int]) -> tuple[Path, Path]:
    """Offline stand-in for Pythia's ``stepN`` revisions and WikiText.

    ``root/data/{train,validation,test}.jsonl``: rows in WikiText's schema (column ``text``).
    ``root/model/step{N}/``: a tiny GPTNeoX (``save_pretrained``) with a word-level tokenizer.
    A random init theta_0 is trained briefly on the train rows (theta*); revision k is
    theta_0 + t_k (theta* - theta_0) + noise (t_k = SMOKE_T, noise std SMOKE_NOISE): a noisy walk
    down a straight river whose loss still falls past the last revision, so the rank-1 structure,
    the merges and the extrapolation all have something to find."""
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, PreTrainedTokenizerFast

    if len(steps) > len(SMOKE_T):
        raise ValueError(f"steps: the smoke fixture has {len(SMOKE_T)} revisions, got {len(steps)}")
    rng = torch.Generator().manual_seed(0)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    texts = {}
    for split, n in (("train", 384), ("validation", 36), ("test", 48)):
        rows = _smoke_rows(n, rng)
        texts[split] = [r["text"] for r in rows]
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    vocab = {"<unk>": 0, "<|endoftext|>": 1}
    for w in SMOKE_WORDS:
        vocab.setdefault(w, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", eos_token="<|endoftext|>"
    )
    cfg = GPTNeoXConfig(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(cfg)
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    x = chunk_tokens(tok, texts["train"], 16, 0, [0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    for _ in range(60):
        b = x[torch.randint(len(x), (32,), generator=rng)]
        logits = model(input_ids=b).logits[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), b[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    star = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for step, t in zip(steps, SMOKE_T):
        sd = {
            k: (
                v + t * (star[k] - v) + SMOKE_NOISE * torch.randn(v.shape, generator=rng)
                if v.is_floating_point()
                else v
            )
            for k, v in init.items()
        }
        model.load_state_dict(sd)
        model.save_pretrained(root / "model" / f"step{step}")
        tok.save_pretrained(root / "model" / f"step{step}")
    return root / "model", data


def _cache_name(model: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in model)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.window < 2:
        raise SystemExit(
            f"--window: need W >= 2 (a merge of one checkpoint is no merge), got {args.window}"
        )
    if args.block < 2 or args.batch_size < 1:
        raise SystemExit(
            f"--block >= 2 and --batch-size >= 1 needed, got {args.block}, {args.batch_size}"
        )
    import numpy as np
    import torch
    import transformers
    from icml26_extramerge import (
        ema,
        extra_merge,
        load_checkpoint,
        merged_trajectory,
        rank1_report,
        save_checkpoint,
    )
    from icml26_kernels.evidence import comparison, evidence, tuned

    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    if args.quiet:
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    tmp = tempfile.TemporaryDirectory()
    root = Path(args.workdir or tmp.name)
    if args.smoke:
        torch.set_num_threads(1)
        args.steps = [100 * (i + 1) for i in range(8)]
        model_dir, data_dir = write_smoke(root / "smoke", args.steps)
        args.model, args.dataset, args.dataset_config = str(model_dir), str(data_dir), None
        args.window, args.block, args.batch_size = 3, 16, 8
    if sorted(set(args.steps)) != list(args.steps):
        raise SystemExit(f"--steps: need increasing checkpoint steps, got {args.steps}")
    if len(args.steps) < args.window + 1:
        raise SystemExit(
            f"--steps: need more than --window ({args.window}) checkpoints, got {len(args.steps)}"
        )
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    local = Path(args.model).is_dir()
    work = root / "state_dicts" / _cache_name(args.model)
    work.mkdir(parents=True, exist_ok=True)

    # 1. every revision through from_pretrained, saved as .safetensors (streamed by the merges);
    #    hub revisions are immutable, so their cache is reused; a local dir is always re-read
    paths: list[str] = []
    model = None
    for step in args.steps:
        p = work / f"step{step}.safetensors"
        if local or not p.is_file() or model is None:
            m = load_revision(args.model, step)
            if local or not p.is_file():
                save_checkpoint(m.state_dict(), p)
            if model is None:
                model = m.to(device)
            del m
        paths.append(str(p))
        log(f"loaded step{step}")
    tok = load_tokenizer(args.model, args.steps[-1])
    splits = (args.select_split, args.report_split)
    chunks = {
        split: chunk_tokens(
            tok,
            load_texts(args.dataset, args.dataset_config, split),
            args.block,
            args.n_chunks,
            args.seeds,
        )
        for split in splits
    }

    def losses(sd, split):
        model.load_state_dict(sd)
        return chunk_losses(model, chunks[split], args.batch_size, device)

    def select_loss(sd):
        return float(np.mean(losses(sd, args.select_split)))

    # 2. rank-1 structure of the merged trajectory M_W..M_N vs the raw checkpoints of the same
    #    span (raw first: the two sets of |theta|-sized tensors are never held together)
    n_merged = len(paths) - args.window + 1
    raw_rep = rank1_report(paths[-n_merged:])
    traj = merged_trajectory(paths, args.window)
    rep = rank1_report(traj)
    log(
        f"EVR(PC1) merged {rep.explained_variance_ratio:.3f} "
        f"raw {raw_rep.explained_variance_ratio:.3f}"
    )

    # 3. arms; every hyper-parameter chosen on the select split
    decay_scores = [select_loss(ema(paths, d)) for d in args.ema_decays]
    best_decay = args.ema_decays[int(np.argmin(decay_scores))]
    arms = {
        "last": load_checkpoint(paths[-1]),
        "sma": traj[-1],
        "ema": ema(paths, best_decay),
    }
    tuning = [
        tuned(
            "ema",
            "decay",
            args.ema_decays,
            decay_scores,
            objective=f"mean {args.select_split} loss (nats/token)",
            higher_is_better=False,
            chosen=best_decay,
            hard_bound=_decay_bound(best_decay, args.ema_decays),
        )
    ]
    chosen: dict[str, float] = {"ema_decay": best_decay}
    for direction in PAPER["directions"]:
        res = extra_merge(traj, direction=direction, eval_fn=select_loss, alphas=args.alphas)
        arms[f"extra_merge_{direction}"] = res.state_dict
        chosen[f"alpha_{direction}"] = res.alpha
        grid = sorted(res.losses)
        tuning.append(
            tuned(
                f"extra_merge_{direction}",
                "alpha",
                grid,
                [res.losses[a] for a in grid],
                objective=f"mean {args.select_split} loss (nats/token)",
                higher_is_better=False,
                chosen=res.alpha,
                hard_bound=_alpha_bound(res.alpha, grid),
            )
        )
    select = {name: select_loss(sd) for name, sd in arms.items()}
    per = {name: losses(sd, args.report_split) for name, sd in arms.items()}
    for name, v in per.items():
        log(f"{name}: {args.report_split} loss {np.mean(v):.4f}")

    def comp(name, ours, base, statistic):
        d = [a - b for a, b in zip(per[ours], per[base])]
        return comparison(
            name,
            f"{args.report_split} loss (nats/token), {statistic}, paired per "
            f"{args.block}-token chunk",
            d,
            target=None,
            target_source="paper: abstract only (no table number retrieved)",
            headroom_note="no oracle (annealed) branch exists for Pythia's trajectory",
            unit="nats/token",
            higher_is_better=False,
        )

    comps = [
        comp("extra_merge_vs_ema", "extra_merge_diff", "ema", "Extra-Merge (diff) - EMA"),
        comp("extra_merge_pc1_vs_ema", "extra_merge_pc1", "ema", "Extra-Merge (pc1) - EMA"),
        comp("extra_merge_vs_sma", "extra_merge_diff", "sma", "Extra-Merge (diff) - SMA"),
        comp("extra_merge_vs_last", "extra_merge_diff", "last", "Extra-Merge (diff) - last"),
        comp("sma_vs_last", "sma", "last", "SMA - last checkpoint"),
    ]
    cfg = model.config
    results = {
        "revisions": [f"step{s}" for s in args.steps],
        "model_config": {
            "model_type": cfg.model_type,
            "hidden_size": cfg.hidden_size,
            "num_hidden_layers": cfg.num_hidden_layers,
            "vocab_size": cfg.vocab_size,
            "n_params": sum(p.numel() for p in model.parameters()),
        },
        "n_chunks": {k: len(v) for k, v in chunks.items()},
        "evr_merged": rep.explained_variance_ratio,
        "evr_raw": raw_rep.explained_variance_ratio,
        "eigenvalues_merged": rep.eigenvalues.tolist(),
        "eigenvalues_raw": raw_rep.eigenvalues.tolist(),
        "n_merged": len(traj),
        "chosen": chosen,
        "select_loss_mean": select,
        "loss_mean": {k: float(np.mean(v)) for k, v in per.items()},
        "loss_per_chunk": per,
    }
    hardware = {
        "device": str(device),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        hardware["gpu"] = torch.cuda.get_device_name(device)
    doc = {
        "recipe": "extramerge",
        "paper": PAPER,
        "config": vars(args),
        "smoke": bool(args.smoke),
        "hardware": hardware,
        "results": results,
        "evidence": evidence(comparisons=comps, tuning=tuning),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    tmp.cleanup()
    log(f"wrote {args.out}")
    return 0


def _alpha_bound(alpha: float, grid: list[float]) -> str | None:
    if alpha == min(grid):
        return "alpha = 0 is the merge itself; alpha < 0 steps back along the river"
    if alpha == max(grid):
        return f"top of the alpha grid ({alpha}) chosen: not extended; rerun with larger --alphas"
    return None


def _decay_bound(decay: float, grid: list[float]) -> str | None:
    if decay == min(grid):
        return f"lowest decay ({decay}) chosen: decay -> 0 is the last checkpoint (its own arm)"
    if decay == max(grid):
        return (
            f"top of the decay grid ({decay}) chosen: not extended; rerun with larger --ema-decays"
        )
    return None


if __name__ == "__main__":
    raise SystemExit(main())
