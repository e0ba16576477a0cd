"""The noxfile discovers members itself, rejects unknown names, and proves a new package installs."""

import shutil
import subprocess
import sys

import new
import workspace
from conftest import REPO


def nox(*args, cwd=REPO, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(cwd / "noxfile.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_sessions_are_listed_per_member():
    res = nox("-l")
    assert res.returncode == 0, res.stderr
    listed = res.stdout
    for m in workspace.discover(REPO):
        for session in ("tests", "install", "build", "deps"):
            assert f"{session}({m.name})" in listed, (session, m.name)
    for session in ("lint", "reproduce", "tests(tools)", "deps(independence)"):
        assert session in listed


def test_unknown_package_is_a_clear_error():
    res = nox("-s", "tests(kernels)", "--", "no-such-package")
    assert res.returncode != 0
    assert "unknown package 'no-such-package'; valid names: kernels" in res.stderr


def test_a_new_package_builds_installs_and_passes_its_tests_from_the_wheel(tmp_path):
    """tools/new.py + nox install(...): the template is a working, installable package."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("noxfile.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(
        REPO / "tools", root / "tools", ignore=shutil.ignore_patterns("tests", "__pycache__")
    )
    shutil.copytree(
        REPO / "shared-kernels",
        root / "shared-kernels",
        ignore=shutil.ignore_patterns("tests", "__pycache__"),
    )
    new.create("throwaway", "A throwaway paper", "Throwaway", kernels=True, root=root)
    res = nox("-s", "install(throwaway)", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "installed:" in res.stdout + res.stderr and "site-packages" in res.stdout + res.stderr
    assert "1 passed" in res.stdout + res.stderr
