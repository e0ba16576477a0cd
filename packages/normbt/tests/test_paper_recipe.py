"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

``--smoke`` saves a tiny random ``LlamaForSequenceClassification`` and a char tokenizer with a
chat template, loads both through the recipe's ``from_pretrained`` path, trains BT and NormBT
through ``NormBTRewardTrainer`` for 3 steps on rows in Skywork-Reward-Preference's schema and
scores rows in RewardBench's schema; once in-process and once as 2 gloo processes (torchrun).
Skipped in an installed wheel.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")
KEYS = {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"}
TINY = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 79}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(doc: dict, world: int) -> None:
    assert set(doc) >= KEYS and doc["recipe"] == "normbt" and doc["smoke"] is True
    r = doc["results"]
    assert r["model_config"] == TINY
    assert set(r["runs"]) == {f"{a}/seed{s}" for a in ("bt", "normbt") for s in (0, 1)}
    for run in r["runs"].values():
        assert run["n_pairs"] == 10 and run["n_ranks"] == world and run["steps"] == 3
        assert set(run["sections"]) == {"Chat", "Chat Hard", "Safety", "Reasoning", "score"}
    for s in (0, 1):  # the BT arm is TRL's loss (m untouched); NormBT folds m once per step
        assert r["runs"][f"bt/seed{s}"]["normbt_updates"] == 0
        assert r["runs"][f"normbt/seed{s}"]["normbt_updates"] == 3
        assert r["runs"][f"normbt/seed{s}"]["normbt_m"] > 0
    assert doc["hardware"]["world_size"] == world
    names = [c["name"] for c in doc["evidence"]["comparisons"]]
    assert names == ["normbt_minus_bt_reasoning", "normbt_minus_bt_score"]
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_smoke_writes_a_linted_json(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    paper = _load(BENCH / "paper.py", "normbt_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    _check(doc, world=1)
    # the paired comparison is NormBT - BT per seed, in points
    runs = doc["results"]["runs"]
    c = doc["evidence"]["comparisons"][1]
    want = [
        100
        * (runs[f"normbt/seed{s}"]["sections"]["score"] - runs[f"bt/seed{s}"]["sections"]["score"])
        for s in (0, 1)
    ]
    assert c["per_unit"] == pytest.approx(want, rel=1e-12)


@pytest.mark.timeout(120)
def test_smoke_on_two_gloo_processes(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    out = tmp_path / "p2.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    cmd += [str(BENCH / "paper.py"), "--smoke", "--out", str(out), "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("2-process torchrun smoke did not finish within 90 s")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    _check(doc, world=2)  # both ranks' halves of RewardBench gathered: 10 pairs, 2 ranks


def test_rewardbench_rows_are_sharded_and_gathered_in_order():
    pytest.importorskip("torch")
    paper = _load(BENCH / "paper.py", "normbt_paper")
    assert paper._dist() == (0, 1)
    assert set(paper.SMOKE_SUBSETS) <= {
        s for subs in __import__("icml26_normbt").REWARDBENCH_SECTIONS.values() for s in subs
    }


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "normbt_paper")
    P = paper.PAPER
    assert P["reported_reasoning_gain_points"] == 5.0
    assert (P["eval_dataset"], P["eval_split"]) == ("allenai/reward-bench", "filtered")
    assert P["dataset"] == "Skywork/Skywork-Reward-Preference-80K-v0.2"
    assert (P["normbt_decay"], P["normbt_eps"]) == (0.99, 0.05)
    assert P["arms"] == ["bt", "normbt"]
    # the recipe's NormBT constants are the trainer's defaults
    trl = pytest.importorskip("icml26_normbt.trl")
    f = trl.NormBTConfig.__dataclass_fields__
    assert (f["normbt_decay"].default, f["normbt_eps"].default) == (0.99, 0.05)
    a = paper.build_parser().parse_args([])
    assert (a.model, a.dataset, a.eval_dataset, a.eval_split, a.lr, a.epochs) == (
        P["model"],
        P["dataset"],
        P["eval_dataset"],
        P["eval_split"],
        P["learning_rate"],
        P["epochs"],
    )
    assert (a.batch_size, a.grad_accum, a.max_length, a.warmup_ratio, a.scheduler) == (
        P["per_device_batch_size"],
        P["grad_accum"],
        P["max_length"],
        P["warmup_ratio"],
        P["lr_scheduler"],
    )
    assert (a.decay, a.eps, a.seeds, a.arms) == (
        P["normbt_decay"],
        P["normbt_eps"],
        P["seeds"],
        P["arms"],
    )


def test_help_imports_no_torch():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        f"try: runpy.run_path({str(BENCH / 'paper.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('torch','transformers','trl') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
