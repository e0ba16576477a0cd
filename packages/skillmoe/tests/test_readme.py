"""The README's digits quickstart runs as written (skipped where the README is not shipped)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.skipif(not README.exists(), reason="README.md not next to the tests (installed wheel)")
def test_digits_quickstart_runs_and_routing_beats_the_best_single_expert():
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    text = out.getvalue()
    routed = float(re.search(r"routed accuracy ([0-9.]+)", text).group(1))
    single = float(re.search(r"best single expert \S+ ([0-9.]+)", text).group(1))
    assert routed > single + 0.1, text


@pytest.mark.skipif(not README.exists(), reason="README.md not next to the tests (installed wheel)")
def test_readme_results_tables_are_the_committed_benchmark_json():
    import importlib.util
    import json

    bench = README.parent / "benchmarks"
    spec = importlib.util.spec_from_file_location("skillmoe_reproduce", bench / "reproduce.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tables = mod.render_table(json.loads((bench / "reproduce_quick.json").read_text()))
    text = README.read_text()
    missing = [line for line in tables.splitlines() if line and line not in text]
    assert not missing, f"README rows not from reproduce_quick.json: {missing}"
