import subprocess
import sys

import new
import pytest
import workspace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def test_new_package_has_the_template_and_is_discovered(fake_repo):
    folder = new.create("gamma-ray", "Gamma paper", "Gamma method", kernels=True, root=fake_repo)
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {
        "LICENSE"
    }
    assert files == {
        "pyproject.toml",
        "README.md",
        "CHANGELOG.md",
        "src/icml26_gamma_ray/__init__.py",
        "src/icml26_gamma_ray/py.typed",
        "tests/test_imports.py",
        "benchmarks/reproduce.py",
    }
    member = workspace.get("gamma-ray", fake_repo)
    assert member.dist == "icml26-gamma-ray" and member.paper == "Gamma paper"
    assert "icml26-kernels>=0.1,<0.2" in member.dependencies
    readme = (folder / "README.md").read_text()
    for section in ("## Install", "## Quickstart", "## API", "## Results", "## Citation"):
        assert section in readme


def test_generated_tests_pass_and_reproduce_fails_loudly(fake_repo):
    folder = new.create("gamma", "Gamma paper", "Gamma", kernels=False, root=fake_repo)
    env = {"PYTHONPATH": str(folder / "src")}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "tests")],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    rep = subprocess.run(
        [sys.executable, str(folder / "benchmarks/reproduce.py"), "--quick"],
        capture_output=True,
        text=True,
    )
    assert rep.returncode != 0 and "not written yet" in rep.stderr


@pytest.mark.parametrize("bad", ["Gamma", "gamma_ray", "1gamma", "gamma--ray", "kernels", ""])
def test_bad_names_are_refused(fake_repo, bad):
    with pytest.raises(ValueError):
        new.create(bad, "P", "D", kernels=False, root=fake_repo)


def test_existing_package_is_refused(fake_repo):
    with pytest.raises(ValueError, match="already exists"):
        new.create("alpha", "P", "D", kernels=False, root=fake_repo)


def test_new_package_joins_the_fairpyx_conflict_list(fake_repo):
    root = fake_repo / "pyproject.toml"
    root.write_text(
        f'[tool.uv]\nconflicts = [\n  [{new.FAIRPYX}, {{ package = "icml26-alpha" }}],\n]\n'
    )
    new.create("gamma", "Gamma paper", "Gamma", kernels=False, root=fake_repo)
    pairs = tomllib.loads(root.read_text())["tool"]["uv"]["conflicts"]
    assert [pair[1]["package"] for pair in pairs] == ["icml26-alpha", "icml26-gamma"]
    assert all(pair[0] == {"package": "icml26-online-fair", "extra": "fairpyx"} for pair in pairs)
