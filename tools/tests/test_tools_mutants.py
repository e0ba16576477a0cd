"""tools/mutants.py: plants each listed mutant in a copy, fails on a survivor, a hang, an error
or a stale entry; every member's list is well-formed and current; ``nox -s mutants(<name>)``
passes when every entry is killed and fails when one survives (a throwaway member)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import textwrap

import mutants
import pytest
import workspace
from conftest import REPO, write

CORE = """\
def clip(x, lo, hi):
    return min(max(x, lo), hi)


def mean(xs):
    return sum(xs) / len(xs)
"""

TESTS = """\
import pytest
from fakepkg.core import clip, mean


def test_clip():
    assert clip(5, 0, 3) == 3 and clip(-1, 0, 3) == 0 and clip(2, 0, 3) == 2


def test_mean():
    assert mean([1, 2, 6]) == 3


@pytest.mark.slow
def test_mean_slow():
    assert mean([1, 2, 6]) == 3
"""

PYPROJECT = """\
[tool.pytest.ini_options]
addopts = "-m 'not slow'"
markers = ["slow: deselected by default"]
"""

KILLED = """\
[[mutant]]
id = "clip-upper"
file = "src/fakepkg/core.py"
find = "min(max(x, lo), hi)"
replace = "max(x, lo)"
tests = ["tests/test_core.py::test_clip"]
description = "the upper bound is dropped"

[[mutant]]
id = "mean-denominator"
file = "src/fakepkg/core.py"
find = "sum(xs) / len(xs)"
replace = "sum(xs) / (len(xs) + 1)"
tests = ["tests/test_core.py::test_mean"]
description = "off-by-one denominator"
"""

SURVIVOR = """
[[mutant]]
id = "equivalent"
file = "src/fakepkg/core.py"
find = "min(max(x, lo), hi)"
replace = "max(min(x, hi), lo)"
tests = ["tests/test_core.py::test_clip"]
description = "equivalent for lo <= hi: no test can kill it"
"""


def _digest(folder):
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def fake(tmp_path):
    pkg = tmp_path / "packages" / "fake"
    write(pkg / "pyproject.toml", PYPROJECT)
    write(pkg / "src" / "fakepkg" / "__init__.py", "")
    write(pkg / "src" / "fakepkg" / "core.py", CORE)
    write(pkg / "tests" / "test_core.py", TESTS)
    write(pkg / "tests" / "mutants.toml", KILLED)
    return pkg


def _run(pkg, *extra, capsys=None):
    rc = mutants.main([str(pkg), "--import-name", "fakepkg", "--timeout", "60", *extra])
    out = capsys.readouterr() if capsys else None
    return rc, (out.out + out.err) if out else ""


def test_every_killed_mutant_passes_and_the_package_is_untouched(fake, capsys):
    before = _digest(fake)
    rc, out = _run(fake, capsys=capsys)
    assert rc == 0, out
    assert "killed  clip-upper" in out and "killed  mean-denominator" in out
    assert "2 of 2 killed" in out
    assert _digest(fake) == before  # planted in a temporary copy only


def test_a_survivor_fails_the_run_and_is_named(fake, capsys, tmp_path):
    (fake / "tests" / "mutants.toml").write_text(KILLED + SURVIVOR)
    out_json = tmp_path / "out.json"
    rc, out = _run(fake, "--json", str(out_json), capsys=capsys)
    assert rc == 1
    assert "survived: equivalent" in out and "2 of 3 killed" in out
    assert '"status": "survived"' in out_json.read_text()


def test_a_hanging_mutant_is_a_timeout_not_a_pass(fake, capsys):
    (fake / "tests" / "mutants.toml").write_text(
        KILLED
        + textwrap.dedent("""
        [[mutant]]
        id = "hang"
        file = "src/fakepkg/core.py"
        find = "return sum(xs) / len(xs)"
        replace = "while True:\\n        pass"
        tests = ["tests/test_core.py::test_mean"]
        description = "loops forever"
        """)
    )
    rc = mutants.main([str(fake), "--timeout", "8", "--only", "hang"])
    out = capsys.readouterr()
    assert rc == 1
    assert "timeout: hang" in out.err


def test_a_deselected_test_is_an_error_not_a_kill(fake, capsys):
    """A mutant whose only test the package's addopts deselect (``slow``) selects nothing:
    pytest exits 5, an error, never a kill."""
    (fake / "tests" / "mutants.toml").write_text(
        KILLED.replace("tests/test_core.py::test_mean", "tests/test_core.py::test_mean_slow")
    )
    rc, out = _run(fake, capsys=capsys)
    assert rc == 1
    assert "error: mean-denominator" in out and "pytest exit 5" in out


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('find = "min(max(x, lo), hi)"', 'find = "min(max(x, lo), hi + 0)"'),
         "occurs 0 times"),
        (lambda t: t.replace('find = "sum(xs) / len(xs)"', 'find = "xs"'), "occurs 3 times"),
        (lambda t: t.replace('id = "mean-denominator"', 'id = "clip-upper"'), "repeated"),
        (lambda t: t.replace('description = "off-by-one denominator"\n', ""), "missing keys"),
        (lambda t: t.replace("src/fakepkg/core.py", "src/fakepkg/gone.py", 1), "does not exist"),
        (lambda t: t.replace('replace = "max(x, lo)"', 'replace = "min(max(x, lo), hi)"'),
         "no mutation"),
    ],
)  # fmt: skip
def test_a_stale_or_malformed_list_is_a_usage_error(fake, capsys, edit, message):
    path = fake / "tests" / "mutants.toml"
    path.write_text(edit(path.read_text()))
    rc, out = _run(fake, capsys=capsys)
    assert rc == 2
    assert message in out


def test_named_tests_must_pass_unmutated(fake, capsys):
    core = fake / "src" / "fakepkg" / "core.py"
    core.write_text(CORE.replace("/ len(xs)", "/ len(xs) + 1"))  # a real bug: baseline fails
    rc, out = _run(fake, capsys=capsys)
    assert rc == 2
    assert "do not pass on the unmutated copy" in out


def test_the_copy_is_what_the_tests_import(fake, tmp_path, capsys):
    """A package importable from elsewhere first would make every mutant survive: refused."""
    other = tmp_path / "elsewhere"
    write(other / "fakepkg" / "__init__.py", "")
    write(other / "sitecustomize.py", f"import sys; sys.path.insert(0, {str(other)!r})\n")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(other) + (os.pathsep + old if old else "")
    try:
        rc, out = _run(fake, capsys=capsys)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    assert rc == 2
    assert "not from the copy" in out


# ----------------------------------------------------------------------------- the real lists
LISTS = sorted(
    (m for m in workspace.discover(REPO) if (m.path / mutants.LIST_NAME).is_file()),
    key=lambda m: m.name,
)


@pytest.mark.parametrize("member", LISTS, ids=[m.name for m in LISTS])
def test_every_member_list_is_current(member):
    """Each entry's code is still there exactly once and each named test still exists: a
    refactor that moves the code fails here, on every push, not only in the scheduled run."""
    entries = mutants.load(member.path / mutants.LIST_NAME)
    mutants.check_against(member.path, entries)
    for m in entries:
        assert m.description.strip(), m.id
        for node in m.tests:
            file, _, name = node.partition("::")
            if name:
                func = re.sub(r"\[.*\]$", "", name.split("::")[-1])
                text = (member.path / file).read_text()
                assert re.search(rf"^\s*(async )?def {re.escape(func)}\(", text, re.M), (m.id, node)


def test_the_issue_67_mutants_are_listed():
    """The six mechanisms of issue 67 (findings 1 and 2) stay in the harness."""
    want = {
        "bilateral-trade": "pro-ucb-uncapped",
        "online-fair": "capped-greedy-cap-ignores-slack",
        "cka-upcycling": "frozen-w2-not-detached",
        "lazyattention": "inplace-rotates-a-shared-document",
        "rcfcl": "stratified-test-ignores-tolerance",
    }
    by_name = {m.name: m for m in LISTS}
    for name, ident in want.items():
        ids = {e.id for e in mutants.load(by_name[name].path / mutants.LIST_NAME)}
        assert ident in ids, name
    of = {e.id for e in mutants.load(by_name["online-fair"].path / mutants.LIST_NAME)}
    assert "mms-share-not-deflated" in of


# ----------------------------------------------------------------------------- nox session
def test_mutants_sessions_are_listed_per_member():
    from test_tools_noxfile import nox

    res = nox("-l")
    assert res.returncode == 0, res.stderr
    for m in workspace.discover(REPO):
        assert f"mutants({m.name})" in res.stdout, m.name
        assert f"slow({m.name})" in res.stdout, m.name


def test_the_workflow_runs_mutants_on_changes_and_mutants_and_slow_on_a_schedule():
    import yaml

    wf = yaml.safe_load((REPO / ".github" / "workflows" / "mutants.yml").read_text())
    triggers = wf[True]  # YAML 1.1 reads the key `on` as True
    assert {"push", "pull_request", "schedule", "workflow_dispatch"} <= set(triggers)
    jobs = wf["jobs"]
    runs = {name: " ".join(s.get("run", "") for s in job["steps"]) for name, job in jobs.items()}
    assert 'nox -s "mutants($PACKAGE)"' in runs["mutants"]
    assert 'nox -s "slow($PACKAGE)"' in runs["slow"]
    assert "schedule" in jobs["slow"]["if"]
    # the slow job runs every member; the mutants job the changed ones (all on the schedule)
    assert "outputs.all" in jobs["slow"]["strategy"]["matrix"]["package"]
    assert "outputs.matrix" in jobs["mutants"]["strategy"]["matrix"]["package"]
    # and neither runs from .ci/run (the 60-minute CI run)
    ci_run = (REPO / ".ci" / "run").read_text()
    assert "mutants" not in ci_run and "slow(" not in ci_run


def test_nox_mutants_session_passes_when_killed_and_fails_on_a_survivor(tmp_path):
    """A throwaway member (tools/new.py in a workspace copy) with a list: the session passes;
    one equivalent entry added, it fails naming the survivor."""
    import new
    from test_tools_noxfile import _workspace_copy, nox

    root = _workspace_copy(tmp_path / "ws")
    pkg = new.create("throwaway", "Throwaway", "Throwaway", kernels=False, root=root)
    write(pkg / "src" / "icml26_throwaway" / "core.py", CORE)
    write(pkg / "tests" / "test_core.py", TESTS.replace("fakepkg", "icml26_throwaway"))
    listing = KILLED.replace("src/fakepkg/", "src/icml26_throwaway/")
    write(pkg / "tests" / "mutants.toml", listing)
    env = {**os.environ, "UV_PREVIEW_FEATURES": "package-conflicts"}
    lock = subprocess.run(
        ["uv", "lock"], cwd=root, capture_output=True, text=True, env=env, timeout=600
    )
    assert lock.returncode == 0, lock.stderr[-3000:]
    ok = nox("-s", "mutants(throwaway)", cwd=root)
    out = ok.stdout + ok.stderr
    assert ok.returncode == 0, out[-5000:]
    assert "2 of 2 killed" in out and "Session mutants(throwaway) was successful" in out
    (pkg / "tests" / "mutants.toml").write_text(
        listing + SURVIVOR.replace("src/fakepkg/", "src/icml26_throwaway/")
    )
    bad = nox("-s", "mutants(throwaway)", "--", "--timeout", "120", cwd=root)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0, out[-5000:]
    assert "survived: equivalent" in out and "Session mutants(throwaway) failed" in out
