"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

``--smoke`` saves a tiny random ``ResNetForImageClassification`` (``ResNetConfig``, 2 stages),
loads it through the recipe's ``AutoModelForImageClassification.from_pretrained`` path, writes
40 rows in Waterbirds' release layout (metadata.csv: img_id, img_filename, y, split, place) read
by the normal loader, trains ERM, IRS (through ``IRSTrainer``, after a warm-up epoch) and
GroupDRO for 2 epochs on 2 seeds (ERM on a 3-point learning-rate grid, tuned on validation)
and writes the JSON; the test recomputes every reported accuracy from the stored predictions,
replays the τ rule at every IRS step and the ERM choice, and lints the evidence. Skipped in an
installed wheel.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")
KEYS = {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(180)
def test_smoke_writes_a_linted_json(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("icml26_kernels")
    paper = _load(BENCH / "paper.py", "rs_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) >= KEYS and doc["recipe"] == "robust-satisficing" and doc["smoke"] is True
    r = doc["results"]
    # the backbone trained is the saved tiny ResNet, with a fresh 2-way head
    assert r["model_config"] == {
        "model_type": "resnet",
        "hidden_sizes": [8, 16],
        "depths": [1, 1],
        "num_labels": 2,
    }
    # groups g = 2y + place from the metadata: 2 rows per minority group in train
    assert r["train_group_counts"] == [10, 2, 2, 10]
    runs = r["runs"]
    # tuned ERM, replayed: the smoke's grid; the best mean validation worst-group accuracy
    # (first on ties); an edge optimum adds one 10x step past that edge (--erm-extend 1)

    def mean_val(lr):
        return sum(runs[f"erm_lr{lr:g}/seed{s}"]["val"]["worst_group"] for s in (0, 1)) / 2

    lrs = [1e-3, 1e-2, 1e-1]
    means = [mean_val(lr) for lr in lrs]
    first = lrs[means.index(max(means))]
    if first in (lrs[0], lrs[-1]):
        lrs = sorted([*lrs, lrs[0] / 10 if first == lrs[0] else lrs[-1] * 10])
    assert set(runs) == {f"{a}/seed{s}" for a in ("erm", "irs", "groupdro") for s in (0, 1)} | {
        f"erm_lr{lr:g}/seed{s}" for lr in lrs for s in (0, 1)
    }
    w = [c / sum(r["train_group_counts"]) for c in r["train_group_counts"]]
    for key, run in runs.items():
        assert run["steps"] == 6 and len(run["epochs"]) == 2  # 24 train rows / 8, 2 epochs
        # reported at the best validation worst-group epoch (first on ties), never on test
        assert run["selected_epoch"] == paper.select_epoch(run["epochs"])["epoch"]
        for part in ("val", "test"):
            rows, got = r["eval_rows"][part], run[part]
            assert len(got["pred"]) == len(rows["y"]) == len(rows["g"]) == 8
            # recomputed from the stored predictions, independently of the recipe's code
            acc = []
            for g in range(4):
                hits = [p == y for p, y, gg in zip(got["pred"], rows["y"], rows["g"]) if gg == g]
                acc.append(sum(hits) / len(hits))
            assert got["groups"] == pytest.approx(acc, rel=1e-12)
            assert got["worst_group"] == min(acc)
            assert got["average"] == pytest.approx(sum(a * x for a, x in zip(acc, w)), rel=1e-12)
            epoch = next(e for e in run["epochs"] if e["epoch"] == run["selected_epoch"])
            assert epoch[part]["groups"] == got["groups"] and "pred" not in epoch[part]
        if key.startswith("irs/"):  # IRS's loss after the warm-up epoch only
            assert 0 < run["irs_steps"] < run["steps"] and run["kappa"]
            assert all(math.isfinite(k) for k in run["kappa"])
            irs = run["irs"]  # the IRSLoss the trainer used: the paper's constants
            assert (irs["target_tau"], irs["tau_multiplier"]) == (0.1, 1.01)
            assert (irs["h_min"], irs["h_max"], irs["grid"], irs["refine"]) == (1e-3, 50.0, 64, 3)
            assert len(irs["steps"]) == run["irs_steps"]
            for st in irs["steps"]:  # τ = max(1.01·π·L, 0.1) at every IRS step
                want = max(1.01 * st["prior_loss"], 0.1)
                assert st["tau"] == pytest.approx(want, rel=1e-12)
        else:
            assert run["irs_steps"] == 0 and run["kappa"] == [] and "irs" not in run
    # the ERM arm is the chosen learning rate's run of every seed
    (tune,) = doc["evidence"]["tuning"]
    assert (tune["arm"], tune["param"], tune["grid"]) == ("erm", "learning_rate", lrs)
    means = [mean_val(lr) for lr in lrs]
    assert tune["scores"] == pytest.approx(means, rel=1e-12)
    chosen = lrs[means.index(max(means))]
    assert tune["chosen"] == r["erm_learning_rate"] == chosen
    for s in (0, 1):
        assert runs[f"erm/seed{s}"] == runs[f"erm_lr{chosen:g}/seed{s}"]
        assert runs[f"erm/seed{s}"]["learning_rate"] == chosen
        assert runs[f"irs/seed{s}"]["learning_rate"] == runs[f"groupdro/seed{s}"]["learning_rate"]
    assert ("grid edge" in doc["claim"]) == (chosen in (lrs[0], lrs[-1]))
    comps = doc["evidence"]["comparisons"]
    names = [c["name"] for c in comps]
    assert names == [
        f"{a}_minus_erm_{m}" for a in ("irs", "groupdro") for m in ("worst_group", "average")
    ]
    for c in comps:
        arm, metric = c["name"].split("_minus_erm_")
        want = [100 * (runs[f"{arm}/seed{s}"]["test"][metric] - runs[f"erm/seed{s}"]["test"][metric])
                for s in (0, 1)]  # fmt: skip
        assert c["per_unit"] == pytest.approx(want, rel=1e-9, abs=1e-9)
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_detailed(doc, "paper.json") == []


def _release(root: Path, rows):
    import numpy as np

    for r in rows:
        (root / r["img_filename"]).parent.mkdir(parents=True, exist_ok=True)
        np.save(root / r["img_filename"], np.full((10, 10, 3), 20 * r["img_id"], dtype=np.uint8))


def test_loader_reads_the_release_layout_and_jsonl(tmp_path):
    pytest.importorskip("torch")
    paper = _load(BENCH / "paper.py", "rs_paper")
    # (y, place) = (0,0), (0,1), (1,0), (1,1) in train, one of each in val and test
    rows = [
        {"img_id": i, "img_filename": f"d/{i}.npy", "y": i // 2 % 2, "split": s, "place": i % 2}
        for s in (0, 1, 2)
        for i in range(4 * s, 4 * s + 4)
    ]
    _release(tmp_path, rows)
    with open(tmp_path / "metadata.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    a = paper.load_waterbirds(str(tmp_path), resize=8, crop=6)
    b = paper.load_waterbirds(str(tmp_path / "rows.jsonl"), resize=8, crop=6)
    for split in ("train", "val", "test"):
        # group_DRO's g = 2y + place: landbird/land, landbird/water, waterbird/land, waterbird/water
        assert a[split]["g"].tolist() == [0, 1, 2, 3]
        assert a[split]["y"].tolist() == [0, 0, 1, 1]
        assert tuple(a[split]["x"].shape) == (4, 3, 6, 6)
        for k in ("x", "y", "g"):
            assert a[split][k].tolist() == b[split][k].tolist()
    assert a["val"]["x"][1].float().mean().item() == pytest.approx(20 * 5, rel=1e-2)
    assert paper.read_rows("some/hub-id") is None  # anything else goes to datasets.load_dataset


def test_model_selection_reads_validation_not_test():
    paper = _load(BENCH / "paper.py", "rs_paper")
    rows = [
        {"epoch": 1.0, "val": {"worst_group": 0.5}, "test": {"worst_group": 0.9}},
        {"epoch": 2.0, "val": {"worst_group": 0.7}, "test": {"worst_group": 0.2}},
        {"epoch": 3.0, "val": {"worst_group": 0.7}, "test": {"worst_group": 0.8}},
    ]
    assert paper.select_epoch(rows)["epoch"] == 2.0  # best val, first on ties


def test_paired_points_are_arm_minus_baseline_per_seed():
    paper = _load(BENCH / "paper.py", "rs_paper")
    runs = {
        "irs/seed0": {"test": {"worst_group": 0.80}},
        "erm/seed0": {"test": {"worst_group": 0.75}},
        "irs/seed1": {"test": {"worst_group": 0.70}},
        "erm/seed1": {"test": {"worst_group": 0.90}},
    }
    got = paper.paired_points(runs, "irs", "erm", "worst_group", [1, 0])
    assert got == pytest.approx([-20.0, 5.0], rel=1e-9)  # points, in seed order


def test_tuned_erm_is_the_best_mean_validation_worst_group():
    paper = _load(BENCH / "paper.py", "rs_paper")
    grid = [1e-5, 1e-4, 1e-3]
    val = {1e-5: [0.5, 0.7], 1e-4: [0.8, 0.6], 1e-3: [0.9, 0.1]}  # means 0.6, 0.7, 0.5
    chosen, scores = paper.choose_lr(grid, val)
    assert chosen == 1e-4 and scores == pytest.approx([0.6, 0.7, 0.5], rel=1e-12)
    tie = {1e-5: [0.5], 1e-4: [0.9], 1e-3: [0.9]}
    assert paper.choose_lr(grid, tie)[0] == 1e-4  # first on ties


def test_erm_grid_extends_past_an_edge_optimum_only():
    paper = _load(BENCH / "paper.py", "rs_paper")
    grid = [1e-5, 1e-4, 1e-3]
    assert paper.extend_lr(grid, 1e-5) == pytest.approx(1e-6, rel=1e-12)
    assert paper.extend_lr(grid, 1e-3) == pytest.approx(1e-2, rel=1e-12)
    assert paper.extend_lr(grid, 1e-4) is None
    assert paper.build_parser().parse_args([]).erm_extend == paper.PAPER["erm_lr_extend"] == 2


def test_per_group_accuracy_counts_within_groups():
    paper = _load(BENCH / "paper.py", "rs_paper")
    pred = [0, 1, 1, 1, 0, 0]
    y = [0, 0, 1, 1, 1, 0]
    g = [0, 1, 2, 3, 3, 3]  # group 3: 2 of 3 right (not grouped by label)
    got = paper.per_group_accuracy(pred, y, g, 5)
    assert got[:4] == pytest.approx([1.0, 0.0, 1.0, 2 / 3], rel=1e-12) and math.isnan(got[4])


def test_summary_is_worst_group_and_training_weighted_average():
    paper = _load(BENCH / "paper.py", "rs_paper")
    w = [c / 4795 for c in (3498, 184, 56, 1057)]
    s = paper.summary([1.0, 0.5, 0.25, 0.75], w)
    assert s["worst_group"] == 0.25
    assert s["average"] == pytest.approx((3498 + 92 + 14 + 792.75) / 4795, rel=1e-12)
    nan = float("nan")  # an absent group is dropped, not counted as 0
    assert paper.summary([1.0, nan, 0.5, nan], [0.5, 0.2, 0.1, 0.2]) == pytest.approx(
        {"worst_group": 0.5, "average": (0.5 + 0.05) / 0.6}, rel=1e-12
    )


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "rs_paper")
    P = paper.PAPER
    # official code (Bilkent-CYBORG/IRS: waterbirds.ipynb, methods/irs.py) and group_DRO's release
    assert (P["batch_size"], P["epochs"], P["learning_rate"]) == (256, 50, 1e-5)
    assert (P["weight_decay"], P["warmup_epochs"], P["lr_scheduler"]) == (1e-4, 4, "cosine")
    assert (P["target_tau"], P["tau_multiplier"], P["groupdro_step_size"]) == (0.1, 1.01, 0.01)
    assert (P["h_range"], P["h_grid"], P["h_refine"]) == ([1e-3, 50.0], 64, 3)
    assert P["train_group_counts"] == [3498, 184, 56, 1057] and P["n_groups"] == 4
    assert (P["resize"], P["crop"]) == (256, 224)
    assert (P["anchor_erm_worst_group"], P["anchor_erm_average"]) == (74.9, 98.1)
    assert P["model"] == "microsoft/resnet-50" and P["arms"] == ["erm", "irs"]
    assert P["erm_lr_grid"] == [1e-5, 1e-4, 1e-3] and P["learning_rate"] in P["erm_lr_grid"]
    a = paper.build_parser().parse_args([])
    assert (a.model, a.dataset, a.epochs, a.batch_size, a.lr, a.weight_decay) == (
        P["model"],
        P["dataset"],
        P["epochs"],
        P["batch_size"],
        P["learning_rate"],
        P["weight_decay"],
    )
    assert (a.warmup_epochs, a.target_tau, a.tau_multiplier, a.groupdro_step_size) == (
        P["warmup_epochs"],
        P["target_tau"],
        P["tau_multiplier"],
        P["groupdro_step_size"],
    )
    assert (a.resize, a.crop, a.arms, a.seeds) == (P["resize"], P["crop"], P["arms"], P["seeds"])
    assert a.erm_lrs == P["erm_lr_grid"]
    assert a.out == "paper_robust_satisficing.json" and not a.smoke


def test_help_does_not_import_torch():
    code = (
        "import runpy, sys; sys.argv = ['paper.py', '--help']\n"
        "try:\n    runpy.run_path({!r}, run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')"
    ).format(str(BENCH / "paper.py"))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--smoke" in out.stdout and out.stdout.strip().endswith("NO-TORCH")


def test_real_data_readers_name_the_missing_package(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    paper = _load(BENCH / "paper.py", "rs_paper")
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL raises ImportError
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(SystemExit, match="--with pillow"):
        paper.read_image(tmp_path / "img.jpg")
    with pytest.raises(SystemExit, match="--with datasets"):
        paper.load_waterbirds("some/hub-id", resize=8, crop=6)
