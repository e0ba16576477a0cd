"""tools/gpu_check.py's roofline scripts, run end to end on the CPU at toy shapes ("smoke":
Triton interpreter, wall-clock timing, numbers meaningless): the GPU session then spends its
minutes on numbers, not on a script error. Slow (a minute or two); needs the repository."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
TOOLS = Path(__file__).resolve().parents[2] / "tools"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["_ROOFLINE_ATTENTION", "_ROOFLINE_MLP"])
def test_roofline_script_runs_end_to_end_on_the_cpu(script):
    if not (TOOLS / "gpu_check.py").is_file():
        pytest.skip("tools/gpu_check.py is not beside this checkout (installed-wheel run)")
    sys.path.insert(0, str(TOOLS))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(TOOLS))
    env = dict(os.environ, TRITON_INTERPRET="1")
    cmd = [sys.executable, "-c", getattr(gpu_check, script), json.dumps(gpu_check.CARD_PEAKS)]
    r = subprocess.run([*cmd, "smoke"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    last = gpu_check._last_json(r.stdout)
    assert last["done"] and last["rows"]
    # every kernel row has its peers' ratios; a peer that cannot run on the CPU is a row too
    mine = [x for x in last["rows"] if x["impl"].startswith(("paged_", "grouped_mlp"))]
    assert mine and all(x["ms"] and x["vs"] for x in mine), mine
