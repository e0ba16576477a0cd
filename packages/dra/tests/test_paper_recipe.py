"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

``--smoke`` saves a tiny random ``LlamaForCausalLM`` and a word tokenizer, loads both through
the recipe's ``from_pretrained`` path, takes hidden states of 24 pool rows and 6 targets written
in DATE-LM Toxicity-Bias-Filtering's schema (train / ref, prompt / response / type), scores
them with RepSim and DRA, retrains the saved model on the unfiltered and filtered pools for 2
steps, answers JBB-schema prompts and writes the JSON. Skipped in an installed wheel.
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
KEYS = {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(120)
def test_smoke_writes_a_linted_json(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("icml26_kernels")
    paper = _load(BENCH / "paper.py", "dra_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) >= KEYS and doc["recipe"] == "dra" and doc["smoke"] is True
    r = doc["results"]
    # the model whose hidden states were scored is the saved tiny Llama
    assert r["model_config"]["model_type"] == "llama"
    assert (r["model_config"]["hidden_size"], r["model_config"]["num_hidden_layers"]) == (32, 2)
    assert r["model_config"]["vocab_size"] == 3 + len(dict.fromkeys(paper.SMOKE_WORDS))
    # DATE-LM's label: type == "Unsafe" is the positive class (4 of 24 pool rows)
    assert (r["n_pool"], r["n_unsafe"], r["n_ref"]) == (24, 4, 6)
    assert r["random_auprc"] == pytest.approx(4 / 24)
    seeds = r["seeds"]
    assert set(seeds) == {"0", "1", "2"}
    for s in seeds.values():
        assert len(s["targets"]) == 4 and len(set(s["targets"])) == 4
        assert set(s["auprc"]) == {"repsim", "dra"}
        assert all(4 / 24 * 0.5 < v <= 1 for v in s["auprc"].values())
        assert set(s["asr"]) == {"unfiltered", "repsim", "dra"}
        assert s["removed_unsafe"]["unfiltered"] == 0
        assert all(0 <= s["removed_unsafe"][a] <= 4 for a in ("repsim", "dra"))
        assert set(s["steps"].values()) == {2}
    comps = doc["evidence"]["comparisons"]
    names = [c["name"] for c in comps]
    assert names == ["dra_minus_repsim_auprc", "asr_dra_minus_repsim", "asr_dra_minus_unfiltered"]
    want = [seeds[k]["auprc"]["dra"] - seeds[k]["auprc"]["repsim"] for k in ("0", "1", "2")]
    assert comps[0]["per_unit"] == pytest.approx(want, rel=1e-12)
    want = [seeds[k]["asr"]["dra"] - seeds[k]["asr"]["unfiltered"] for k in ("0", "1", "2")]
    assert comps[2]["per_unit"] == pytest.approx(want, rel=1e-12, abs=0)
    assert comps[1]["higher_is_better"] is False
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_loader_reads_jsonl_dirs_and_labels(tmp_path):
    paper = _load(BENCH / "paper.py", "dra_paper")
    (tmp_path / "train.jsonl").write_text(
        "\n".join(
            json.dumps({"prompt": "p", "response": "r", "type": t})
            for t in ("Unsafe", "Safe", "Unsafe", "Benign")
        )
    )
    rows = paper.load_split(str(tmp_path), "XSTest-response-Het", "train")
    assert len(rows) == 4 and set(rows[0]) == {"prompt", "response", "type"}
    assert paper.load_split(str(tmp_path / "train.jsonl"), None, "ignored") == rows
    assert paper.unsafe_labels(rows, "type", "Unsafe").tolist() == [1, 0, 1, 0]


def test_prompts_go_through_the_chat_template():
    paper = _load(BENCH / "paper.py", "dra_paper")

    class Tok:
        chat_template = None

        def apply_chat_template(self, msgs, tokenize, add_generation_prompt):
            assert not tokenize and add_generation_prompt
            return "".join(f"<{m['role']}>{m['content']}" for m in msgs) + "<assistant>"

    tok = Tok()
    assert paper.format_prompt(tok, "how do i") == "how do i"  # no template: as is
    tok.chat_template = "{{ messages }}"
    assert paper.format_prompt(tok, "how do i") == "<user>how do i<assistant>"


def test_keyword_attack_success():
    paper = _load(BENCH / "paper.py", "dra_paper")
    refusals = paper.PAPER["refusals"]
    answers = ["I'm sorry, I can't help", "Sure, here is how", "i cannot do that", "Step 1: mix"]
    assert paper.attack_success(answers, refusals) == 0.5  # case-insensitive match
    assert paper.attack_success(["Sure"], refusals) == 1.0
    assert paper.attack_success(["As an AI I will not"], refusals) == 0.0


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "dra_paper")
    P = paper.PAPER
    # DATE-LM (datamodules/load_data.py, evaluation/evaluate_application.py, Applications.md)
    assert P["dataset"] == "DataAttributionEval/Toxicity-Bias-Filtering"
    assert (P["train_split"], P["target_split"]) == ("train", "ref")
    assert (P["label_column"], P["unsafe_label"]) == ("type", "Unsafe")
    assert (P["prompt_column"], P["response_column"]) == ("prompt", "response")
    assert P["subset"] == "XSTest-response-Het" and P["subset"] in P["subsets"]
    assert len(P["subsets"]) == 6
    assert P["model"] == "DataAttributionEval/Pythia-1b-XSTest-response-Het"
    assert P["base_model"] == "EleutherAI/pythia-1b" and P["base_model"] in P["base_models"]
    assert (P["reported_auprc_gain_relative"], P["reported_asr_drop_relative"]) == (0.633, 0.399)
    assert P["arms"] == ["unfiltered", "repsim", "dra"]
    a = paper.build_parser().parse_args([])
    assert (a.model, a.base_model, a.dataset, a.subset) == (
        P["model"],
        P["base_model"],
        P["dataset"],
        P["subset"],
    )
    assert (a.train_split, a.target_split, a.layer, a.pool, a.n_targets) == (
        P["train_split"],
        P["target_split"],
        P["layer"],
        P["pool"],
        P["n_targets"],
    )
    assert (a.lr, a.epochs, a.batch_size, a.max_length, a.budget_factor) == (
        P["learning_rate"],
        P["epochs"],
        P["batch_size"],
        P["max_length"],
        P["budget_factor"],
    )
    assert (a.eval_dataset, a.eval_config, a.eval_split, a.eval_column) == (
        P["eval_dataset"],
        P["eval_config"],
        P["eval_split"],
        P["eval_column"],
    )
    assert (a.refusals, a.seeds, a.arms, a.max_new_tokens) == (
        P["refusals"],
        P["seeds"],
        P["arms"],
        P["max_new_tokens"],
    )


def test_help_imports_no_torch():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        f"try: runpy.run_path({str(BENCH / 'paper.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('torch','transformers','datasets') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
