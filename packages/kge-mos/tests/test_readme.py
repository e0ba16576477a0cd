"""The README's quickstart checker catches this README's past failure (issue 66).

The nox ``tests`` session runs every block of the Quickstart (tools/readme_quickstart.py). This
test feeds that checker the "layer alone" block as it stood before commit 515a8a1 (it used ``h``
and ``entity_table`` without building them, and printed nothing) and the block as it is now:
the old one must fail with the NameError a user saw, the current one must pass. Skipped where the
checkout's tools/ is absent (installed-wheel runs).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECKER = ROOT / "tools" / "readme_quickstart.py"
README = Path(__file__).resolve().parents[1] / "README.md"

OLD = """## Quickstart

```python
from icml26_kge_mos import MoSOutput

layer = MoSOutput(dim=64, n_components=4)
logp = layer(h, entity_table)  # (B, 64), (|E|, 64) -> (B, |E|)
logp = layer(h, entity_table, chunk_size=4096)  # same values, O(B·K·4096) memory
```
"""


def _checker():
    if not CHECKER.is_file() or not README.is_file():
        pytest.skip("tools/readme_quickstart.py or README.md absent (installed-wheel run)")
    spec = importlib.util.spec_from_file_location("readme_quickstart", CHECKER)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("readme_quickstart", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_old_layer_alone_block_fails_and_the_current_one_passes():
    qs = _checker()
    (old,) = qs.blocks(OLD)
    problems = qs.run_block(old, sys.executable, timeout=120, rtol=0.05)
    assert problems and "NameError: name 'h' is not defined" in problems[0]
    current = [b for b in qs.blocks(README.read_text()) if "MoSOutput(dim=64" in b.code]
    assert len(current) == 1 and len(current[0].expected) == 2  # (8, 1000) True / True
    assert qs.run_block(current[0], sys.executable, timeout=120, rtol=0.05) == []
