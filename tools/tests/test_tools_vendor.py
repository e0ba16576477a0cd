import subprocess
import sys

import pytest
import vendor
from conftest import write


def run_in(project, code):
    return subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True)


def test_vendored_copy_runs_under_another_name(fake_repo, tmp_path):
    project = tmp_path / "userproject"
    out = vendor.vendor("alpha", project, package_name="mylib", root=fake_repo)
    assert out == project / "mylib"
    # the kernel it uses came along, the one it does not use did not
    assert (out / "_kernels/ops/scale.py").is_file() and (out / "_kernels/backend.py").is_file()
    assert not (out / "_kernels/ops/unused.py").exists()
    assert (out / "data/table.txt").read_text() == "1 2 3\n"
    method = (out / "method.py").read_text()
    assert "icml26_kernels" not in method.replace("# Source", "")
    assert "from ._kernels.ops.scale import scale" in method
    assert "from ._kernels import backend as kb" in method
    assert method.startswith("# Vendored by tools/vendor.py from icml26-alpha 0.1.0")
    # no icml26 package is importable in the user's project: only the copy
    res = run_in(
        project,
        "import mylib, sys; print(mylib.double([1, 2])); "
        "assert not any(m.startswith('icml26') for m in sys.modules)",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[2, 4]"
    notes = (out / "VENDORED.md").read_text()
    assert "icml26-alpha 0.1.0" in notes and "Apache-2.0" in notes


def test_partial_copy_takes_the_closure_and_no_package_init(fake_repo, tmp_path):
    out = vendor.vendor("alpha", tmp_path, modules=["method"], root=fake_repo)
    assert (out / "helpers.py").is_file()  # imported by method
    init = (out / "__init__.py").read_text()
    assert "from .method" not in init  # the package __init__ was not copied
    res = run_in(tmp_path, "from icml26_alpha.method import dumps; print(dumps([3]))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[6]"


def test_refuses_a_sibling_import_and_writes_nothing(fake_repo, tmp_path):
    tmp_path = tmp_path / "into"
    tmp_path.mkdir()
    write(fake_repo / "packages/alpha/src/icml26_alpha/bad.py", "from icml26_beta import f\n")
    with pytest.raises(vendor.VendorError, match="sibling package 'icml26_beta'"):
        vendor.vendor("alpha", tmp_path, root=fake_repo)
    assert list(tmp_path.iterdir()) == []


def test_refuses_bare_import_of_kernels_submodule(fake_repo, tmp_path):
    write(
        fake_repo / "packages/alpha/src/icml26_alpha/bare.py", "import icml26_kernels.ops.scale\n"
    )
    with pytest.raises(vendor.VendorError, match="binds the name 'icml26_kernels'"):
        vendor.vendor("alpha", tmp_path, root=fake_repo)


def test_refuses_module_names_given_as_strings(fake_repo, tmp_path):
    write(
        fake_repo / "packages/alpha/src/icml26_alpha/dyn.py",
        "import importlib\nm = importlib.import_module('icml26_alpha.helpers')\n",
    )
    with pytest.raises(vendor.VendorError, match="names a package by string"):
        vendor.vendor("alpha", tmp_path, root=fake_repo)


def test_existing_target_needs_force(fake_repo, tmp_path):
    vendor.vendor("alpha", tmp_path, root=fake_repo)
    with pytest.raises(vendor.VendorError, match="--force"):
        vendor.vendor("alpha", tmp_path, root=fake_repo)
    vendor.vendor("alpha", tmp_path, force=True, root=fake_repo)


def test_bad_arguments_are_named(fake_repo, tmp_path):
    with pytest.raises(vendor.VendorError, match="unknown module 'nope'.*valid: helpers, method"):
        vendor.vendor("alpha", tmp_path, modules=["nope"], root=fake_repo)
    with pytest.raises(vendor.VendorError, match="--package-name must be a Python identifier"):
        vendor.vendor("alpha", tmp_path, package_name="my-lib", root=fake_repo)
    assert vendor.main(["gamma", "--into", str(tmp_path), "--root", str(fake_repo)]) == 2


def test_a_real_package_vendors_and_runs(tmp_path):
    """icml26-online-fair's fairness notions (numpy + scipy) copied and run in a foreign project."""
    from conftest import REPO

    project = tmp_path / "userproject"
    out = vendor.vendor(
        "online-fair", project, package_name="fairlib", modules=["notions"], root=REPO
    )
    assert not (out / "policies.py").exists()  # not imported by notions: not carried
    header = (out / "notions.py").read_text().splitlines()[0]
    assert header.startswith("# Vendored by tools/vendor.py from icml26-online-fair")
    # maximin share of goods {1, 2, 3, 4} for 2 agents: best split {1, 4} | {2, 3} -> 5
    res = run_in(
        project,
        "import sys; from fairlib.notions import mms_value; "
        "print(mms_value([1.0, 2.0, 3.0, 4.0], 2)); "
        "assert not any(m.startswith('icml26') for m in sys.modules)",
    )
    assert res.returncode == 0, res.stderr
    assert float(res.stdout.strip()) == 5.0
    assert (
        "numpy" in (out / "VENDORED.md").read_text()
        and "scipy" in (out / "VENDORED.md").read_text()
    )
