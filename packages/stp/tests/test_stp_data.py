"""NL -> regex generator: deterministic, distinct, and regexes that mean what the text says."""

from __future__ import annotations

import re

import pytest
from icml26_stp.data import SYSTEM_PROMPT, nl_regex_pairs, regex_equivalent, to_messages


def test_deterministic_distinct_and_disjoint():
    a, b = nl_regex_pairs(1500, seed=3), nl_regex_pairs(1500, seed=3)
    assert a == b and len({nl for nl, _ in a}) == 1500
    other = nl_regex_pairs(200, seed=4, exclude={nl for nl, _ in a})
    assert not {nl for nl, _ in other} & {nl for nl, _ in a}
    for _, rx in a:
        re.compile(rx)
    with pytest.raises(ValueError, match="distinct"):
        nl_regex_pairs(10**5)


@pytest.mark.parametrize(
    "nl_fragment,rx,yes,no",
    [
        ("containing the string 'dog'", ".*(dog).*", "a dog!", "a do g"),
        ("starting with a number", "[0-9].*", "7up", "up7"),
        ("ending with a vowel", ".*[AEIOUaeiou]", "tea", "tee7"),
    ],
)
def test_regexes_accept_what_the_description_says(nl_fragment, rx, yes, no):
    pairs = dict((nl, r) for nl, r in nl_regex_pairs(2000, seed=0))
    assert pairs.get(f"lines {nl_fragment}") == rx
    assert re.fullmatch(rx, yes) and not re.fullmatch(rx, no)


def test_semantic_equivalence_against_hand_labels():
    assert regex_equivalent(".*(dog).*", ".*dog.*")
    assert regex_equivalent("(.*[A-Z].*){2,}", ".*[A-Z].*[A-Z].*")
    assert regex_equivalent(".*([0-9]|(dog)).*", ".*((dog)|[0-9]).*")
    assert not regex_equivalent(".*[0-9].*", ".*[0-9]")
    assert not regex_equivalent(".*[A-Za-z].*", ".*[a-z].*")  # 'A' separates them
    assert not regex_equivalent("(.*[0-9].*){3,}", "(.*[0-9].*){2,}")
    assert not regex_equivalent(".*(dog).*", ".*(dog.*")  # does not compile


def test_messages_follow_the_official_synth_format():
    m = to_messages("lines containing a number", ".*[0-9].*")
    assert [x["role"] for x in m] == ["system", "user", "assistant"]
    assert m[0]["content"] == SYSTEM_PROMPT == "Convert natural language to regular expression."
