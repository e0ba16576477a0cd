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


def test_reproduce_table_renders_every_column(tmp_path):
    import reproduce_table

    rows = [
        {
            "package": "alpha",
            "claim": "x|y",
            "paper": "5%",
            "ours": 0.51234,
            "baseline": 0.4,
            "ratio": 1.28,
            "seconds": 3.0,
        }
    ]
    text = reproduce_table.render(rows)
    assert "| alpha | x\\|y | 5% | 0.5123 | 0.4 | 1.28 | 3 |" in text
