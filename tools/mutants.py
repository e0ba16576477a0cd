# /// script
# requires-python = ">=3.10"
# dependencies = ["tomli>=2; python_version < '3.11'"]
# ///
"""Mutation regression harness: every mutant a test once killed must stay killed.

    python tools/mutants.py packages/<name>                  # every entry of its mutants.toml
    python tools/mutants.py packages/<name> --only ID [...]  # some entries
    python tools/mutants.py packages/<name> --list           # the entries, nothing run
    uvx nox -s "mutants(<name>)"                             # the same, in the member's env

Each member may keep a declarative list, ``packages/<name>/tests/mutants.toml``::

    [[mutant]]
    id = "pro-ucb-uncapped"                      # unique within the file
    file = "src/icml26_x/learners.py"            # relative to the package folder
    find = "np.minimum(ucb, np.maximum(sp, 0.0))"  # exact text, must occur exactly once
    replace = "ucb"                              # what the mutant puts there
    tests = ["tests/test_x.py::test_cap"]        # pytest node ids (relative to the package)
    description = "PRO+ not capped at max(0, q - p)"

The harness copies the package folder once into a temporary directory (the working tree is
never touched: other people may be working in it), checks that every ``find`` text occurs
exactly once in the pristine copy (a refactor that moves the code makes the entry *stale*, which
is an error, not a silent pass), runs every named test once on the unmutated copy (they must
pass there, or a "kill" would mean nothing), then plants one mutant at a time, runs only that
entry's tests with a time limit, and restores the file. The copy's ``src`` comes first on
``PYTHONPATH``, and the harness checks that the package then imports from the copy.

Outcome per entry: ``killed`` (pytest exit 1: a named test failed), ``survived`` (exit 0),
``timeout``, or ``error`` (collection error, nothing selected, ...). The run fails (exit 1)
unless every entry is killed; exit 2 is a malformed or stale list.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LIST_NAME = Path("tests") / "mutants.toml"
KEYS = {"id", "file", "find", "replace", "tests", "description"}
COPY_IGNORE = shutil.ignore_patterns(
    "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv", ".nox", "dist", "build"
)
DEFAULT_TIMEOUT_S = 300.0  # per pytest run; a mutant that hangs counts as "timeout"


class ListError(ValueError):
    """A malformed, stale or ambiguous mutant list (exit 2)."""


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    description: str


@dataclass
class Outcome:
    id: str
    status: str  # killed | survived | timeout | error
    seconds: float
    detail: str = ""
    tests: list[str] = field(default_factory=list)


def load(path: Path) -> list[Mutant]:
    """The entries of one mutants.toml, checked for shape (not yet against the source)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ListError(f"{path}: {exc}") from None
    unknown = set(data) - {"mutant"}
    if unknown:
        raise ListError(f"{path}: unknown top-level keys {sorted(unknown)}; expected [[mutant]]")
    rows = data.get("mutant", [])
    if not isinstance(rows, list) or not rows:
        raise ListError(f"{path}: no [[mutant]] entries")
    out, seen = [], set()
    for i, row in enumerate(rows):
        where = f"{path}: [[mutant]] #{i + 1}"
        if not isinstance(row, dict):
            raise ListError(f"{where}: not a table")
        missing, extra = KEYS - set(row), set(row) - KEYS
        if missing or extra:
            raise ListError(
                f"{where}: missing keys {sorted(missing)}, unknown keys {sorted(extra)}"
            )
        tests = row["tests"]
        if not (isinstance(tests, list) and tests and all(isinstance(t, str) for t in tests)):
            raise ListError(f"{where}: tests must be a non-empty list of pytest node ids")
        for key in ("id", "file", "find", "replace", "description"):
            if not isinstance(row[key], str):
                raise ListError(f"{where}: {key} must be a string")
        if not row["id"] or row["id"] in seen:
            raise ListError(f"{where}: id {row['id']!r} is empty or repeated")
        if row["find"] == row["replace"]:
            raise ListError(f"{where} ({row['id']}): replace equals find (no mutation)")
        if not row["find"]:
            raise ListError(f"{where} ({row['id']}): find is empty")
        seen.add(row["id"])
        out.append(Mutant(row["id"], row["file"], row["find"], row["replace"], tuple(tests),
                          row["description"]))  # fmt: skip
    return out


def check_against(package: Path, mutants: list[Mutant]) -> None:
    """Every ``find`` occurs exactly once in its file; every test file exists (else stale)."""
    for m in mutants:
        target = package / m.file
        if not target.is_file():
            raise ListError(f"{m.id}: file {m.file} does not exist in {package}")
        n = target.read_text(encoding="utf-8").count(m.find)
        if n != 1:
            raise ListError(
                f"{m.id}: the text to replace occurs {n} times in {m.file} (must be exactly "
                f"once; the code moved or the entry is ambiguous): {m.find!r}"
            )
        for t in m.tests:
            test_file = t.split("::", 1)[0]
            if not (package / test_file).is_file():
                raise ListError(f"{m.id}: test file {test_file} does not exist in {package}")


def _env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "src"), *([old] if old else [])])
    env["ICML26_MUTANT_COPY"] = str(copy)
    return env


def _pytest(python: str, copy: Path, tests: list[str], timeout: float, extra: list[str]):
    cmd = [python, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider", *extra]
    return subprocess.run(
        cmd, cwd=copy, env=_env(copy), capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


def _tail(proc, n: int = 25) -> str:
    text = (proc.stdout or "") + (proc.stderr or "")
    return "\n".join(text.strip().splitlines()[-n:])


def _import_root(python: str, copy: Path, import_name: str) -> Path:
    code = f"import {import_name} as m; print(m.__file__)"
    proc = subprocess.run(
        [python, "-c", code], cwd=copy, env=_env(copy), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ListError(f"cannot import {import_name} from the copy:\n{_tail(proc)}")
    return Path(proc.stdout.strip().splitlines()[-1]).resolve()


def run(
    package: Path,
    mutants: list[Mutant],
    *,
    python: str = sys.executable,
    import_name: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    pytest_args: list[str] | None = None,
    log=print,
    workdir: Path | None = None,
) -> list[Outcome]:
    """Plant each mutant in a temporary copy of ``package``, run its tests, restore it."""
    package = Path(package).resolve()
    if os.sep in python:  # a relative interpreter path must survive the change of cwd (no
        python = os.path.abspath(python)  # resolve(): a venv's python is a symlink)
    extra = list(pytest_args or [])
    check_against(package, mutants)
    base = Path(tempfile.mkdtemp(prefix=f"mutants-{package.name}-", dir=workdir))
    try:
        # the same depth as in the repository (packages/<name>), so that tests locating files by
        # parents[k] find the copy's own benchmarks/ and README
        copy = base / package.parent.name / package.name
        shutil.copytree(package, copy, ignore=COPY_IGNORE, symlinks=True)
        if import_name:
            where = _import_root(python, copy, import_name)
            if copy.resolve() not in where.parents:
                raise ListError(f"{import_name} imports from {where}, not from the copy {copy}")
        named = sorted({t for m in mutants for t in m.tests})
        t0 = time.perf_counter()
        try:
            proc = _pytest(python, copy, named, timeout, extra)
        except subprocess.TimeoutExpired:
            raise ListError(
                f"the named tests ran past {timeout:g} s on the unmutated copy"
            ) from None
        if proc.returncode != 0:
            raise ListError(
                f"the named tests do not pass on the unmutated copy (exit {proc.returncode}):\n"
                f"{_tail(proc)}"
            )
        log(f"baseline: {len(named)} named tests pass unmutated ({time.perf_counter() - t0:.1f} s)")
        outcomes = []
        for m in mutants:
            target = copy / m.file
            original = target.read_text(encoding="utf-8")
            target.write_text(original.replace(m.find, m.replace, 1), encoding="utf-8")
            t0 = time.perf_counter()
            try:
                proc = _pytest(python, copy, list(m.tests), timeout, extra)
                rc = proc.returncode
                status = {0: "survived", 1: "killed"}.get(rc, "error")
                detail = "" if status == "killed" else f"pytest exit {rc}\n{_tail(proc)}"
            except subprocess.TimeoutExpired:
                status, detail = "timeout", f"ran past {timeout:g} s"
            finally:
                target.write_text(original, encoding="utf-8")
                for cache in (copy / "src").rglob("__pycache__"):
                    shutil.rmtree(cache, ignore_errors=True)
            out = Outcome(m.id, status, round(time.perf_counter() - t0, 2), detail, list(m.tests))
            outcomes.append(out)
            log(f"{status:>8}  {m.id}  ({out.seconds:.1f} s)  {m.description}")
            if detail and status != "killed":
                log("          " + detail.replace("\n", "\n          "))
        return outcomes
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", type=Path, help="the package folder (packages/<name>)")
    ap.add_argument("--list-file", type=Path, help=f"default: <package>/{LIST_NAME}")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    ap.add_argument("--import-name", help="check that this module imports from the copy")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run these entries only")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per run")
    ap.add_argument("--json", type=Path, help="write the outcomes here")
    ap.add_argument("--list", action="store_true", help="print the entries and exit")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    argv, pytest_args = argv[:cut], argv[cut + 1 :]  # after --: passed on to pytest
    args = ap.parse_args(argv)
    args.pytest_args = pytest_args
    path = args.list_file or args.package / LIST_NAME
    try:
        mutants = load(path)
        if args.only:
            unknown = set(args.only) - {m.id for m in mutants}
            if unknown:
                raise ListError(f"--only: no entries {sorted(unknown)} in {path}")
            mutants = [m for m in mutants if m.id in args.only]
        if args.list:
            check_against(args.package.resolve(), mutants)
            for m in mutants:
                print(f"{m.id}: {m.file}: {m.description} -> {', '.join(m.tests)}")
            return 0
        outcomes = run(
            args.package, mutants, python=args.python, import_name=args.import_name,
            timeout=args.timeout, pytest_args=args.pytest_args,
        )  # fmt: skip
    except ListError as exc:
        print(f"mutants: {exc}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    bad = [o for o in outcomes if o.status != "killed"]
    print(f"mutants: {len(outcomes) - len(bad)} of {len(outcomes)} killed in {args.package.name}")
    for o in bad:
        print(f"mutants: {o.status}: {o.id}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
