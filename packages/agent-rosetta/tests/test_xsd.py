"""The benchmark's judge (subset XSD + parse-time checks) and the LLM error model."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from golden_actions import GOLDEN_ACTIONS
from icml26_agent_rosetta import (
    BackboneChange,
    HPBackend,
    IndexSelector,
    LLMErrorPolicy,
    ProtocolError,
    RosettaEnv,
    RotamerChange,
    compile_protocol,
    hp_task,
    parse_protocol,
    run_episode,
)
from icml26_agent_rosetta.actions import CANONICAL
from icml26_agent_rosetta.error_model import (
    _ATTR_HALLUCINATION,
    _TAG_HALLUCINATION,
    apply_element_slips,
    element_weights,
)

pytest.importorskip("xmlschema")
from icml26_agent_rosetta.rosetta_xsd import validate_rosetta_xml, xsd_errors

DESIGN = RotamerChange(
    design_selector=IndexSelector(resnums="1-12"),
    restrict=["LEU", "SER"],
    composition_penalties=[{"types": ["LEU"], "target": 6, "weight": 2.0}],
    repeats=2,
)
SMALL = BackboneChange(mover="small", selector=IndexSelector(resnums="2-6"), nmoves=50)


def test_every_compiled_protocol_is_valid_rosettascripts():
    for a in GOLDEN_ACTIONS.values():
        validate_rosetta_xml(compile_protocol(a, ("TRF",)), 20, (*CANONICAL, "TRF"))
    validate_rosetta_xml(compile_protocol(DESIGN), 12, CANONICAL)


def test_valid_rosettascripts_the_inverse_parser_used_to_reject():
    xml = compile_protocol(DESIGN)
    pack = xml.replace("FastDesign", "PackRotamersMover").replace(' repeats="2"', "")
    beta = xml.replace('weights="ref2015"', 'weights="beta_nov16"')
    no_repeats = xml.replace(' repeats="2"', "")
    for x in (pack, beta, no_repeats):
        validate_rosetta_xml(x, 12, CANONICAL)  # RosettaScripts accepts them
    assert parse_protocol(no_repeats).repeats == 5  # Rosetta's FastDesign default
    assert parse_protocol(pack).repeats == 1  # one packing pass
    assert parse_protocol(beta).restrict == ["LEU", "SER"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (("<FastDesign ", "<FastDesignMover "), "Unexpected child with tag 'FastDesignMover'"),
        ((' repeats="2"', ' cycles="2"'), "'cycles' attribute not allowed"),
        (('repeats="2"', 'repeats="auto"'), "repeats"),
        (('resnums="1-12"', 'resnums="1..12"'), "cannot parse the residue numbers"),
        (('resnums="1-12"', 'resnums="1-13"'), "residue 13 is out of range"),
        (('base_types="LEU,SER"', 'base_types="LEU,XAA"'), "unknown residue type(s) ['XAA']"),
        (('weights="ref2015"', 'weights="ref2016"'), "no weights file ref2016.wts"),
        (('selector="sel1" />', 'selector="sel1;" />'), "'sel1;' is not defined"),
    ],
)
def test_rosetta_rejects_with_a_message_naming_the_mistake(edit, message):
    xml = compile_protocol(DESIGN).replace(*edit)
    with pytest.raises(ProtocolError) as exc:
        validate_rosetta_xml(xml, 12, CANONICAL)
    assert message in str(exc.value)


def test_element_in_the_wrong_section_is_rejected():
    xml = compile_protocol(DESIGN)
    root = ET.fromstring(xml)
    idx = next(i for i, e in enumerate(root.iter()) if e.tag == "Index")
    bad = apply_element_slips(xml, [{"kind": "wrong_section", "i": idx, "pick": 1}])
    assert "<Index" in bad.split("<MOVERS>")[1]  # moved under MOVERS
    assert any("Index" in e for e in xsd_errors(bad))


def test_hallucinated_names_do_not_exist_in_the_schema():
    for tag, bad in _TAG_HALLUCINATION.items():
        assert bad != tag
    xml = compile_protocol(DESIGN)
    for tag, attr in _ATTR_HALLUCINATION.items():
        if f"<{tag} " in xml:
            assert xsd_errors(xml.replace(f"<{tag} ", f'<{tag} {attr}="3" ', 1))


def test_template_decisions_equal_the_structured_argument_values():
    # the template arm writes the same argument values, grouped by element (sum of weights),
    # and the boilerplate carries none
    root = ET.fromstring(compile_protocol(DESIGN))
    w = element_weights(DESIGN, root)
    tags = {e.tag: k for e, k in zip(root.iter(), w) if k}
    assert tags == {
        "Index": 2,
        "RestrictToSpecifiedBaseResidueTypes": 2,
        "Comp": 4,  # types[0], target, fraction, weight
        "FastDesign": 1,
    }
    assert sum(w) == 9  # the structured arm's leaves: 2 + 2 + 4 + repeats


def test_noise_free_agents_are_always_valid_and_noisy_ones_repair_from_messages():
    task = hp_task(8, 4, nstruct=4, max_steps=6)
    plan = [
        RotamerChange(design_selector=IndexSelector(resnums="1-8"), restrict=["LEU", "SER"]),
        BackboneChange(mover="small", selector=IndexSelector(resnums="1-8"), nmoves=20),
    ]
    for mode, r in (("structured", 2), ("protocol", 3)):
        env = RosettaEnv(task, HPBackend(), mode=mode, max_retries=r, validate_xml=True)
        res = run_episode(env, LLMErrorPolicy(plan, 0.0, mode=mode))
        assert res["valid_rate"] == 1.0 and res["turns"] == (12 if mode == "structured" else 6)
    # p = 0.5: mistakes are made, the messages name them, repairs happen, rewrites are rare
    for mode, r in (("structured", 2), ("protocol", 3)):
        env = RosettaEnv(task, HPBackend(), mode=mode, max_retries=r, validate_xml=True)
        pol = LLMErrorPolicy(plan, 0.5, mode=mode, seed=1)
        run_episode(env, pol)
        assert pol.mistakes_made > 0 and pol.repairs > 0
        assert pol.rewrites <= pol.repairs / 2, (mode, pol.rewrites, pol.repairs)
        assert env.n_uninterpretable == 0 if mode == "protocol" else True


def test_repair_beats_rewriting_from_scratch():
    task = hp_task(8, 4, nstruct=2, max_steps=8)
    plan = [
        RotamerChange(
            design_selector=IndexSelector(resnums="1-8"),
            restrict=["LEU", "SER"],
            composition_penalties=[{"types": ["LEU"], "target": 4, "weight": 2.0}],
        )
    ]
    rates = {}
    for repair in (True, False):
        vr = []
        for seed in range(4):
            env = RosettaEnv(task, HPBackend(), max_retries=2)
            vr.append(
                run_episode(env, LLMErrorPolicy(plan, 0.3, repair=repair, seed=seed))["valid_rate"]
            )
        rates[repair] = np.mean(vr)
    assert rates[True] > rates[False] + 0.1, rates


def test_template_element_with_k_values_is_wrong_with_probability_one_minus_q_to_the_k():
    # the design protocol's argument-bearing elements carry k = 2, 2, 4, 1 values: the expected
    # number of mistakes per fresh reply is sum(1 - (1-p)^k), not p per element or per value
    p, n = 0.3, 1000
    pol = LLMErrorPolicy([DESIGN], p, mode="protocol", seed=0)
    for _ in range(n):
        pol._fresh()
    expected = sum(1 - (1 - p) ** k for k in (2, 2, 4, 1))  # 2.08
    assert pol.mistakes_made / n == pytest.approx(expected, abs=0.12)  # 4 SE
    assert pol.decisions_written == 9 * n
    s = LLMErrorPolicy([DESIGN], p, mode="structured", seed=0)
    s._phase = "run"
    for _ in range(n):
        s._fresh()
    assert s.mistakes_made / n == pytest.approx(9 * p, abs=0.17)  # one chance per value


def test_a_repair_is_a_decision_that_fails_with_probability_p():
    pol = LLMErrorPolicy([DESIGN], 0.5, seed=0)
    pol._phase = "run"
    slip = {"kind": "nonexistent_option", "path": ("repeats",), "value": "auto"}
    failed = 0
    for _ in range(400):
        pol._slips = [dict(slip, tokens=("repeats",))]
        pol._repair("invalid arguments:\n- repeats: Input should be a valid integer")
        failed += len(pol._slips)
    assert pol.repairs == 400 and pol.rewrites == 0
    assert 160 <= failed <= 240  # 400 x 0.5, +-4 SD
    pol._slips = [dict(slip, tokens=("repeats",))]
    pol._repair("an error that names nothing the agent wrote")
    assert pol.rewrites == 1  # rewrite from scratch
