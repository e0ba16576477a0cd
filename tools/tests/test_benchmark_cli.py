"""Every member's benchmarks/reproduce.py answers --help from the standard library alone (issue 66/61).

Each script runs in a subprocess under a finder that refuses every import outside the standard
library and records it: `--help` must exit 0 before the script reaches numpy, torch, jax,
transformers, sklearn or its own package, so it returns at once on any machine, even one without
the member's environment. The parser it built is read back: its description is the module
docstring's first paragraph (whole sentences), every option has help, and --out and --quiet exist
(every reproduce.py writes a JSON and reports progress on stderr). Deterministic: no timings.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(REPO.glob("packages/*/benchmarks/reproduce.py"))
# the other entry points with a command line (paper.py and the table printers aside)
OTHERS = [
    REPO / "packages" / p
    for p in (
        "cka-upcycling/benchmarks/planted_depth.py",
        "cka-upcycling/benchmarks/search_signal.py",
        "diffusion-resampling/benchmarks/bench_speed.py",
        "diffusion-resampling/benchmarks/gms.py",
        "kge-mos/benchmarks/bench_mos_memory.py",
        "lazyattention/benchmarks/quality.py",
        "normbt/benchmarks/bench_overhead.py",
        "online-fair/benchmarks/bench_speed.py",
        "tnshap/benchmarks/bench_readout.py",
        # issue 66: argparse before the heavy imports, a description and help on every option
        "latentmoe/benchmarks/bench_kernels.py",
        "lazyattention/benchmarks/bench_kernels.py",
        "online-fair/benchmarks/certify.py",
        "robust-satisficing/benchmarks/ablation_optimizer.py",
        "skillmoe/benchmarks/serve_load.py",
        "stp/benchmarks/probe_base.py",
        "stp/benchmarks/probe_variants.py",
        "tnshap/benchmarks/ablation_fit_vs_capacity.py",
        "tnshap/benchmarks/bench_fit.py",
        "tnshap/benchmarks/sweep_low_budget.py",
        "trips/benchmarks/bench_digits.py",
    )
]
HEAVY = ("torch", "jax", "jaxlib", "transformers", "tensorflow", "sklearn", "scipy")

RUNNER = r"""
import argparse, json, runpy, sys
from importlib.abc import MetaPathFinder
from pathlib import Path

script = sys.argv[1]
STD = set(sys.stdlib_module_names) | {"__future__", "org"}  # org: pickle probes Jython
blocked = []


class _Refuse(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in STD:
            blocked.append(name)
            raise ModuleNotFoundError(f"refused before --help returned: {name}")
        return None


sys.meta_path.insert(0, _Refuse())
parsers = []
_orig = argparse.ArgumentParser.parse_known_args


def _record(self, *a, **k):
    parsers.append(self)
    return _orig(self, *a, **k)


argparse.ArgumentParser.parse_known_args = _record
sys.argv = [script, "--help"]
sys.path.insert(0, str(Path(script).parent))
try:
    runpy.run_path(script, run_name="__main__")
    code = "returned without exiting"
except SystemExit as e:
    code = e.code
except BaseException as e:
    code = repr(e)
info = {"exit": code, "blocked": blocked, "parser": None}
if parsers:
    p = parsers[0]
    info["parser"] = {
        "description": p.description,
        "options": [
            {"flags": a.option_strings, "dest": a.dest, "help": a.help}
            for a in p._actions
            if not isinstance(a, argparse._HelpAction)
        ],
    }
print("\n@@CLI@@" + json.dumps(info))
"""


def _first_paragraph(script: Path) -> str:
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def probe(script: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-I", "-c", RUNNER, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=script.parent,
    )
    assert "@@CLI@@" in r.stdout, r.stderr[-2000:]
    return json.loads(r.stdout.rsplit("@@CLI@@", 1)[1])


def check(script: Path, required: tuple[str, ...] = ("--out", "--quiet")) -> list[str]:
    """The problems of one script's command line (empty: good)."""
    info = probe(script)
    problems = []
    heavy = sorted({b for b in info["blocked"] if b.partition(".")[0] in HEAVY})
    if heavy:
        problems.append(f"imports {heavy} before --help returns")
    if info["blocked"]:
        problems.append(f"imports outside the standard library before parsing: {info['blocked']}")
    if info["exit"] != 0:
        problems.append(f"--help exit: {info['exit']!r}")
    parser = info["parser"]
    if parser is None:
        return [*problems, "no argparse parser ran"]
    desc = " ".join((parser["description"] or "").split())
    if not desc:
        problems.append("no description")
    elif desc != _first_paragraph(script):
        problems.append("description is not the module docstring's first paragraph")
    for opt in parser["options"]:
        if not (opt["help"] or "").strip():
            problems.append(f"{'/'.join(opt['flags']) or opt['dest']} has no help")
    flags = {f for opt in parser["options"] for f in opt["flags"]}
    problems += [f"no {f}" for f in required if f not in flags]
    return problems


def test_there_are_scripts():
    assert len(SCRIPTS) >= 19


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.parts[-3] for s in SCRIPTS])
def test_help_before_heavy_imports(script: Path):
    assert check(script) == []


@pytest.mark.parametrize("script", OTHERS, ids=[f"{s.parts[-3]}/{s.name}" for s in OTHERS])
def test_other_entry_points_help_before_heavy_imports(script: Path):
    assert check(script, required=()) == []


def test_a_top_level_torch_import_fails(tmp_path: Path):
    """The probe catches the finding itself: a heavy import above argparse, no help, no --out."""
    bad = tmp_path / "benchmarks" / "reproduce.py"
    bad.parent.mkdir()
    bad.write_text(
        '"""A benchmark.\n\nMore."""\nimport argparse\nimport torch\n\n'
        "ap = argparse.ArgumentParser(description=__doc__.split('\\n')[0])\n"
        "ap.add_argument('--quick', action='store_true')\nap.parse_args()\n"
    )
    problems = check(bad)
    assert any("['torch']" in p for p in problems), problems
    bad.write_text(
        '"""A benchmark that runs.\n\nMore."""\nimport argparse\n\n'
        "ap = argparse.ArgumentParser(description=__doc__.split('\\n')[0])\n"
        "ap.add_argument('--quick', action='store_true')\nap.parse_args()\nimport torch\n"
    )
    problems = check(bad)
    assert not any("imports" in p for p in problems), problems
    assert "--quick has no help" in problems and "no --out" in problems, problems
