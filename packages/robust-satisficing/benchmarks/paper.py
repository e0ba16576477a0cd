"""IRS's spurious-correlation experiment: an ImageNet-pretrained ResNet-50 fine-tuned on
Waterbirds with ERM and with Iterative Robust Satisficing through `IRSTrainer`; worst-group and
average test accuracy.

The paper (ICML 2026 poster 64578; official code Bilkent-CYBORG/IRS, waterbirds.ipynb) trains
to a target in-distribution loss τ while minimising fragility κ over group reweightings: per
batch the Danskin loss (p*·L)/KL(p*‖π), π the training group frequencies, one forward and one
backward pass. It reports that IRS "consistently improves performance on minority and
worst-case groups without sacrificing overall accuracy" (abstract); no Waterbirds number could
be read (the notebooks carry no outputs). Anchors from the literature: ERM 74.9% worst-group /
98.1% average, GroupDRO ≈ 91% worst-group.

Data: Waterbirds as released with group_DRO / WILDS (``waterbird_complete95_forest2water2``:
``metadata.csv`` with img_id, img_filename, y, split (0 train, 1 val, 2 test), place; groups
g = 2·y + place: landbird/land, landbird/water, waterbird/land, waterbird/water, train counts
[3498, 184, 56, 1057]), a ``.jsonl`` with the same columns, or a hub id through
``datasets.load_dataset`` with columns image, y, place and splits train / validation / test (a
mirror's column names could not be checked offline: rename to these). Images: resize 256x256,
centre crop 224, ImageNet normalisation (group_DRO's eval transform).

Per seed and arm (``erm``, ``irs``; ``groupdro`` with the official η = 0.01 on request): the same
init of the head, the same batch order; Adam (coupled weight decay, as torch.optim.Adam),
cosine schedule; IRS after 4 warm-up epochs of plain cross-entropy (official schedule). ERM is
tuned: its learning rate over ``--erm-lrs`` (1e-5, 1e-4, 1e-3), chosen by the mean over seeds of
the validation worst-group accuracy, the grid extended by 10x steps past an edge optimum (up to
``--erm-extend`` 2 times); IRS keeps the official constants. Every epoch the
validation and test per-group accuracies are measured; each run is reported at its epoch with
the best validation worst-group accuracy (never chosen on test). Written: per-group accuracies,
worst-group, average (weighted by the training group proportions), the selected epoch's
predictions (so both can be recomputed), IRS's κ and per-step τ = max(1.01·π·L, 0.1) log, the
ERM grid, and the paired IRS - tuned ERM differences over seeds.

Hardware / cost: one GPU. Waterbirds is 4,795 training images: 50 epochs of ResNet-50 plus the
per-epoch val/test passes take ~10 minutes on an H100, so (3-5 ERM learning rates + IRS) x 3
seeds = 12-18 runs ≈ 2-3 H100-hours [estimate] (+0.5 with GroupDRO); decoding the 11,788 JPEGs
once takes a few CPU-minutes.

Known (official code): ResNet-50, batch 256, 50 epochs, lr 1e-5, target τ 0.1, τ multiplier
1.01, 4 warm-up epochs, Adam with weight decay 1e-4, cosine schedule, the h search (64 points in
[1e-3, 50], 3 refinements; h in units of 1/(max L - min L), the package default, where the
official code uses absolute h), the prior.
Reconstructions: the checkpoint ``microsoft/resnet-50`` (ImageNet-1k), no augmentation,
validation worst-group model selection, 3 seeds, ERM's learning-rate grid, the average-accuracy
definition (the anchors').
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "model": "microsoft/resnet-50",  # reconstruction: the ImageNet-pretrained ResNet-50
    "dataset": "waterbird_complete95_forest2water2",  # group_DRO / WILDS release (a local dir)
    "n_groups": 4,
    "train_group_counts": [3498, 184, 56, 1057],
    "batch_size": 256,  # official (Waterbirds)
    "epochs": 50,
    "learning_rate": 1e-5,
    "weight_decay": 1e-4,
    "lr_scheduler": "cosine",
    "warmup_epochs": 4,  # official: plain CE before IRS
    "target_tau": 0.1,
    "tau_multiplier": 1.01,
    "h_range": [1e-3, 50.0],  # official _maximize_along_curve: 64 log-spaced h, 3 x 25 refinement
    "h_grid": 64,
    "h_refine": 3,
    "groupdro_step_size": 0.01,  # IRS's copy of GroupDRO
    "resize": 256,  # group_DRO's transform
    "crop": 224,
    "seeds": [0, 1, 2],
    "arms": ["erm", "irs"],
    "erm_lr_grid": [1e-5, 1e-4, 1e-3],  # reconstruction: "tuned ERM" (IRS's lr is the low edge)
    "erm_lr_extend": 2,  # reconstruction: up to 2 more 10x points past an edge optimum
    "anchor_erm_worst_group": 74.9,
    "anchor_erm_average": 98.1,
    "anchor_groupdro_worst_group": 91.0,
}
ARMS = ("erm", "irs", "groupdro")
SPLITS = {"train": 0, "val": 1, "test": 2}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="IRS's spurious-correlation experiment: a pretrained ResNet-50 on Waterbirds "
        "through IRSTrainer vs ERM; worst-group and average accuracy."
    )
    p.add_argument("--model", default=PAPER["model"], help="hub id or local dir of the backbone")
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="Waterbirds: a dir with metadata.csv (group_DRO layout), a .jsonl of its rows, or a hub id",
    )
    p.add_argument("--epochs", type=float, default=PAPER["epochs"], help="training epochs")
    p.add_argument("--batch-size", type=int, default=PAPER["batch_size"], help="images per step")
    p.add_argument("--lr", type=float, default=PAPER["learning_rate"], help="Adam learning rate")
    p.add_argument(
        "--weight-decay", type=float, default=PAPER["weight_decay"], help="Adam weight decay"
    )
    p.add_argument(
        "--warmup-epochs",
        type=float,
        default=PAPER["warmup_epochs"],
        help="plain cross-entropy epochs before IRS",
    )
    p.add_argument("--target-tau", type=float, default=PAPER["target_tau"], help="IRS target τ")
    p.add_argument(
        "--tau-multiplier", type=float, default=PAPER["tau_multiplier"], help="τ = max(m·π·L, τ0)"
    )
    p.add_argument(
        "--groupdro-step-size",
        type=float,
        default=PAPER["groupdro_step_size"],
        help="GroupDRO η",
    )
    p.add_argument("--resize", type=int, default=PAPER["resize"], help="resize side (pixels)")
    p.add_argument("--crop", type=int, default=PAPER["crop"], help="centre-crop side (pixels)")
    p.add_argument("--arms", nargs="+", default=PAPER["arms"], choices=ARMS, help="losses")
    p.add_argument("--seeds", type=int, nargs="+", default=PAPER["seeds"], help="paired seeds")
    p.add_argument(
        "--erm-lrs",
        type=float,
        nargs="+",
        default=PAPER["erm_lr_grid"],
        help="ERM's learning-rate grid (chosen on mean validation worst-group accuracy)",
    )
    p.add_argument(
        "--erm-extend",
        type=int,
        default=PAPER["erm_lr_extend"],
        help="while ERM's best lr is a grid edge, up to this many 10x steps past it",
    )
    p.add_argument("--eval-batch-size", type=int, default=512, help="images per eval batch")
    p.add_argument("--out", default="paper_robust_satisficing.json", help="output JSON path")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="offline: tiny ResNetConfig backbone saved/loaded, Waterbirds-layout rows",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


# ---------------------------------------------------------------- images
def read_image(path: Path) -> Any:
    """(H, W, 3) uint8: a ``.npy`` array as is (the offline smoke images), anything else through
    Pillow (the release's JPEGs; Pillow comes with ``--with datasets``/``--with pillow``)."""
    import numpy as np

    if path.suffix == ".npy":
        return np.load(path)
    try:
        from PIL import Image
    except ImportError as e:
        raise SystemExit(
            f"--dataset: reading {path.suffix or 'image'} files needs Pillow: add --with pillow"
        ) from e

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def preprocess(rgb: Any, resize: int, crop: int) -> Any:
    """group_DRO's eval transform: resize to resize x resize, centre crop, uint8 (3, crop, crop)."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(rgb.copy()).permute(2, 0, 1)[None].float()
    x = F.interpolate(
        x, size=(resize, resize), mode="bilinear", antialias=True, align_corners=False
    )
    o = (resize - crop) // 2
    return x[0, :, o : o + crop, o : o + crop].round().clamp(0, 255).to(torch.uint8)


# ---------------------------------------------------------------- data
def read_rows(spec: str) -> tuple[list[dict[str, str]], Path] | None:
    """The release's rows (img_filename, y, split, place) and the image root, from a directory
    with ``metadata.csv`` (group_DRO / WILDS layout) or a ``.jsonl`` with the same columns
    (images relative to its directory); None for anything else (a hub id)."""
    path = Path(spec)
    if (path / "metadata.csv").is_file():
        with open(path / "metadata.csv", newline="") as f:
            return list(csv.DictReader(f)), path
    if path.suffix == ".jsonl" and path.is_file():
        lines = path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()], path.parent
    return None


def group_of(y: Any, place: Any) -> Any:
    """group_DRO's group id g = 2·y + place: 0 landbird/land, 1 landbird/water, 2 waterbird/land,
    3 waterbird/water (train counts [3498, 184, 56, 1057])."""
    return 2 * y + place


def load_waterbirds(spec: str, resize: int, crop: int) -> dict[str, dict[str, Any]]:
    """{"train"|"val"|"test": {"x": uint8 (N, 3, crop, crop), "y": (N,), "g": (N,)}}: the local
    release (``read_rows``) or ``datasets.load_dataset(spec)`` (columns image, y, place; splits
    train / validation / test)."""
    import torch

    rows: dict[str, list[tuple[Any, int, int]]] = {k: [] for k in SPLITS}
    local = read_rows(spec)
    if local is not None:
        names = {v: k for k, v in SPLITS.items()}
        meta, root = local
        for r in meta:
            rgb = read_image(root / r["img_filename"])
            rows[names[int(r["split"])]].append((rgb, int(r["y"]), int(r["place"])))
    else:
        try:
            import datasets
        except ImportError as e:
            raise SystemExit(
                f"--dataset {spec!r} is neither a dir with metadata.csv nor a .jsonl, so it is "
                "read with the datasets package as a hub id: add --with datasets"
            ) from e
        import numpy as np

        ds = datasets.load_dataset(spec)
        for split, name in (("train", "train"), ("val", "validation"), ("test", "test")):
            for r in ds[name]:
                rgb = np.asarray(r["image"].convert("RGB"))
                rows[split].append((rgb, int(r["y"]), int(r["place"])))
    out = {}
    for split, rs in rows.items():
        x = torch.stack([preprocess(rgb, resize, crop) for rgb, _, _ in rs])
        y = torch.tensor([y for _, y, _ in rs])
        place = torch.tensor([p for _, _, p in rs])
        out[split] = {"x": x, "y": y, "g": group_of(y, place)}
    return out


class GroupImages:
    """A torch map-style dataset of {pixel_values, labels, group_ids} (normalised on access)."""

    def __init__(self, part: dict[str, Any]) -> None:
        import torch

        self.part = part
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.part["y"])

    def pixels(self, idx: Any) -> Any:
        return (self.part["x"][idx].float() / 255 - self.mean) / self.std

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {
            "pixel_values": self.pixels(i),
            "labels": self.part["y"][i],
            "group_ids": self.part["g"][i],
        }


def predict(model: Any, data: GroupImages, batch: int) -> list[int]:
    """The model's predicted class for every image of ``data``, in order."""
    import torch

    dev = next(model.parameters()).device
    out: list[int] = []
    model.eval()
    with torch.no_grad():
        for s in range(0, len(data), batch):
            idx = torch.arange(s, min(s + batch, len(data)))
            logits = model(pixel_values=data.pixels(idx).to(dev)).logits
            out += logits.argmax(-1).cpu().tolist()
    model.train()
    return out


def per_group_accuracy(pred: Any, y: Any, g: Any, n_groups: int) -> list[float]:
    """Accuracy within each group g (NaN for a group with no rows)."""
    import torch

    ok = (torch.as_tensor(pred) == torch.as_tensor(y)).double()
    g = torch.as_tensor(g).long()
    correct = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, ok)
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, torch.ones_like(ok))
    return [float(c / t) if t > 0 else float("nan") for c, t in zip(correct, total)]


def extend_lr(grid: list[float], chosen: float) -> float | None:
    """The next learning rate past an edge optimum (10x below the lowest or above the highest
    grid point), or None when the optimum is interior."""
    if chosen == min(grid):
        return min(grid) / 10
    if chosen == max(grid):
        return max(grid) * 10
    return None


def choose_lr(grid: list[float], val_worst: dict[float, list[float]]) -> tuple[float, list[float]]:
    """ERM's tuned learning rate: the grid point with the best mean over seeds of the validation
    worst-group accuracy (first on ties); returns it and the mean score at every grid point."""
    scores = [sum(val_worst[lr]) / len(val_worst[lr]) for lr in grid]
    return grid[max(range(len(grid)), key=lambda i: scores[i])], scores


def select_epoch(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The epoch with the best validation worst-group accuracy (first on ties); never test."""
    return max(rows, key=lambda r: r["val"]["worst_group"])


def drop_predictions(row: dict[str, Any]) -> dict[str, Any]:
    """An epoch row without its per-image predictions."""
    return {
        k: ({kk: vv for kk, vv in v.items() if kk != "pred"} if isinstance(v, dict) else v)
        for k, v in row.items()
    }


def paired_points(runs: dict[str, Any], arm: str, base: str, metric: str, seeds: Any) -> list:
    """Per seed, arm - base test ``metric`` in accuracy points (the evidence's paired diffs)."""
    return [
        100 * (runs[f"{arm}/seed{s}"]["test"][metric] - runs[f"{base}/seed{s}"]["test"][metric])
        for s in seeds
    ]


def summary(acc: list[float], weights: list[float]) -> dict[str, float]:
    present = [(a, w) for a, w in zip(acc, weights) if a == a]  # drop NaN (absent groups)
    return {
        "worst_group": min(a for a, _ in present),
        "average": sum(a * w for a, w in present) / sum(w for _, w in present),
    }


# ---------------------------------------------------------------- smoke
def write_smoke(root: Path) -> tuple[str, str]:
    """A tiny ResNetForImageClassification (ResNetConfig, 2 stages) saved to root/model; 40
    Waterbirds-layout rows to root/waterbirds (metadata.csv columns img_id, img_filename, y,
    split, place as in group_DRO's release; 16x16 images as .npy); in train place = y but for 2
    rows per minority group, in val / test every group twice."""
    import numpy as np
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    cfg = ResNetConfig(
        num_channels=3,
        embedding_size=8,
        hidden_sizes=[8, 16],
        depths=[1, 1],
        layer_type="basic",
        num_labels=2,
    )
    ResNetForImageClassification(cfg).save_pretrained(root / "model")
    data = root / "waterbirds"
    rng = np.random.default_rng(0)
    rows = []
    for i in range(40):
        split = 0 if i < 24 else (1 if i < 32 else 2)
        y = i % 2
        # train: place = y except 2 rows per minority group; val / test: every group twice
        place = y if split == 0 and i >= 4 else ((i // 2) % 2 if split else 1 - y)
        img = rng.integers(0, 60, (16, 16, 3), dtype=np.uint8)
        img[:, :, 2 if place else 1] += 150  # background colour = place
        img[6:10, 6:10, 0] += 100 * y  # a small "bird" patch = label
        name = f"{y:03d}.smoke/img_{i:04d}.npy"
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        np.save(data / name, img)
        rows.append({"img_id": i, "img_filename": name, "y": y, "split": split, "place": place})
    with open(data / "metadata.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["img_id", "img_filename", "y", "split", "place"])
        w.writeheader()
        w.writerows(rows)
    return str(root / "model"), str(data)


# ---------------------------------------------------------------- trainer
def make_trainer_class() -> type:
    from icml26_robust_satisficing.hf import IRSTrainer

    class PaperTrainer(IRSTrainer):
        """IRSTrainer with the official warm-up (plain CE for `warmup_epochs`) and, for the
        baselines, a per-group loss in place of IRS (`baseline`: "erm" or a GroupDRO)."""

        def __init__(self, *a: Any, warmup_epochs: float = 0.0, baseline: Any = None, **kw: Any):
            self.warmup_epochs, self.baseline = warmup_epochs, baseline
            self.irs_steps = 0
            super().__init__(*a, **kw)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
            warm = (self.state.epoch or 0.0) < self.warmup_epochs
            if self.baseline is None and not warm:
                self.irs_steps += int(model.training)
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            inputs = dict(inputs)
            groups = inputs.pop(self.group_key)
            labels = inputs.pop("labels")
            outputs = model(**inputs)
            per = self.per_sample_loss_fn(outputs.logits, labels)
            if self.baseline is None or self.baseline == "erm":
                loss = per.mean()
            else:
                loss = self.baseline(per, groups)
            return (loss, outputs) if return_outputs else loss

    return PaperTrainer


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    import transformers
    from icml26_kernels.evidence import comparison, evidence, headroom, tuned
    from icml26_robust_satisficing import GroupDRO, IRSLoss
    from transformers import AutoModelForImageClassification, TrainerCallback, TrainingArguments

    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    if args.quiet:
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    if "erm" not in args.arms or len(set(args.arms)) < 2:
        raise SystemExit(f"--arms: give erm and at least one of irs, groupdro; got {args.arms}")
    if len(set(args.erm_lrs)) < 2 or min(args.erm_lrs) <= 0:
        raise SystemExit(
            f"--erm-lrs: tuning ERM needs >= 2 distinct values > 0, got {args.erm_lrs}"
        )
    if args.erm_extend < 0:
        raise SystemExit(f"--erm-extend must be >= 0, got {args.erm_extend}")
    tmp = tempfile.TemporaryDirectory()
    cuda = torch.cuda.is_available() and not args.smoke
    if args.smoke:
        torch.set_num_threads(1)
        args.model, args.dataset = write_smoke(Path(tmp.name))
        args.epochs, args.warmup_epochs, args.batch_size, args.lr = 2, 1, 8, 1e-2
        args.erm_lrs, args.erm_extend = [1e-3, 1e-2, 1e-1], 1
        args.resize, args.crop, args.eval_batch_size = 16, 12, 16
        args.arms = ["erm", "irs", "groupdro"]
        args.seeds = args.seeds[:2] if len(args.seeds) >= 2 else [0, 1]
    data = load_waterbirds(args.dataset, args.resize, args.crop)
    n_groups = PAPER["n_groups"]
    counts = torch.bincount(data["train"]["g"], minlength=n_groups).tolist()
    weights = [c / sum(counts) for c in counts]  # "average" = training-proportion weighted
    sets = {k: GroupImages(v) for k, v in data.items()}
    log(f"waterbirds: {', '.join(f'{k} {len(v)}' for k, v in sets.items())}; train groups {counts}")
    Trainer = make_trainer_class()
    results: dict[str, Any] = {
        "train_group_counts": counts,
        # the evaluated rows' labels and groups, in the order of every run's stored predictions
        "eval_rows": {
            split: {"y": data[split]["y"].tolist(), "g": data[split]["g"].tolist()}
            for split in ("val", "test")
        },
        "runs": {},
    }

    class EpochEval(TrainerCallback):
        def __init__(self, model: Any) -> None:
            self.model, self.rows = model, []

        def on_epoch_end(self, a, state, control, **kw):  # type: ignore[no-untyped-def]
            row = {"epoch": float(state.epoch)}
            for split in ("val", "test"):
                pred = predict(self.model, sets[split], args.eval_batch_size)
                acc = per_group_accuracy(pred, data[split]["y"], data[split]["g"], n_groups)
                row[split] = {"groups": acc, **summary(acc, weights), "pred": pred}
            self.rows.append(row)

    def run(arm: str, seed: int, lr: float) -> dict[str, Any]:
        transformers.set_seed(seed)  # same head init and batch order for every arm
        model = AutoModelForImageClassification.from_pretrained(
            args.model, num_labels=2, ignore_mismatched_sizes=True
        )
        results["model_config"] = {
            k: getattr(model.config, k)
            for k in ("model_type", "hidden_sizes", "depths", "num_labels")
        }
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=args.weight_decay)
        cb = EpochEval(model)
        targs = TrainingArguments(
            output_dir=str(Path(tmp.name) / f"{arm}_s{seed}_lr{lr:g}"),
            num_train_epochs=args.epochs,
            per_device_train_batch_size=args.batch_size,
            learning_rate=lr,
            lr_scheduler_type=PAPER["lr_scheduler"],
            bf16=cuda,
            use_cpu=not cuda,
            seed=seed,
            save_strategy="no",
            report_to="none",
            logging_steps=1 if args.smoke else 10,
            dataloader_num_workers=0,
            disable_tqdm=args.quiet,
            log_level="error" if args.quiet else "passive",
        )
        baseline = None
        if arm == "erm":
            baseline = "erm"
        elif arm == "groupdro":
            dev = "cuda" if cuda else "cpu"
            baseline = GroupDRO(counts, step_size=args.groupdro_step_size).to(dev)
        irs_loss = IRSLoss.from_counts(
            counts,
            target_tau=args.target_tau,
            tau_multiplier=args.tau_multiplier,
            h_min=PAPER["h_range"][0],
            h_max=PAPER["h_range"][1],
            grid=PAPER["h_grid"],
            refine=PAPER["h_refine"],
        )
        taus: list[dict[str, float]] = []  # every IRS step: the τ used and the batch's π·L

        def record(mod: Any, inp: Any, out: Any) -> None:
            st = out[1]
            taus.append(
                {
                    "tau": float(st.fragility.tau),
                    "prior_loss": float(st.prior.double() @ st.group_losses.double()),
                }
            )

        irs_loss.register_forward_hook(record)
        trainer = Trainer(
            model=model,
            args=targs,
            train_dataset=sets["train"],
            optimizers=(opt, None),
            callbacks=[cb],
            irs_loss=irs_loss,
            warmup_epochs=args.warmup_epochs if arm == "irs" else 0.0,
            baseline=baseline,
        )
        if args.quiet:
            trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
        out = trainer.train()
        best = select_epoch(cb.rows)
        rec = {
            "learning_rate": lr,
            "selected_epoch": best["epoch"],
            "val": best["val"],
            "test": best["test"],
            "epochs": [drop_predictions(r) for r in cb.rows],  # kept for the reported epoch
            "steps": int(out.global_step),
            "irs_steps": trainer.irs_steps,
            "kappa": [h["irs/kappa"] for h in trainer.state.log_history if "irs/kappa" in h],
        }
        if arm == "irs":
            rec["irs"] = {
                "target_tau": irs_loss.target_tau,
                "tau_multiplier": irs_loss.tau_multiplier,
                **irs_loss.search,
                "steps": taus,
            }
        log(f"{arm} lr {lr:g} seed {seed}: test {best['test']['worst_group']:.3f} worst-group")
        del trainer, model
        return rec

    runs = results["runs"]
    for seed in args.seeds:
        for arm in dict.fromkeys(args.arms):
            if arm == "erm":
                for lr in dict.fromkeys(args.erm_lrs):
                    runs[f"erm_lr{lr:g}/seed{seed}"] = run("erm", seed, lr)
            else:
                runs[f"{arm}/seed{seed}"] = run(arm, seed, args.lr)
    claim = []
    grid = sorted(set(args.erm_lrs))

    def erm_val() -> dict[float, list[float]]:
        return {lr: [runs[f"erm_lr{lr:g}/seed{s}"]["val"]["worst_group"] for s in args.seeds]
                for lr in grid}  # fmt: skip

    for _ in range(args.erm_extend):  # an optimum on an edge: one more 10x step past it
        new = extend_lr(grid, choose_lr(grid, erm_val())[0])
        if new is None:
            break
        for seed in args.seeds:
            runs[f"erm_lr{new:g}/seed{seed}"] = run("erm", seed, new)
        grid = sorted([*grid, new])
    chosen, scores = choose_lr(grid, erm_val())
    for s in args.seeds:  # the tuned ERM arm: the chosen learning rate's run of every seed
        runs[f"erm/seed{s}"] = runs[f"erm_lr{chosen:g}/seed{s}"]
    t = tuned(
        "erm",
        "learning_rate",
        grid,
        scores,
        objective="mean over seeds of the validation worst-group accuracy",
        chosen=chosen,
    )
    results["erm_learning_rate"] = chosen
    if chosen in (min(grid), max(grid)):
        t["edge_note"] = "ERM's best learning rate is still an edge after --erm-extend steps"
        claim.append(f"ERM's learning rate {chosen:g} sits on the grid edge of {grid}")
    tuning = [t]
    comps = []
    others = [a for a in dict.fromkeys(args.arms) if a != "erm"]
    for arm in others:
        for metric, target_source in (
            ("worst_group", "abstract: IRS improves worst-case groups (no Waterbirds number)"),
            ("average", "abstract: without sacrificing overall accuracy (no number)"),
        ):
            erm = [100 * runs[f"erm/seed{s}"]["test"][metric] for s in args.seeds]
            comps.append(
                comparison(
                    f"{arm}_minus_erm_{metric}",
                    f"Waterbirds test {metric.replace('_', '-')} accuracy, {arm} - tuned ERM (points)",
                    paired_points(runs, arm, "erm", metric, args.seeds),
                    target=None,
                    target_source=target_source,
                    headroom=headroom(100.0, sum(erm) / len(erm), "accuracy ceiling 100"),
                    unit="points",
                )
            )
    for c in comps[:2]:
        lo, hi = c["ci95"]
        claim.append(f"{c['name']}: {c['diff']:+.2f} points, 95% CI [{lo:.2f}, {hi:.2f}]")
    doc = {
        "recipe": "robust-satisficing",
        "paper": PAPER,
        "config": vars(args),
        "smoke": bool(args.smoke),
        "claim": "; ".join(claim),
        "hardware": {
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        },
        "results": results,
        "evidence": evidence(comparisons=comps, tuning=tuning),
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    log(f"wrote {args.out}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
