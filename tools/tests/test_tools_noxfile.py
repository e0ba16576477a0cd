"""The noxfile discovers members itself, rejects unknown names, and proves a new package installs."""

import os
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


def _workspace_copy(root):
    """The repository's tooling, root config and shared-kernels, without the paper packages."""
    root.mkdir()
    for name in ("noxfile.py", "README.md", "LICENSE"):
        shutil.copy(REPO / name, root / name)
    # the fairpyx conflict list names members this copy lacks
    text = (REPO / "pyproject.toml").read_text()
    start = text.index("conflicts = [")
    end = text.index("\n]\n", start) + 3
    (root / "pyproject.toml").write_text(text[:start] + text[end:])
    shutil.copytree(
        REPO / "tools", root / "tools", ignore=shutil.ignore_patterns("tests", "__pycache__")
    )
    shutil.copytree(
        REPO / "shared-kernels",
        root / "shared-kernels",
        ignore=shutil.ignore_patterns("tests", "__pycache__"),
    )
    return root


def test_a_new_package_passes_tests_deps_build_and_install_unchanged(tmp_path):
    """tools/new.py, then uv lock: the template passes every per-member CI session as written.

    (The template used to declare numpy and icml26-kernels without importing them: deptry's
    DEP002 turned `deps` red on every new package.)
    """
    root = _workspace_copy(tmp_path / "ws")
    new.create("throwaway", 'A "quoted" paper', "Throwaway", kernels=True, root=root)
    env = {**os.environ, "UV_PREVIEW_FEATURES": "package-conflicts"}
    lock = subprocess.run(
        ["uv", "lock"], cwd=root, capture_output=True, text=True, env=env, timeout=600
    )
    assert lock.returncode == 0, lock.stderr[-3000:]
    res = nox(
        "-s",
        "tests(throwaway)",
        "deps(throwaway)",
        "build(throwaway)",
        "install(throwaway)",
        cwd=root,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-5000:]
    for session in ("tests", "deps", "build", "install"):
        assert f"Session {session}(throwaway) was successful" in out, session
    assert "bare install ok:" in out and "site-packages" in out
    assert "Success! No dependency issues found" in out  # deptry
    assert out.count("1 passed") >= 2  # the source tree and the installed wheel
