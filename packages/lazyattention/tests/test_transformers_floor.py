"""The transformers floor: declared in pyproject, checked at import with a message that says
which version was found and which is needed (issue 66: "needs transformers: pip install ..."
was shown although transformers was installed, only too old)."""

from __future__ import annotations

import re
from pathlib import Path

from icml26_lazyattention import hf


def test_too_old_says_found_and_required():
    msg = hf.transformers_problem("4.53.3", "5.18")
    assert msg is not None and "transformers 4.53.3 found, >= 5.18 required" in msg


def test_absent_says_install_the_extra():
    msg = hf.transformers_problem(None, "5.18")
    assert msg is not None and "icml26-lazyattention[hf]" in msg


def test_new_enough_passes():
    for v in ("5.18.0", "5.18", "5.24.0", "6.0.0.dev0", "5.20.2", "10.0.0"):
        assert hf.transformers_problem(v, "5.18") is None, v
    for v in ("5.10.0", "5.9.1", "4.57.0"):  # compared as numbers, not as strings
        assert hf.transformers_problem(v, "5.18") is not None, v


def test_floor_matches_pyproject():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    declared = re.search(r'hf = \["transformers>=([0-9.]+)"\]', text).group(1)
    assert declared == hf.MIN_TRANSFORMERS
