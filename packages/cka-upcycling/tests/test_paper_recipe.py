"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

``--smoke`` saves a tiny random ``Qwen2ForCausalLM`` (d 32, 4 layers, byte-level tokenizer),
loads it through the recipe's ``from_pretrained`` path, upcycles its MLPs with ``replace_mlp``,
and trains the four arms (CKA-selected growth, random growth of equal size, full upcycling,
no growth) over three TRACE tasks written in TRACE's layout and schema, 2 seeds. The checks are
the method's facts, recomputed from the JSON: the grown layers are the lowest-CKA ones, random
and CKA grow equal parameter counts, frozen sources never move, and the reported averages are
those of the accuracy matrix. Skipped in an installed wheel.
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
LAYERS = [f"model.layers.{i}.mlp" for i in range(4)]
SEEDS = (0, 1)
ARMS = ("cka", "random", "full", "replay")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("icml26_kernels")
    paper = _load(BENCH / "paper.py", "cka_paper")
    out = tmp_path_factory.mktemp("paper") / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


@pytest.mark.timeout(150)
def test_smoke_writes_a_linted_json_of_the_saved_model(doc):
    assert set(doc) >= KEYS and doc["recipe"] == "cka-upcycling" and doc["smoke"] is True
    r = doc["results"]
    assert r["model_config"] == {
        "model_type": "qwen2",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 4,
    }
    assert r["tasks"] == ["Py150", "C-STANCE", "FOMC"]
    assert r["n_train"] == {"Py150": 8, "C-STANCE": 8, "FOMC": 8}
    assert r["n_test"] == {"Py150": 4, "C-STANCE": 4, "FOMC": 4}
    assert set(r["runs"]) == {f"{a}/seed{s}" for a in ARMS for s in SEEDS}
    names = [c["name"] for c in doc["evidence"]["comparisons"]]
    assert names == [
        "cka_minus_random_average_accuracy",
        "cka_minus_random_bwt",
        "cka_minus_full_average_accuracy",
        "cka_minus_full_bwt",
        "cka_minus_replay_bwt",
    ]
    if LINT.is_file():  # as tools/evidence_lint.py reads a detailed JSON and a script
        lint = _load(LINT, "evidence_lint")
        assert lint.check_evidence(doc["evidence"], "paper.json") == []
        assert lint.check_detailed(doc, "paper.json") == []
        assert lint.check_source(BENCH / "paper.py", "paper.py") == []


def test_cka_arm_grows_the_lowest_cka_layers(doc):
    """The grown layers are the round(0.4 x 4) = 2 layers with the lowest CKA between the model
    and its probe fine-tune (highest drift), recomputed from the stored per-layer CKA."""
    r = doc["results"]
    assert r["grow_count"] == 2
    for s in SEEDS:
        run = r["runs"][f"cka/seed{s}"]
        assert len(run["cka"]) == len(run["grown"]) == 3
        for cka, grown in zip(run["cka"], run["grown"]):
            assert list(cka) == LAYERS and all(-1e-9 <= v <= 1 + 1e-9 for v in cka.values())
            assert len(set(cka.values())) == 4  # no ties: the choice is determined
            want = sorted(sorted(LAYERS, key=lambda n: cka[n])[:2], key=LAYERS.index)
            assert grown == want
            rest = [cka[n] for n in LAYERS if n not in grown]
            assert max(cka[n] for n in grown) < min(rest)


def test_growth_sizes_random_equals_cka_and_full_grows_everything(doc):
    runs = doc["results"]["runs"]
    for s in SEEDS:
        cka, rnd = runs[f"cka/seed{s}"], runs[f"random/seed{s}"]
        full, rep = runs[f"full/seed{s}"], runs[f"replay/seed{s}"]
        assert [len(g) for g in rnd["grown"]] == [len(g) for g in cka["grown"]] == [2, 2, 2]
        assert rnd["added_params"] == cka["added_params"]  # equal size, per task
        assert all(a > 0 for a in cka["added_params"])
        assert full["grown"] == [LAYERS] * 3 and rep["grown"] == [[]] * 3
        assert rep["total_added_params"] == 0
        assert full["total_added_params"] == 2 * cka["total_added_params"]  # 4 layers vs 2
        assert set(rnd["grown"][0]) <= set(LAYERS)
        # every growth freezes its source copy (2 slots per layer), and frozen copies never move
        for run in (cka, rnd, full, rep):
            per_task = [2 * len(g) for g in run["grown"]]
            assert run["n_frozen"] == [sum(per_task[: t + 1]) for t in range(3)]
            assert run["frozen_change"] == [0.0, 0.0, 0.0]
    # random draws differ between seeds or tasks (not a fixed choice)
    draws = {tuple(g) for s in SEEDS for g in runs[f"random/seed{s}"]["grown"]}
    assert len(draws) > 1
    assert doc["results"]["added_params_cka_over_full"] == pytest.approx(0.5, rel=1e-12)


def test_metrics_and_comparisons_follow_the_accuracy_matrix(doc):
    runs = doc["results"]["runs"]
    for key, run in runs.items():
        R = run["R"]
        T = len(R)
        assert all(
            R[i][j] is not None and 0 <= R[i][j] <= 1 for i in range(T) for j in range(i + 1)
        )
        m = run["metrics"]
        assert m["average_accuracy"] == pytest.approx(sum(R[-1]) / T, rel=1e-12, abs=1e-15)
        bwt = sum(R[-1][j] - R[j][j] for j in range(T - 1)) / (T - 1)
        assert m["bwt"] == pytest.approx(bwt, rel=1e-12, abs=1e-15), key
        assert run["steps"] == [2, 2, 2]
    comps = {c["name"]: c for c in doc["evidence"]["comparisons"]}
    for base in ("random", "full", "replay"):
        for k in ("average_accuracy", "bwt"):
            name = f"cka_minus_{base}_{k}"
            if name not in comps:
                continue
            want = [
                runs[f"cka/seed{s}"]["metrics"][k] - runs[f"{base}/seed{s}"]["metrics"][k]
                for s in SEEDS
            ]
            assert comps[name]["per_unit"] == pytest.approx(want, rel=1e-12, abs=1e-15)
            assert comps[name]["higher_is_better"] is True and comps[name]["n"] == 2
    # the smoke produces signal: Py150 (task 0) scores > 0 by edit similarity and its score
    # moves across the sequence, so BWT is not trivially 0
    assert any(run["R"][0][0] > 0 for run in runs.values())
    assert any(run["metrics"]["bwt"] != 0 for run in runs.values())


def test_selection_and_metric_helpers():
    paper = _load(BENCH / "paper.py", "cka_paper")
    cka = {"a": 0.9, "b": 0.2, "c": 0.5, "d": 0.95}
    assert paper.select_lowest_cka(cka, 2) == ["b", "c"]  # in layer order
    assert paper.select_lowest_cka(cka, 1) == ["b"]
    assert paper.grow_count(0.4, 24) == 10 and paper.grow_count(0.4, 4) == 2
    assert paper.grow_count(0.01, 4) == 1
    a = paper.select_random(list("abcdef"), 3, seed=0, task=1)
    assert a == paper.select_random(list("abcdef"), 3, seed=0, task=1) and len(set(a)) == 3
    assert paper.rouge_l("the cat sat", "the cat sat") == 1.0
    # LCS 2 ("the sat") of 3 and 4 tokens: P 2/3, R 1/2, F = 4/7
    assert paper.rouge_l("the cat sat", "the dog did sat") == pytest.approx(4 / 7)
    assert paper.rouge_l("支持", "支持") == 1.0 and paper.rouge_l("支持", "反对") == 0.0
    assert paper.edit_similarity("abcd", "abce") == pytest.approx(0.75)
    assert paper.edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert paper.score("accuracy", " hawkish\nmore", "hawkish") == 1.0
    assert paper.score("accuracy", "dovish", "hawkish") == 0.0
    assert paper.score("accuracy_choice", "Answer: B\nBecause", "Answer: B\nBecause x") == 1.0
    assert paper.score("accuracy_choice", "Answer: A", "Answer: B") == 0.0
    assert paper.score("accuracy_number", "the answer is 1,200.0", "1200") == 1.0
    with pytest.raises(ValueError, match="unknown metric"):
        paper.score("bleu", "a", "b")


def test_layer_cka_is_one_for_an_unchanged_model_and_drops_where_it_changed():
    torch = pytest.importorskip("torch")
    from icml26_cka_upcycling import linear_cka

    paper = _load(BENCH / "paper.py", "cka_paper")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5))
    other = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5))
    other.load_state_dict(net.state_dict())
    batches = [torch.randn(16, 6) for _ in range(2)]
    same = paper.layer_cka(net, other, batches, ["0", "2"], lambda m, b: m(b))
    assert same == pytest.approx({"0": 1.0, "2": 1.0}, abs=1e-9)
    with torch.no_grad():
        other[2].weight.mul_(torch.randn(5, 8))  # only the last layer changes
    got = paper.layer_cka(net, other, batches, ["0", "2"], lambda m, b: m(b))
    x = torch.cat(batches)
    with torch.no_grad():
        want = float(linear_cka(net(x).double(), other(x).double()))
    assert got["0"] == pytest.approx(1.0, abs=1e-9)
    assert got["2"] == pytest.approx(want, rel=1e-9) and want < 0.99


def test_trace_loader_and_missing_datasets_error(tmp_path, monkeypatch):
    paper = _load(BENCH / "paper.py", "cka_paper")
    (tmp_path / "FOMC").mkdir()
    rows = [{"prompt": "Text:\nx\nStance:\n", "answer": "neutral"}]
    (tmp_path / "FOMC" / "train.json").write_text(json.dumps(rows))
    assert paper.load_task(str(tmp_path), "FOMC", "train") == rows
    with pytest.raises(FileNotFoundError, match="FOMC/test"):
        paper.load_task(str(tmp_path), "FOMC", "test")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    with pytest.raises(ImportError, match="uv run --with datasets"):
        paper.load_task("someone/TRACE", "FOMC", "train")


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "cka_paper")
    P = paper.PAPER
    # TRACE (scripts/train_seq_naive.sh, README)
    assert P["tasks"] == [
        "C-STANCE",
        "FOMC",
        "MeetingBank",
        "Py150",
        "ScienceQA",
        "NumGLUE-cm",
        "NumGLUE-ds",
        "20Minuten",
    ]
    assert P["epochs"] == [5, 3, 7, 5, 3, 5, 5, 7]
    assert (P["lr"], P["weight_decay"], P["global_batch"]) == (1e-5, 0.0, 256)
    assert (P["max_prompt_len"], P["max_ans_len"]) == (1024, 512)
    assert (P["prompt_column"], P["answer_column"]) == ("prompt", "answer")
    assert set(P["metrics"]) == set(P["tasks"]) == set(P["max_new_tokens"])
    # the abstract: 60% of the expansion eliminated -> the selective arms keep 40% of full's
    assert P["grow_frac"] == pytest.approx(1 - P["reported"]["expansion_removed"]) == 0.4
    assert P["reported"]["forgetting_reduction"] == 0.8
    assert P["arms"] == ["cka", "random", "full", "replay"]
    a = paper.build_parser().parse_args([])
    assert (a.model, a.data, a.tasks, a.epochs, a.lr) == (
        P["model"],
        P["data"],
        P["tasks"],
        P["epochs"],
        P["lr"],
    )
    assert (a.global_batch, a.max_prompt_len, a.max_ans_len, a.grow_frac) == (
        P["global_batch"],
        P["max_prompt_len"],
        P["max_ans_len"],
        P["grow_frac"],
    )
    assert (a.num_experts, a.top_k, a.lambda_replay, a.lambda_cka, a.replay_size) == (
        P["num_experts"],
        P["top_k"],
        P["lambda_replay"],
        P["lambda_cka"],
        P["replay_size"],
    )
    assert (a.seeds, a.arms, a.max_eval, a.probe_steps) == (
        P["seeds"],
        P["arms"],
        P["max_eval"],
        P["probe_steps"],
    )
    with pytest.raises(ValueError, match="--grow-frac"):
        paper.main(["--grow-frac", "0", "--out", "/dev/null"])
    with pytest.raises(ValueError, match="--seeds"):
        paper.main(["--seeds", "0", "--out", "/dev/null"])


def test_help_imports_no_torch():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        f"try: runpy.run_path({str(BENCH / 'paper.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('torch','transformers','datasets') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
