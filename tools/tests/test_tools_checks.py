"""The repository checks fail when they should: planted sibling import, stale table, bad wheel."""

import independence
import readme_table
from conftest import REPO, write


def test_independence_passes_on_a_clean_workspace(fake_repo):
    assert independence.check(fake_repo) == 0


def test_independence_fails_on_a_planted_sibling_import(fake_repo, capfd):
    write(fake_repo / "packages/beta/src/icml26_beta/leak.py", "from icml26_alpha import double\n")
    assert independence.check(fake_repo) != 0
    assert "icml26_beta.leak" in capfd.readouterr().out


def test_independence_fails_when_kernels_import_a_paper_package(fake_repo):
    write(fake_repo / "shared-kernels/src/icml26_kernels/leak.py", "import icml26_beta\n")
    assert independence.check(fake_repo) != 0


def test_independence_passes_on_this_repository():
    assert independence.check(REPO) == 0


def test_readme_table_write_then_check(fake_repo):
    assert readme_table.main(["--check", "--root", str(fake_repo)]) == 1  # empty table is stale
    assert readme_table.main(["--write", "--root", str(fake_repo)]) == 0
    text = (fake_repo / "README.md").read_text()
    assert "[`icml26-alpha`](packages/alpha) | Alpha paper | Alpha method | alpha |" in text
    assert readme_table.main(["--check", "--root", str(fake_repo)]) == 0


def test_readme_table_needs_a_paper_title(fake_repo):
    p = fake_repo / "packages/beta/pyproject.toml"
    p.write_text(p.read_text().replace('paper = "Beta paper"', ""))
    assert readme_table.main(["--check", "--root", str(fake_repo)]) == 2


_EVIDENCE = {
    "schema": "icml26-evidence/1",
    "comparisons": [
        {
            "name": "a_vs_b",
            "statistic": "paired difference",
            "diff": 0.1,
            "ci95": [0.05, 0.15],
            "n": 5,
            "paired_sd": 0.04,
            "mde": 0.06,
            "target": None,
            "resolved": True,
            "headroom": None,
            "headroom_note": "a synthetic row",
        }
    ],
    "tuning": [],
}


def _row(name, ours, measured="2020-01-01 00:00", machine=None):
    row = {"package": name, "claim": "c|d", "paper": "p", "ours": ours, "baseline": 1.0}
    row.update(ratio=ours, seconds=1.0, measured=measured, evidence=_EVIDENCE)
    if machine is not None:
        row["machine"] = machine
    return row


def _repro_repo(tmp_path, names=("alpha", "beta")):
    for name in names:
        (tmp_path / "packages" / name / "benchmarks").mkdir(parents=True)
        (tmp_path / "packages" / name / "pyproject.toml").write_text("[project]\n")
    return tmp_path


def test_reproduce_table_renders_every_column_and_the_machine():
    import reproduce_table

    machine = {"cpu": "AMD EPYC", "cpu_capability": "AVX512", "torch_threads": 2}
    text = reproduce_table.render([_row("alpha", 0.51234, machine=machine)])
    assert (
        "| alpha | c\\|d | p | 0.5123 | 1 | 0.5123 | 1 | AMD EPYC (AVX512, 2 threads) | 2020-01-01 00:00 |"
        in text
    )
    assert "| unrecorded |" in reproduce_table.render([_row("alpha", 0.5)])
    loaded = {
        **_row("alpha", 0.5, machine=machine),
        "cpu_seconds": 61.23,
        "load_avg_at_start": [9.5, 8, 7],
    }
    assert "| 1 (CPU 61.23) | AMD EPYC (AVX512, 2 threads), load 9.5 |" in reproduce_table.render(
        [loaded]
    )


def test_reproduce_table_check_fails_on_a_stale_row(tmp_path):
    """The diffusion-resampling incident: a merge reverted a row; --check must catch it."""
    import reproduce_table

    root = _repro_repo(tmp_path)
    reproduce_table.write_row(root, _row("alpha", 0.5))
    reproduce_table.write_row(root, _row("beta", 0.7))
    assert reproduce_table.main(["--write", "--root", str(root)]) == 0
    assert reproduce_table.main(["--check", "--root", str(root)]) == 0
    table = root / "REPRODUCTION.md"
    good = table.read_text()
    # a hand-edited (or merge-reverted) number
    table.write_text(good.replace("| beta | c\\|d | p | 0.7 |", "| beta | c\\|d | p | 0.9 |"))
    assert reproduce_table.check(root) and "beta" in reproduce_table.check(root)[0]
    assert reproduce_table.main(["--check", "--root", str(root)]) == 1
    # a rerun's row file that was committed without regenerating the table
    table.write_text(good)
    reproduce_table.write_row(root, _row("alpha", 0.6))
    assert reproduce_table.main(["--check", "--root", str(root)]) == 1
    assert reproduce_table.main(["--write", "--root", str(root)]) == 0
    assert reproduce_table.main(["--check", "--root", str(root)]) == 0


def test_reproduce_table_check_needs_every_members_row(tmp_path):
    import reproduce_table

    root = _repro_repo(tmp_path)
    reproduce_table.write_row(root, _row("alpha", 0.5))
    reproduce_table.write_table(root)
    problems = reproduce_table.check(root)
    assert len(problems) == 1 and problems[0].startswith("beta: no benchmarks/reproduce_row.json")


def test_reproduce_table_rejects_a_row_without_keys(tmp_path):
    import reproduce_table

    root = _repro_repo(tmp_path, ("alpha",))
    (root / "packages/alpha/benchmarks/reproduce_row.json").write_text('{"package": "alpha"}')
    assert reproduce_table.main(["--write", "--root", str(root)]) == 2
    assert not (root / "REPRODUCTION.md").exists()


def test_committed_reproduction_table_matches_the_row_files():
    import reproduce_table

    assert reproduce_table.check(reproduce_table.ROOT) == []
