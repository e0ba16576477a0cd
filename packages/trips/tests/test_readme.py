"""The README quickstart runs (its first python block)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.slow
def test_quickstart_runs():
    block = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)[0]
    exec(compile(block, "README quickstart", "exec"), {})
