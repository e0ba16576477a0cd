"""The action -> RosettaScripts compiler: golden files, reference integrity, round trip."""

import re
import xml.etree.ElementTree as ET

import pytest
from golden_actions import GOLDEN, GOLDEN_ACTIONS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icml26_agent_rosetta import (
    BackboneChange,
    CompositionPenalty,
    GoBackToStep,
    IndexSelector,
    LayerSelector,
    NotSelector,
    ProtocolError,
    ResidueNameSelector,
    RotamerChange,
    compile_protocol,
    parse_protocol,
)
from icml26_agent_rosetta.actions import AndSelector, OrSelector


@pytest.mark.parametrize("name", sorted(GOLDEN_ACTIONS))
def test_golden_protocols(name):
    extra = ("TRF",) if name == "rotamer_core" else ()  # the paper's NCAA task palette
    assert compile_protocol(GOLDEN_ACTIONS[name], extra) == (GOLDEN / f"{name}.xml").read_text()


def _refs(root):
    """Every name a protocol refers to, by kind."""
    sections = [
        root.find(s)
        for s in (
            "RESIDUE_SELECTORS",
            "MOVERS",
            "TASKOPERATIONS",
            "SCOREFXNS",
            "PACKER_PALETTES",
            "MOVE_MAP_FACTORIES",
        )
    ]
    defined = {
        el.get("name") for sec in sections if sec is not None for el in sec.iter() if el.get("name")
    }
    used = []
    for el in root.iter():
        for key in (
            "selector",
            "residue_selector",
            "scorefxn",
            "mover",
            "mover_name",
            "scorefxn_name",
            "packer_palette",
            "movemap_factory",
        ):
            if key in el.attrib:
                used.append(el.attrib[key])
        for key in ("selectors", "task_operations"):
            if key in el.attrib:
                used += el.attrib[key].split(",")
    return defined, used


@pytest.mark.parametrize("name", sorted(GOLDEN_ACTIONS))
def test_every_reference_is_defined_before_use(name):
    root = ET.fromstring(compile_protocol(GOLDEN_ACTIONS[name], ("TRF",)))
    defined, used = _refs(root)
    assert set(used) <= defined, set(used) - defined
    # selectors are defined before the selectors that combine them (Rosetta parses in order)
    seen = set()
    for el in root.find("RESIDUE_SELECTORS"):
        for ref in (el.get("selector"), *(el.get("selectors") or "").split(",")):
            assert not ref or ref in seen, (el.get("name"), ref)
        seen.add(el.get("name"))


def test_guidance_weights_and_constraints_match_the_official_config():
    root = ET.fromstring(compile_protocol(GOLDEN_ACTIONS["rotamer_core"]))
    rw = {r.get("scoretype"): float(r.get("weight")) for r in root.iter("Reweight")}
    assert rw == {"aa_composition": 1.0, "atom_pair_constraint": 1.0}
    gen = next(root.iter("AtomPairConstraintGenerator"))
    assert (gen.get("ca_only"), gen.get("use_harmonic"), gen.get("native")) == (
        "true",
        "true",
        "true",
    )


def test_penalty_definition_is_linear_in_the_deviation():
    # PENALTIES w 0 w over DELTA -1..1 with linear extrapolation == w * |delta|
    xml = compile_protocol(GOLDEN_ACTIONS["rotamer_repack"])
    entry = re.search(r'entry="([^"]+)"', xml).group(1).split(";")
    assert entry[0] == "PENALTY_DEFINITION" and entry[-2] == "END_PENALTY_DEFINITION"
    assert "PENALTIES 2.5 0.0 2.5" in entry and "FRACTION 0.4" in entry
    assert "BEFORE_FUNCTION LINEAR" in entry and "AFTER_FUNCTION LINEAR" in entry


def test_backrub_runs_in_monte_carlo_with_a_movemap_and_side_chains_are_minimized():
    root = ET.fromstring(compile_protocol(GOLDEN_ACTIONS["backbone_backrub"]))
    mc = next(root.iter("GenericMonteCarlo"))
    assert (mc.get("mover_name"), mc.get("trials"), mc.get("temperature")) == ("bb", "50", "0.5")
    assert next(root.iter("Backrub")).get("movemap_factory") == "map_factory"
    assert [a.get("mover") for a in root.find("PROTOCOLS")] == ["add_csts", "mc", "min"]
    mm = next(root.iter("MinMover"))
    assert (mm.get("bb"), mm.get("chi")) == ("false", "true")
    with pytest.raises(ValueError, match="small and shear only"):
        BackboneChange(mover="backrub", selector=LayerSelector(core=True), angle_max=3.0)


def test_ncaa_palette_reaches_fast_design():
    root = ET.fromstring(compile_protocol(GOLDEN_ACTIONS["rotamer_core"], ("TRF",)))
    pal = next(root.iter("CustomBaseTypePackerPalette"))
    assert pal.get("additional_residue_types") == "TRF"
    assert next(root.iter("FastDesign")).get("packer_palette") == pal.get("name")
    assert next(root.iter("FastDesign")).get("scorefxn") == "guidance"
    assert root.find("OUTPUT").get("scorefxn") == "scoring"  # output scored without guidance terms


def test_go_back_has_no_protocol():
    with pytest.raises(TypeError, match="environment"):
        compile_protocol(GoBackToStep(step=0))


# --- round trip: parse_protocol(compile_protocol(a)) == a -----------------------------------

residues = st.sampled_from(["ALA", "LEU", "ILE", "VAL", "SER", "THR", "GLY", "TRF", "PHE"])
leaf_selectors = st.one_of(
    st.builds(
        lambda a, b: IndexSelector(resnums=f"{a}-{a + b}"),
        st.integers(1, 20),
        st.integers(0, 5),
    ),
    st.builds(LayerSelector, core=st.just(True), boundary=st.booleans(), surface=st.booleans()),
    st.builds(lambda ns: ResidueNameSelector(names=ns), st.lists(residues, min_size=1, max_size=3)),
)
selectors = st.recursive(
    leaf_selectors,
    lambda kids: st.one_of(
        st.builds(NotSelector, selector=kids),
        st.builds(lambda a, b: AndSelector(selectors=[a, b]), kids, kids),
        st.builds(lambda a, b: OrSelector(selectors=[a, b]), kids, kids),
    ),
    max_leaves=4,
)
penalties = st.builds(
    CompositionPenalty,
    types=st.lists(residues, min_size=1, max_size=3, unique=True),
    target=st.integers(0, 5).map(float),
    weight=st.sampled_from([0.5, 1.0, 2.5]),
)
rotamer = st.builds(
    RotamerChange,
    design_selector=selectors,
    repack_selector=st.one_of(st.none(), selectors),
    restrict=st.one_of(st.none(), st.lists(residues, min_size=2, max_size=4, unique=True)),
    prohibit=st.lists(st.sampled_from(["CYS", "PRO"]), max_size=2, unique=True),
    composition_penalties=st.lists(penalties, max_size=2),
    repeats=st.integers(1, 5),
)
backbone = st.builds(
    BackboneChange,
    mover=st.sampled_from(["small", "shear"]),
    selector=selectors,
    nmoves=st.integers(1, 2000),
    angle_max=st.sampled_from([1.0, 2.0, 6.5]),
    temperature=st.sampled_from([0.5, 1.0, 2.0]),
) | st.builds(
    BackboneChange,
    mover=st.just("backrub"),
    selector=selectors,
    nmoves=st.integers(1, 2000),
    temperature=st.sampled_from([0.5, 1.0, 2.0]),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(rotamer, backbone))
def test_round_trip(action):
    assert parse_protocol(compile_protocol(action)) == action


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda x: x.replace('selector="sel1"', 'selector="sel9"', 1), "sel9"),
        (
            lambda x: x.replace("<FastDesign", "<FastDezign").replace(
                "</FastDesign", "</FastDezign"
            ),
            "FastDezign",
        ),
        (lambda x: x.replace('repeats="5"', 'repeatz="5"'), "repeatz"),
        (lambda x: x.replace('<Add mover="design" />', '<Add mover="desing" />'), "desing"),
        (lambda x: x.replace("</MOVERS>", ""), "well-formed"),
        (lambda x: x.replace('weights="ref2015"', 'weights="talaris"'), "ref2015"),
        (lambda x: x.replace("ABSOLUTE 1", "ABSOLUTE one"), "PENALTY_DEFINITION"),
        (lambda x: x.replace('repeats="5"', 'repeats="9"'), "repeats"),
    ],
)
def test_broken_protocols_are_refused_with_the_culprit_named(edit, message):
    xml = compile_protocol(GOLDEN_ACTIONS["rotamer_core"])
    broken = edit(xml)
    assert broken != xml
    with pytest.raises(ProtocolError, match=message):
        parse_protocol(broken)
