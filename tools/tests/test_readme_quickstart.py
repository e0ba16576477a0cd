"""tools/readme_quickstart.py: a README quickstart that fails, hangs, prints nothing or prints the
wrong result is caught (issue 66); every member's README has a runnable quickstart.

The blocks here are standard-library Python, run by this interpreter, so the checker's logic is
tested without any member's environment. The members' real quickstarts run in their own ``tests``
session (noxfile.py), and packages/kge-mos/tests/test_readme.py runs the kge-mos "layer alone"
block as it stood before 515a8a1 (a NameError) through this checker.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import readme_quickstart as qs

REPO = Path(__file__).resolve().parents[2]
READMES = sorted(REPO.glob("packages/*/README.md"))


def readme(*blocks: str, markers: tuple[str, ...] = ()) -> str:
    parts = ["# pkg\n\n## Install\n\n```python\nraise SystemExit(3)\n```\n\n## Quickstart\n"]
    for i, code in enumerate(blocks):
        marker = markers[i] if i < len(markers) else ""
        parts.append(f"\n{marker}\n```python\n{textwrap.dedent(code)}```\n")
    parts.append("\n## API\n\n```python\nraise SystemExit(4)\n```\n")
    return "".join(parts)


def run(tmp_path: Path, text: str, *args: str) -> int:
    path = tmp_path / "README.md"
    path.write_text(text)
    return qs.main([str(path), *args])


def test_only_the_quickstart_section_runs(tmp_path, capsys):
    # the Install and API blocks would exit 3 / 4: only the Quickstart's block runs
    assert run(tmp_path, readme("print('ok')  # -> ok\n")) == 0
    assert "1 of 1 quickstart blocks passed" in capsys.readouterr().out


def test_an_error_fails_and_names_it(tmp_path, capsys):
    # the shape of kge-mos's "layer alone" before 515a8a1: a name the block never built
    assert run(tmp_path, readme("layer = len\nprint(layer(h))\n")) == 1
    assert "NameError: name 'h' is not defined" in capsys.readouterr().out


def test_printing_nothing_fails(tmp_path, capsys):
    assert run(tmp_path, readme("x = 1 + 1\n")) == 1
    assert "printed nothing" in capsys.readouterr().out


def test_a_wrong_result_fails_and_a_close_one_passes(tmp_path, capsys):
    assert run(tmp_path, readme("print(0.25, True)  # -> 0.30 True\n")) == 1
    assert "no printed line matches `# -> 0.30 True`" in capsys.readouterr().out
    assert run(tmp_path, readme("print(0.2501, True)  # -> 0.25 True\n")) == 0
    assert run(tmp_path, readme("print(0.25, False)  # -> 0.25 True\n")) == 1
    assert run(tmp_path, readme("print((8, 1000))  # -> (8, 1000)\n")) == 0
    assert run(tmp_path, readme("print((8, 999))  # -> (8, 1000)\n")) == 0  # within 5%
    assert run(tmp_path, readme("print((8, 900))  # -> (8, 1000)\n")) == 1


def test_a_print_wrapped_by_the_formatter_keeps_its_check(tmp_path, capsys):
    # ruff formats Markdown code blocks: a long print becomes print(\n    ...\n)  # -> X, whose
    # last line holds the expectation but no "print(" (lint failed on 10 READMEs before the wrap)
    wrapped = "print(\n    0.25, True\n)  # -> {}\nx = 1  # -> not a print\n"
    assert qs.blocks(readme(wrapped.format("0.25 True")))[0].expected == ["0.25 True"]
    assert run(tmp_path, readme(wrapped.format("0.30 True"))) == 1
    assert "no printed line matches `# -> 0.30 True`" in capsys.readouterr().out
    assert run(tmp_path, readme(wrapped.format("0.25 True"))) == 0


def test_numbers_inside_dicts_and_trailing_comments(tmp_path):
    code = (
        "print({'f1': 0.6666, 'delay': 2.0})  # -> {'f1': 0.67, 'delay': 2.0}  # F1 of the flags\n"
    )
    assert run(tmp_path, readme(code)) == 0
    code = "print({'f1': 0.6666, 'delay': 3.0})  # -> {'f1': 0.67, 'delay': 2.0}\n"
    assert run(tmp_path, readme(code)) == 1
    assert run(tmp_path, readme("print([0.5, 1])  # -> (0.5, 1)\n")) == 1  # brackets exact


def test_magnitude_only_numbers(tmp_path):
    assert run(tmp_path, readme("print(3e-17)  # -> ~1e-17\n")) == 0
    assert run(tmp_path, readme("print(3e-3)  # -> ~1e-17\n")) == 1
    # a roundoff-sized value: one CPU prints 1e-17, another exactly 0.0 (CI, sco-erm README)
    assert run(tmp_path, readme("print(0.0)  # -> ~1e-17\n")) == 0
    assert run(tmp_path, readme("print(3e-3)  # -> ~3e-2\n")) == 0
    assert run(tmp_path, readme("print(3e-1)  # -> ~3e-3\n")) == 1


def test_expected_lines_match_in_order(tmp_path):
    code = "print('a')  # -> a\nprint('b')  # -> b\n"
    assert run(tmp_path, readme(code)) == 0
    swapped = "print('b')\nprint('a')  # -> a\nprint('x')  # -> b\n"
    assert run(tmp_path, readme(swapped)) == 1  # b printed before a, not after


def test_a_hang_fails_within_the_timeout(tmp_path, capsys):
    assert run(tmp_path, readme("import time\ntime.sleep(30)\n"), "--timeout", "1") == 1
    assert "ran past 1 s" in capsys.readouterr().out


def test_skip_needs_a_reason_and_continues_shares_names(tmp_path, capsys):
    text = readme("print(undefined)\n", markers=("<!-- quickstart: skip -->",))
    assert run(tmp_path, text) == 2
    text = readme(
        "x = 41\n",
        "print(x + 1)  # -> 42\n",
        "print(...)\n",
        markers=("", "<!-- quickstart: continues -->", "<!-- quickstart: skip a fragment -->"),
    )
    assert run(tmp_path, text) == 0
    out = capsys.readouterr().out
    assert "SKIP" in out and "a fragment" in out and "1 of 1 quickstart blocks passed" in out
    # without the marker the second block is its own script: x is undefined there
    assert run(tmp_path, readme("x = 41\n", "print(x + 1)  # -> 42\n")) == 1


def test_needs_runs_only_where_the_module_imports(tmp_path, capsys):
    text = readme("print(1)  # -> 2\n", markers=("<!-- quickstart: needs json -->",))
    assert run(tmp_path, text) == 1  # json imports: the block runs (and its result is wrong)
    text = readme(
        "print(1)  # -> 1\n",
        "import no_such_module_xyz\n",
        markers=("", "<!-- quickstart: needs no_such_module_xyz -->"),
    )
    assert run(tmp_path, text) == 0
    assert "needs no_such_module_xyz (not installed here)" in capsys.readouterr().out
    # continues + needs: the first block still runs alone where the module is absent
    text = readme(
        "x = 1\nprint(x)  # -> 1\n",
        "print(x + no_such_module_xyz)\n",
        markers=("", "<!-- quickstart: continues; needs no_such_module_xyz -->"),
    )
    assert run(tmp_path, text) == 0
    assert "1 of 1 quickstart blocks passed" not in capsys.readouterr().out  # 2 blocks, 1 skipped
    bad = readme("print(1)\n", markers=("<!-- quickstart: sometimes -->",))
    assert run(tmp_path, bad) == 2


def test_no_quickstart_is_a_usage_error(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# pkg\n\n## Install\n\n```python\nprint(1)\n```\n")
    assert qs.main([str(path)]) == 2


def test_blocks_run_in_a_fresh_folder_without_network(tmp_path):
    code = f"""\
    import os, socket, sys
    print(os.getcwd() != {str(REPO)!r}, sys.path[0] == os.getcwd())  # -> True True
    try:
        socket.create_connection(("203.0.113.1", 80), timeout=1)
    except Exception as err:
        print(type(err).__name__)  # -> NetworkBlocked
    """
    assert run(tmp_path, readme(code)) == 0


@pytest.mark.parametrize("path", READMES, ids=[p.parent.name for p in READMES])
def test_every_member_has_a_runnable_quickstart(path):
    found = qs.blocks(path.read_text())
    runnable = [b for b in found if b.skip is None]
    assert runnable, f"{path}: no runnable block under ## Quickstart"
    # a result the user can check: at least one print carries its `# -> EXPECTED`
    assert any(b.expected for b in runnable), f"{path}: no `# -> EXPECTED` beside a print"
