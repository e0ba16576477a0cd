"""An error model of real LLM mistakes, with repair from the error message (the benchmark agent).

``LLMErrorPolicy`` means to take a fixed plan of actions. Every *decision* it writes is wrong
with probability ``p``, and a wrong decision is one of the mistakes LLMs make with
RosettaScripts (the five ``KINDS``, drawn uniformly among those that apply):

- ``hallucinated_tag``: a tag or argument name that does not exist (``<SmallMover>``,
  ``<IndexSelector>``; ``"n_moves"`` for ``nmoves``, ``"max_angle"`` for ``angle_max``);
- ``hallucinated_attribute``: an attribute or key the element does not have
  (``<FastDesign cycles="3">``, ``<Index residues=...>``; ``{"type": "index", "chain": "A"}``);
- ``wrong_section``: an element in the wrong section (a selector under ``<MOVERS>``, a task
  operation under ``<RESIDUE_SELECTORS>``); an argument nested in the wrong object;
- ``nonexistent_option``: a value the option does not take (``select_core="maybe"``,
  ``nmoves="auto"``, a residue type without params, ``"mover": "wiggle"``);
- ``selector_syntax``: a residue selection written wrong (``resnums="1..12"``,
  ``selector="sel1;"``).

Decisions are counted the same way in both arms: one per argument value of the action
(``to_arguments`` leaves). The structured arm writes them as JSON leaves, plus the action name
at ``choose`` (one more decision). The prompt-only arm fills a *template protocol*: the
boilerplate (score functions, constraints, task-operation plumbing, ``PROTOCOLS``,
``OUTPUT``) is copied from the template and cannot be wrong; an argument-bearing element that
carries k argument values is wrong with probability 1 - (1 - p)^k (at most one mistake per
element). ``template=False`` drops the template: every element of the protocol is a decision
(the old baseline, kept as a labelled variant).

Repair: after an error message the agent keeps its previous reply and fixes each mistake the
message names (a mistake is named when one of its tokens -- the wrong tag, key, attribute or
value -- appears in the message); each fix is itself a decision (wrong again with probability
p, with a fresh mistake). If the message names none of its mistakes, the agent rewrites the
whole reply from scratch. Identical in both arms, so the quality of the messages decides.
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .actions import CANONICAL, BackboneChange, RotamerChange
from .agent import Message, run_reply, to_arguments
from .compile import compile_protocol

KINDS = (
    "hallucinated_tag",
    "hallucinated_attribute",
    "wrong_section",
    "nonexistent_option",
    "selector_syntax",
)

# names LLMs write that RosettaScripts does not have (checked against the subset XSD in tests)
_TAG_HALLUCINATION = {
    "FastDesign": "FastDesignMover",
    "PackRotamersMover": "PackRotamers",
    "Small": "SmallMover",
    "Shear": "ShearMover",
    "Backrub": "BackrubMover",
    "GenericMonteCarlo": "MonteCarloMover",
    "Index": "IndexSelector",
    "Layer": "LayerSelector",
    "ResidueName": "ResidueNameSelector",
    "Not": "NotSelector",
    "And": "AndSelector",
    "Or": "OrSelector",
    "RestrictToSpecifiedBaseResidueTypes": "RestrictToResidueTypes",
    "ProhibitSpecifiedBaseResidueTypes": "ProhibitResidueTypes",
    "Comp": "Composition",
    "AddCompositionConstraintMover": "AddCompositionConstraint",
}
_ATTR_HALLUCINATION = {
    "FastDesign": "cycles",
    "Small": "max_angle",
    "Shear": "max_angle",
    "GenericMonteCarlo": "n_trials",
    "Index": "residues",
    "Layer": "core",
    "ResidueName": "name3s",
    "RestrictToSpecifiedBaseResidueTypes": "residue_types",
    "ProhibitSpecifiedBaseResidueTypes": "residue_types",
    "Comp": "penalty",
    "Backrub": "max_angle",
    "Not": "selectors",
}
_KEY_HALLUCINATION = {
    "design_selector": "designable_residues",
    "repack_selector": "packable_residues",
    "restrict": "allowed_residues",
    "prohibit": "forbidden_residues",
    "composition_penalties": "penalties",
    "repeats": "cycles",
    "mover": "move_type",
    "selector": "residue_selector",
    "nmoves": "n_moves",
    "angle_max": "max_angle",
    "temperature": "kT",
    "resnums": "residues",
    "types": "residue_types",
    "target": "count",
    "weight": "strength",
    "step": "to_step",
    "core": "buried",
}
_ARG_TAGS = set(_ATTR_HALLUCINATION) - {"Not"} | {"And", "Or"}
_SECTIONS = ("RESIDUE_SELECTORS", "TASKOPERATIONS", "MOVERS")
_BAD_RESIDUE = "XAA"


def _misspell_action(name: str) -> str:
    return {
        "rotamer_change": "design_residues",
        "backbone_change": "move_backbone",
        "go_back_to_step": "revert",
    }.get(name, name + "_action")


# ---------------------------------------------------------------------------------------------
# structured arm: mistakes on JSON argument leaves


def leaf_paths(args: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths of the scalar leaves of a JSON argument tree (the structured arm's decisions)."""
    if isinstance(args, dict):
        return [p for k, v in args.items() for p in leaf_paths(v, (*prefix, k))]
    if isinstance(args, list):
        return [p for i, v in enumerate(args) for p in leaf_paths(v, (*prefix, i))]
    return [prefix]


def _bad_value(key: Any, value: Any) -> Any:
    if isinstance(value, bool):
        return "maybe"
    if isinstance(value, int | float):
        return "auto"
    if key == "mover":
        return "wiggle"
    if key == "type":
        return "chain"
    if isinstance(value, str) and value in CANONICAL:
        return _BAD_RESIDUE
    return f"{value}_mode"


def _draw_leaf_slip(path: tuple, value: Any, rng: np.random.Generator) -> dict[str, Any]:
    key = path[-1]
    kinds = ["hallucinated_attribute", "nonexistent_option"]
    if isinstance(key, str):
        kinds += ["hallucinated_tag", "wrong_section"]
    if key in ("resnums", "type") or (isinstance(value, str) and value in CANONICAL):
        kinds.append("selector_syntax" if key in ("resnums", "type") else "nonexistent_option")
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "hallucinated_tag":
        new = _KEY_HALLUCINATION.get(key, f"{key}s")
        return {"kind": kind, "path": path, "key": new, "tokens": (new,)}
    if kind == "hallucinated_attribute":
        extra = ("chain", "A") if len(path) > 1 else ("verbose", True)
        return {"kind": kind, "path": path, "extra": extra, "tokens": (extra[0],)}
    if kind == "wrong_section":
        return {"kind": kind, "path": path, "tokens": (str(key),)}
    if kind == "selector_syntax" and key == "resnums":
        bad = str(value).replace("-", "..") if "-" in str(value) else f"{value}.."
        return {"kind": kind, "path": path, "value": bad, "tokens": (bad, "resnums")}
    if kind == "selector_syntax":  # the selector's type written as Rosetta's tag
        bad = f"{value}_selector"
        return {"kind": kind, "path": path, "value": bad, "tokens": (bad, "type")}
    bad = _bad_value(key, value)
    toks = (str(key), str(bad)) if isinstance(key, str) else (str(bad),)
    return {"kind": "nonexistent_option", "path": path, "value": bad, "tokens": toks}


def _get(tree: Any, path: tuple) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def apply_leaf_slips(args: dict[str, Any], slips: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The arguments with every slip applied (value slips first, then moves and renames)."""
    out = copy.deepcopy(args)
    order = sorted(slips, key=lambda s: s["kind"] in ("hallucinated_tag", "wrong_section"))
    for s in order:
        *parent_path, key = s["path"]
        try:
            parent = _get(out, tuple(parent_path))
        except (KeyError, IndexError, TypeError):
            continue  # a container already moved by another slip
        if isinstance(parent, dict) and key not in parent:
            continue
        if s["kind"] in ("nonexistent_option", "selector_syntax"):
            parent[key] = s["value"]
        elif s["kind"] == "hallucinated_attribute":
            k, v = s["extra"]
            (parent if isinstance(parent, dict) else out)[k] = v
        elif s["kind"] == "hallucinated_tag":
            parent[s["key"]] = parent.pop(key)
        else:  # wrong_section: a top-level argument into a nested object, or a nested one out
            v = parent.pop(key)
            if parent is out:
                nested = [x for x in out.values() if isinstance(x, dict)]
                (nested[0] if nested else out)[key if nested else f"{key}_"] = v
            else:
                out[key] = v
    return out


# ---------------------------------------------------------------------------------------------
# prompt-only arm: mistakes on protocol elements


def _selector_leaves(sel: Any) -> int:
    return len(leaf_paths(sel)) if sel is not None else 0


def element_weights(action: RotamerChange | BackboneChange, root: ET.Element) -> list[int]:
    """Per element of ``root.iter()``: how many argument values it carries (0 = template)."""
    els = list(root.iter())
    w = [0] * len(els)
    args = to_arguments(action)
    sel_section = root.find("RESIDUE_SELECTORS")
    sel_els = [e for e in (sel_section if sel_section is not None else []) if e.tag != "True"]
    first_sel = els.index(sel_els[0]) if sel_els else None

    def add(tag: str, k: int) -> None:
        for i, e in enumerate(els):
            if e.tag == tag:
                w[i] += k
                return

    if isinstance(action, RotamerChange):
        if first_sel is not None:
            w[first_sel] += _selector_leaves(args.get("design_selector"))
            w[first_sel] += _selector_leaves(args.get("repack_selector"))
        add("RestrictToSpecifiedBaseResidueTypes", len(args.get("restrict") or []))
        add("ProhibitSpecifiedBaseResidueTypes", len(args.get("prohibit") or []))
        comps = [i for i, e in enumerate(els) if e.tag == "Comp"]
        for i, pen in zip(comps, args.get("composition_penalties", [])):
            w[i] += len(leaf_paths(pen))
        add("FastDesign", int("repeats" in args))
    else:
        if first_sel is not None:
            w[first_sel] += _selector_leaves(args.get("selector"))
        main = (
            "Backrub"
            if action.mover == "backrub"
            else {"small": "Small", "shear": "Shear"}[action.mover]
        )
        add(main, 1 + int("angle_max" in args))
        mc = "GenericMonteCarlo" if action.mover == "backrub" else main
        add(mc, int("nmoves" in args) + int("temperature" in args))
    return w


def _attr_choices(el: ET.Element) -> list[str]:
    refs = {"name", "selector", "selectors", "residue_selector", "scorefxn", "task_operations"}
    refs |= {"mover_name", "scorefxn_name", "movemap_factory", "packer_palette"}
    return [a for a in el.attrib if a not in refs]


def _draw_element_slip(i: int, el: ET.Element, rng: np.random.Generator) -> dict[str, Any]:
    kinds = ["hallucinated_tag", "hallucinated_attribute"]
    if el.tag != "ROSETTASCRIPTS" and not el.tag.isupper():  # not the root or a section
        kinds.append("wrong_section")
    if _attr_choices(el):
        kinds.append("nonexistent_option")
    if "resnums" in el.attrib or {"selector", "selectors", "residue_selector"} & set(el.attrib):
        kinds.append("selector_syntax")
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "hallucinated_tag":
        new = _TAG_HALLUCINATION.get(el.tag, el.tag + "Mover")
        return {"kind": kind, "i": i, "tag": new, "tokens": (new,)}
    if kind == "hallucinated_attribute":
        a = _ATTR_HALLUCINATION.get(el.tag, "verbose")
        return {"kind": kind, "i": i, "attr": a, "tokens": (a,)}
    if kind == "wrong_section":
        return {"kind": kind, "i": i, "pick": int(rng.integers(2)), "tokens": (el.tag,)}
    if kind == "selector_syntax":
        if "resnums" in el.attrib:
            v = el.attrib["resnums"]
            bad = v.replace("-", "..") if "-" in v else f"{v}.."
            return {"kind": kind, "i": i, "attr": "resnums", "value": bad, "tokens": (bad,)}
        a = next(k for k in ("selector", "selectors", "residue_selector") if k in el.attrib)
        bad = el.attrib[a] + ";"
        return {"kind": kind, "i": i, "attr": a, "value": bad, "tokens": (bad,)}
    choices = _attr_choices(el)
    a = choices[int(rng.integers(len(choices)))]
    v = el.attrib[a]
    if a in ("base_types", "residue_name3"):
        bad = f"{v},{_BAD_RESIDUE}"
        toks: tuple[str, ...] = (_BAD_RESIDUE,)
    elif v.lower() in ("true", "false"):
        bad, toks = "maybe", ("maybe",)
    elif a == "entry":
        bad, toks = v.replace("TYPE ", "TYPE XAA ", 1), (_BAD_RESIDUE,)
    else:
        bad, toks = "auto", ("auto",)
    return {"kind": kind, "i": i, "attr": a, "value": bad, "tokens": toks}


def apply_element_slips(xml: str, slips: Sequence[dict[str, Any]]) -> str:
    root = ET.fromstring(xml)
    els = list(root.iter())
    parent = {c: p for p in root.iter() for c in p}
    for s in slips:
        el = els[s["i"]]
        if s["kind"] == "hallucinated_tag":
            el.tag = s["tag"]
        elif s["kind"] == "hallucinated_attribute":
            el.set(s["attr"], "3")
        elif s["kind"] in ("nonexistent_option", "selector_syntax"):
            el.set(s["attr"], s["value"])
        else:  # wrong_section: into one of the other sections (created if absent)
            here = el
            while parent.get(here) is not None and parent[here] is not root:
                here = parent[here]
            others = [t for t in _SECTIONS if t != here.tag]
            target_tag = others[s["pick"] % len(others)]
            target = root.find(target_tag)
            if target is None:
                target = ET.Element(target_tag)
                root.insert(1, target)
            if parent.get(el) is not None:
                parent[el].remove(el)
            target.append(el)
            parent[el] = target
    return ET.tostring(root, encoding="unicode")


# ---------------------------------------------------------------------------------------------


@dataclass
class LLMErrorPolicy:
    """A scripted agent with the error model above (see the module docstring).

    ``mode="structured"``: choose, then run with JSON arguments; ``mode="protocol"``: one
    whole protocol per reply, from a template (``template=True``) or written whole.
    ``repair=False`` rewrites every retry from scratch (the previous benchmark's agent).
    """

    plan: Sequence[RotamerChange | BackboneChange]
    p: float
    mode: str = "structured"
    template: bool = True
    repair: bool = True
    seed: int = 0
    step: int = 0
    rng: np.random.Generator = field(init=False)
    _phase: str = "choose"
    _slips: list[dict[str, Any]] = field(default_factory=list)
    decisions_written: int = 0
    mistakes_made: int = 0
    repairs: int = 0
    rewrites: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.p <= 1:
            raise ValueError(f"p must be in [0, 1], got {self.p}")
        if self.mode not in ("structured", "protocol"):
            raise ValueError(f"mode must be 'structured' or 'protocol', got {self.mode!r}")
        if not self.plan:
            raise ValueError("plan must hold at least one action")
        self.rng = np.random.default_rng(self.seed)

    # --- what to write -------------------------------------------------------------------------
    def _units(self) -> list[tuple[Any, int]]:
        """The decision units of the current reply: (unit, number of decisions in it)."""
        action = self.plan[self.step % len(self.plan)]
        if self.mode == "structured":
            if self._phase == "choose":
                return [("name", 1)]
            return [(path, 1) for path in leaf_paths(to_arguments(action))]
        root = ET.fromstring(compile_protocol(action))
        if not self.template:
            return [(i, 1) for i in range(len(list(root.iter())))]
        return [(i, k) for i, k in enumerate(element_weights(action, root)) if k > 0]

    def _draw(self, unit: Any) -> dict[str, Any]:
        action = self.plan[self.step % len(self.plan)]
        if self.mode == "structured":
            if unit == "name":
                bad = _misspell_action(action.action)
                return {
                    "kind": "hallucinated_tag",
                    "path": ("name",),
                    "tokens": (bad,),
                    "name": bad,
                }
            return _draw_leaf_slip(unit, _get(to_arguments(action), unit), self.rng)
        el = list(ET.fromstring(compile_protocol(action)).iter())[unit]
        return _draw_element_slip(unit, el, self.rng)

    def _fresh(self) -> None:
        self._slips = []
        for unit, k in self._units():
            self.decisions_written += k
            if self.rng.random() < 1.0 - (1.0 - self.p) ** k:
                self._slips.append(self._draw(unit))
                self.mistakes_made += 1

    def _repair(self, message: str) -> None:
        named = [s for s in self._slips if any(t and t in message for t in s["tokens"])]
        if not self.repair or not named:
            self.rewrites += 1
            self._fresh()
            return
        for s in named:
            self._slips.remove(s)
            self.repairs += 1
            self.decisions_written += 1
            if self.rng.random() < self.p:  # the fix is a decision too
                unit = s.get("path", s.get("i"))
                if unit == ("name",):
                    unit = "name"
                self._slips.append(self._draw(unit))
                self.mistakes_made += 1

    def _render(self) -> str:
        action = self.plan[self.step % len(self.plan)]
        if self.mode == "protocol":
            return apply_element_slips(compile_protocol(action), self._slips)
        if self._phase == "choose":
            name = next((s["name"] for s in self._slips if "name" in s), action.action)
            return f'<action tag="choose"><name>{name}</name></action>'
        args = apply_leaf_slips(to_arguments(action), self._slips)
        return run_reply(action.action, args)

    def __call__(self, messages: list[Message]) -> str:
        last = str(messages[-1].get("content") or "")
        if len(messages) <= 2:
            self._fresh()
        elif self.mode == "structured" and last.startswith("# "):
            self._phase = "run"  # the chosen action's documentation: fill the arguments
            self._fresh()
        elif last.startswith("Step ") or "No retries left" in last:
            self.step, self._phase = self.step + 1, "choose"  # the step is over
            self._fresh()
        else:  # an error on the current reply: repair it from the message
            self._repair(last)
        return self._render()
