# /// script
# requires-python = ">=3.10"
# dependencies = []
# ///
"""Run a README's quickstart verbatim and check what it prints.

    python tools/readme_quickstart.py packages/<name>/README.md [--python PY] [--timeout S]

Every ```python block of the README's ``## Quickstart`` section (up to the next ``## `` heading)
runs as its own fresh script, in a fresh temporary folder, with the given interpreter (default:
this one), the way a user pastes it: no test harness, no repository on ``sys.path``. A block
fails when it

- raises, or exits non-zero;
- runs past ``--timeout`` seconds (default 60: a quickstart is read in a minute and runs in one);
- prints nothing (a quickstart prints a result the user can check);
- prints a line that does not match the ``# -> EXPECTED`` comment of its ``print`` (in order:
  the k-th annotated print is matched against the next printed line that follows the previous
  match; numbers compare with relative tolerance ``--rtol`` (default 0.05) and absolute 1e-6,
  a number written ``~x`` only by order of magnitude (within a factor 10), other words exactly;
  brackets, braces and commas around a number are compared exactly, the number by tolerance;
  ``# -> 1.0  # why`` : what follows a second ``#`` is a comment, not expected output).

Markers, an HTML comment on the line right above the fence:

- ``<!-- quickstart: skip REASON -->``: not run (a fragment with ``...``, a GPU, a server); the
  reason is required and printed;
- ``<!-- quickstart: continues -->``: the block runs after the previous block of the section,
  in one script (it uses names the previous block defined);
- ``<!-- quickstart: needs MODULE [MODULE ...] -->``: runs where those modules import in the
  interpreter (an optional integration the user installs beside the package, e.g. ``flwr``),
  is reported as skipped elsewhere. Directives combine with ``;``:
  ``<!-- quickstart: continues; needs flwr -->``.

Non-loopback network access raises inside the blocks (tools/pytest_plugins/icml26_no_network.py):
no hub, no downloads. Exit status 0 when every block passes, 1 otherwise, 2 on usage errors
(no Quickstart section, no runnable block). ``noxfile.py`` runs this in every member's ``tests``
session (the workspace environment) and after the tests of ``install`` / ``lowest`` (the
installed wheel, from a folder outside the checkout).
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

PLUGINS = Path(__file__).resolve().parent / "pytest_plugins"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!--\s*quickstart:\s*(.*?)\s*-->\s*$")
EXPECT = re.compile(r"#\s*->\s*(.+?)\s*$")
NUMBER = re.compile(r"^~?[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?$")
# the blocks run under the no-network guard and with unbuffered output
PRELUDE = textwrap.dedent(
    """\
    import os as _os, sys as _sys
    if _os.environ.get("ICML26_ALLOW_NETWORK") != "1":
        _sys.path.insert(0, {plugins!r})
        import icml26_no_network as _guard
        _guard.install()
        del _sys.path[0], _guard
    del _os, _sys
    """
)


@dataclass
class Block:
    """One runnable unit: the code of one fenced block (plus earlier ones it continues)."""

    line: int  # 1-based line of the fence in the README
    code: str
    skip: str | None = None  # the reason, when marked skip
    needs: tuple[str, ...] = ()  # modules that must import for it to run
    expected: list[str] = field(default_factory=list)  # the `# -> X` of its prints, in order


def quickstart_section(text: str) -> str:
    """The text of the ``## Quickstart`` section (heading line included); '' when absent."""
    match = re.search(r"^## Quickstart.*?$(.*?)(?=^## |\Z)", text, re.S | re.M)
    return match.group(0) if match else ""


def blocks(text: str) -> list[Block]:
    """The quickstart's python blocks, in order, with their markers applied."""
    section = quickstart_section(text)
    if not section:
        return []
    offset = text[: text.index(section)].count("\n")
    out: list[Block] = []
    for match in FENCE.finditer(section):
        before = section[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        line = offset + section[: match.start()].count("\n") + 1
        code = match.group(1)
        expected = [
            m.group(1).split("  #", 1)[0].strip()
            for m in (EXPECT.search(s) for s in _print_lines(code))
            if m
        ]
        directives = {}
        given = marker.group(1) if marker else ""
        parts = [given] if given.startswith("skip") else given.split(";")  # a reason may hold ;
        for part in parts if given else []:
            word, _, rest = part.strip().partition(" ")
            if word not in ("skip", "continues", "needs"):
                raise ValueError(f"line {line}: unknown quickstart directive {word!r}")
            directives[word] = rest.strip()
        if "skip" in directives:
            if not directives["skip"]:
                raise ValueError(f"line {line}: `quickstart: skip` needs a reason")
            out.append(Block(line, code, skip=directives["skip"]))
            continue
        needs = tuple(directives.get("needs", "").split())
        if "needs" in directives and not needs:
            raise ValueError(f"line {line}: `quickstart: needs` names no module")
        if "continues" in directives:
            runnable = [b for b in out if b.skip is None]
            if not runnable:
                raise ValueError(f"line {line}: `quickstart: continues` has no block before it")
            prev = runnable[-1]
            if not needs:  # it runs as part of this one
                out.remove(prev)
            # with `needs`, the earlier block also runs alone (where the modules are absent)
            code, expected = prev.code + code, prev.expected + expected
            needs = tuple(dict.fromkeys(prev.needs + needs))
        out.append(Block(line, code, expected=expected, needs=needs))
    return out


WRAP = "()[]{},;:"  # punctuation around a number in a printed tuple, list or dict


def _split(token: str) -> tuple[str, str, str]:
    """(leading punctuation, core, trailing punctuation) of a token."""
    core = token.strip(WRAP)
    if not core:
        return token, "", ""
    start = token.index(core)
    return token[:start], core, token[start + len(core) :]


def _print_lines(code: str) -> list[str]:
    """The lines that may carry a print's ``# -> EXPECTED``, in order.

    A one-line ``print(...)`` carries it on its own line; one that ruff's Markdown formatter
    wraps (``print(\n    a, b\n)  # -> X``) carries it on its closing line, which holds no
    ``print(``: both count (ast gives each call's last line), so a wrapped print keeps its check.
    """
    lines = code.splitlines()
    try:
        tree = ast.parse(code)
    except SyntaxError:  # the run reports it; keep the plain rule
        return [s for s in lines if "print(" in s]
    ends = sorted(
        {
            node.end_lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and node.end_lineno is not None
        }
    )
    keep = {i for i, s in enumerate(lines, 1) if "print(" in s} | set(ends)
    return [lines[i - 1] for i in sorted(keep)]


def _number(core: str) -> float | None:
    if not NUMBER.match(core):
        return None
    return float(core.lstrip("~").rstrip("%"))


def token_matches(expected: str, got: str, rtol: float) -> bool:
    """One whitespace-separated token: numbers by tolerance, everything else exactly."""
    (lead_w, core_w, tail_w), (lead_h, core_h, tail_h) = _split(expected), _split(got)
    want, have = _number(core_w), _number(core_h)
    if want is None or have is None:
        return expected == got
    if (lead_w, tail_w) != (lead_h, tail_h):
        return False
    if core_w.startswith("~"):  # order of magnitude only
        if abs(want) < 1e-6:  # roundoff-sized: another CPU may print 0.0 or 1e-16
            return abs(have) < 1e-6
        return have != 0.0 and abs(math.log10(abs(have) / abs(want))) <= 1.0
    return math.isclose(have, want, rel_tol=rtol, abs_tol=1e-6)


def line_matches(expected: str, got: str, rtol: float) -> bool:
    """A printed line against its `# -> EXPECTED`: the same tokens, numbers by tolerance."""
    want, have = expected.split(), got.split()
    return len(want) == len(have) and all(token_matches(w, h, rtol) for w, h in zip(want, have))


def check_output(expected: list[str], stdout: str, rtol: float) -> list[str]:
    """Problems with what a block printed ([] when fine)."""
    lines = [s.strip() for s in stdout.splitlines() if s.strip()]
    if not lines:
        return ["printed nothing: a quickstart prints a result the user can check"]
    pos = 0
    for want in expected:
        hit = next((i for i in range(pos, len(lines)) if line_matches(want, lines[i], rtol)), None)
        if hit is None:
            shown = "\n      ".join(lines[pos:][-6:]) or "(no more lines)"
            return [f"no printed line matches `# -> {want}`; printed:\n      {shown}"]
        pos = hit + 1
    return []


def missing_modules(python: str, modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that ``python`` cannot find."""
    if not modules:
        return []
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    proc = subprocess.run(
        [python, "-c", probe, *modules], capture_output=True, text=True, timeout=60
    )
    return proc.stdout.split()


def run_block(
    block: Block, python: str, timeout: float, rtol: float, shown: list[str] | None = None
) -> list[str]:
    """Run one block as a fresh script in a fresh folder; problems found ([] when it passes).

    ``shown``, when given, receives the lines the block printed (for the log).
    """
    with tempfile.TemporaryDirectory(prefix="icml26-quickstart-") as tmp:
        script = Path(tmp) / "quickstart.py"
        script.write_text(PRELUDE.format(plugins=str(PLUGINS)) + block.code)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
        env.pop("PYTHONPATH", None)  # nothing of the checkout on the path
        try:
            proc = subprocess.run(
                [python, str(script)],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return [f"ran past {timeout:g} s (a quickstart must finish within it)"]
    if shown is not None:
        shown.extend(s for s in proc.stdout.splitlines() if s.strip())
    if proc.returncode != 0:
        tail = "\n      ".join(proc.stderr.strip().splitlines()[-8:])
        return [f"exit {proc.returncode}:\n      {tail}"]
    return check_output(block.expected, proc.stdout, rtol)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run a README's Quickstart python blocks as fresh scripts and check their "
        "printed results against their `# -> EXPECTED` comments."
    )
    parser.add_argument("readme", type=Path, help="the README.md whose Quickstart runs")
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter to run the blocks with"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds each block may run (default 60)"
    )
    parser.add_argument(
        "--rtol", type=float, default=0.05, help="relative tolerance on printed numbers"
    )
    args = parser.parse_args(argv)
    try:
        found = blocks(args.readme.read_text())
    except ValueError as err:
        print(f"{args.readme}: {err}", file=sys.stderr)
        return 2
    runnable = [b for b in found if b.skip is None]
    if not runnable:
        print(f"{args.readme}: no runnable python block under '## Quickstart'", file=sys.stderr)
        return 2
    failed = 0
    for block in found:
        where = f"{args.readme}:{block.line}"
        if block.skip is not None:
            print(f"SKIP {where}: {block.skip}")
            continue
        absent = missing_modules(args.python, block.needs)
        if absent:
            print(f"SKIP {where}: needs {' '.join(absent)} (not installed here)")
            continue
        start = time.perf_counter()
        printed: list[str] = []
        problems = run_block(block, args.python, args.timeout, args.rtol, printed)
        took = time.perf_counter() - start
        if problems:
            failed += 1
            for p in problems:
                print(f"FAIL {where} ({took:.1f} s): {p}")
        else:
            print(f"ok   {where} ({took:.1f} s, {len(block.expected)} checked lines)")
            for line in printed[-12:]:
                print(f"     | {line}")
    print(f"{args.readme}: {len(runnable) - failed} of {len(runnable)} quickstart blocks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
