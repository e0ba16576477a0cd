# /// script
# requires-python = ">=3.10"
# dependencies = ["tomli>=2; python_version < '3.11'"]
# ///
"""Discover the workspace members and read their metadata from ``pyproject.toml``.

Used by ``noxfile.py``, the CI matrix (``tools/changed.py``), the README table and vendoring,
so there is no hand-kept list of packages anywhere.

    python tools/workspace.py list [--json]
    python tools/workspace.py show NAME
    python tools/workspace.py release-tag icml26-NAME/vX.Y.Z   # the release workflow's check
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# The repository every member's [project.urls] points to (metadata only; nothing fetches it)
REPO_URL = "https://github.com/icml26/icml26"
KERNELS_DIR = "shared-kernels"
KERNELS_NAME = "kernels"
DIST_PREFIX = "icml26-"


class UnknownPackageError(LookupError):
    """A package name that is not a workspace member; the message lists the valid names."""


@dataclass(frozen=True)
class Member:
    """One workspace member (a distribution)."""

    name: str  # short name: "normbt", "kge-mos", or "kernels" for shared-kernels
    dist: str  # distribution: "icml26-normbt"
    import_name: str  # "icml26_normbt"
    path: Path  # folder, absolute
    version: str
    description: str
    dependencies: list[str] = field(default_factory=list)
    extras: dict[str, list[str]] = field(default_factory=dict)
    dev: list[str] = field(default_factory=list)
    paper: str = ""  # [tool.icml26] paper = "..."
    status: str = ""  # [tool.icml26] status = "..."
    # [tool.icml26] unlocked-test-requirements = ["flwr[simulation]==1.42.0"]: exact pins that
    # the shared lock cannot hold (they cap a library the workspace tooling needs newer); the
    # `tests` session installs them into the member's venv after the locked sync
    unlocked_test: list[str] = field(default_factory=list)
    # [tool.icml26] quick-over-budget = "why": its `reproduce.py --quick` exceeds the 120 s
    # budget; `nox -s reproduce` skips it unless named (or `--all`), and its README says why
    quick_over_budget: str = ""

    def relpath(self, root: Path = ROOT) -> str:
        """The folder relative to the repository root: ``packages/normbt``, ``shared-kernels``."""
        return self.path.relative_to(Path(root).resolve()).as_posix()

    @property
    def src(self) -> Path:
        return self.path / "src" / self.import_name

    @property
    def is_kernels(self) -> bool:
        return self.name == KERNELS_NAME

    def to_json(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def read_member(folder: Path) -> Member:
    """Read one member's metadata; raises ValueError naming the file when it is malformed."""
    pyproject = folder / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{pyproject}: cannot read: {exc}") from exc
    project = data.get("project")
    if not isinstance(project, dict) or "name" not in project or "version" not in project:
        raise ValueError(f"{pyproject}: needs a [project] table with a static name and version")
    dist = project["name"]
    if not dist.startswith(DIST_PREFIX):
        raise ValueError(f"{pyproject}: project.name must start with {DIST_PREFIX!r}; got {dist!r}")
    name = KERNELS_NAME if folder.name == KERNELS_DIR else folder.name
    if folder.name != KERNELS_DIR and dist != DIST_PREFIX + name:
        raise ValueError(
            f"{pyproject}: folder packages/{name} must hold {DIST_PREFIX + name}; got {dist!r}"
        )
    meta = data.get("tool", {}).get("icml26", {})
    unlocked = meta.get("unlocked-test-requirements", [])
    if not isinstance(unlocked, list) or not all(
        isinstance(r, str) and "==" in r for r in unlocked
    ):
        raise ValueError(
            f"{pyproject}: [tool.icml26] unlocked-test-requirements must be a list of exact "
            f'pins ("name==version"); got {unlocked!r}'
        )
    over = meta.get("quick-over-budget", "")
    if not isinstance(over, str):
        raise ValueError(
            f"{pyproject}: [tool.icml26] quick-over-budget must be a string (the reason)"
        )
    return Member(
        name=name,
        dist=dist,
        import_name=dist.replace("-", "_"),
        path=folder.resolve(),
        version=str(project["version"]),
        description=project.get("description", ""),
        dependencies=list(project.get("dependencies", [])),
        extras={k: list(v) for k, v in project.get("optional-dependencies", {}).items()},
        dev=[d for d in data.get("dependency-groups", {}).get("dev", []) if isinstance(d, str)],
        paper=meta.get("paper", ""),
        status=meta.get("status", ""),
        unlocked_test=list(unlocked),
        quick_over_budget=over,
    )


def discover(root: Path = ROOT) -> list[Member]:
    """All members: ``shared-kernels`` first, then ``packages/*`` sorted by name."""
    root = Path(root)
    folders = []
    if (root / KERNELS_DIR / "pyproject.toml").is_file():
        folders.append(root / KERNELS_DIR)
    packages = root / "packages"
    for folder in sorted(packages.iterdir()) if packages.is_dir() else []:
        if not folder.is_dir() or folder.name.startswith((".", "_")):
            continue
        if not (folder / "pyproject.toml").is_file():
            # a package folder nobody builds or tests would leave CI green without testing it
            raise ValueError(
                f"{folder}: a folder under packages/ must hold a pyproject.toml "
                "(create packages with tools/new.py; remove stray folders)"
            )
        folders.append(folder)
    return [read_member(f) for f in folders]


def get(name: str, root: Path = ROOT) -> Member:
    """A member by short name (``normbt``), distribution (``icml26-normbt``) or import name."""
    members = discover(root)
    for m in members:
        if name in (m.name, m.dist, m.import_name, m.path.name):
            return m
    valid = ", ".join(m.name for m in members)
    raise UnknownPackageError(f"unknown package {name!r}; valid names: {valid}")


def release_member(tag: str, root: Path = ROOT) -> Member:
    """The member a release tag ``icml26-<name>/v<version>`` names; refuses a version mismatch."""
    dist, sep, version = tag.partition("/v")
    if not sep or not dist.startswith(DIST_PREFIX) or not version:
        raise ValueError(f"release tag must look like 'icml26-<name>/v<version>'; got {tag!r}")
    member = get(dist, root)
    if member.version != version:
        raise ValueError(
            f"tag {tag!r} says version {version} but {member.dist} is at {member.version} "
            f"({member.path / 'pyproject.toml'}); bump the version or fix the tag"
        )
    if not changelog_entry(member, version):
        raise ValueError(
            f"{member.path / 'CHANGELOG.md'} has no '## {version}' entry; "
            "write the release notes before tagging"
        )
    return member


def changelog_entry(member: Member, version: str) -> str:
    """The text of ``## <version>`` in the member's CHANGELOG.md ('' when absent or empty)."""
    path = member.path / "CHANGELOG.md"
    if not path.is_file():
        return ""
    lines = path.read_text().splitlines()
    start = None
    for i, line in enumerate(lines):
        if line.startswith("## "):
            head = line[3:].strip()
            if start is not None:
                return "\n".join(lines[start:i]).strip()
            if head == version or head.startswith((version + " ", version + "\t")):
                start = i + 1
    if start is None:
        return ""
    return "\n".join(lines[start:]).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/workspace.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_list = sub.add_parser("list", help="list the members")
    p_list.add_argument("--json", action="store_true", help="one JSON object per member")
    p_show = sub.add_parser("show", help="one member's metadata as JSON")
    p_show.add_argument("name")
    p_tag = sub.add_parser(
        "release-tag", help="check a release tag; print the distribution to build"
    )
    p_tag.add_argument("tag", help="icml26-<name>/v<version>")
    p_notes = sub.add_parser("release-notes", help="print a tag's CHANGELOG section")
    p_notes.add_argument("tag", help="icml26-<name>/v<version>")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            for m in discover():
                print(json.dumps(m.to_json()) if args.json else f"{m.name}\t{m.dist}\t{m.version}")
        elif args.cmd == "release-tag":
            print(release_member(args.tag).dist)
        elif args.cmd == "release-notes":
            member = release_member(args.tag)
            print(changelog_entry(member, member.version))
        else:
            print(json.dumps(get(args.name).to_json(), indent=2))
    except (UnknownPackageError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
