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
    assert "| alpha | x\\|y | 5% | 0.5123 | 0.4 | 1.28 | 3 | " in text


def _row(name, ours, measured=None):
    row = {"package": name, "claim": "c|d", "paper": "p", "ours": ours, "baseline": 1.0}
    row.update(ratio=ours, seconds=1.0)
    if measured:
        row["measured (UTC)"] = measured
    return row


def test_reproduce_table_merge_replaces_only_rerun_rows(tmp_path):
    import reproduce_table

    path = tmp_path / "REPRODUCTION.md"
    old = [_row("alpha", 0.5, "2020-01-01 00:00"), _row("beta", 0.7, "2020-01-01 00:00")]
    reproduce_table.write_table(old, path)
    reproduce_table.write_table([_row("beta", 0.9)], path, merge=True)
    kept = reproduce_table.parse_rows(path.read_text())
    assert sorted(kept) == ["alpha", "beta"]
    # alpha untouched, escaped pipe and original stamp intact; beta re-measured and re-stamped
    assert kept["alpha"] == "| alpha | c\\|d | p | 0.5 | 1 | 0.5 | 1 | 2020-01-01 00:00 |"
    assert "| 0.9 |" in kept["beta"] and "2020-01-01" not in kept["beta"]
    # a full (non-merge) run drops packages it did not measure
    reproduce_table.write_table([_row("beta", 0.9)], path)
    assert sorted(reproduce_table.parse_rows(path.read_text())) == ["beta"]


def test_reproduce_table_cli_rejects_rows_without_package(tmp_path):
    import reproduce_table

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"claim": "x"}\n')
    assert reproduce_table.main([str(rows), "-o", str(tmp_path / "R.md")]) == 2
    assert not (tmp_path / "R.md").exists()
