"""Issue 66 finding 6: the toolchain CI runs is pinned, and pinned to what uv.lock holds.

- every `uvx` in a workflow or `.ci/run` names an exact version (`uvx --from 'nox==V' nox`,
  `uvx ruff@V`): a bare `uvx nox` runs whatever PyPI has that day;
- each pin equals uv.lock's version of that tool (the `build`/`lint` nox sessions use the lock),
  so CI, `.ci/run` and a local `nox -s build` run the same twine, nox, check-wheel-contents;
- setup-uv is given a `version:`, `.ci/run`'s bootstrap installs an exact uv, and both satisfy
  the root pyproject's `[tool.uv] required-version` (uv.lock relies on a preview feature);
- the release publishes with trusted publishing and PEP 740 attestations.
"""

from __future__ import annotations

import re
import shlex

import pytest
import yaml
from conftest import REPO
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SCRIPTS = [*WORKFLOWS, REPO / ".ci" / "run"]
PUBLISH = "pypa/gh-action-pypi-publish@"


def lock_versions() -> dict[str, str]:
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    return {canonicalize_name(p["name"]): p["version"] for p in lock["package"] if "version" in p}


def uvx_calls(text: str) -> list[tuple[int, str, str | None, str]]:
    """Each ``uvx`` invocation: (line number, tool, exact version or None, the line).

    Pinned: ``uvx --from 'T==V' ...`` or ``uvx T@V``. Anything else (``uvx nox``,
    ``uvx --from 'nox>=2024.10' nox``, ``uvx twine``) has no version.
    """
    calls = []
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for m in re.finditer(r"(?<![\w-])uvx\s+(.*)", line):
            try:
                words = shlex.split(m.group(1), comments=True)
            except ValueError:  # an unbalanced quote: read it as words
                words = m.group(1).split()
            if not words:
                calls.append((no, "", None, line.strip()))
                continue
            if words[0] == "--from" and len(words) > 1:
                spec = words[1]
                name, eq, version = spec.partition("==")
                pinned = bool(eq) and not re.search(r"[<>=!~*,;\s]", version)
                calls.append((no, name.strip(), version if pinned else None, line.strip()))
            else:
                name, at, version = words[0].partition("@")
                calls.append((no, name, version if at and version else None, line.strip()))
    return calls


def unpinned(text: str) -> list[str]:
    return [f"line {no}: {line}" for no, _, version, line in uvx_calls(text) if version is None]


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ("        run: uvx nox -s lint", True),
        ("uvx --from 'nox>=2024.10' nox -s tests", True),
        ("  uvx twine check --strict dist/*", True),
        ("  uvx --from nox nox -l", True),
        ("nox=(uvx --from 'nox==2026.10.20' nox)", False),
        ("uvx ruff@0.17.6 check .", False),
        ('  uvx --from "check-wheel-contents==0.6.3" check-wheel-contents dist/*.whl', False),
        ("# uvx nox in a comment runs nothing", False),
    ],
)
def test_the_check_tells_a_bare_uvx_from_a_pinned_one(line, bad):
    assert bool(unpinned(line)) is bad


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_workflow_or_ci_run_line_runs_an_unpinned_uvx(path):
    text = path.read_text()
    assert "uvx" in text, f"{path.name}: no uvx at all; did the tool move?"
    assert unpinned(text) == [], f"{path.relative_to(REPO)}: bare uvx (pin it: uvx --from 'T==V')"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_uvx_pin_is_the_version_in_the_lock(path):
    locked = lock_versions()
    for no, tool, version, line in uvx_calls(path.read_text()):
        want = locked.get(canonicalize_name(tool))
        if version is not None and want is not None:
            assert version == want, f"{path.name}:{no}: {tool}=={version}, uv.lock has {want}"
    # the tools CI itself runs: nox everywhere, twine and check-wheel-contents in the release
    tools = {canonicalize_name(t) for _, t, _, _ in uvx_calls(path.read_text())}
    assert "nox" in tools, path.name
    if path.name == "release.yml":
        assert {"twine", "check-wheel-contents"} <= tools


def required_uv() -> SpecifierSet:
    root = tomllib.loads((REPO / "pyproject.toml").read_text())
    spec = root["tool"]["uv"].get("required-version")
    assert spec, "[tool.uv] required-version missing in the root pyproject.toml"
    return SpecifierSet(spec)


def test_uv_is_pinned_in_every_setup_uv_and_in_ci_run_and_meets_required_version():
    uv = lock_versions()["uv"]
    spec = required_uv()
    assert Version(uv) in spec, f"uv.lock's uv {uv} outside required-version {spec}"
    seen = 0
    for wf in WORKFLOWS:
        for name, job in yaml.safe_load(wf.read_text())["jobs"].items():
            for step in job.get("steps", []):
                if step.get("uses", "").startswith("astral-sh/setup-uv@"):
                    seen += 1
                    got = str(step.get("with", {}).get("version", ""))
                    assert got == uv, f"{wf.name}:{name}: setup-uv version {got!r}, lock has {uv}"
    assert seen >= 8
    run = (REPO / ".ci" / "run").read_text()
    boot = re.search(r"-m pip install --quiet (\S+)", run)
    assert boot and boot.group(1).strip("'\"") == "uv==$uv_pin", boot and boot.group(1)
    pin = re.search(r"^uv_pin=(\S+)$", run, flags=re.M)
    assert pin and pin.group(1) == uv, pin and pin.group(1)
    # a uv of another version on PATH is replaced by the pinned one, not used
    assert '!= "$uv_pin"' in run


def test_release_publishes_with_trusted_publishing_and_attestations():
    jobs = yaml.safe_load((REPO / ".github/workflows/release.yml").read_text())["jobs"]
    publish = jobs["publish"]
    assert publish["permissions"] == {"id-token": "write"}
    steps = [s for s in publish["steps"] if s.get("uses", "").startswith(PUBLISH)]
    assert len(steps) == 1, "publish with pypa/gh-action-pypi-publish (PEP 740 attestations)"
    assert steps[0]["with"]["attestations"] is True
    assert "password" not in steps[0]["with"]  # trusted publishing: no stored token
    for job in jobs.values():  # one way out to PyPI
        for s in job.get("steps", []):
            assert not re.search(r"\b(uv publish|twine upload)\b", s.get("run", "")), s
