"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline on a loopback server.

The smoke run talks to a loopback OpenAI-compatible server (its "model" is the package's scripted
LLM with the error model) through the same ``OpenAIChatPolicy`` a vLLM ``--base-url`` takes, on
the HP-lattice Rosetta stand-in. Skipped in an installed wheel.
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


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(90)
def test_smoke_writes_a_linted_json(tmp_path):
    pytest.importorskip("openai")
    paper = _load(BENCH / "paper.py", "agent_rosetta_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"} <= set(doc)
    assert doc["recipe"] == "agent-rosetta" and doc["smoke"] is True
    res = doc["results"]
    assert set(res["tasks"].values()) == {"hp8", "pack_ncaa_TRF"}
    assert set(res["nstruct"].values()) == {paper.SMOKE["nstruct"]}
    for arms in res["episodes"].values():
        assert set(arms) == {"structured", "protocol"}
        for rows in arms.values():
            assert len(rows) == 3 and all(r["steps"] == paper.SMOKE["max_steps"] for r in rows)
    (comp,) = doc["evidence"]["comparisons"]
    expect = [
        100.0 * (s["valid_rate"] - p["valid_rate"])
        for arms in res["episodes"].values()
        for s, p in zip(arms["structured"], arms["protocol"])
    ]
    assert comp["n"] == 6 and comp["diff"] == pytest.approx(sum(expect) / 6)
    assert "HPBackend" in doc["hardware"]["device"]
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_loopback_pairs_the_scripted_llm_seed_across_arms(tmp_path):
    """Conversation i gets seed i mod n_seeds: with p = 0 every action of both arms is valid,
    and the same seed gives the same replies in the same arm."""
    pytest.importorskip("openai")
    paper = _load(BENCH / "paper.py", "agent_rosetta_paper")
    from icml26_agent_rosetta import RosettaEnv, run_episode
    from icml26_agent_rosetta.openai_policy import OpenAIChatPolicy

    tasks = paper.smoke_tasks()
    task, backend, plan = tasks["hp_design"]
    srv, url = paper.start_loopback({task.name: plan}, 0.0, 2)
    try:
        pol = OpenAIChatPolicy("m", base_url=url, timeout=10, max_retries=0)
        for mode in ("structured", "protocol"):
            res = run_episode(RosettaEnv(task, backend, mode=mode), pol)
            assert res["valid_rate"] == 1.0
    finally:
        srv.shutdown()
        srv.server_close()


def test_missing_rosetta_is_named_before_any_model_call(tmp_path):
    paper = _load(BENCH / "paper.py", "agent_rosetta_paper")
    with pytest.raises(SystemExit, match="rosetta_scripts"):
        paper.main(["--rosetta", str(tmp_path / "nope"), "--out", str(tmp_path / "p.json")])
    assert not (tmp_path / "p.json").exists()


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "agent_rosetta_paper")
    P = paper.PAPER
    assert P["max_steps"] == 20 and P["nstruct"] == 128 and P["rosetta_timeout_s"] == 3600
    assert P["guidance_weights"] == {"aa_composition": 1.0, "atom_pair_constraint": 1.0}
    assert P["tasks"]["pack_ncaa"]["pdb"] == "6V67.pdb" and P["tasks"]["pack_ncaa"]["ncaa"] == "TRF"
    assert P["tasks"]["pack_ncaa"]["objectives"]["ncaa_core_success"] == "max"
    assert P["tasks"]["gfp_stability"]["pdb"] == "1EMA.pdb"
    assert P["arms"] == ["structured", "protocol"]
    args = paper.build_parser().parse_args([])
    assert args.model == P["model"] and args.max_steps == P["max_steps"]
    assert args.nstruct == P["nstruct"] and args.max_retries == P["max_retries"]
    assert args.temperature == P["temperature"] and args.tasks == ["pack_ncaa", "gfp_stability"]


def test_help_imports_no_heavy_module():
    code = (
        "import runpy,sys; sys.argv=['paper.py','--help']\n"
        "try: runpy.run_path({!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', [m for m in ('numpy','openai','icml26_agent_rosetta') if m in sys.modules])"
    ).format(str(BENCH / "paper.py"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
