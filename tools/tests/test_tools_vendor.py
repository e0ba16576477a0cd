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
    assert "\n    from mylib import double\n" in notes  # the import line of the copy


def test_default_name_cannot_shadow_the_distribution(fake_repo, tmp_path):
    """Issue 66: the default target was the import name (icml26_alpha), so the copy shadowed an
    installed icml26-alpha, or the other way round, depending on sys.path order."""
    out = vendor.vendor("alpha", tmp_path / "proj", root=fake_repo)
    assert out.name == "_vendored_alpha"
    assert out.match("**/_vendored_*")  # what the root pyproject's ruff extend-exclude skips
    notes = (out / "VENDORED.md").read_text()
    line = "from _vendored_alpha import double"
    assert f"\n    {line}\n" in notes and "in place of `icml26_alpha`" in notes
    res = run_in(tmp_path / "proj", f"{line}; print(double([4]))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[8]"
    # an icml26 import name is refused outright, the package's own or a sibling's
    for taken in ("icml26_alpha", "icml26_beta", "icml26_kernels"):
        with pytest.raises(vendor.VendorError, match="import name of an icml26 distribution"):
            vendor.vendor("alpha", tmp_path / "p2", package_name=taken, root=fake_repo)
    assert not (tmp_path / "p2").exists()


def test_cli_prints_the_import_line(fake_repo, tmp_path, capsys):
    assert vendor.main(["alpha", "--into", str(tmp_path), "--root", str(fake_repo)]) == 0
    assert "import it as: from _vendored_alpha import double" in capsys.readouterr().out


def test_partial_copy_takes_the_closure_and_no_package_init(fake_repo, tmp_path):
    out = vendor.vendor("alpha", tmp_path, modules=["method"], root=fake_repo)
    assert (out / "helpers.py").is_file()  # imported by method
    init = (out / "__init__.py").read_text()
    assert "from .method" not in init  # the package __init__ was not copied
    res = run_in(tmp_path, "from _vendored_alpha.method import dumps; print(dumps([3]))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[6]"
    # no package __init__: VENDORED.md names the module
    assert "\n    from _vendored_alpha.method import " in (out / "VENDORED.md").read_text()


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
    assert "\n    from fairlib.notions import " in (out / "VENDORED.md").read_text()
    assert (
        "numpy" in (out / "VENDORED.md").read_text()
        and "scipy" in (out / "VENDORED.md").read_text()
    )
