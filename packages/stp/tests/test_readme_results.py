"""The README's results tables are the ones `benchmarks/readme_tables.py` prints from the
committed benchmark JSON (so the README cannot drift from the measured numbers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(120)
def test_readme_tables_match_the_quick_json() -> None:
    script = PKG / "benchmarks" / "readme_tables.py"
    if not (PKG / "benchmarks" / "reproduce_quick.json").is_file():
        pytest.skip("no committed benchmark JSON (installed package without benchmarks)")
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=100, check=True
    ).stdout
    readme = (PKG / "README.md").read_text()
    rows = [ln for ln in out.splitlines() if ln.startswith("| 0.5 |")]
    assert len(rows) == 4, out  # NTP and the three STP arms
    missing = [ln for ln in rows if ln not in readme]
    assert not missing, f"README lacks these rows of readme_tables.py's output: {missing}"
