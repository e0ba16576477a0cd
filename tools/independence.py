# /// script
# requires-python = ">=3.10"
# dependencies = ["import-linter>=2.1", "tomli>=2; python_version < '3.11'"]
# ///
"""No member imports another paper package; icml26_kernels imports none of them.

    python tools/independence.py [--root DIR]

Builds an import-linter configuration from the discovered members and runs ``lint-imports``
with every member's ``src`` on ``PYTHONPATH`` (import-linter reads the source statically; the
members' own dependencies need not be installed). Two contracts:

- independence: the paper packages ``icml26_<name>`` do not import each other;
- forbidden: ``icml26_kernels`` imports no paper package.

Exits non-zero, with import-linter's report of the offending import chain, when either breaks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workspace import ROOT, discover


def config_text(papers: list[str], kernels: str | None) -> str:
    lines = [
        "[importlinter]",
        "root_packages =",
        *[f"    {p}" for p in [*papers, *([kernels] if kernels else [])]],
        "",
    ]
    if len(papers) >= 2:
        lines += [
            "[importlinter:contract:independence]",
            "name = Paper packages are independent",
            "type = independence",
            "modules =",
            *[f"    {p}" for p in papers],
            "",
        ]
    if kernels and papers:
        lines += [
            "[importlinter:contract:kernels]",
            "name = icml26_kernels imports no paper package",
            "type = forbidden",
            "source_modules =",
            f"    {kernels}",
            "forbidden_modules =",
            *[f"    {p}" for p in papers],
            "",
        ]
    return "\n".join(lines)


def check(root: Path = ROOT) -> int:
    members = discover(root)
    if not members:
        raise ValueError(
            f"{root}: no workspace members (expected shared-kernels/pyproject.toml or "
            "packages/*/pyproject.toml); is --root the repository root?"
        )
    missing = [m.name for m in members if not (m.src / "__init__.py").is_file()]
    if missing:
        raise ValueError(f"members without src/<import name>/__init__.py: {', '.join(missing)}")
    papers = [m.import_name for m in members if not m.is_kernels]
    kernels = next((m.import_name for m in members if m.is_kernels), None)
    if len(papers) + (kernels is not None) < 2:
        print("independence: fewer than two members; nothing to check")
        return 0
    beside = Path(sys.executable).parent / "lint-imports"  # the running environment's own
    exe = str(beside) if beside.is_file() else shutil.which("lint-imports")
    if exe is None:
        raise RuntimeError(
            "lint-imports not found: install import-linter (root dependency group 'deps')"
        )
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "importlinter.ini"
        cfg.write_text(config_text(papers, kernels))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(str(m.path / "src") for m in members)
        return subprocess.run([exe, str(cfg), "--no-cache"], env=env, cwd=tmp).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/independence.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="repository root (default: this one)"
    )
    args = parser.parse_args(argv)
    try:
        return check(args.root)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
