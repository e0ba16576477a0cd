"""Check built distributions: a sibling requirement is a version range, never a path or URL.

    python tools/wheel_check.py dist/normbt/*.whl dist/normbt/*.tar.gz

The workspace maps ``icml26-kernels`` to its folder through ``[tool.uv.sources]``; that mapping
must not leak into the published metadata (a ``file://`` requirement cannot be installed from
PyPI). Every ``icml26-*`` requirement must carry a specifier like ``>=0.1,<0.2``.
"""

from __future__ import annotations

import sys

import pkginfo
from packaging.requirements import Requirement


def problems(path: str) -> list[str]:
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
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: tools/wheel_check.py DIST_FILE [DIST_FILE ...]", file=sys.stderr)
        return 2
    found = [p for a in argv for p in problems(a)]
    for p in found:
        print(f"error: {p}", file=sys.stderr)
    if not found:
        print(f"ok: {len(argv)} distribution(s): sibling requirements are ranges, no paths")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
