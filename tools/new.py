# /// script
# requires-python = ">=3.10"
# dependencies = ["tomli>=2; python_version < '3.11'"]
# ///
"""Create a new package from the template in DESIGN.md.

    python tools/new.py NAME --paper "Paper title" [--description "..."] [--kernels]

Writes ``packages/NAME`` with its pyproject (hatchling, static version, dev group, pytest
config), README skeleton (every section a package README must have), CHANGELOG,
``src/icml26_NAME/__init__.py`` with ``__all__``, ``py.typed``, ``tests/test_imports.py``
pinning ``__all__``, and a ``benchmarks/reproduce.py`` that fails loudly until written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workspace import REPO_URL, ROOT

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")

PYPROJECT = """\
[project]
name = "icml26-{name}"
version = "0.1.0"
description = {description_toml}
readme = "README.md"
license = "Apache-2.0"
requires-python = ">=3.10"
authors = [{{ name = "icml26 developers" }}]
classifiers = [
  "Programming Language :: Python :: 3",
  "Programming Language :: Python :: 3 :: Only",
  "Intended Audience :: Science/Research",
  "Topic :: Scientific/Engineering :: Artificial Intelligence",
]
# declare exactly what src/ imports (deptry checks it in `nox -s deps`)
dependencies = [{deps}]

[project.urls]
Homepage = "{repo_url}/tree/main/packages/{name}"
Source = "{repo_url}/tree/main/packages/{name}"
Issues = "{repo_url}/issues"
Changelog = "{repo_url}/blob/main/packages/{name}/CHANGELOG.md"

[project.optional-dependencies]

[dependency-groups]
dev = ["pytest>=8", "pytest-timeout>=2.3"]
{sources}
[tool.icml26]
paper = {paper_toml}
status = "planned"

[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["src/{module}"]

[tool.pytest.ini_options]
# pytest-timeout: a hung test fails after 600 s instead of running to CI's limit
timeout = 600
addopts = "-ra --strict-markers --import-mode=importlib -m 'not slow and not gpu'"
markers = [
  "slow: longer than a few seconds; excluded by default (run with -m slow)",
  "gpu: needs CUDA; skipped without it",
]
"""

README = """\
# icml26-{name}

{description}

Paper: {paper}

## The method

(One paragraph: what the method does and the equation at its heart.)

The result, each paired comparison with its 95% interval (numbers and setup in [Results](#results)):

![Each comparison of the results row (benchmarks/evidence.svg, drawn by tools/evidence_figure.py)](https://raw.githubusercontent.com/icml26/icml26/main/packages/{name}/benchmarks/evidence.svg)

## Install

```bash
pip install icml26-{name}
```

## Quickstart

```python
import {module}

print({module}.__name__)  # -> {module}
```

## API

| name | what |
|---|---|

## Results

`python benchmarks/reproduce.py --quick` (machine, date):

| claim | paper | ours | baseline |
|---|---|---|---|

## Faithful, reconstructed, different

## Citation

```bibtex
```
"""

INIT = '''\
"""icml26-{name}: {description_doc}"""
{kernels_import}
__version__ = "0.1.0"

__all__ = ["__version__"]
'''

TEST_IMPORTS = """\
import {module}

EXPECTED_ALL = ["__version__"]


def test_public_api_is_pinned():
    assert sorted({module}.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr({module}, name), name
"""

REPRODUCE = '''\
"""Reproduce the paper's central claim at small scale; prints one JSON line.

Keys: package, claim, paper, ours, baseline, ratio, seconds.
"""

import sys

if __name__ == "__main__":
    sys.exit("benchmarks/reproduce.py for icml26-{name} is not written yet")
'''

CHANGELOG = "# Changelog\n\n## 0.1.0 — unreleased\n\n- Package created from the template.\n"


def create(name: str, paper: str, description: str, kernels: bool, root: Path = ROOT) -> Path:
    """Write the package skeleton; returns its folder. Raises ValueError on a bad or taken name."""
    if not NAME_RE.match(name):
        raise ValueError(
            f"name must be lowercase letters, digits and single dashes, starting with a letter "
            f"(like 'normbt' or 'kge-mos'); got {name!r}"
        )
    if name == "kernels":
        raise ValueError("name 'kernels' is reserved for shared-kernels (icml26-kernels)")
    folder = Path(root) / "packages" / name
    if folder.exists():
        raise ValueError(f"{folder} already exists")
    for arg, value in (("paper", paper), ("description", description)):
        if "\n" in value or "\r" in value:
            raise ValueError(f"{arg} must be one line; got {value!r}")
    module = "icml26_" + name.replace("-", "_")
    # the skeleton imports nothing but icml26_kernels (with --kernels): declare only that, or
    # deptry fails the new package's `deps` session (DEP002, declared but unused)
    deps: list[str] = []
    sources = ""
    kernels_import = ""
    if kernels:
        deps.append('"icml26-kernels>=0.1,<0.2"')
        sources = "\n[tool.uv.sources]\nicml26-kernels = { workspace = true }\n"
        kernels_import = (
            "\n# the method's kernels come from icml26-kernels (dispatch: select_backend)\n"
            "from icml26_kernels import select_backend as _select_backend  # noqa: F401\n"
        )
    fmt = {
        "name": name,
        "module": module,
        "paper": paper,
        "paper_toml": toml_str(paper),
        "description": description,
        "description_toml": toml_str(description),
        "description_doc": description.replace("\\", "\\\\").replace('"', '\\"'),
        "kernels_import": kernels_import,
        "repo_url": REPO_URL,
        "deps": ", ".join(deps),
        "sources": sources,
    }
    files = {
        "pyproject.toml": PYPROJECT.format(**fmt),
        "README.md": README.format(**fmt),
        "CHANGELOG.md": CHANGELOG,
        f"src/{module}/__init__.py": INIT.format(**fmt),
        f"src/{module}/py.typed": "",
        "tests/test_imports.py": TEST_IMPORTS.format(**fmt),
        "benchmarks/reproduce.py": REPRODUCE.format(**fmt),
    }
    license_file = Path(root) / "LICENSE"
    if license_file.is_file():  # every wheel carries the license text
        files["LICENSE"] = license_file.read_text()
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _register_conflicts(Path(root) / "pyproject.toml", f"icml26-{name}")
    return folder


def toml_str(value: str) -> str:
    """A TOML basic string: backslashes and double quotes escaped (JSON's escaping is valid TOML)."""
    return json.dumps(value, ensure_ascii=False)


FAIRPYX = '{ package = "icml26-online-fair", extra = "fairpyx" }'


def _register_conflicts(root_pyproject: Path, dist: str) -> None:
    """Add ``dist`` to the root's ``[tool.uv] conflicts`` against online-fair[fairpyx].

    fairpyx caps numpy<2; listing every other member there makes uv.lock fork that world off,
    so a new package resolves (and is tested) against numpy 2. No-op without such a list.
    """
    if not root_pyproject.is_file():
        return
    lines = root_pyproject.read_text().splitlines(keepends=True)
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("conflicts = ["))
        end = next(i for i in range(start, len(lines)) if lines[i].strip() == "]")
    except StopIteration:
        return
    if not any(FAIRPYX in ln for ln in lines[start:end]):
        return
    lines.insert(end, f'  [{FAIRPYX}, {{ package = "{dist}" }}],\n')
    root_pyproject.write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/new.py", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="short name, e.g. 'normbt' (distribution icml26-normbt)")
    parser.add_argument("--paper", required=True, help="the paper's title")
    parser.add_argument("--description", default="", help="one line for the package metadata")
    parser.add_argument("--kernels", action="store_true", help="depend on icml26-kernels")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        folder = create(
            args.name, args.paper, args.description or args.paper, args.kernels, args.root
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"created {folder}; next: uv lock, then write src/, tests/ and benchmarks/reproduce.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
