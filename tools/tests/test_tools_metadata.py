"""Every member's [project] metadata: what a user sees on PyPI (issue 66, finding 6).

Python-version classifiers that match requires-python, a Development Status, keywords and a
``Paper`` link (the paper note in /work/shared/papers/<name>.md names it); the license is the
SPDX ``license`` field (PEP 639 forbids license classifiers beside it, so none is required).
"""

from __future__ import annotations

import re
import sys

import pytest
import workspace
from conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MEMBERS = workspace.discover(REPO)


def check_metadata(project: dict, *, needs_paper: bool) -> list[str]:
    """The problems of one [project] table (empty: good)."""
    problems = []
    classifiers = project.get("classifiers", [])
    if not any(c.startswith("Development Status :: ") for c in classifiers):
        problems.append("no 'Development Status' classifier")
    floor = re.fullmatch(r">=\s*3\.(\d+)", project.get("requires-python", "").strip())
    if not floor:
        problems.append(f"requires-python {project.get('requires-python')!r} is not '>=3.N'")
    else:
        minors = sorted(
            int(m.group(1))
            for c in classifiers
            if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
        )
        if not minors:
            problems.append("no 'Programming Language :: Python :: 3.N' classifier")
        elif minors[0] != int(floor.group(1)):
            problems.append(
                f"oldest Python classifier 3.{minors[0]} != requires-python {floor.group(0)}"
            )
    if "license" not in project and not any(c.startswith("License :: ") for c in classifiers):
        problems.append("no license (SPDX 'license' field or a License classifier)")
    if len(project.get("keywords", [])) < 2:
        problems.append("fewer than two keywords")
    paper = project.get("urls", {}).get("Paper", "")
    if needs_paper and not paper.startswith("https://"):
        problems.append("no [project.urls] Paper link")
    return problems


@pytest.mark.parametrize("member", MEMBERS, ids=[m.name for m in MEMBERS])
def test_member_metadata_complete(member):
    project = tomllib.loads((member.path / "pyproject.toml").read_text())["project"]
    assert check_metadata(project, needs_paper=not member.is_kernels) == []


def test_check_metadata_catches_each_gap():
    good = {
        "requires-python": ">=3.10",
        "license": "Apache-2.0",
        "keywords": ["a", "b"],
        "classifiers": [
            "Development Status :: 3 - Alpha",
            "Programming Language :: Python :: 3.10",
        ],
        "urls": {"Paper": "https://arxiv.org/abs/1"},
    }
    assert check_metadata(good, needs_paper=True) == []
    cases = {
        "Development Status": {"classifiers": ["Programming Language :: Python :: 3.10"]},
        "Python :: 3.N": {"classifiers": ["Development Status :: 3 - Alpha"]},
        "oldest Python": {
            "classifiers": [
                "Development Status :: 3 - Alpha",
                "Programming Language :: Python :: 3.11",
            ]
        },
        "keywords": {"keywords": []},
        "Paper": {"urls": {}},
        "license": {"license": None},
    }
    for needle, change in cases.items():
        bad = {**good, **change}
        bad = {k: v for k, v in bad.items() if v is not None}
        assert any(needle in p for p in check_metadata(bad, needs_paper=True)), needle


def _base_requirements(member) -> list[str]:
    """The member's base requirements with the extras it asks of its siblings, flattened."""
    by_dist = {m.dist: m for m in MEMBERS}
    out = []
    for req in member.dependencies:
        out.append(req)
        m = re.match(r"([A-Za-z0-9_.-]+)\s*\[([^\]]+)\]", req)
        if m and m.group(1) in by_dist:
            sibling = by_dist[m.group(1)]
            for extra in m.group(2).split(","):
                out += sibling.extras.get(extra.strip(), [])
    return out


@pytest.mark.parametrize("member", MEMBERS, ids=[m.name for m in MEMBERS])
def test_base_requirements_do_not_pull_triton(member):
    """A CPU-torch install must not get triton (995 MB): it is an opt-in extra (issue 66, 3)."""
    pulled = [r for r in _base_requirements(member) if re.match(r"triton\b", r.strip())]
    assert pulled == [], f"{member.dist}: base requirements pull triton via {pulled}"
