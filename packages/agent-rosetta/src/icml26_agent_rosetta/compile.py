"""Actions -> RosettaScripts XML, and the inverse for protocols written by hand (or by an LLM).

``compile_protocol`` writes one self-contained protocol per action, as the official environment
does (``environments/rosetta/xml/*.xml``): ``ref2015`` with ``aa_composition`` and
``atom_pair_constraint`` reweighted to 1.0, CA-only harmonic pair constraints to the input
(``AtomPairConstraintGenerator``), residue selectors, task operations and one design or
backbone mover. Composition penalties are inlined as ``<Comp entry="PENALTY_DEFINITION;...">``
(the official parser writes ``.comp`` files instead; same content).

``parse_protocol`` reads a full protocol back into an action and names the first thing that is
wrong (unknown tag, dangling reference, bad value): it is how the prompt-only baseline, which
writes whole protocols, is checked.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .actions import (
    Action,
    AndSelector,
    BackboneChange,
    CompositionPenalty,
    GoBackToStep,
    IndexSelector,
    LayerSelector,
    NotSelector,
    OrSelector,
    ResidueNameSelector,
    RotamerChange,
    Selector,
)

GUIDANCE_WEIGHTS = {"aa_composition": 1.0, "atom_pair_constraint": 1.0}  # the official config
MOVER_TAGS = {"small": "Small", "shear": "Shear", "backrub": "Backrub"}
_TAG_TO_MOVER = {v: k for k, v in MOVER_TAGS.items()}


class ProtocolError(ValueError):
    """A protocol that RosettaScripts would reject; the message names the offending element."""


def _fmt(x: float) -> str:
    return repr(float(x)) if x != int(x) else f"{int(x)}.0"


class _Selectors:
    """Names every selector node once, children before parents (Rosetta needs that order)."""

    def __init__(self) -> None:
        self.nodes: list[ET.Element] = [ET.Element("True", name="all")]
        self.seen: dict[str, str] = {}

    def add(self, sel: Selector) -> str:
        key = sel.model_dump_json()
        if key not in self.seen:
            self.seen[key] = self._add(sel)
        return self.seen[key]

    def _add(self, sel: Selector) -> str:
        name = f"sel{len(self.nodes)}"
        if isinstance(sel, IndexSelector):
            el = ET.Element("Index", name=name, resnums=sel.resnums)
        elif isinstance(sel, LayerSelector):
            el = ET.Element(
                "Layer",
                name=name,
                select_core=str(sel.core).lower(),
                select_boundary=str(sel.boundary).lower(),
                select_surface=str(sel.surface).lower(),
                use_sidechain_neighbors="true",
            )
        elif isinstance(sel, ResidueNameSelector):
            el = ET.Element("ResidueName", name=name, residue_name3=",".join(sel.names))
        elif isinstance(sel, NotSelector):
            child = self.add(sel.selector)
            name = f"sel{len(self.nodes)}"
            el = ET.Element("Not", name=name, selector=child)
        else:  # And / Or
            kids = [self.add(s) for s in sel.selectors]
            name = f"sel{len(self.nodes)}"
            tag = "And" if isinstance(sel, AndSelector) else "Or"
            el = ET.Element(tag, name=name, selectors=",".join(kids))
        self.nodes.append(el)
        return name


def penalty_definition(p: CompositionPenalty) -> list[str]:
    """The ``aa_composition`` block for ``w·|count - target|``."""
    w = _fmt(p.weight)
    return [
        "PENALTY_DEFINITION",
        "TYPE " + " ".join(p.types),
        ("FRACTION " + _fmt(p.target)) if p.fraction else f"ABSOLUTE {int(p.target)}",
        "DELTA_START -1",
        "DELTA_END 1",
        f"PENALTIES {w} 0.0 {w}",
        "BEFORE_FUNCTION LINEAR",
        "AFTER_FUNCTION LINEAR",
        "END_PENALTY_DEFINITION",
    ]


def compile_protocol(
    action: RotamerChange | BackboneChange, additional_residue_types: Sequence[str] = ()
) -> str:
    """One action as a RosettaScripts protocol (XML text, deterministic: golden-file tested).

    Two score functions, as in the official templates: ``guidance`` (ref2015 + the guidance
    weights) drives FastDesign, ``scoring`` (plain ref2015) scores the output and drives the
    backbone movers. ``additional_residue_types`` (the task's non-canonical types, which need
    ``-extra_res_fa`` params) enter through a ``CustomBaseTypePackerPalette``.
    """
    if isinstance(action, GoBackToStep):
        raise TypeError("go_back_to_step is handled by the environment; it has no protocol")
    if not isinstance(action, RotamerChange | BackboneChange):
        raise TypeError(f"action must be RotamerChange or BackboneChange, got {type(action)}")
    root = ET.Element("ROSETTASCRIPTS")
    sfxns = ET.SubElement(root, "SCOREFXNS")
    sf = ET.SubElement(sfxns, "ScoreFunction", name="guidance", weights="ref2015")
    for term, w in GUIDANCE_WEIGHTS.items():
        ET.SubElement(sf, "Reweight", scoretype=term, weight=_fmt(w))
    ET.SubElement(sfxns, "ScoreFunction", name="scoring", weights="ref2015")
    if additional_residue_types:
        pal = ET.SubElement(root, "PACKER_PALETTES")
        ET.SubElement(
            pal,
            "CustomBaseTypePackerPalette",
            name="palette",
            additional_residue_types=",".join(additional_residue_types),
        )
    sels = _Selectors()
    movers = ET.Element("MOVERS")
    protocol = ["add_csts"]
    csts = ET.SubElement(movers, "AddConstraints", name="add_csts")
    ET.SubElement(
        csts,
        "AtomPairConstraintGenerator",
        name="csts",
        residue_selector="all",
        ca_only="true",
        use_harmonic="true",
        native="true",
        sd="0.5",
    )
    taskops = ET.Element("TASKOPERATIONS")
    mmf = None
    if isinstance(action, RotamerChange):
        design = sels.add(action.design_selector)
        not_design = sels.add(NotSelector(selector=action.design_selector))
        ops = ["ifcl", "ic", "repack_only"]
        ET.SubElement(taskops, "InitializeFromCommandline", name="ifcl")
        ET.SubElement(taskops, "IncludeCurrent", name="ic")
        op = ET.SubElement(
            taskops, "OperateOnResidueSubset", name="repack_only", selector=not_design
        )
        ET.SubElement(op, "RestrictToRepackingRLT")
        if action.repack_selector is not None:
            packable = OrSelector(selectors=[action.design_selector, action.repack_selector])
            frozen = sels.add(NotSelector(selector=packable))
            op = ET.SubElement(taskops, "OperateOnResidueSubset", name="freeze", selector=frozen)
            ET.SubElement(op, "PreventRepackingRLT")
            ops.append("freeze")
        if action.restrict is not None:
            ET.SubElement(
                taskops,
                "RestrictToSpecifiedBaseResidueTypes",
                name="palette_restrict",
                base_types=",".join(action.restrict),
                selector=design,
            )
            ops.append("palette_restrict")
        if action.prohibit:
            ET.SubElement(
                taskops,
                "ProhibitSpecifiedBaseResidueTypes",
                name="prohibit",
                base_types=",".join(action.prohibit),
                selector=design,
            )
            ops.append("prohibit")
        for i, pen in enumerate(action.composition_penalties):
            comp = ET.SubElement(
                movers, "AddCompositionConstraintMover", name=f"comp{i}", selector=design
            )
            ET.SubElement(comp, "Comp", entry=";".join(penalty_definition(pen)) + ";")
            protocol.append(f"comp{i}")
        fd = ET.SubElement(
            movers,
            "FastDesign",
            name="design",
            scorefxn="guidance",
            task_operations=",".join(ops),
            repeats=str(action.repeats),
        )
        if additional_residue_types:
            fd.set("packer_palette", "palette")
        protocol.append("design")
    else:
        sel = sels.add(action.selector)
        if action.mover == "backrub":  # Backrub takes a MoveMapFactory, not a selector
            mmf = ET.Element("MOVE_MAP_FACTORIES")
            fac = ET.SubElement(mmf, "MoveMapFactory", name="map_factory", bb="false", chi="false")
            ET.SubElement(fac, "Backbone", enable="true", residue_selector=sel)
            ET.SubElement(movers, "Backrub", name="bb", movemap_factory="map_factory")
            ET.SubElement(
                movers,
                "GenericMonteCarlo",
                name="mc",
                mover_name="bb",
                scorefxn_name="scoring",
                trials=str(action.nmoves),
                temperature=_fmt(action.temperature),
            )
            protocol.append("mc")
        else:
            ET.SubElement(
                movers,
                MOVER_TAGS[action.mover],
                name="bb",
                scorefxn="scoring",
                residue_selector=sel,
                nmoves=str(action.nmoves),
                angle_max=_fmt(action.angle_max),
                temperature=_fmt(action.temperature),
            )
            protocol.append("bb")
        # side chains relaxed after the move (bb off, chi on), as the official template does
        ET.SubElement(movers, "MinMover", name="min", scorefxn="scoring", bb="false", chi="true")
        protocol.append("min")
    rs = ET.Element("RESIDUE_SELECTORS")
    rs.extend(sels.nodes)
    at = 2 if additional_residue_types else 1
    for el in (rs, taskops, *([mmf] if mmf is not None else []), movers):
        root.insert(at, el)
        at += 1
    prot = ET.SubElement(root, "PROTOCOLS")
    for m in protocol:
        ET.SubElement(prot, "Add", mover=m)
    ET.SubElement(root, "OUTPUT", scorefxn="scoring")
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


# ---------------------------------------------------------------------------------------------
# the inverse: a whole protocol -> an action, with the first error named


def _attr(el: ET.Element, key: str) -> str:
    if key not in el.attrib:
        raise ProtocolError(f"<{el.tag} name={el.get('name')!r}> lacks the attribute {key!r}")
    return el.attrib[key]


def _bool(el: ET.Element, key: str) -> bool:
    v = _attr(el, key).lower()
    if v not in ("true", "false", "1", "0"):
        raise ProtocolError(f"<{el.tag} {key}={v!r}>: expected true or false")
    return v in ("true", "1")


_SELECTOR_TAGS = {"True", "Index", "Layer", "ResidueName", "Not", "And", "Or"}
_TASKOP_TAGS = {
    "InitializeFromCommandline",
    "IncludeCurrent",
    "OperateOnResidueSubset",
    "RestrictToSpecifiedBaseResidueTypes",
    "ProhibitSpecifiedBaseResidueTypes",
}
_MOVER_TAGS = {
    "AddConstraints",
    "AddCompositionConstraintMover",
    "FastDesign",
    "PackRotamersMover",
    "GenericMonteCarlo",
    "MinMover",
    *_TAG_TO_MOVER,
}
# score-function weights files in Rosetta's database (the common ones)
WEIGHTS = frozenset(
    {
        "ref2015",
        "ref2015_cart",
        "ref2015_soft",
        "beta_nov16",
        "beta_nov16_cart",
        "beta_nov16_soft",
        "beta_jan25",
        "talaris2014",
        "talaris2013",
        "score12",
        "score3",
        "score0",
        "empty",
    }
)
FASTDESIGN_DEFAULT_REPEATS = 5  # Rosetta's FastDesign/FastRelax default (``repeats``)
_MOVE_ATTRS = {"name", "scorefxn", "residue_selector", "nmoves", "angle_max", "temperature"}
_BASE_TYPES = {"name", "base_types", "selector"}
# What RosettaScripts' XSD validation would accept here (the subset these protocols use).
ALLOWED_ATTRS: dict[str, set[str]] = {
    "ROSETTASCRIPTS": set(),
    "SCOREFXNS": set(),
    "RESIDUE_SELECTORS": set(),
    "TASKOPERATIONS": set(),
    "PACKER_PALETTES": set(),
    "MOVE_MAP_FACTORIES": set(),
    "MOVERS": set(),
    "PROTOCOLS": set(),
    "OUTPUT": {"scorefxn"},
    "ScoreFunction": {"name", "weights"},
    "Reweight": {"scoretype", "weight"},
    "True": {"name"},
    "Index": {"name", "resnums"},
    "Layer": {
        "name",
        "select_core",
        "select_boundary",
        "select_surface",
        "use_sidechain_neighbors",
    },
    "ResidueName": {"name", "residue_name3"},
    "Not": {"name", "selector"},
    "And": {"name", "selectors"},
    "Or": {"name", "selectors"},
    "InitializeFromCommandline": {"name"},
    "IncludeCurrent": {"name"},
    "OperateOnResidueSubset": {"name", "selector"},
    "RestrictToRepackingRLT": set(),
    "PreventRepackingRLT": set(),
    "RestrictToSpecifiedBaseResidueTypes": _BASE_TYPES,
    "ProhibitSpecifiedBaseResidueTypes": _BASE_TYPES,
    "AddConstraints": {"name"},
    "AtomPairConstraintGenerator": {
        "name",
        "residue_selector",
        "ca_only",
        "use_harmonic",
        "native",
        "sd",
        "max_distance",
    },
    "AddCompositionConstraintMover": {"name", "selector", "filename"},
    "Comp": {"entry"},
    "FastDesign": {
        "name",
        "scorefxn",
        "task_operations",
        "repeats",
        "relaxscript",
        "packer_palette",
    },
    "PackRotamersMover": {"name", "scorefxn", "task_operations", "packer_palette", "nloop"},
    "Small": _MOVE_ATTRS,
    "Shear": _MOVE_ATTRS,
    "Backrub": {"name", "movemap_factory"},
    "GenericMonteCarlo": {"name", "mover_name", "scorefxn_name", "trials", "temperature"},
    "MinMover": {"name", "scorefxn", "bb", "chi", "tolerance"},
    "CustomBaseTypePackerPalette": {"name", "additional_residue_types"},
    "MoveMapFactory": {"name", "bb", "chi"},
    "Backbone": {"enable", "residue_selector"},
    "Add": {"mover"},
}
_SECTIONS = [
    "SCOREFXNS",
    "PACKER_PALETTES",
    "RESIDUE_SELECTORS",
    "TASKOPERATIONS",
    "MOVE_MAP_FACTORIES",
    "MOVERS",
    "PROTOCOLS",
    "OUTPUT",
]


def _named(section: ET.Element | None, allowed: set[str], kind: str) -> dict[str, ET.Element]:
    out: dict[str, ET.Element] = {}
    for el in [] if section is None else list(section):
        if el.tag not in allowed:
            raise ProtocolError(f"unknown {kind} <{el.tag}>; known: {', '.join(sorted(allowed))}")
        name = _attr(el, "name")
        if name in out:
            raise ProtocolError(f"two {kind}s are named {name!r}")
        out[name] = el
    return out


def _selector(name: str, defs: dict[str, ET.Element], depth: int = 0) -> dict[str, Any]:
    if name not in defs:
        raise ProtocolError(f"residue selector {name!r} is used but not defined")
    if depth > 16:
        raise ProtocolError(f"residue selector {name!r} refers to itself")
    el = defs[name]
    if el.tag == "True":
        raise ProtocolError(
            f"selector {name!r} (<True>) selects everything; design selectors must be specific"
        )
    if el.tag == "Index":
        return {"type": "index", "resnums": _attr(el, "resnums")}
    if el.tag == "Layer":
        return {
            "type": "layer",
            "core": _bool(el, "select_core"),
            "boundary": _bool(el, "select_boundary"),
            "surface": _bool(el, "select_surface"),
        }
    if el.tag == "ResidueName":
        return {"type": "residue_name", "names": _attr(el, "residue_name3").split(",")}
    if el.tag == "Not":
        return {"type": "not", "selector": _selector(_attr(el, "selector"), defs, depth + 1)}
    kids = [_selector(k.strip(), defs, depth + 1) for k in _attr(el, "selectors").split(",")]
    return {"type": el.tag.lower(), "selectors": kids}


def _penalty(entry: str) -> dict[str, Any]:
    lines = [s.strip() for s in entry.split(";") if s.strip()]
    if not lines or lines[0] != "PENALTY_DEFINITION" or lines[-1] != "END_PENALTY_DEFINITION":
        raise ProtocolError(
            "a Comp entry must run from PENALTY_DEFINITION to END_PENALTY_DEFINITION"
        )
    kv = {ln.split()[0]: ln.split()[1:] for ln in lines[1:-1]}
    try:
        pens = [float(x) for x in kv["PENALTIES"]]
        if kv["DELTA_START"] != ["-1"] or kv["DELTA_END"] != ["1"] or len(pens) != 3:
            raise ProtocolError(
                "only the linear penalty (DELTA -1..1, PENALTIES w 0 w) is supported"
            )
        frac = "FRACTION" in kv
        return {
            "types": kv["TYPE"],
            "target": float((kv["FRACTION"] if frac else kv["ABSOLUTE"])[0]),
            "fraction": frac,
            "weight": pens[0],
        }
    except (KeyError, IndexError, ValueError) as exc:
        raise ProtocolError(f"malformed PENALTY_DEFINITION ({exc!s})") from None


def parse_protocol(xml: str) -> RotamerChange | BackboneChange:
    """Read a RosettaScripts protocol back into an action; ``ProtocolError`` names the problem."""
    if not isinstance(xml, str):
        raise ProtocolError(f"protocol must be XML text, got {type(xml).__name__}")
    try:
        root = ET.fromstring(xml.strip())
    except ET.ParseError as exc:
        raise ProtocolError(f"the protocol is not well-formed XML: {exc}") from None
    if root.tag != "ROSETTASCRIPTS":
        raise ProtocolError(f"the root element must be <ROSETTASCRIPTS>, not <{root.tag}>")
    for el in root:
        if el.tag not in _SECTIONS:
            raise ProtocolError(f"unknown section <{el.tag}>; known: {', '.join(_SECTIONS)}")
    for el in root.iter():  # the XSD check: known tags, known attributes
        if el.tag not in ALLOWED_ATTRS:
            raise ProtocolError(f"unknown element <{el.tag}>")
        extra = sorted(set(el.attrib) - ALLOWED_ATTRS[el.tag])
        if extra:
            raise ProtocolError(
                f"<{el.tag}> has unknown attribute(s) {extra}; allowed: {sorted(ALLOWED_ATTRS[el.tag])}"
            )
    sfxns = _named(root.find("SCOREFXNS"), {"ScoreFunction"}, "score function")
    sels = _named(root.find("RESIDUE_SELECTORS"), _SELECTOR_TAGS, "residue selector")
    ops = _named(root.find("TASKOPERATIONS"), _TASKOP_TAGS, "task operation")
    movers = _named(root.find("MOVERS"), _MOVER_TAGS, "mover")
    palettes = _named(
        root.find("PACKER_PALETTES"), {"CustomBaseTypePackerPalette"}, "packer palette"
    )
    factories = _named(root.find("MOVE_MAP_FACTORIES"), {"MoveMapFactory"}, "move map factory")
    for sf in sfxns.values():
        if _attr(sf, "weights") not in WEIGHTS:
            raise ProtocolError(
                f"score function weights {sf.get('weights')!r}: no such weights file "
                f"(known: {', '.join(sorted(WEIGHTS))})"
            )
    prot = root.find("PROTOCOLS")
    if prot is None or not len(prot):
        raise ProtocolError("<PROTOCOLS> is missing or empty")
    added = []
    for add in prot:
        if add.tag != "Add":
            raise ProtocolError(f"<PROTOCOLS> may hold only <Add>, found <{add.tag}>")
        m = _attr(add, "mover")
        if m not in movers:
            raise ProtocolError(f"<Add mover={m!r}> refers to an undefined mover")
        added.append(movers[m])
    out = root.find("OUTPUT")
    if out is not None and out.get("scorefxn", "scoring") not in sfxns:
        raise ProtocolError(f"<OUTPUT scorefxn={out.get('scorefxn')!r}>: undefined score function")
    refs = {
        "scorefxn": sfxns,
        "scorefxn_name": sfxns,
        "mover_name": movers,
        "packer_palette": palettes,
        "movemap_factory": factories,
    }
    tops = (*movers.values(), *ops.values(), *factories.values())
    for el in [e for top in tops for e in top.iter()]:
        for key, defined in refs.items():
            if key in el.attrib and el.attrib[key] not in defined:
                raise ProtocolError(f"<{el.tag} {key}={el.attrib[key]!r}>: not defined")
        for key in ("scorefxn",):
            if key in el.attrib and el.attrib[key] not in sfxns:
                raise ProtocolError(
                    f"<{el.tag} {key}={el.attrib[key]!r}>: undefined score function"
                )
        for key in ("selector", "residue_selector"):
            if key in el.attrib and el.attrib[key] not in sels:
                raise ProtocolError(f"<{el.tag} {key}={el.attrib[key]!r}>: undefined selector")
    main = [
        m
        for m in added
        if m.tag in ("FastDesign", "PackRotamersMover", "GenericMonteCarlo", *_TAG_TO_MOVER)
    ]
    if len(main) != 1:
        raise ProtocolError(
            "expected exactly one FastDesign, PackRotamersMover, Small, Shear or "
            "GenericMonteCarlo(Backrub) in "
            f"<PROTOCOLS>, found {len(main)}"
        )
    mv_main = main[0]
    if mv_main.tag == "Backrub":
        raise ProtocolError("Backrub runs inside a GenericMonteCarlo (trials, temperature)")
    args: dict[str, Any]
    if mv_main.tag in ("FastDesign", "PackRotamersMover"):
        names = [s.strip() for s in _attr(mv_main, "task_operations").split(",") if s.strip()]
        for n in names:
            if n not in ops:
                raise ProtocolError(
                    f"{mv_main.tag} uses task operation {n!r}, which is not defined"
                )
        design = None
        # FastDesign without ``repeats`` runs Rosetta's default 5; a PackRotamersMover is one
        # packing pass, read here as one repeat (the HP/OpenMM backends have no minimizer-free
        # packer; an approximation, named in the README)
        repeats = (
            mv_main.get("repeats", str(FASTDESIGN_DEFAULT_REPEATS))
            if mv_main.tag == "FastDesign"
            else "1"
        )
        args = {"action": "rotamer_change", "repeats": repeats}
        for n in names:
            op = ops[n]
            if op.tag == "OperateOnResidueSubset":
                rlt = [c.tag for c in op]
                target = _selector(_attr(op, "selector"), sels)
                if rlt == ["RestrictToRepackingRLT"]:
                    if target.get("type") != "not":
                        raise ProtocolError("RestrictToRepackingRLT must act on a Not selector")
                    design = target["selector"]
                elif rlt == ["PreventRepackingRLT"]:
                    inner = target.get("selector", {})
                    if target.get("type") != "not" or inner.get("type") != "or":
                        raise ProtocolError(
                            "PreventRepackingRLT must act on Not(Or(design, repack))"
                        )
                    args["repack_selector"] = inner["selectors"][1]
                else:
                    raise ProtocolError(f"unsupported residue-level operation(s) {rlt}")
            elif op.tag == "RestrictToSpecifiedBaseResidueTypes":
                args["restrict"] = _attr(op, "base_types").split(",")
            elif op.tag == "ProhibitSpecifiedBaseResidueTypes":
                args["prohibit"] = _attr(op, "base_types").split(",")
        if design is None:
            raise ProtocolError(
                "no designable residues: add OperateOnResidueSubset/RestrictToRepackingRLT on Not(design)"
            )
        args["design_selector"] = design
        pens = []
        for mv in added:
            if mv.tag == "AddCompositionConstraintMover":
                comps = [c for c in mv if c.tag == "Comp"]
                if len(comps) != 1:
                    raise ProtocolError(
                        f"<AddCompositionConstraintMover name={mv.get('name')!r}> needs one <Comp>"
                    )
                pens.append(_penalty(_attr(comps[0], "entry")))
        args["composition_penalties"] = pens
    elif mv_main.tag == "GenericMonteCarlo":
        inner = movers[_attr(mv_main, "mover_name")]
        if inner.tag != "Backrub":
            raise ProtocolError(f"GenericMonteCarlo must wrap a Backrub mover, not <{inner.tag}>")
        fac = factories[_attr(inner, "movemap_factory")]
        bbs = [b for b in fac if b.tag == "Backbone"]
        if len(bbs) != 1:
            raise ProtocolError("the MoveMapFactory needs one <Backbone residue_selector=...>")
        args = {
            "action": "backbone_change",
            "mover": "backrub",
            "selector": _selector(_attr(bbs[0], "residue_selector"), sels),
            "nmoves": _attr(mv_main, "trials"),
            "temperature": _attr(mv_main, "temperature"),
        }
    else:
        args = {
            "action": "backbone_change",
            "mover": _TAG_TO_MOVER[mv_main.tag],
            "selector": _selector(_attr(mv_main, "residue_selector"), sels),
            "nmoves": _attr(mv_main, "nmoves"),
            "angle_max": _attr(mv_main, "angle_max"),
            "temperature": _attr(mv_main, "temperature"),
        }
    try:
        action = TypeAdapter(Action).validate_python(args)
    except ValidationError as exc:
        from .parser import format_validation_error

        raise ProtocolError(format_validation_error(exc)) from None
    assert isinstance(action, RotamerChange | BackboneChange)
    return action
