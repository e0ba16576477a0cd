import json
import subprocess
import sys

import changed
from conftest import TOOLS

NAMES = ["kernels", "alpha", "beta"]


def test_one_package_change_selects_only_it():
    assert changed.affected(["packages/beta/src/icml26_beta/core.py"], NAMES) == ["beta"]


def test_changes_keep_discovery_order_and_deduplicate():
    paths = ["packages/beta/README.md", "packages/alpha/tests/t.py", "packages/beta/x.py"]
    assert changed.affected(paths, NAMES) == ["alpha", "beta"]


def test_shared_inputs_select_everything():
    for path in [
        "shared-kernels/src/icml26_kernels/x.py",
        "tools/vendor.py",
        "uv.lock",
        "pyproject.toml",
        "noxfile.py",
        ".github/workflows/ci.yml",
        "./uv.lock",
    ]:
        assert changed.affected([path], NAMES) == NAMES, path


def test_docs_and_unknown_packages_select_nothing():
    assert changed.affected(["README.md", "CONTRIBUTING.md", "packages/gone/x.py", ""], NAMES) == []
    assert changed.matrix([]) == {"package": [], "any": False}


def test_nested_pyproject_is_not_the_root_one():
    assert changed.affected(["packages/alpha/pyproject.toml"], NAMES) == ["alpha"]


def test_cli_prints_a_json_matrix_from_stdin():
    out = subprocess.run(
        [sys.executable, str(TOOLS / "changed.py"), "--stdin"],
        input="README.md\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == {"package": [], "any": False}


def test_cli_bad_git_ref_is_a_clear_error():
    res = subprocess.run(
        [sys.executable, str(TOOLS / "changed.py"), "--base", "no-such-ref-xyz"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and "no-such-ref-xyz" in res.stderr
