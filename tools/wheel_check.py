# /// script
# requires-python = ">=3.10"
# dependencies = ["pkginfo>=1.10", "packaging>=24", "tomli>=2; python_version < '3.11'"]
# ///
"""Check built distributions' metadata before they are published.

    uv run tools/wheel_check.py dist/normbt/*.whl dist/normbt/*.tar.gz

Each distribution must have:

- sibling (``icml26-*``) requirements as version ranges (``>=0.1,<0.2``), never a path or URL:
  the workspace maps ``icml26-kernels`` to its folder through ``[tool.uv.sources]`` and that
  mapping must not leak into the published metadata (a ``file://`` requirement cannot be
  installed from PyPI);
- license metadata, ``Requires-Python``, at least one ``Project-URL`` and the classifiers
  ``Programming Language :: Python :: 3`` (the license is the PEP 639 expression, no classifier);
- a README (long description) whose links work on PyPI: no relative link such as
  ``../../shared-kernels/README.md`` or ``benchmarks/reproduce.py`` (PyPI renders the README
  without the repository around it; use an absolute URL).
"""

from __future__ import annotations

import argparse
import re
import sys

# markdown links and images: [text](target) / ![alt](target); reference definitions [x]: target
LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
ABSOLUTE = ("http://", "https://", "mailto:", "#")


def relative_links(markdown: str) -> list[str]:
    """Link targets in ``markdown`` that are relative (break once rendered on PyPI)."""
    # code blocks are not links
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = LINK_RE.findall(text) + REF_RE.findall(text)
    return [t for t in targets if not t.startswith(ABSOLUTE)]


def problems(path: str) -> list[str]:
    import pkginfo
    from packaging.requirements import Requirement

    meta = pkginfo.get_metadata(path)
    if meta is None or not meta.name:
        return [f"{path}: no readable metadata"]
    out = []
    for raw in meta.requires_dist or []:
        req = Requirement(raw)
        if req.url:
            out.append(f"{path}: requirement {raw!r} points at a URL/path")
        if req.name.startswith("icml26-") and not req.specifier:
            out.append(f"{path}: sibling requirement {raw!r} has no version range")
    if not getattr(meta, "license_expression", None) and not meta.license:
        out.append(f"{path}: no license metadata")
    if not meta.requires_python:
        out.append(f"{path}: no Requires-Python")
    if not getattr(meta, "project_urls", None):
        out.append(f"{path}: no Project-URL (Homepage/Source/Issues in [project.urls])")
    classifiers = list(meta.classifiers or [])
    if "Programming Language :: Python :: 3" not in classifiers:
        out.append(f"{path}: classifier 'Programming Language :: Python :: 3' missing")
    for link in relative_links(meta.description or ""):
        out.append(f"{path}: README link {link!r} is relative; it breaks on PyPI (use a URL)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/wheel_check.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("dists", nargs="+", metavar="DIST_FILE", help="wheels and sdists")
    args = parser.parse_args(argv)
    try:
        found = [p for a in args.dists for p in problems(a)]
    except ModuleNotFoundError as exc:
        print(
            f"error: {exc.name} is missing: run `uv run tools/wheel_check.py ...` "
            "(its PEP 723 header installs pkginfo and packaging)",
            file=sys.stderr,
        )
        return 2
    for p in found:
        print(f"error: {p}", file=sys.stderr)
    if not found:
        print(f"ok: {len(args.dists)} distribution(s): metadata complete, links absolute")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
