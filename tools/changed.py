# /// script
# requires-python = ">=3.10"
# dependencies = ["tomli>=2; python_version < '3.11'"]
# ///
"""Which members a change touches, as a GitHub Actions matrix.

    python tools/changed.py --base origin/main [--head HEAD]   # from git
    git diff --name-only A B | python tools/changed.py --stdin   # from a list of paths

A change under ``shared-kernels/`` or ``tools/``, or to the root ``pyproject.toml``,
``uv.lock`` or ``noxfile.py``, or to the CI workflow, affects every member (they all build on
them); a change under ``packages/<name>/`` affects that member; anything else (docs at the
root) affects none. Prints ``{"package": [...]}`` for ``strategy.matrix`` plus ``"any"``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workspace import ROOT, discover

AFFECTS_ALL_PREFIXES = ("shared-kernels/", "tools/", ".ci/")
AFFECTS_ALL_FILES = {"pyproject.toml", "uv.lock", "noxfile.py", ".github/workflows/ci.yml"}


def affected(paths: Iterable[str], members: list[str]) -> list[str]:
    """Members (short names, in discovery order) that a change to ``paths`` must re-test."""
    hit: set[str] = set()
    for raw in paths:
        path = raw.strip().removeprefix("./")
        if not path:
            continue
        if path in AFFECTS_ALL_FILES or path.startswith(AFFECTS_ALL_PREFIXES):
            return list(members)
        parts = path.split("/")
        if len(parts) >= 2 and parts[0] == "packages":
            if parts[1] in members:
                hit.add(parts[1])
            # a deleted or not-yet-discovered package folder: nothing to test
    return [m for m in members if m in hit]


def matrix(names: list[str]) -> dict:
    return {"package": names, "any": bool(names)}


def git_changed(base: str, head: str, root: Path = ROOT) -> list[str]:
    try:
        out = subprocess.run(
            ["git", "diff", "--name-only", f"{base}...{head}"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as exc:
        raise ValueError(f"git diff {base}...{head} failed: {exc.stderr.strip()}") from exc
    return out.stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/changed.py", description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--base", help="git ref to diff against (merge base with --head)")
    src.add_argument("--stdin", action="store_true", help="read changed paths from standard input")
    src.add_argument("--all", action="store_true", help="every member (scheduled or manual runs)")
    parser.add_argument("--head", default="HEAD", help="git ref of the change (default HEAD)")
    args = parser.parse_args(argv)
    try:
        names = [m.name for m in discover()]
        if args.all:
            chosen = names
        elif args.stdin:
            chosen = affected(sys.stdin.read().splitlines(), names)
        else:
            chosen = affected(git_changed(args.base, args.head), names)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(matrix(chosen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
