"""The README's results tables are generated from the committed benchmark JSON (no hand edits)."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "benchmarks" / "table.py").exists():  # the installed wheel's tests
    pytest.skip("benchmarks/ not present (installed package)", allow_module_level=True)


def _table_module():
    spec = importlib.util.spec_from_file_location("cka_table", ROOT / "benchmarks" / "table.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["quick", "full", "signal", "planted"])
def test_readme_results_tables_match_the_benchmark_json(name):
    table = _table_module()
    readme = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- table:{name} -->\n(.*?)<!-- /table:{name} -->", readme, re.S)
    assert m, f"README.md lacks the generated block table:{name}"
    assert m.group(1) == table.block(name), (
        f"README table:{name} differs from {table.BLOCKS[name].name}: "
        "run `python benchmarks/table.py --write`"
    )
