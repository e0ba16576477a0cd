"""The agent's actions as pydantic models (the paper's schema-validated arguments).

Three actions, as in the official environment (``environments/rosetta/actions.py``):

- ``rotamer_change``: FastDesign over residue selectors, with a residue palette (``restrict`` /
  ``prohibit``), packing restrictions and composition penalties (``aa_composition``);
- ``backbone_change``: a ``small`` / ``shear`` / ``backrub`` move set over a selector;
- ``go_back_to_step``: return to the designs of an earlier successful step.

Residue types are normalised here (``"a"``, ``"Ala"``, ``"alanine"`` -> ``"ALA"``); whether a
non-canonical three-letter code is *allowed* is a property of the task (Rosetta needs a params
file for it), checked by the environment, not by the schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CANONICAL: dict[str, str] = {
    "ALA": "A", "ARG": "R", "ASN": "N", "ASP": "D", "CYS": "C", "GLN": "Q", "GLU": "E",
    "GLY": "G", "HIS": "H", "ILE": "I", "LEU": "L", "LYS": "K", "MET": "M", "PHE": "F",
    "PRO": "P", "SER": "S", "THR": "T", "TRP": "W", "TYR": "Y", "VAL": "V",
}  # fmt: skip
ONE_TO_THREE = {v: k for k, v in CANONICAL.items()}
FULL_NAMES = {
    "ALANINE": "ALA", "ARGININE": "ARG", "ASPARAGINE": "ASN", "ASPARTATE": "ASP",
    "ASPARTIC ACID": "ASP", "CYSTEINE": "CYS", "GLUTAMINE": "GLN", "GLUTAMATE": "GLU",
    "GLUTAMIC ACID": "GLU", "GLYCINE": "GLY", "HISTIDINE": "HIS", "ISOLEUCINE": "ILE",
    "LEUCINE": "LEU", "LYSINE": "LYS", "METHIONINE": "MET", "PHENYLALANINE": "PHE",
    "PROLINE": "PRO", "SERINE": "SER", "THREONINE": "THR", "TRYPTOPHAN": "TRP",
    "TYROSINE": "TYR", "VALINE": "VAL",
}  # fmt: skip
_CODE = re.compile(r"^[A-Z0-9]{2,3}$")
_RESNUMS = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")


def normalize_residue(name: str) -> str:
    """One residue type in Rosetta's three-letter form; ``ValueError`` naming what is accepted."""
    if not isinstance(name, str):
        raise ValueError(f"residue type must be a string, got {type(name).__name__}")
    s = name.strip().upper()
    if s in CANONICAL:
        return s
    if len(s) == 1 and s in ONE_TO_THREE:
        return ONE_TO_THREE[s]
    if s in FULL_NAMES:
        return FULL_NAMES[s]
    if _CODE.match(s):  # a non-canonical code (TRF, MSE, AIB, DAL, NLE...): the task decides
        return s
    raise ValueError(
        f"unknown residue type {name!r}: use a one-letter code (A), a three-letter code (ALA) "
        "or a non-canonical three-letter code with params in the task (e.g. TRF)"
    )


def parse_resnums(spec: str) -> list[int]:
    """``"1-3,7"`` -> ``[1, 2, 3, 7]`` (Rosetta pose numbering, 1-based)."""
    out: list[int] = []
    for part in spec.split(","):
        a, _, b = part.strip().partition("-")
        lo, hi = int(a), int(b or a)
        if lo < 1 or hi < lo:
            raise ValueError(f"bad residue range {part.strip()!r}: need 1 <= start <= end")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


ResidueType = Annotated[str, Field(description="one- or three-letter residue code, e.g. L or LEU")]


class IndexSelector(_Model):
    """Residues by pose number: ``"1-5,9"`` (Rosetta's ``Index`` selector, 1-based)."""

    type: Literal["index"] = "index"
    resnums: str = Field(description='comma-separated numbers and ranges, e.g. "1-5,9"')

    @field_validator("resnums", mode="before")
    @classmethod
    def _resnums(cls, v: object) -> str:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        elif (
            isinstance(v, list)
            and v
            and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
        ):
            v = ",".join(str(i) for i in v)
        if not isinstance(v, str) or not _RESNUMS.match(v):
            raise ValueError('resnums must look like "1-5,9" (1-based pose numbers)')
        parse_resnums(v)  # raises on an empty or reversed range
        return ",".join(p.strip().replace(" ", "") for p in v.split(","))


class LayerSelector(_Model):
    """Residues by burial (Rosetta's ``Layer`` selector, side-chain neighbours)."""

    type: Literal["layer"] = "layer"
    core: bool = False
    boundary: bool = False
    surface: bool = False

    @model_validator(mode="after")
    def _some(self) -> LayerSelector:
        if not (self.core or self.boundary or self.surface):
            raise ValueError("a layer selector must select at least one of core, boundary, surface")
        return self


class ResidueNameSelector(_Model):
    """Residues whose current type is one of ``names`` (``ResidueName``)."""

    type: Literal["residue_name"] = "residue_name"
    names: list[ResidueType] = Field(min_length=1)

    @field_validator("names", mode="before")
    @classmethod
    def _names(cls, v: object) -> object:
        if isinstance(v, str):
            v = [s for s in re.split(r"[,\s]+", v) if s]
        if isinstance(v, list):
            return [normalize_residue(s) for s in v]
        return v


class NotSelector(_Model):
    """Every residue not in ``selector``."""

    type: Literal["not"] = "not"
    selector: Selector


class AndSelector(_Model):
    """Residues in every one of ``selectors``."""

    type: Literal["and"] = "and"
    selectors: list[Selector] = Field(min_length=2)


class OrSelector(_Model):
    """Residues in any of ``selectors``."""

    type: Literal["or"] = "or"
    selectors: list[Selector] = Field(min_length=2)


Selector = Annotated[
    IndexSelector | LayerSelector | ResidueNameSelector | NotSelector | AndSelector | OrSelector,
    Field(discriminator="type"),
]
NotSelector.model_rebuild()
AndSelector.model_rebuild()
OrSelector.model_rebuild()


class CompositionPenalty(_Model):
    """A linear composition penalty, ``weight · |count - target|`` (Rosetta's ``aa_composition``).

    Compiled to a ``PENALTY_DEFINITION`` block: ``DELTA_START -1``, ``DELTA_END 1``,
    ``PENALTIES w 0 w``, linear before and after, so the penalty is exactly ``w·|Δ|``.
    """

    types: list[ResidueType] = Field(min_length=1, description="residue types counted together")
    target: float = Field(ge=0, description="wanted count (absolute) or fraction (fraction=true)")
    fraction: bool = Field(False, description="target is a fraction of the selected residues")
    weight: float = Field(1.0, gt=0, le=100)

    @field_validator("types", mode="before")
    @classmethod
    def _types(cls, v: object) -> object:
        if isinstance(v, str):
            v = [s for s in re.split(r"[,\s]+", v) if s]
        if isinstance(v, list):
            return [normalize_residue(s) for s in v]
        return v

    @model_validator(mode="after")
    def _frac(self) -> CompositionPenalty:
        if self.fraction and self.target > 1:
            raise ValueError(f"target {self.target} is a fraction: it must be in [0, 1]")
        if not self.fraction and self.target != int(self.target):
            raise ValueError(f"target {self.target} is a count: it must be a whole number")
        return self


class RotamerChange(_Model):
    """FastDesign: redesign and repack the selected residues (sequence changes, backbone kept).

    ``design_selector`` residues may change type, limited to ``restrict`` (if given) minus
    ``prohibit``; ``repack_selector`` residues (default: all) keep their type but may move;
    every other residue is frozen. ``composition_penalties`` are added to the score function
    (weight 1.0 on ``aa_composition``) over the designed residues.
    """

    action: Literal["rotamer_change"] = "rotamer_change"
    design_selector: Selector
    repack_selector: Selector | None = None
    restrict: list[ResidueType] | None = Field(None, description="allowed residue types")
    prohibit: list[ResidueType] = Field(default_factory=list, description="forbidden types")
    composition_penalties: list[CompositionPenalty] = Field(default_factory=list, max_length=8)
    repeats: int = Field(1, ge=1, le=5, description="FastDesign repeats")

    @field_validator("restrict", "prohibit", mode="before")
    @classmethod
    def _palette(cls, v: object) -> object:
        if isinstance(v, str):
            v = [s for s in re.split(r"[,\s]+", v) if s]
        if isinstance(v, list):
            return sorted({normalize_residue(s) for s in v})
        return v

    @model_validator(mode="after")
    def _nonempty(self) -> RotamerChange:
        if self.restrict is not None and not set(self.restrict) - set(self.prohibit):
            raise ValueError("restrict minus prohibit leaves no residue type to design with")
        return self


class BackboneChange(_Model):
    """Perturb the backbone of the selected residues with a Monte Carlo move set.

    ``small`` (independent φ/ψ), ``shear`` (φ_i, ψ_{i-1} in opposition) or ``backrub`` (a local
    rotation about a CA-CA axis); ``nmoves`` trials, each accepted by Metropolis at ``temperature``
    (for backrub through a ``GenericMonteCarlo``); side chains are minimized afterwards.
    """

    action: Literal["backbone_change"] = "backbone_change"
    mover: Literal["small", "shear", "backrub"]
    selector: Selector
    nmoves: int = Field(100, ge=1, le=10_000)
    angle_max: float = Field(6.0, gt=0, le=180, description="largest angle change, degrees")
    temperature: float = Field(0.5, gt=0, le=100, description="Metropolis kT")

    @model_validator(mode="after")
    def _backrub_angle(self) -> BackboneChange:
        if self.mover == "backrub" and self.angle_max != 6.0:
            raise ValueError(
                "angle_max applies to small and shear only (backrub sets its own angles)"
            )
        return self


class GoBackToStep(_Model):
    """Restore the designs of an earlier successful step (0 is the starting structure)."""

    action: Literal["go_back_to_step"] = "go_back_to_step"
    step: int = Field(ge=0)


Action = Annotated[RotamerChange | BackboneChange | GoBackToStep, Field(discriminator="action")]
ACTIONS: dict[str, type[RotamerChange] | type[BackboneChange] | type[GoBackToStep]] = {
    "rotamer_change": RotamerChange,
    "backbone_change": BackboneChange,
    "go_back_to_step": GoBackToStep,
}


class SelectorError(ValueError):
    """A selector that cannot apply to this pose (e.g. a residue number out of range)."""


def resolve_selector(sel: Selector, sequence: Sequence[str], layers: Sequence[str]) -> np.ndarray:
    """Boolean mask (n,) of the residues ``sel`` selects on a pose (backend-independent)."""
    n = len(sequence)
    if isinstance(sel, IndexSelector):
        idx = parse_resnums(sel.resnums)
        bad = [i for i in idx if i > n]
        if bad:
            raise SelectorError(
                f"resnums {sel.resnums!r}: residue {bad[0]} is out of range (pose has 1-{n})"
            )
        mask = np.zeros(n, bool)
        mask[np.array(idx) - 1] = True
        return mask
    if isinstance(sel, LayerSelector):
        want = {k for k in ("core", "boundary", "surface") if getattr(sel, k)}
        return np.array([lay in want for lay in layers])
    if isinstance(sel, ResidueNameSelector):
        return np.array([s in sel.names for s in sequence])
    if isinstance(sel, NotSelector):
        return ~resolve_selector(sel.selector, sequence, layers)
    masks = [resolve_selector(s, sequence, layers) for s in sel.selectors]
    return (
        np.logical_and.reduce(masks)
        if isinstance(sel, AndSelector)
        else np.logical_or.reduce(masks)
    )
