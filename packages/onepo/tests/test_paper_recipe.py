"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

``--smoke`` saves a tiny random ``LlamaConfig`` student and a tiny teacher (trained to answer
the smoke problems) with a char tokenizer and a chat template, loads both through the recipe's
``from_pretrained`` path, writes the teacher column by greedy generation, and runs pure GRPO and
OnePO (teacher injection, DAPO filter, overlong penalty) through ``OnePOGRPOTrainer`` for 2
rollout steps on rows in GSM8K's schema. Single process: OnePOGRPOTrainer is single-process.
Skipped in an installed wheel.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")
TINY = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_writes_a_linted_json(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    paper = _load(BENCH / "paper.py", "onepo_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"} <= set(doc)
    assert doc["recipe"] == "onepo" and doc["smoke"] is True
    r = doc["results"]
    assert r["model_config"] == TINY and r["teacher_config"] == TINY
    # the teacher column came from the saved teacher's greedy answers, all correct
    assert r["teacher_train_accuracy"] == 1.0
    runs = r["runs"]
    assert set(runs) == {f"{a}/seed{s}" for a in ("grpo", "onepo") for s in (0, 1)}
    for key, run in runs.items():
        assert run["rollout_steps"] == 2 and run["steps"] == 4  # 2 updates per rollout
        assert run["num_gen_batches"] and min(run["num_gen_batches"]) >= 1  # DAPO filter on
        if key.startswith("grpo"):  # pure RL: no teacher ever considered
            assert run["retirement_rate"] == [] and run["teacher_replaced"] == []
        else:
            assert run["retirement_rate"] and all(0 <= x <= 1 for x in run["retirement_rate"])
    assert sum(sum(runs[f"onepo/seed{s}"]["teacher_replaced"]) for s in (0, 1)) > 0
    c = doc["evidence"]["comparisons"][0]
    assert c["name"] == "onepo_minus_pure_rl_accuracy" and c["target"] == 7.4
    want = [
        100 * (runs[f"onepo/seed{s}"]["test_accuracy"] - runs[f"grpo/seed{s}"]["test_accuracy"])
        for s in (0, 1)
    ]
    assert c["per_unit"] == pytest.approx(want, rel=1e-12, abs=1e-12)
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_gsm8k_gold_and_answer_reward():
    paper = _load(BENCH / "paper.py", "onepo_paper")
    assert paper.gold_answer("Natalia sold 48/2 = 24 clips.\n#### 1,072") == "1072"
    assert paper.extract("so <answer> 72 </answer> done") == "72"
    assert paper.extract("72") is None
    conv = [[{"role": "assistant", "content": "<answer>72.0</answer>"}], "<answer>7</answer>"]
    assert paper.answer_reward(conv, gold=["72", "72"]) == [1.0, 0.0]
    assert paper.messages({"question": "q?"}, "I")[0] == {"role": "user", "content": "q?\nI"}


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "onepo_paper")
    P = paper.PAPER
    # OnePO.sh (official code) and the abstract
    assert (P["floor"], P["clip_low"], P["clip_high"], P["clip_c"]) == (0.1, 0.2, 0.28, 10.0)
    assert (P["prompts_per_step"], P["num_generations"], P["mini_batch_prompts"]) == (128, 8, 16)
    assert (P["learning_rate"], P["weight_decay"], P["warmup_steps"]) == (2e-6, 0.1, 1)
    assert (P["max_num_gen_batches"], P["overlong_penalty_factor"], P["beta"]) == (20, 0.6, 0.0)
    assert (P["paper_response_length"], P["paper_overlong_buffer"]) == (8000, 4000)
    assert P["overlong_buffer"] / P["max_completion_length"] == 4000 / 8000
    assert P["reported_healthbench"] == {"onepo": 67.2, "sft_rl": 64.5, "pure_rl": 59.8}
    assert P["reported_gain_over_pure_rl_points"] == pytest.approx(67.2 - 59.8)
    assert P["reported_gain_over_sft_rl_points"] == pytest.approx(67.2 - 64.5)
    a = paper.build_parser().parse_args([])
    assert (a.model, a.teacher, a.dataset, a.lr, a.rollout_steps) == (
        P["model"],
        P["teacher"],
        P["dataset"],
        P["learning_rate"],
        P["rollout_steps"],
    )
    assert (a.prompts_per_step, a.num_generations, a.mini_batch_prompts) == (
        P["prompts_per_step"],
        P["num_generations"],
        P["mini_batch_prompts"],
    )
    assert (a.max_completion_length, a.overlong_buffer, a.seeds, a.arms) == (
        P["max_completion_length"],
        P["overlong_buffer"],
        P["seeds"],
        P["arms"],
    )
    # the trainer's own defaults are OnePO.sh's too
    trl = pytest.importorskip("icml26_onepo.trl")
    f = trl.OnePOConfig.__dataclass_fields__
    assert (f["onepo_floor"].default, f["epsilon_high"].default, f["delta"].default) == (
        P["floor"],
        P["clip_high"],
        P["clip_c"],
    )
    assert f["onepo_max_num_gen_batches"].default == P["max_num_gen_batches"]


def test_help_imports_no_torch():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        f"try: runpy.run_path({str(BENCH / 'paper.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('torch','transformers','trl') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
