"""The README quickstarts run as written."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme() -> str:
    """The repository README, or the installed wheel's long description (the same file)."""
    if README.exists():
        return README.read_text()
    from importlib.metadata import metadata

    return metadata("icml26-onepo").get_payload()  # type: ignore[attr-defined]


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _readme(), flags=re.S)


def test_loss_quickstart_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_blocks()[0], "README-loss", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("[") and "-1" in out  # group 1 ties its best student: retired


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [trl] extra")
def test_trl_quickstart_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(_blocks()[1], "README-trl", "exec"), ns)
    assert len([h for h in ns["trainer"].state.log_history if "onepo/retirement_rate" in h]) == 2


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
def test_verl_registration_runs():  # pragma: no cover - verl is not in the lock
    exec(compile(_blocks()[2].split("# in your actor")[0], "README-verl", "exec"), {})


def test_readme_results_match_the_benchmark_json(capsys):
    """The README's results tables are `benchmarks/table.py`'s output on the committed JSON."""
    table = Path(__file__).resolve().parents[1] / "benchmarks" / "table.py"
    if not (table.exists() and README.exists()):
        pytest.skip("needs the source checkout (benchmarks/ and README.md)")
    spec = importlib.util.spec_from_file_location("onepo_table", table)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main("reproduce")
    out = capsys.readouterr().out.strip()
    assert out in README.read_text(), "README results differ from benchmarks/table.py output"
