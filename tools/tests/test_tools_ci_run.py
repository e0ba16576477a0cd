"""`.ci/run` end to end with a stand-in `uvx`: its exit status and closing line follow nox's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO


def run_ci(tmp_path: Path, tests_output: str, tests_rc: int, lint_rc: int = 0, port_rc: int = 0):
    """Copy `.ci/run` into a scratch tree and run it with `uvx` replaced by a script."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci/run", tmp_path / ".ci/run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "uvx"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        # the portability pass (other ATen kernels, MKL AVX2, one thread) prints its own line
        'if [[ " $* " == *" tests "* && "${ATEN_CPU_CAPABILITY:-}" == default'
        ' && "${MKL_ENABLE_INSTRUCTIONS:-}" == AVX2 && "${OMP_NUM_THREADS:-}" == 1 ]]; then\n'
        f"  echo '=== 1 passed in 1s (portability) ==='; exit {port_rc}\n"
        "fi\n"
        'if [[ " $* " == *" tests "* ]]; then\n'
        f"  printf '%s\\n' {tests_output!r}; exit {tests_rc}\n"
        "fi\n"
        f"echo 'nox > Session lint was successful.'; exit {lint_rc}\n"
    )
    fake.chmod(0o755)
    # the pinned uv (.ci/run's uv_pin): another version would be replaced by a bootstrapped one
    pin = re.search(r"^uv_pin=(\S+)$", (REPO / ".ci/run").read_text(), flags=re.M)
    assert pin, ".ci/run has no uv_pin="
    (bin_dir / "uv").write_text(f"#!/usr/bin/env bash\necho 'uv {pin.group(1)}'\n")
    (bin_dir / "uv").chmod(0o755)
    # the portability pass's variables may be set around this very test (CI's second pass)
    outer = {"ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS"}
    env = {k: v for k, v in os.environ.items() if k not in outer}
    env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    return subprocess.run(
        ["bash", str(tmp_path / ".ci/run")], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    ("output", "tests_rc", "lint_rc", "want_rc", "want_line"),
    [
        # nothing failed or skipped anywhere: grep finds no match, the run must still pass
        (
            "=== 5 passed in 1s ===\n=== 7 passed in 2s ===",
            0,
            0,
            0,
            "13 passed, 0 failed, 0 skipped",
        ),
        ("=== 5 passed, 2 skipped in 1s ===", 0, 0, 0, "6 passed, 0 failed, 2 skipped"),
        ("=== 4 passed, 1 failed in 1s ===", 1, 0, 1, "4 passed, 1 failed, 0 skipped"),
        # lint fails with every test passing: the run fails and says so
        ("=== 3 passed in 1s ===", 0, 1, 1, "4 passed, 1 failed, 0 skipped"),
    ],
)
def test_ci_run_status_and_summary(tmp_path, output, tests_rc, lint_rc, want_rc, want_line):
    result = run_ci(tmp_path, output, tests_rc, lint_rc)
    assert result.returncode == want_rc, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == want_line


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ci_run_fails_when_only_the_portability_pass_fails(tmp_path):
    """A test that passes on this CPU's kernels but not on the generic ones fails CI."""
    result = run_ci(tmp_path, "=== 5 passed in 1s ===", 0, 0, port_rc=1)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "portability pass" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "6 passed, 1 failed, 0 skipped"
