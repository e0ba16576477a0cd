# /// script
# requires-python = ">=3.10"
# dependencies = ["tomli>=2; python_version < '3.11'"]
# ///
"""One GPU check: every ``gpu``-marked test and every kernel benchmark, one JSON report.

    python3 tools/gpu_check.py --out DIR          # on a CUDA machine: writes DIR/gpu_check.json
    python3 tools/gpu_check.py --list             # what it would run or skip, and why (no CUDA needed)
    python3 tools/gpu_check.py --out DIR --only bench:latentmoe --budget 300

Runs with the interpreter that has torch (``--python`` picks another one; ``uv run`` alone
gives a bare interpreter without torch). Nothing is installed: each item runs in a subprocess
with every member's ``src`` folder on ``PYTHONPATH``. What runs, in this order:

- ``triton-api``: every ``tl.*`` / ``triton.*`` name (and keyword argument) the kernels use,
  looked up in the installed Triton, so an older Triton is reported as the feature it lacks;
- ``gpu-tests:<member>``: ``pytest -m gpu`` in each member whose tests mark one ``gpu``;
- ``bench:<member>/<script>``: each ``benchmarks/bench_*.py`` that opts in with a line
  ``# gpu-check: ARGS  # why`` (``{json}`` in ARGS becomes a path the report then reads);
  its own numbers are the last JSON object it prints on stdout (or the ``{json}`` file);
  a benchmark without that line is listed as skipped (not a kernel benchmark);
- ``roofline:attention``, ``roofline:grouped-mlp``: the kernels timed against fair peers at
  real shapes (``--list`` names them), each row with achieved GB/s or TFLOP/s, the fraction
  of the card's peak (:data:`CARD_PEAKS`) and the ratio to each peer; rows are printed as they
  are measured, so a time limit keeps the finished ones;
- ``suite:kernels``: shared-kernels' default suite, whose kernel tests pick CUDA when present.

At the end one markdown table (every item, then every roofline row) is printed;
``--table gpu_check.json`` prints it again from a recorded report.

Before an item runs, the member's declared requirements (dependencies, the extras it asks of
``icml26-kernels``, its dev group) and a benchmark's own imports are checked in the target
interpreter; an item whose requirements are absent is skipped with the missing names as reason.
Each item has a timeout and the whole run a budget (``--budget``, default 450 s), so the check
ends in under 8 minutes. Exit status: 0 all ran items passed, 1 an item failed, 2 no CUDA
device (the message says why) or a usage error.

Report (``gpu_check.json``, schema 1): ``machine`` (card name, capability, memory, torch /
CUDA / Triton / JAX versions), ``summary`` (counts per status) and ``items`` (id, kind, member,
command, status passed/failed/incomplete/skipped (incomplete: stopped by a timeout or the
budget, not a failure), reason, seconds, per-test results, the benchmark's
numbers, a hint for a known Triton/CUDA error, the output's tail). ``gpu_check.log`` beside it
holds every item's full output.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

try:
    import workspace  # tools/ sibling; stdlib only from Python 3.11 on
except ModuleNotFoundError as _exc:  # pragma: no cover - Python 3.10 without tomli
    sys.exit(f"gpu_check: {_exc}; run it with Python >= 3.11 (tomllib) or install tomli")

# dev-group test plugins the GPU machine (no registry) may lack: gpu_check's own per-item
# timeouts stand in for pytest-timeout there
OPTIONAL_TEST_PLUGINS = {"pytest-timeout"}
SCHEMA = 1
REPORT = "gpu_check.json"
LOG = "gpu_check.log"
BENCH_MARKER = re.compile(r"^#\s*gpu-check:(.*)$", re.MULTILINE)
GPU_MARK = re.compile(r"\bmark\.gpu\b")
# seconds per item kind; each is capped by what is left of --budget
TIMEOUTS = {
    "preflight": 60.0,
    "pytest": 180.0,
    "bench": 180.0,
    "roofline": 150.0,
    "suite": 240.0,
}
STATUSES = ("passed", "failed", "incomplete", "skipped")
PROBE_TIMEOUT = 90.0
MIN_ITEM_SECONDS = 15.0  # an item is not started with less budget than this left
TAIL_CHARS = 4000
HINTS = [  # (pattern in the output, what it means)
    (r"module 'triton\.language' has no attribute '(\w+)'", "Triton lacks tl.{0}"),
    (r"module 'triton' has no attribute '(\w+)'", "Triton lacks triton.{0}"),
    (r"got an unexpected keyword argument '(\w+)'", "an API lacks the keyword {0!r}"),
    (r"(triton\.compiler\.errors\.\w+)", "Triton failed to compile a kernel ({0})"),
    (r"(OutOfResources[^\n]*)", "a kernel asks for more shared memory / registers: {0}"),
    (r"(CUDA out of memory[^\n]*)", "{0}"),
    (r"No module named '([\w.]+)'", "module {0!r} is not importable"),
]


@dataclass
class Item:
    """One thing the check runs: a pytest selection, a benchmark script or a preflight probe."""

    id: str  # "gpu-tests:kernels", "bench:latentmoe/bench_kernels.py", "triton-api", ...
    kind: str  # preflight | pytest | bench | suite
    member: str | None
    description: str
    args: list[str]  # argv after the python executable
    cwd: Path
    requires: list[str] = field(default_factory=list)  # requirement strings (PEP 508)
    modules: list[str] = field(default_factory=list)  # top-level modules that must import
    skip: str | None = None  # reason decided before running
    stdin: str | None = None

    @property
    def timeout(self) -> float:
        return TIMEOUTS[self.kind]


# --------------------------------------------------------------------------------------------
# planning (stdlib only; works without torch or CUDA)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _req_name(req: str) -> tuple[str, list[str]]:
    m = _REQ.match(req)
    if not m:
        raise ValueError(f"cannot read requirement {req!r}")
    extras = [e.strip() for e in (m.group(2) or "").split(",") if e.strip()]
    return m.group(1), extras


def member_requirements(
    member: workspace.Member,
    members: list[workspace.Member],
    *,
    dev: bool = True,
    extras: tuple[str, ...] = (),
) -> list[str]:
    """Third-party requirements of ``member``: its dependencies, ``extras`` and dev group, with
    workspace members (``icml26-kernels[triton]``) expanded to theirs."""
    by_dist = {_norm(m.dist): m for m in members}
    out: list[str] = []
    seen: set[tuple[str, str]] = set()

    def add(reqs: list[str]) -> None:
        for req in reqs:
            name, wanted = _req_name(req)
            inner = by_dist.get(_norm(name))
            if inner is None:
                if req not in out:
                    out.append(req)
                continue
            for extra in ["", *wanted]:
                if (inner.name, extra) in seen:
                    continue
                seen.add((inner.name, extra))
                add(inner.dependencies if extra == "" else inner.extras.get(extra, []))

    add(member.dependencies)
    for extra in extras:
        add(member.extras.get(extra, []))
    if dev:
        add([d for d in member.dev if not d.startswith("-") and _norm(_req_name(d)[0]) not in
             OPTIONAL_TEST_PLUGINS])  # fmt: skip
    return out


def script_imports(path: Path) -> list[str]:
    """Top-level module names a script imports anywhere (stdlib and relative imports dropped)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | {"__future__"}
    return sorted(n for n in names if n not in stdlib)


def _dotted(node: ast.expr, alias: dict[str, str]) -> str | None:
    """``tl.math.erf`` -> ``triton.language.math.erf`` when ``tl`` aliases a triton module."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in alias and parts:
        return ".".join([alias[node.id], *reversed(parts)])
    return None


def triton_uses(paths: list[Path], root: Path) -> list[dict]:
    """Each ``triton``/``tl`` attribute chain (and the keywords it is called with) in ``paths``."""
    uses: dict[str, dict] = {}
    for path in paths:
        text = path.read_text()
        if "triton" not in text:
            continue
        tree = ast.parse(text, filename=str(path))
        alias: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "triton" or a.name.startswith("triton."):
                        alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else "triton"
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "triton" or node.module.startswith("triton."):
                    for a in node.names:
                        alias[a.asname or a.name] = f"{node.module}.{a.name}"

        where = path.relative_to(root).as_posix()
        inner: set[int] = set()  # attribute nodes that are part of a longer chain
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                inner.add(id(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and id(node) not in inner:
                name = _dotted(node, alias)
                if name:
                    uses.setdefault(name, {"name": name, "keywords": [], "where": where})
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = _dotted(node.func, alias) if isinstance(node.func, ast.Attribute) else None
                if name:
                    entry = uses.setdefault(name, {"name": name, "keywords": [], "where": where})
                    for kw in node.keywords:
                        if kw.arg and kw.arg not in entry["keywords"]:
                            entry["keywords"].append(kw.arg)
    return sorted(uses.values(), key=lambda u: u["name"])


def plan(root: Path, members: list[workspace.Member], suites: bool = False) -> list[Item]:
    """Every item, in run order; ``skip`` set where the repository alone says it cannot run."""
    srcs = [p for m in members for p in sorted(m.path.joinpath("src").rglob("*.py"))]
    uses = triton_uses(srcs, root)
    items = [
        Item(
            id="triton-api",
            kind="preflight",
            member=None,
            description=f"{len(uses)} Triton names the kernels use, looked up in the installed Triton",
            args=["-c", _TRITON_API_SCRIPT],
            cwd=root,
            modules=["triton"],
            skip=None if uses else "no Triton kernels in any member",
            stdin=json.dumps(uses),
        )
    ]
    for m in members:
        tests = m.path / "tests"
        marked = [
            p.relative_to(m.path).as_posix()
            for p in sorted(tests.rglob("*.py"))
            if GPU_MARK.search(p.read_text())
        ]
        items.append(
            Item(
                id=f"gpu-tests:{m.name}",
                kind="pytest",
                member=m.name,
                description=f"pytest -m gpu ({', '.join(marked) or 'no gpu-marked test'})",
                args=["-m", "pytest", "tests", "-m", "gpu", *_PYTEST_ARGS],
                cwd=m.path,
                requires=member_requirements(m, members, extras=_test_extras(m)),
                skip=None if marked else "no gpu-marked tests",
            )
        )
    for m in members:
        for script in sorted((m.path / "benchmarks").glob("bench_*.py")):
            rel = script.relative_to(m.path).as_posix()
            found = BENCH_MARKER.search(script.read_text())
            args = shlex.split(found.group(1), comments=True) if found else []
            items.append(
                Item(
                    id=f"bench:{m.name}/{script.name}",
                    kind="bench",
                    member=m.name,
                    description=f"python {rel} {shlex.join(args)}".rstrip(),
                    args=[rel, *args],
                    cwd=m.path,
                    requires=member_requirements(m, members, dev=False),
                    modules=[
                        n
                        for n in script_imports(script)
                        if not any(n == x.import_name for x in members)
                    ],
                    skip=None if found else "not a kernel benchmark (no '# gpu-check:' line)",
                )
            )
    for m in members:
        if m.is_kernels:
            for name, peers in ROOFLINE_PEERS.items():
                script = _ROOFLINE_ATTENTION if name == "attention" else _ROOFLINE_MLP
                items.append(
                    Item(
                        id=f"roofline:{name}",
                        kind="roofline",
                        member=m.name,
                        description=peers,
                        args=["-c", script, json.dumps(CARD_PEAKS)],
                        cwd=root,
                        requires=member_requirements(m, members, dev=False, extras=("triton",)),
                        modules=["torch", "triton"],
                    )
                )
    for m in members:
        if m.is_kernels or (suites and _uses_kernels(m, members)):
            items.append(
                Item(
                    id=f"suite:{m.name}",
                    kind="suite",
                    member=m.name,
                    description="default test suite on CUDA (kernel tests pick the GPU)",
                    args=["-m", "pytest", "tests", "-m", "not slow and not gpu", *_PYTEST_ARGS],
                    cwd=m.path,
                    requires=member_requirements(m, members, extras=_test_extras(m)),
                    skip=None if (m.path / "tests").is_dir() else "no tests folder",
                )
            )
    return items


def _test_extras(m: workspace.Member) -> tuple[str, ...]:
    """Extras a member's GPU tests need: its ``triton`` extra where it has one (the kernels' own
    tests are Triton tests; latentmoe and lazyattention make Triton opt-in for CPU users)."""
    return ("triton",) if "triton" in m.extras else ()


def _uses_kernels(m: workspace.Member, members: list[workspace.Member]) -> bool:
    kernels = {_norm(x.dist) for x in members if x.is_kernels}
    return any(_norm(_req_name(r)[0]) in kernels for r in m.dependencies)


# pytest's own options for every pytest item: ini addopts dropped (they select 'not gpu' and may
# name plugins the GPU machine lacks), no cache folder written into the tree
# (-v: one line per test, read back when a timeout kills pytest before it writes its junit file)
_PYTEST_ARGS = ["-p", "no:cacheprovider", "-o", "addopts=", "-ra", "-v", "--strict-markers"]
_VERBOSE_LINE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)
_VERBOSE_STATUS = {"PASSED": "passed", "XFAIL": "passed", "XPASS": "passed", "SKIPPED": "skipped"}


# --------------------------------------------------------------------------------------------
# scripts run by the target interpreter (they may import torch; this file does not)

_PROBE_SCRIPT = r"""
import json, platform, shutil, subprocess, sys
from importlib import metadata
out = {"python": sys.version.split()[0], "executable": sys.executable,
       "platform": platform.platform()}
for dist in ("torch", "triton", "jax", "jaxlib", "transformers", "numpy", "pytest"):
    try:
        out[dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        out[dist] = None
try:
    import torch
except Exception as exc:
    out["cuda_available"] = False
    out["why"] = f"torch is not importable by {sys.executable}: {type(exc).__name__}: {exc}"
else:
    out["torch_cuda"] = torch.version.cuda
    out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    out["cuda_available"] = bool(torch.cuda.is_available())
    if out["cuda_available"]:
        p = torch.cuda.get_device_properties(0)
        out.update(device=torch.cuda.get_device_name(0), capability=[p.major, p.minor],
                   device_count=torch.cuda.device_count(), memory_gib=round(p.total_memory / 2**30, 1),
                   multiprocessors=p.multi_processor_count)
        if shutil.which("nvidia-smi"):
            r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30)
            out["driver"] = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    else:
        out["why"] = (f"torch.cuda.is_available() is False (torch {torch.__version__}, "
                      f"built for CUDA {torch.version.cuda})")
print(json.dumps(out))
"""

_REQUIRES_SCRIPT = r"""
import importlib.util, json, re, sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    Requirement = None
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
top = {}
for mod, dists in metadata.packages_distributions().items():
    for d in dists:
        top.setdefault(norm(d), []).append(mod)
def module_ok(mod):
    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False
def check(reqs, mods):
    missing, gone = [], set()
    for req in reqs:
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1)
        spec = None
        if Requirement is None and ";" in req:
            continue  # a marker that cannot be evaluated without packaging: not checked
        if Requirement is not None:
            r = Requirement(req)
            if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                continue
            spec = r.specifier
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(f"{name} (not installed)")
            gone.add(norm(name).replace("-", "_"))
            continue
        if spec is not None and not spec.contains(have, prereleases=True):
            missing.append(f"{name} {have} (needs {spec})")
            continue
        mods_of = [m for m in top.get(norm(name), []) if not m.startswith("_")]
        if mods_of and not any(module_ok(m) for m in mods_of):
            missing.append(f"{name} (installed but {mods_of[0]!r} is not importable)")
    for mod in mods:
        if mod not in gone and not module_ok(mod):
            missing.append(f"module {mod!r} (not importable)")
    return missing
items = json.load(sys.stdin)
print(json.dumps({k: check(v["requires"], v["modules"]) for k, v in items.items()}))
"""

_TRITON_API_SCRIPT = r"""
import importlib, inspect, json, sys
import triton
uses = json.load(sys.stdin)
missing = []
def resolve(name):
    parts = name.split(".")
    obj, i = None, len(parts)
    while i > 0:  # longest importable module prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            i -= 1
    if obj is None:
        raise AttributeError(name)
    for p in parts[i:]:
        obj = getattr(obj, p)
    return obj
for use in uses:
    try:
        obj = resolve(use["name"])
    except AttributeError:
        missing.append(f"{use['name']} (used in {use['where']})")
        continue
    if use["keywords"] and callable(obj):
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        for kw in use["keywords"]:
            if kw not in params:
                missing.append(f"{use['name']}({kw}=...) (used in {use['where']})")
print(json.dumps({"triton": triton.__version__, "checked": len(uses), "missing": missing}))
sys.exit(1 if missing else 0)
"""


# --------------------------------------------------------------------------------------------
# running


def _env(members: list[workspace.Member]) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(m.path / "src") for m in members]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["MPLBACKEND"] = "Agg"
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # JAX would take 75% of the card at import
    env.pop("TRITON_INTERPRET", None)  # compiled kernels, not the CPU interpreter
    env.pop("ICML26_KERNELS_BACKEND", None)
    return env


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float, stdin: str | None = None):
    """(returncode or None on timeout, stdout, stderr); a timeout kills the whole process group."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return None, out or "", err or ""


def probe_machine(python: str, env: dict, cwd: Path) -> dict:
    """The card and the versions, from the target interpreter (which imports torch, not us)."""
    try:
        rc, out, err = _run([python, "-c", _PROBE_SCRIPT], cwd, env, PROBE_TIMEOUT)
    except OSError as exc:
        return {"cuda_available": False, "why": f"cannot run {python}: {exc}"}
    if rc is None:
        return {"cuda_available": False, "why": f"the probe took over {PROBE_TIMEOUT:.0f} s"}
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"cuda_available": False, "why": f"the probe failed: {err.strip()[-2000:]}"}


def check_requirements(python: str, items: list[Item], env: dict, cwd: Path) -> None:
    """Set ``skip`` on items whose requirements the target interpreter lacks."""
    todo = {
        it.id: {"requires": it.requires, "modules": it.modules}
        for it in items
        if it.skip is None and (it.requires or it.modules)
    }
    if not todo:
        return
    rc, out, err = _run([python, "-c", _REQUIRES_SCRIPT], cwd, env, 120.0, json.dumps(todo))
    if rc != 0:
        raise RuntimeError(f"the requirement check failed in {python}: {err.strip()[-2000:]}")
    missing = json.loads(out.strip().splitlines()[-1])
    for it in items:
        if missing.get(it.id):
            it.skip = "missing: " + "; ".join(missing[it.id])


def _junit(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        status, message = "passed", None
        for child in case:
            if child.tag in ("failure", "error"):
                status, message = "failed", (child.get("message") or "")[:500]
            elif child.tag == "skipped":
                status, message = "skipped", (child.get("message") or "")[:500]
        nodeid = f"{case.get('classname', '')}::{case.get('name', '')}"
        tests.append(
            {
                "test": nodeid,
                "status": status,
                "seconds": float(case.get("time") or 0),
                "message": message,
            }
        )
    return tests


def _verbose(text: str) -> list[dict]:
    """Per-test results from ``pytest -v`` output (what ran before a timeout)."""
    return [
        {
            "test": m[0],
            "status": _VERBOSE_STATUS.get(m[1], "failed"),
            "seconds": None,
            "message": None,
        }
        for m in _VERBOSE_LINE.findall(text)
    ]


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _hint(text: str) -> str | None:
    for pattern, fmt in HINTS:
        m = re.search(pattern, text)
        if m:
            return fmt.format(*m.groups())
    return None


# --------------------------------------------------------------------------------------------
# roofline items: the kernels against their fair peers, timed on the card (scripts below)

# card peaks: (HBM bytes/s, dense bf16 tensor-core FLOP/s without sparsity), by name substring;
# the first match wins, so the PCIe / NVL variants come before the SXM name
CARD_PEAKS = [
    ("H100 PCIe", 2.0e12, 756e12),
    ("H100 NVL", 3.9e12, 835e12),
    ("H200", 4.8e12, 989e12),
    ("H100", 3.35e12, 989e12),
    ("A100", 2.0e12, 312e12),
    ("L40S", 0.864e12, 362e12),
    ("A10", 0.6e12, 125e12),
]

_ROOFLINE_COMMON = r"""
import json, sys, time
import torch
PEAKS = json.loads(sys.argv[1])
# "smoke": tiny shapes on the CPU (Triton interpreter), wall-clock timing: checks the script
# runs end to end without a GPU; its numbers mean nothing
SMOKE = sys.argv[2:3] == ["smoke"]
DEV = "cpu" if SMOKE else "cuda"
NAME = "cpu (smoke run)" if SMOKE else torch.cuda.get_device_name()
BW, FLOPS = next(((b, f) for k, b, f in PEAKS if k in NAME), (None, None))
ROWS = []
def emit(done=False):  # every row as soon as it is measured: a timeout keeps what finished
    print(json.dumps({"device": NAME, "peak_bw": BW, "peak_flops": FLOPS, "rows": ROWS,
                      "done": done}), flush=True)
def ms(fn, graph=False):
    if SMOKE:
        fn()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    import triton.testing
    if not graph:
        return triton.testing.do_bench(fn)
    fn(); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return triton.testing.do_bench(g.replay)
def row(case, impl, t, *, bytes_=None, flops=None, peers=None, note=None, **extra):
    r = {"case": case, "impl": impl, "ms": t, "note": note} | extra
    if bytes_ is not None:
        r["gbps"] = bytes_ / (t * 1e-3) / 1e9
        r["frac_peak"] = bytes_ / (t * 1e-3) / BW if BW else None
    if flops is not None:
        r["tflops"] = flops / (t * 1e-3) / 1e12
        r["frac_peak"] = flops / (t * 1e-3) / FLOPS if FLOPS else None
    r["vs"] = {p["impl"]: p["ms"] / t for p in (peers or []) if p.get("ms")}
    ROWS.append(r)
    emit()
    return r
def attempt(case, impl, fn, **kw):
    try:
        return row(case, impl, fn(), **kw)
    except Exception as exc:  # one peer that cannot run (old torch, no flash) is a row, not a crash
        r = {"case": case, "impl": impl, "ms": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        ROWS.append(r)
        emit()
        return r
"""

_ROOFLINE_ATTENTION = (
    _ROOFLINE_COMMON
    + r"""
import torch.nn.functional as F
from icml26_kernels.attention import (Llama3Scaling, RopeConfig, apply_rope, pack_block_table,
                                      paged_decode, paged_prefill, plan_paged, rope_table)
dev, dt = DEV, torch.bfloat16
H, HKV, D, BS, DOC, NDOC = (4, 2, 64, 16, 32, 2) if SMOKE else (32, 8, 128, 16, 512, 8)
cfg = RopeConfig(head_dim=D, base=500000.0, llama3=Llama3Scaling())
ctx, nb = DOC * NDOC, DOC // BS
tab = rope_table(cfg, 2 * ctx + 1, dtype=dt, device=dev)
L2 = None if SMOKE else getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None)
for B in (1, 2) if SMOKE else (1, 16, 64):
    # distinct documents per request: request b owns pool blocks [b*NDOC*nb, (b+1)*NDOC*nb),
    # so the unique K/V bytes equal the naive count (no request re-reads another's cache lines)
    n_pool = B * NDOC * nb
    k_pool = torch.randn(n_pool, BS, HKV, D, device=dev, dtype=dt)
    v_pool = torch.randn_like(k_pool)
    rows, order = [], []
    for b in range(B):
        docs = (torch.randperm(NDOC) + b * NDOC).tolist()
        ids = [d * nb + j for d in docs for j in range(nb)]
        rows.append(pack_block_table(ids, [i * DOC for i in range(NDOC) for _ in range(nb)],
                                     [0] * len(ids), block_size=BS))
        order.append(ids)
    table = torch.stack(rows).to(dev)
    ids_t = torch.tensor(order, device=dev)  # (B, NDOC*nb)
    plan = plan_paged(table, block_size=BS, n_pool_blocks=n_pool, cfg=cfg, table=tab)
    q = torch.randn(B, H, D, device=dev, dtype=dt)
    kv_bytes = 2 * B * ctx * HKV * D * k_pool.element_size()
    unique = 2 * len(set(sum(order, []))) * BS * HKV * D * k_pool.element_size()
    pos = torch.arange(ctx, device=dev).expand(B, ctx)
    def gather(pool):
        return pool[ids_t].flatten(1, 2)  # (B, ctx, HKV, D)
    k_mat = apply_rope(gather(k_pool), pos, cfg, table=tab).transpose(1, 2).contiguous()
    v_mat = gather(v_pool).transpose(1, 2).contiguous()
    case = f"decode B={B} ctx={ctx}"
    launch = "launch-bound: the K/V read is ~%.0f us at peak" % (kv_bytes / BW * 1e6) if B == 1 and BW else None
    sdpa = lambda: F.scaled_dot_product_attention(q[:, :, None], k_mat, v_mat, enable_gqa=True)
    peers = [attempt(case, "SDPA, contiguous re-rotated K/V", lambda: ms(sdpa), bytes_=kv_bytes)]
    def reencode():  # gather the blocks, re-rotate every key at its new position, attend
        k = apply_rope(gather(k_pool), pos, cfg, table=tab).transpose(1, 2)
        return F.scaled_dot_product_attention(q[:, :, None], k, gather(v_pool).transpose(1, 2),
                                              enable_gqa=True)
    peers.append(attempt(case, "re-encode (gather + rotate) + SDPA", lambda: ms(reencode),
                         bytes_=kv_bytes))
    shift = torch.full((B, ctx), 7, device=dev)  # every document moved by 7 positions
    k_inplace = k_mat.transpose(1, 2)  # (B, ctx, HKV, D) view of the contiguous cache
    def inplace():  # the CPU headline's fair baseline: rotate the cached K in place, then SDPA
        k_inplace.copy_(apply_rope(k_inplace, shift, cfg, table=tab))
        return sdpa()
    peers.append(attempt(case, "in-place re-rotation + SDPA", lambda: ms(inplace),
                         bytes_=kv_bytes))
    fn = lambda: paged_decode(q, k_pool, v_pool, table, cfg, plan=plan, prefer="triton")
    attempt(case, "paged_decode (deferred RoPE)", lambda: ms(fn), bytes_=kv_bytes, peers=peers,
            unique_bytes=unique, naive_bytes=kv_bytes, l2_bytes=L2, note=launch)
    attempt(case, "paged_decode, CUDA graph", lambda: ms(fn, graph=True), bytes_=kv_bytes,
            peers=peers, note="one graph replay: no per-kernel launch cost")
    del k_pool, v_pool, k_mat, v_mat
    if not SMOKE:
        torch.cuda.empty_cache()

# prefill: one request, T new tokens over the ctx-token context
T = 16 if SMOKE else 512
case = f"prefill T={T} ctx={ctx}"
q = torch.randn(1, T, H, D, device=dev, dtype=dt)
kn, vn = (torch.randn(1, T, HKV, D, device=dev, dtype=dt) for _ in range(2))
n_pool = NDOC * nb
k_pool = torch.randn(n_pool, BS, HKV, D, device=dev, dtype=dt)
v_pool = torch.randn_like(k_pool)
offs = [i * DOC for i in range(NDOC) for _ in range(nb)]
table = pack_block_table(list(range(n_pool)), offs, [0] * n_pool, block_size=BS)[None].to(dev)
plan = plan_paged(table, block_size=BS, n_pool_blocks=n_pool, cfg=cfg, table=tab)
flops = 4 * H * D * T * (ctx + T / 2)  # QK^T and PV, the new keys causal
g = H // HKV
k_all = torch.cat([k_pool.flatten(0, 1)[None], kn], 1).transpose(1, 2).repeat_interleave(g, 1)
v_all = torch.cat([v_pool.flatten(0, 1)[None], vn], 1).transpose(1, 2).repeat_interleave(g, 1)
qt = q.transpose(1, 2)
peers = []
try:
    from torch.nn.attention.bias import causal_lower_right
    mask = causal_lower_right(T, ctx + T)  # flash / memory-efficient backends accept it
    peers.append(attempt(case, "SDPA, causal_lower_right (flash-eligible)",
                         lambda: ms(lambda: F.scaled_dot_product_attention(qt, k_all, v_all,
                                                                           attn_mask=mask)),
                         flops=flops))
except ImportError as exc:
    ROWS.append({"case": case, "impl": "SDPA, causal_lower_right", "ms": None, "error": str(exc)})
dense = torch.ones(T, ctx + T, dtype=torch.bool, device=dev)
dense[:, ctx:] = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
peers.append(attempt(case, "SDPA, dense boolean mask (no flash)",
                     lambda: ms(lambda: F.scaled_dot_product_attention(qt, k_all, v_all,
                                                                       attn_mask=dense)),
                     flops=flops))
fn = lambda: paged_prefill(q, kn, vn, k_pool, v_pool, table, cfg, plan=plan, prefer="triton")
t0 = time.perf_counter(); fn(); torch.cuda.synchronize() if not SMOKE else None
first = time.perf_counter() - t0  # the autotuner's 8 configurations, compiled and timed once
attempt(case, "paged_prefill (autotuned)", lambda: ms(fn), flops=flops, peers=peers,
        first_call_s=first)
emit(done=True)
"""
)

_ROOFLINE_MLP = (
    _ROOFLINE_COMMON
    + r"""
import triton
from icml26_kernels.moe import grouped_mlp, make_permutation
from icml26_kernels.moe.grouped_mlp import _kernels, forced_tiles
dev, dt = DEV, torch.bfloat16
# 1) correctness on pinned tiles (one compile per kernel, no autotuning)
pin = {"BLOCK_R": 64} | dict.fromkeys(("BLOCK_D", "BLOCK_M", "BLOCK_O", "BLOCK_N", "BLOCK_K",
                                       "BLOCK_1", "BLOCK_2"), 64)
# 2) the timed part autotunes over a bounded space: BLOCK_R 64/128 x 4/8 warps, the column
# tiles at 64 (8 configurations per kernel instead of 64), so the first call is seconds
for k in _kernels():
    k.configs = [c for c in k.configs if c.kwargs["BLOCK_R"] in (64, 128)
                 and all(v == 64 for n, v in c.kwargs.items() if n != "BLOCK_R")] or k.configs
SIZES = ((256, 32, 4, 2, 64, 32),) if SMOKE else (
    (65536, 128, 64, 8, 512, 128),  # bench_kernels' shape: 65k tokens, k = 8, E = 64
    (16384, 1024, 64, 8, 1024, 1024),  # wide: compute-bound
)
for N, D, E, topk, M, DO in SIZES:
    case = f"grouped MLP N={N} D={D} E={E} k={topk} M={M} D_out={DO} bf16"
    idx = torch.stack([torch.randperm(E, device=dev)[:topk] for _ in range(N)])
    perm = make_permutation(idx, E, 128)
    P = perm.num_rows
    x = torch.randn(P, D, device=dev, dtype=dt, requires_grad=True)
    w1 = (torch.randn(E, D, M, device=dev, dtype=dt) * D**-0.5).requires_grad_()
    w2 = (torch.randn(E, M, DO, device=dev, dtype=dt) * M**-0.5).requires_grad_()
    with forced_tiles(pin):
        y = grouped_mlp(x, w1, w2, perm, backend="triton")
    ref = grouped_mlp(x, w1, w2, perm, backend="torch")
    d, r = (y.detach().float() - ref.detach().float()), ref.detach().float()
    err = float(d.pow(2).mean().sqrt() / r.pow(2).mean().sqrt())
    if err > 1e-2 and not SMOKE:  # both round h and y to bf16: only the sum order differs
        ROWS.append({"case": case, "impl": "grouped_mlp (Triton)", "ms": None,
                     "error": f"pinned tiles: relative RMS error {err:.1e} vs torch > 1e-2"})
        emit()
        sys.exit(1)
    fl = 2 * N * topk * M * (D + DO)  # useful forward FLOPs (padding rows not counted)
    dy = torch.randn(P, DO, device=dev, dtype=dt)
    def fb(f):
        def run():
            x.grad = w1.grad = w2.grad = None
            f().backward(dy)
        return run
    loop = lambda: grouped_mlp(x, w1, w2, perm, backend="torch")
    peers = [attempt(case, "per-expert loop (cuBLAS)", lambda: ms(loop), flops=fl)]
    peers_b = [attempt(case + " fwd+bwd", "per-expert loop (cuBLAS)", lambda: ms(fb(loop)),
                       flops=3 * fl)]
    if hasattr(torch, "_grouped_mm"):
        offs = perm.offsets[1:].to(torch.int32)
        def gmm():
            h = torch.nn.functional.gelu(torch._grouped_mm(x, w1, offs=offs))
            return torch._grouped_mm(h, w2, offs=offs)
        peers.append(attempt(case, "torch._grouped_mm", lambda: ms(gmm), flops=fl))
        peers_b.append(attempt(case + " fwd+bwd", "torch._grouped_mm", lambda: ms(fb(gmm)),
                               flops=3 * fl))
    else:
        ROWS.append({"case": case, "impl": "torch._grouped_mm", "ms": None,
                     "error": f"torch {torch.__version__} has no torch._grouped_mm"})
    a, b1, b2 = x.detach()[: N * topk], w1.detach()[0], w2.detach()[0]
    dense = lambda: torch.nn.functional.gelu(a @ b1) @ b2  # one expert for all rows: the ceiling
    peers.append(attempt(case, "dense bf16 GEMMs, equal FLOPs (ceiling)", lambda: ms(dense),
                         flops=fl))
    fwd = lambda: grouped_mlp(x, w1, w2, perm, backend="triton")
    t0 = time.perf_counter(); fb(fwd)(); torch.cuda.synchronize() if not SMOKE else None
    first = time.perf_counter() - t0  # bounded autotuning of the four kernels
    attempt(case, "grouped_mlp (Triton)", lambda: ms(fwd), flops=fl, peers=peers,
            rel_rms_err_vs_torch=err, first_call_s=first)
    attempt(case + " fwd+bwd", "grouped_mlp (Triton)", lambda: ms(fb(fwd)), flops=3 * fl,
            peers=peers_b)
    del x, w1, w2, y, ref, dy
    if not SMOKE:
        torch.cuda.empty_cache()
emit(done=True)
"""
)


ROOFLINE_PEERS = {
    "attention": (
        "decode B=1/16/64 over distinct documents per request (unique bytes == naive bytes; "
        "B=1 also under a CUDA graph, marked launch-bound) vs SDPA on contiguous K/V, "
        "re-encode + SDPA, in-place re-rotation + SDPA; prefill T=512 vs SDPA with a "
        "flash-eligible causal_lower_right mask and with a dense boolean mask; GB/s, TFLOP/s"
    ),
    "grouped-mlp": (
        "grouped MLP bf16 at two sizes, fwd and fwd+bwd TFLOP/s (pinned tiles checked first, "
        "then a bounded autotune) vs the per-expert cuBLAS loop, torch._grouped_mm (if this "
        "torch has it) and dense bf16 GEMMs of equal FLOPs (the ceiling)"
    ),
}


def run_item(item: Item, python: str, env: dict, timeout: float, scratch: Path) -> dict:
    """Run one item; its report entry."""
    row: dict = {
        "id": item.id,
        "kind": item.kind,
        "member": item.member,
        "description": item.description,
        "command": None,
        "cwd": str(item.cwd),
        "status": "skipped",
        "reason": item.skip,
        "seconds": 0.0,
        "timeout_s": round(timeout, 1),
        "returncode": None,
    }
    if item.skip is not None:
        return row
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.id)
    args = [a.replace("{json}", str(scratch / f"{slug}.json")) for a in item.args]
    if item.kind in ("pytest", "suite"):
        args.append(f"--junitxml={scratch / f'{slug}.xml'}")
    cmd = [python, *args]
    row["command"] = (
        shlex.join(cmd)
        if item.id != "triton-api" and item.kind != "roofline"
        else f"{python} -c <{item.id} script>"
    )
    start = time.perf_counter()
    try:
        rc, out, err = _run(cmd, item.cwd, env, timeout, item.stdin)
    except OSError as exc:
        rc, out, err = -1, "", f"cannot run {python}: {exc}"
    row["seconds"] = round(time.perf_counter() - start, 2)
    row["returncode"] = rc
    text = out + ("\n" if out and err else "") + err
    row["log_tail"] = text[-TAIL_CHARS:]
    row["_log"] = text
    if item.kind in ("pytest", "suite"):
        tests = _junit(scratch / f"{slug}.xml") if rc is not None else _verbose(out)
        row["tests"] = tests
        counts = {s: sum(t["status"] == s for t in tests) for s in ("passed", "failed", "skipped")}
        row["counts"] = counts
        if rc is None:  # stopped by the time limit: not a failure of what ran
            done = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no test finished"
            row["status"] = "failed" if counts["failed"] else "incomplete"
            row["reason"] = f"timed out after {timeout:.0f} s ({done} before that)"
        elif rc == 5:
            row["status"], row["reason"] = "skipped", "pytest collected no test"
        elif rc != 0 or counts["failed"]:
            row["status"] = "failed"
            row["reason"] = (
                f"{counts['failed']} of {len(tests)} tests failed"
                if counts["failed"]
                else f"pytest exited {rc}"
            )
        elif tests and counts["skipped"] == len(tests):
            reasons = sorted({t["message"] or "" for t in tests})
            row["status"], row["reason"] = "skipped", "every test skipped: " + "; ".join(reasons)
        else:
            row["status"] = "passed"
            row["reason"] = f"{counts['passed']} passed, {counts['skipped']} skipped"
    else:
        result = None
        json_file = scratch / f"{slug}.json"
        if "{json}" in " ".join(item.args) and json_file.is_file():
            try:
                result = json.loads(json_file.read_text())
            except json.JSONDecodeError:
                result = None
        if result is None:
            result = _last_json(out)
        row["result"] = result
        if rc is None:  # stopped by the time limit; the numbers printed before it are kept
            kept = len(result.get("rows", [])) if isinstance(result, dict) else 0
            row["status"] = "incomplete"
            row["reason"] = f"timed out after {timeout:.0f} s" + (
                f" ({kept} rows measured before that)" if kept else ""
            )
        elif rc != 0:
            row["status"], row["reason"] = "failed", f"exited {rc}"
            if item.kind == "preflight" and result and result.get("missing"):
                row["reason"] = "installed Triton lacks: " + "; ".join(result["missing"])
        elif isinstance(result, dict) and result.get("skipped"):
            row["status"], row["reason"] = "skipped", f"the script skipped: {result['skipped']}"
        else:
            row["status"] = "passed"
            row["reason"] = None if result is not None else "no JSON line on stdout"
    if row["status"] == "failed":
        row["hint"] = _hint(text)
    return row


def run_items(
    items: list[Item],
    python: str,
    env: dict,
    deadline: float,
    log=print,
) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        for item in items:
            left = deadline - time.monotonic()
            over = item.skip is None and left < MIN_ITEM_SECONDS
            if over:
                item.skip = f"budget exhausted ({max(left, 0):.0f} s left)"
            timeout = min(item.timeout, max(left - 5.0, 1.0))
            if item.skip is None:
                log(f"[gpu_check] {item.id}: running (timeout {timeout:.0f} s)")
            row = run_item(item, python, env, timeout, Path(tmp))
            if over:  # not run for want of time: incomplete, not skipped for a reason
                row["status"] = "incomplete"
            extra = f" ({row['reason']})" if row["reason"] else ""
            log(f"[gpu_check] {item.id}: {row['status']}{extra} [{row['seconds']:.1f} s]")
            rows.append(row)
    return rows


def write_report(out: Path, report: dict, rows: list[dict]) -> Path:
    """``out`` is a folder (report inside) or a ``.json`` path; the full log goes beside it."""
    path = out if out.suffix == ".json" else out / REPORT
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(LOG), "w") as fh:
        for row in rows:
            fh.write(f"===== {row['id']}: {row['status']} =====\n{row.pop('_log', '')}\n")
    report["items"] = rows
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def _fmt(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def render_table(report: dict) -> str:
    """One markdown table: every item's status, then every roofline row (achieved GB/s or
    TFLOP/s, fraction of the card's peak, ratio to each peer: peer time / this time)."""
    m = report.get("machine", {})
    lines = [
        f"## gpu_check on {m.get('device', '?')} (torch {m.get('torch')}, triton {m.get('triton')})",
        "",
        "| item | status | s | reason |",
        "|---|---|---|---|",
    ]
    for r in report.get("items", []):
        reason = (r.get("reason") or "").replace("|", "/")
        lines.append(f"| {r['id']} | {r['status']} | {_fmt(r.get('seconds'), '.1f')} | {reason} |")
    roof = [
        (r["id"], x)
        for r in report.get("items", [])
        if r.get("kind") == "roofline" and isinstance(r.get("result"), dict)
        for x in r["result"].get("rows", [])
    ]
    if roof:
        lines += [
            "",
            "| case | implementation | ms | GB/s | TFLOP/s | fraction of peak | vs peers | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for _, x in roof:
            vs = ", ".join(f"{k}: {v:.2f}x" for k, v in (x.get("vs") or {}).items())
            note = x.get("error") or x.get("note") or ""
            if x.get("unique_bytes") is not None and x.get("naive_bytes") is not None:
                note = (note + "; " if note else "") + (
                    f"unique {x['unique_bytes'] / 2**20:.0f} MiB of {x['naive_bytes'] / 2**20:.0f} MiB"
                )
            if x.get("first_call_s") is not None:
                note = (note + "; " if note else "") + f"first call {x['first_call_s']:.1f} s"
            lines.append(
                f"| {x.get('case')} | {x.get('impl')} | {_fmt(x.get('ms'), '.3f')} | "
                f"{_fmt(x.get('gbps'), '.0f')} | {_fmt(x.get('tflops'), '.1f')} | "
                f"{_fmt(x.get('frac_peak'), '.2f')} | {vs} | {note.replace('|', '/')} |"
            )
        lines.append("")
        lines.append(
            "ratio = peer ms / this ms (> 1: this is faster); GB/s counts the useful K/V bytes "
            "once; fraction of peak uses the card's HBM bandwidth or dense bf16 FLOP/s"
        )
    return "\n".join(lines)


def _git_commit(root: Path) -> str | None:
    try:
        r = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/gpu_check.py",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:5]),
    )
    parser.add_argument("--out", type=Path, help="report folder (or a .json file path)")
    parser.add_argument(
        "--list",
        "--dry-run",
        dest="list",
        action="store_true",
        help="list the items and what would be skipped, run nothing (no CUDA needed)",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="run items whose id contains this (repeatable)"
    )
    parser.add_argument(
        "--suites",
        action="store_true",
        help="also run the default suite of every member that uses icml26-kernels",
    )
    parser.add_argument(
        "--budget", type=float, default=450.0, help="seconds for the whole run (default 450)"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch")
    parser.add_argument("--root", type=Path, default=workspace.ROOT, help=argparse.SUPPRESS)
    parser.add_argument(
        "--table",
        type=Path,
        help="print the markdown table of a recorded gpu_check.json, run nothing",
    )
    args = parser.parse_args(argv)
    if args.table is not None:
        print(render_table(json.loads(args.table.read_text())))
        return 0
    if not args.list and args.out is None:
        parser.error("--out DIR is required (or --list)")
    t0 = time.monotonic()
    root = args.root.resolve()
    if os.sep in args.python:  # items run in member folders: a relative path would break
        args.python = os.path.abspath(args.python)  # (not resolve(): a venv's python is a link)
    try:
        members = workspace.discover(root)
    except ValueError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    items = plan(root, members, suites=args.suites)
    if args.only:
        items = [it for it in items if any(s in it.id for s in args.only)]
        if not items:
            print(f"gpu_check: no item id contains any of {args.only}", file=sys.stderr)
            return 2
    env = _env(members)
    try:
        check_requirements(args.python, items, env, root)
    except (OSError, RuntimeError) as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for it in items:
            state = f"skip: {it.skip}" if it.skip else "run"
            print(f"{it.id}\t{state}\t{it.description}")
        return 0
    machine = probe_machine(args.python, env, root)
    report: dict = {
        "schema": SCHEMA,
        "tool": "tools/gpu_check.py",
        "started": _now(),
        "commit": _git_commit(root),
        "machine": machine,
        "budget_s": args.budget,
    }
    if not machine.get("cuda_available"):
        msg = (
            f"gpu_check: no CUDA device: {machine.get('why', 'unknown reason')}. "
            "This check runs on a machine with an NVIDIA GPU and torch built for CUDA "
            "(--python names another interpreter); --list shows what it would run."
        )
        print(msg, file=sys.stderr)
        report.update(finished=_now(), error=msg, summary={})
        write_report(args.out, report, [])
        return 2
    print(
        f"[gpu_check] {machine.get('device')} (sm_{''.join(map(str, machine.get('capability', [])))}), "
        f"torch {machine.get('torch')} CUDA {machine.get('torch_cuda')}, triton {machine.get('triton')}",
        flush=True,
    )
    rows = run_items(items, args.python, env, t0 + args.budget, log=lambda s: print(s, flush=True))
    summary = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    report.update(finished=_now(), seconds=round(time.monotonic() - t0, 1), summary=summary)
    path = write_report(args.out, report, rows)
    print(f"[gpu_check] {summary} -> {path}", flush=True)
    print(render_table(report), flush=True)
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
