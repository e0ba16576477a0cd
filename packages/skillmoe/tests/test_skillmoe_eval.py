"""Answer extraction edge cases (upstream semantics) and equivalence."""

from __future__ import annotations

import pytest
from icml26_skillmoe import (
    accuracy,
    extract_answer,
    extract_boxed,
    extract_choice,
    extract_number,
    math_equiv,
)


@pytest.mark.parametrize(
    "text,n,expected",
    [
        ("The answer is (B).", 4, "B"),
        ("(A) is wrong, C) too; The answer is (D)", 4, "D"),  # last "X)" wins
        ("I think D) no wait... Answer: B", 4, "D"),  # "X)" beats a later bare letter
        ("Answer: B", 4, "B"),  # no parenthesis: last bare letter
        ("ANSWER: B", 4, "B"),  # last capital A-D anywhere (the A of ANSWER comes first)
        ("Answer: B. Done", 4, "D"),  # ... even inside a word: upstream's known weakness
        ("The answer is (H)", 4, "N/A"),  # H out of range; no capital A-D anywhere
        ("The answer is (H)", 10, "H"),  # MMLU-Pro: 10 choices
        # the last letter of the range counts, the next one does not (an off-by-one in the
        # character class, A-E for four choices, would return "E")
        ("The answer is (D)", 4, "D"),
        ("The answer is (E)", 4, "N/A"),
        ("The answer is (J)", 10, "J"),
        ("The answer is (K)", 10, "N/A"),
        ("the answer is (e)", 4, "N/A"),  # lower case never matches
        ("", 4, "N/A"),
        (None, 4, "N/A"),
        ("x | y", 4, "N/A"),  # upstream's [A|B|C|D] would return "|"
    ],
)
def test_extract_choice(text, n, expected):
    assert extract_choice(text, n) == expected


def test_extract_choice_bad_num_choices():
    with pytest.raises(ValueError, match="num_choices"):
        extract_choice("A", 0)
    with pytest.raises(ValueError, match="num_choices"):
        extract_choice("A", 27)


def test_extract_boxed():
    assert extract_boxed("so \\boxed{12} and finally \\boxed{\\frac{1}{2}}.") == "\\frac{1}{2}"
    assert extract_boxed("\\fbox{7}") == "7"
    assert extract_boxed("no box, 42") == "no box, 42"  # upstream: the whole text
    assert extract_boxed("\\boxed{unclosed") == "\\boxed{unclosed"
    assert extract_boxed("") == "N/A"
    assert extract_answer("\\boxed{3}", "math") == "3"
    with pytest.raises(ValueError, match="task"):
        extract_answer("x", "code")


def test_extract_number():
    assert extract_number("cost 1,234.5 then 7") == 7.0
    assert extract_number("cost 1,234.5") == 1234.5
    assert extract_number("-3 degrees") == -3.0
    assert extract_number("none") is None


def test_math_equiv():
    assert math_equiv("(A)", "A")
    assert math_equiv("$12$", "12")
    assert not math_equiv("N/A", "N/A")
    assert not math_equiv("B", "A")
    assert math_equiv("\\frac{1}{2}", "0.5")  # math-verify (dev group / extra "math")
    assert not math_equiv("\\frac{1}{3}", "0.5")
    assert accuracy(["A", "B", "N/A"], ["A", "C", "N/A"]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="differ in length"):
        accuracy(["A"], [])
