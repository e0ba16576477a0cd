# /// script
# requires-python = ">=3.10"
# dependencies = ["tomli>=2; python_version < '3.11'"]
# ///
"""Copy one package's method into another codebase, with the shared kernels it uses.

    uv run tools/vendor.py NAME --into DIR [--package-name P] [--modules loss,diagnostics] [--force]

Writes ``DIR/P/``. P defaults to ``_vendored_<name>`` (e.g. ``_vendored_normbt``), never the
package's own import name: a copy called ``icml26_normbt`` would shadow an installed
``icml26-normbt``, or be shadowed by it, depending on sys.path order (ruff's extend-exclude
``**/_vendored_*`` already skips such folders). Names of icml26 packages are refused. It holds:

- the package's modules (all of them, or ``--modules`` plus what they import inside the
  package), with their data files;
- the ``icml26_kernels`` modules they import, transitively, under ``DIR/P/_kernels/``;
- every import of the package itself or of ``icml26_kernels`` rewritten to a relative one, so
  the copy runs under any name;
- a provenance header on every file (package, version, commit, license) and ``VENDORED.md``
  with the import line of the copy and the third-party requirements it still needs.

It refuses, changing nothing, when something cannot be carried: an import of another paper
package, ``import icml26_kernels.x`` without ``as`` (binds a name that no longer exists), a
module name given as a string (``importlib.import_module("icml26_...")``), or a target that
already exists (without ``--force``).
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workspace import ROOT, Member, UnknownPackageError, discover, get

KERNELS = "icml26_kernels"
VENDORED_PREFIX = "_vendored_"
KERNELS_DIR = "_kernels"
SKIP_FILES = {"py.typed"}


class VendorError(Exception):
    """Something cannot be carried; the message says what and where."""


def default_package_name(member: Member) -> str:
    """``_vendored_<name>`` (``icml26_kge_mos`` -> ``_vendored_kge_mos``): unlike the import
    name, it cannot collide with an installed icml26 distribution."""
    return VENDORED_PREFIX + member.import_name.removeprefix("icml26_")


def _public_names(path: Path, limit: int = 3) -> list[str]:
    """A module's ``__all__`` (a literal list), else its public top-level defs and classes."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(x, ast.Name) and x.id == "__all__" for x in targets):
            try:
                names = [n for n in ast.literal_eval(node.value) if isinstance(n, str)]
            except ValueError:
                break
            return names[: limit + 1]
    names = [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not n.name.startswith("_")
    ]
    return names[: limit + 1]


def import_lines(pkg: str, own: Source, modules: list[str] | None, limit: int = 3) -> list[str]:
    """How the copy is imported: ``from _vendored_normbt import A, B, C, ...`` (the package's
    ``__all__``); for a partial copy (no package ``__init__``), one line per named module."""
    lines = []
    for dotted in modules or [""]:
        f = own.module_file(dotted)
        names = _public_names(f, limit) if f is not None else []
        where = f"{pkg}.{dotted}" if dotted else pkg
        if not names:
            lines.append(f"import {where}")
            continue
        more = ", ..." if len(names) > limit else ""
        lines.append(f"from {where} import {', '.join(names[:limit])}{more}")
    return lines


@dataclass
class Source:
    """A package being copied: its import name and the folder holding it."""

    import_name: str
    folder: Path  # .../src/<import_name>

    def module_file(self, dotted: str) -> Path | None:
        """File of ``<import_name>.<dotted>`` ('' is the package itself), or None."""
        base = self.folder.joinpath(*dotted.split(".")) if dotted else self.folder
        if base.with_suffix(".py").is_file() and dotted:
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        return None

    def dotted_of(self, path: Path) -> str:
        rel = path.relative_to(self.folder).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)

    def package_of(self, path: Path) -> str:
        """Dotted package (relative to the root) that contains the module file ``path``."""
        rel = path.relative_to(self.folder)
        return ".".join(rel.parts[:-1])


@dataclass
class Plan:
    own: set[Path] = field(default_factory=set)
    kernels: set[Path] = field(default_factory=set)
    third_party: set[str] = field(default_factory=set)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _absolute(node: ast.ImportFrom, package: str, root: str) -> str:
    """Absolute dotted name of a (possibly relative) ``from X import``."""
    if node.level == 0:
        return node.module or ""
    parts = [root, *package.split(".")] if package else [root]
    if node.level - 1 > len(parts) - 1:
        raise VendorError(f"relative import beyond the package root (level {node.level})")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _check_strings(tree: ast.AST, path: Path, names: list[str]) -> None:
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            fn = n.func
            fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if fname in {"import_module", "__import__", "files"} and n.args:
                arg = n.args[0]
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and arg.value.split(".")[0] in names
                ):
                    raise VendorError(
                        f"{path}:{n.lineno}: {fname}({arg.value!r}) names a package by string; "
                        "the vendored copy lives under another name, so this cannot be carried"
                    )


def _walk(
    src: Source,
    start: set[Path],
    plan_set: set[Path],
    other: Source | None,
    plan: Plan,
    paper_names: set[str],
    own_root: str,
    skip: frozenset[Path] = frozenset(),
) -> None:
    """Collect the closure of module files reachable from ``start`` inside ``src``.

    ``skip``: files never carried (the package ``__init__`` of a partial copy, which would
    import every module that was left out).
    """
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in plan_set or path in skip:
            continue
        plan_set.add(path)
        # every enclosing package __init__ runs on import: carry it too
        parent = path.parent
        while parent != src.folder.parent and parent.is_relative_to(src.folder):
            init = parent / "__init__.py"
            if init.is_file() and init not in plan_set:
                todo.append(init)
            parent = parent.parent
        tree = ast.parse(path.read_text(), filename=str(path))
        _check_strings(tree, path, [own_root, KERNELS, *paper_names])
        package = src.package_of(path)
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _absolute(node, package, src.import_name)
                # ``from pkg import name``: name may be a submodule; try both
                targets = [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]
            for name in targets:
                top, _, rest = name.partition(".")
                if top == src.import_name:
                    f = src.module_file(rest)
                    if f is not None:
                        todo.append(f)
                elif other is not None and top == other.import_name:
                    f = other.module_file(rest)
                    if f is not None:
                        _walk(other, {f}, plan.kernels, None, plan, paper_names, own_root)
                elif top in paper_names:
                    raise VendorError(
                        f"{path}:{node.lineno}: imports the sibling package {top!r}; a package may "
                        "import only icml26_kernels, so this cannot be carried"
                    )
                elif top not in sys.stdlib_module_names and top not in {
                    own_root,
                    KERNELS,
                    "__future__",
                }:
                    plan.third_party.add(top)


def _rewrite(text: str, path: Path, dotted_package: list[str], roots: dict[str, list[str]]) -> str:
    """Rewrite absolute imports of the roots (own package, icml26_kernels) to relative ones.

    ``dotted_package``: the vendored file's package, relative to the vendored root P.
    ``roots``: absolute root name -> its location relative to P (``[]`` or ``["_kernels"]``).
    """
    tree = ast.parse(text, filename=str(path))
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    edits: list[tuple[int, int, str]] = []
    dots = "." * (len(dotted_package) + 1)  # from this file up to P
    for node in _imports(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or not node.module or node.module.split(".")[0] not in roots:
                continue
            parts = node.module.split(".")
            target = roots[parts[0]] + parts[1:]
            names = ", ".join(ast.unparse(a) for a in node.names)
            new = f"from {dots}{'.'.join(target)} import {names}"
        else:
            mine = [a for a in node.names if a.name.split(".")[0] in roots]
            if not mine:
                continue
            if len(mine) != len(node.names):
                raise VendorError(
                    f"{path}:{node.lineno}: split this import statement (one module per line)"
                )
            pieces = []
            for a in mine:
                parts = a.name.split(".")
                if a.asname is None:
                    raise VendorError(
                        f"{path}:{node.lineno}: 'import {a.name}' binds the name {parts[0]!r}, which the "
                        f"vendored copy does not have; write 'from {'.'.join(parts[:-1]) or parts[0]} import ...' "
                        f"or 'import {a.name} as NAME'"
                    )
                target = roots[parts[0]] + parts[1:]
                if not target:
                    raise VendorError(
                        f"{path}:{node.lineno}: cannot import the vendored root itself"
                    )
                parent, last = target[:-1], target[-1]
                pieces.append(f"from {dots}{'.'.join(parent)} import {last} as {a.asname}")
            indent = " " * node.col_offset
            new = ("\n" + indent).join(pieces)
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        edits.append((start, end, new))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _header(member: Member, commit: str, rel_source: str) -> str:
    return (
        f"# Vendored by tools/vendor.py from {member.dist} {member.version} "
        f"(icml26 commit {commit}; license Apache-2.0).\n"
        f"# Source: {rel_source}\n"
        "# Change it upstream and re-vendor: local edits are overwritten.\n"
    )


def _with_header(text: str, header: str) -> str:
    if text.startswith("#!"):
        first, _, rest = text.partition("\n")
        return f"{first}\n{header}{rest}"
    return header + text


def _commit(root: Path, paths: list[Path]) -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *map(str, paths)],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def vendor(
    name: str,
    into: Path,
    package_name: str | None = None,
    modules: list[str] | None = None,
    force: bool = False,
    root: Path = ROOT,
) -> Path:
    """Vendor package ``name`` into ``into/<package_name>``; returns that folder."""
    members = discover(root)
    member = get(name, root)
    if member.is_kernels:
        raise VendorError("vendor a paper package; icml26-kernels modules come along with it")
    kernels_member = next((m for m in members if m.is_kernels), None)
    own = Source(member.import_name, member.src)
    kern = Source(KERNELS, kernels_member.src) if kernels_member else None
    paper_names = {m.import_name for m in members if not m.is_kernels}
    pkg = package_name or default_package_name(member)
    if not pkg.isidentifier():
        raise VendorError(f"--package-name must be a Python identifier; got {pkg!r}")
    taken = {m.import_name for m in members}
    if pkg in taken:
        raise VendorError(
            f"--package-name {pkg!r} is the import name of an icml26 distribution: the copy would "
            "shadow an installed one (or be shadowed by it); leave it out for "
            f"{default_package_name(member)!r}, or pick another name"
        )
    target = Path(into) / pkg
    if target.exists() and not force:
        raise VendorError(f"{target} exists; pass --force to replace it")

    plan = Plan()
    if modules:
        start = set()
        for mod in modules:
            f = own.module_file(mod)
            if f is None:
                valid = sorted(
                    own.dotted_of(p) for p in own.folder.rglob("*.py") if p.name != "__init__.py"
                )
                raise VendorError(
                    f"unknown module {mod!r} in {member.dist}; valid: {', '.join(valid)}"
                )
            start.add(f)
    else:
        start = set(own.folder.rglob("*.py"))
    skip = frozenset({own.folder / "__init__.py"}) if modules else frozenset()
    _walk(own, start, plan.own, kern, plan, paper_names, member.import_name, skip)

    commit = _commit(root, [member.path, kernels_member.path] if kernels_member else [member.path])
    staging = Path(into) / f".{pkg}.vendoring"
    shutil.rmtree(staging, ignore_errors=True)
    roots = {member.import_name: [], KERNELS: [KERNELS_DIR]}
    try:
        for src, files, prefix in ((own, plan.own, []), (kern, plan.kernels, [KERNELS_DIR])):
            for f in sorted(files):
                rel = f.relative_to(src.folder)
                out = staging.joinpath(*prefix, rel)
                out.parent.mkdir(parents=True, exist_ok=True)
                pkg_parts = prefix + list(rel.parts[:-1])
                text = _rewrite(f.read_text(), f, pkg_parts, roots)
                out.write_text(
                    _with_header(text, _header(member, commit, f.relative_to(root).as_posix()))
                )
        # packages need an __init__ at every level
        for d in [staging, *[p for p in staging.rglob("*") if p.is_dir()]]:
            init = d / "__init__.py"
            if not init.exists():
                init.write_text(_header(member, commit, "(generated package marker)"))
        # data files the package ships (not code): carried as they are
        if not modules:
            for f in own.folder.rglob("*"):
                if (
                    f.is_file()
                    and f.suffix not in {".py", ".pyc"}
                    and f.name not in SKIP_FILES
                    and "__pycache__" not in f.parts
                ):
                    out = staging / f.relative_to(own.folder)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, out)
        reqs = sorted(plan.third_party)
        imports = "\n".join(f"    {line}" for line in import_lines(pkg, own, modules))
        # Apache-2.0 §4(a): a redistributed copy carries the license text
        license_file = next(
            (f for f in (member.path / "LICENSE", Path(root) / "LICENSE") if f.is_file()), None
        )
        if license_file is None:
            raise VendorError(f"no LICENSE in {member.path} or {root}: cannot vendor without it")
        shutil.copy2(license_file, staging / "LICENSE")
        (staging / "VENDORED.md").write_text(
            f"# Vendored: {member.dist} {member.version}\n\n"
            f"Copied by `tools/vendor.py` from the icml26 monorepo at commit {commit}.\n"
            f"License: Apache-2.0, text in LICENSE beside this file (keep both). Paper: {member.paper or member.description}\n\n"
            f"Import the copy as `{pkg}`, in place of `{member.import_name}` (the folder holding\n"
            f"{pkg}/ must be on sys.path, as a project root usually is):\n\n{imports}\n\n"
            f"Third-party modules imported by this copy: {', '.join(reqs) or 'none'}.\n"
            f"The package declares: {', '.join(member.dependencies) or 'nothing'}.\n"
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/vendor.py", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="package short name, e.g. normbt")
    parser.add_argument("--into", type=Path, required=True, help="folder to write the copy into")
    parser.add_argument(
        "--package-name",
        help="name of the copied package (default: _vendored_<name>, e.g. _vendored_normbt; "
        "never an icml26 import name, which an installed distribution would clash with)",
    )
    parser.add_argument(
        "--modules",
        help="comma-separated modules to copy, plus what they import inside the package "
        "(default: all of them, integrations included: e.g. normbt's evaluate.py needs numpy)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing copy")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    mods = [m.strip() for m in args.modules.split(",") if m.strip()] if args.modules else None
    try:
        out = vendor(args.name, args.into, args.package_name, mods, args.force, args.root)
    except (VendorError, UnknownPackageError, ValueError, SyntaxError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"vendored {args.name} into {out}")
    print(f"import it as: {import_line(out)}")
    print(f"the copy imports: {third_party_line(out)} (details: {out / 'VENDORED.md'})")
    if mods is None:
        print("copy fewer modules (and their imports) with --modules, e.g. --modules loss")
    return 0


def import_line(target: Path) -> str:
    """The first import line VENDORED.md shows for a vendored copy."""
    lines = (target / "VENDORED.md").read_text().splitlines()
    return next((ln.strip() for ln in lines if ln.startswith("    ")), "unknown")


def third_party_line(target: Path) -> str:
    """The 'Third-party modules imported by this copy' line of a vendored copy's VENDORED.md."""
    for line in (target / "VENDORED.md").read_text().splitlines():
        if line.startswith("Third-party modules imported by this copy:"):
            return line.split(":", 1)[1].strip().rstrip(".")
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
