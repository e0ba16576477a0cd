"""The README quickstarts run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    if README.exists():
        text = README.read_text()
    else:  # the installed wheel's long description is the same file
        from importlib.metadata import metadata

        text = metadata("icml26-agent-rosetta").get_payload()  # type: ignore[attr-defined]
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_hp_quickstart_runs(capsys):
    ns: dict = {}
    exec(compile(_blocks()[0], "README-hp", "exec"), ns)
    out = capsys.readouterr().out
    assert out.startswith("# backbone_change")
    assert "Step 2 (rotamer_change): 16 designs" in out
    assert ns["env"].n_valid == 2 and ns["env"].best() >= -3  # never below the optimum


def test_openmm_quickstart_runs(capsys):
    pytest.importorskip("openmm")
    exec(compile(_blocks()[1], "README-openmm", "exec"), {})
    assert "Step 1 (rotamer_change): 2 designs" in capsys.readouterr().out


def test_readme_results_table_is_generated_from_the_benchmark_json():
    import sys

    bench = README.parent / "benchmarks"
    if not (bench / "reproduce_quick.json").exists():
        pytest.skip("benchmarks/ not shipped in the wheel")
    sys.path.insert(0, str(bench))
    try:
        from results_table import table
    finally:
        sys.path.remove(str(bench))
    text = README.read_text()
    block = text.split("<!-- results-table -->\n")[1].split("\n<!-- /results-table -->")[0]
    assert block == table()
