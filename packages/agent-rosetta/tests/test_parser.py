"""The reply parser: the forms LLMs write, and never a crash on anything else."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from icml26_agent_rosetta import (
    ParseError,
    RotamerChange,
    normalize_residue,
    parse_reply,
    validate_action,
)

ARGS = {"design_selector": {"type": "index", "resnums": "1-4"}, "restrict": ["L", "Ser"]}


@pytest.mark.parametrize(
    "text",
    [
        '<action tag="run"><name>rotamer_change</name><design_selector>{"type": "index", "resnums": "1-4"}</design_selector><restrict>["L", "Ser"]</restrict></action>',
        'Sure! Here it is:\n```json\n{"action": "rotamer_change", "arguments": {"design_selector": {"type": "index", "resnums": "1-4"}, "restrict": ["L", "Ser"],},}\n```\nDone.',
        'I will run {"name": "rotamer_change", "args": {"design_selector": {"type": "index", "resnums": "1-4"}, "restrict": ["L", "Ser"]}} now.',
        "{'action': 'rotamer_change', 'arguments': {'design_selector': {'type': 'index', 'resnums': '1-4'}, 'restrict': ['L', 'Ser']}}",
        json.dumps({"action": "rotamer_change", "arguments": json.dumps(ARGS)}),  # a tool call
    ],
)
def test_forms_llms_write(text):
    r = parse_reply(text)
    assert (r.tag, r.name) == ("run", "rotamer_change")
    a = validate_action(r.name, r.arguments)
    assert a == RotamerChange(
        design_selector={"type": "index", "resnums": "1-4"}, restrict=["LEU", "SER"]
    )


def test_trailing_commas_with_json_literals():
    # true/null are not Python literals: only the JSON repair can read this
    r = parse_reply(
        '{"action": "rotamer_change", "arguments": {"design_selector": {"type": "layer", "core": true,}, "restrict": null,},}'
    )
    assert validate_action(r.name, r.arguments) == RotamerChange(
        design_selector={"type": "layer", "core": True}
    )


def test_choose_forms():
    assert parse_reply('<action tag="choose"><name>backbone_change</name></action>').tag == "choose"
    r = parse_reply('{"action": "choose_action", "arguments": {"name": "go_back_to_step"}}')
    assert (r.tag, r.name) == ("choose", "go_back_to_step")


def test_residue_normalisation():
    assert [normalize_residue(s) for s in ("a", "Ala", " alanine ", "trf", "W")] == [
        "ALA",
        "ALA",
        "ALA",
        "TRF",
        "TRP",
    ]
    with pytest.raises(ValueError, match="unknown residue type"):
        normalize_residue("leucine-ish")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"design_selector": {"type": "index", "resnums": "5-2"}}, "design_selector.index.resnums"),
        ({"design_selector": {"resnums": "1-3"}}, 'needs "type"'),
        ({"design_selector": {"type": "layer"}}, "at least one of core"),
        (
            {"design_selector": {"type": "layer", "core": True}, "repeatz": 2},
            "repeatz: unknown argument",
        ),
        (
            {
                "design_selector": {"type": "layer", "core": True},
                "restrict": ["L"],
                "prohibit": ["L"],
            },
            "no residue type",
        ),
        ({}, "design_selector: required argument is missing"),
        (
            {
                "design_selector": {"type": "layer", "core": True},
                "composition_penalties": [{"types": ["L"], "target": 1.5}],
            },
            "whole number",
        ),
    ],
)
def test_validation_messages_name_the_argument(args, needle):
    with pytest.raises(ParseError, match=None) as err:
        validate_action("rotamer_change", args)
    assert needle in str(err.value), str(err.value)


def test_unknown_action_and_missing_action():
    with pytest.raises(ParseError, match="choose one of rotamer_change"):
        validate_action("fold_protein", {})
    with pytest.raises(ParseError, match="no action found"):
        parse_reply("I think we should make the core more hydrophobic.")
    with pytest.raises(ParseError, match="<name>"):
        parse_reply('<action tag="run"><step>2</step></action>')


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300) | st.from_regex(r"[\{\}\[\]\"':,<>a-z0-9 ]{0,80}", fullmatch=True))
def test_fuzz_never_crashes_and_always_explains(text):
    try:
        r = parse_reply(text)
    except ParseError as exc:
        assert len(str(exc)) > 20  # an actionable message, not a bare failure
        return
    try:
        validate_action(r.name, r.arguments)
    except ParseError as exc:
        assert str(exc)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=8),
        lambda kids: (
            st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_fuzz_arbitrary_json_arguments(args):
    payload = json.dumps({"action": "rotamer_change", "arguments": {"design_selector": args}})
    r = parse_reply(payload)
    try:
        validate_action(r.name, r.arguments)
    except ParseError as exc:
        assert "design_selector" in str(exc)
