import json
import subprocess
import sys

import pytest
import workspace
from conftest import REPO, TOOLS, write


def test_discover_reads_members_in_order(fake_repo):
    members = workspace.discover(fake_repo)
    assert [m.name for m in members] == ["kernels", "alpha", "beta"]
    alpha = members[1]
    assert (alpha.dist, alpha.import_name, alpha.paper) == (
        "icml26-alpha",
        "icml26_alpha",
        "Alpha paper",
    )
    assert alpha.relpath(fake_repo) == "packages/alpha"
    assert members[0].relpath(fake_repo) == "shared-kernels" and members[0].is_kernels


def test_get_accepts_every_name_form(fake_repo):
    for name in ("alpha", "icml26-alpha", "icml26_alpha"):
        assert workspace.get(name, fake_repo).name == "alpha"


def test_unknown_package_lists_valid_names(fake_repo):
    with pytest.raises(workspace.UnknownPackageError, match="valid names: kernels, alpha, beta"):
        workspace.get("gamma", fake_repo)


def test_folder_and_distribution_must_agree(fake_repo):
    write(
        fake_repo / "packages/gamma/pyproject.toml",
        '[project]\nname = "icml26-delta"\nversion = "0.1.0"\n',
    )
    with pytest.raises(ValueError, match="packages/gamma must hold icml26-gamma"):
        workspace.discover(fake_repo)


def test_missing_version_is_reported_with_the_file(fake_repo):
    write(fake_repo / "packages/gamma/pyproject.toml", '[project]\nname = "icml26-gamma"\n')
    with pytest.raises(ValueError, match=r"gamma/pyproject.toml: needs a \[project\] table"):
        workspace.discover(fake_repo)


def test_cli_on_real_repo_lists_kernels_and_errors_clearly():
    out = subprocess.run(
        [sys.executable, str(TOOLS / "workspace.py"), "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0]["dist"] == "icml26-kernels"
    assert {r["name"] for r in rows} == {m.name for m in workspace.discover(REPO)}
    bad = subprocess.run(
        [sys.executable, str(TOOLS / "workspace.py"), "show", "nope"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "valid names: kernels" in bad.stderr


def test_release_tag_names_the_member_and_checks_its_version(fake_repo):
    (fake_repo / "packages/alpha/CHANGELOG.md").write_text("# Changelog\n\n## 0.1.0\n\n- x\n")
    assert workspace.release_member("icml26-alpha/v0.1.0", fake_repo).dist == "icml26-alpha"
    with pytest.raises(ValueError, match="says version 0.2.0 but icml26-alpha is at 0.1.0"):
        workspace.release_member("icml26-alpha/v0.2.0", fake_repo)
    with pytest.raises(ValueError, match="must look like"):
        workspace.release_member("alpha-0.1.0", fake_repo)
    with pytest.raises(workspace.UnknownPackageError):
        workspace.release_member("icml26-gamma/v0.1.0", fake_repo)


def test_fairpyx_conflict_covers_every_other_member():
    """uv.lock forks fairpyx's numpy<2 world off: every member but online-fair must be listed,
    or a new package silently resolves with (and is tested against) numpy 1.26."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]
    fairpyx = {"package": "icml26-online-fair", "extra": "fairpyx"}
    listed = {
        other["package"] for pair in config["conflicts"] for other in pair[1:] if pair[0] == fairpyx
    }
    # icml26-kernels is numpy-agnostic and stays out: listed, uv marks every dev-group dependency
    # on it `extra == 'project-14-icml26-kernels'` and never installs it there (the next test)
    others = {m.dist for m in workspace.discover(REPO)} - {"icml26-online-fair", "icml26-kernels"}
    assert listed == others, (
        "add to [tool.uv] conflicts in the root pyproject.toml: "
        f"{sorted(others - listed)}; drop: {sorted(listed - others)}"
    )


def test_every_dev_group_dependency_on_kernels_is_installed():
    """Each member's benchmarks import icml26_kernels.evidence through the dev group. With
    icml26-kernels in a package-level conflict, uv locked those entries under a marker that no
    sync satisfies, and the benchmarks failed with ModuleNotFoundError in every nox venv."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    lock = tomllib.loads((REPO / "uv.lock").read_text())
    dead = []
    for pkg in lock["package"]:
        for dep in pkg.get("dev-dependencies", {}).get("dev", []):
            if dep["name"] == "icml26-kernels" and "project-14-icml26-kernels" in dep.get(
                "marker", ""
            ):
                dead.append(pkg["name"])
    assert not dead, f"dev-group icml26-kernels never installed for {dead}"


def test_unlocked_test_requirements_must_be_exact_pins(fake_repo):
    """The ``tests`` session installs these outside uv.lock: a range would make CI drift."""
    base = '[project]\nname = "icml26-gamma"\nversion = "0.1.0"\n[tool.icml26]\n'
    write(
        fake_repo / "packages/gamma/pyproject.toml",
        base + 'unlocked-test-requirements = ["flwr[simulation]==1.42.0"]\n',
    )
    gamma = workspace.get("gamma", fake_repo)
    assert gamma.unlocked_test == ["flwr[simulation]==1.42.0"]
    assert workspace.get("alpha", fake_repo).unlocked_test == []
    write(
        fake_repo / "packages/gamma/pyproject.toml",
        base + 'unlocked-test-requirements = ["flwr>=1.22"]\n',
    )
    with pytest.raises(ValueError, match="unlocked-test-requirements must be a list of exact"):
        workspace.discover(fake_repo)


def test_quick_over_budget_is_a_reason(fake_repo):
    """`nox -s reproduce` skips such a member by default; the reason must be readable text."""
    base = '[project]\nname = "icml26-gamma"\nversion = "0.1.0"\n[tool.icml26]\n'
    write(fake_repo / "packages/gamma/pyproject.toml", base + 'quick-over-budget = "187 s"\n')
    assert workspace.get("gamma", fake_repo).quick_over_budget == "187 s"
    assert workspace.get("alpha", fake_repo).quick_over_budget == ""
    write(fake_repo / "packages/gamma/pyproject.toml", base + "quick-over-budget = true\n")
    with pytest.raises(ValueError, match="quick-over-budget must be a string"):
        workspace.discover(fake_repo)


def test_over_budget_members_of_this_repository_say_why_in_their_readme():
    for m in workspace.discover(workspace.ROOT):
        if m.quick_over_budget:
            assert "quick-over-budget" in (m.path / "README.md").read_text(), m.name
