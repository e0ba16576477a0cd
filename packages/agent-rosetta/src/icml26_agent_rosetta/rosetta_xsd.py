"""Would RosettaScripts accept this protocol? The XSD check plus Rosetta's parse-time checks.

``validate_rosetta_xml(xml, n_res, palette)`` raises ``ProtocolError`` with the messages a
Rosetta user would see, in two stages, as ``rosetta_scripts`` does:

1. **XSD** (extra ``[xsd]``, pure-Python ``xmlschema``): the protocol against
   ``data/rosetta_scripts_subset.xsd``, a hand-written subset of the official schema (every
   element the benchmark's protocols can contain, with its documented attributes; the
   official ``mpi_schema.xsd`` is Rosetta's own output and not redistributed here). Every schema
   error is reported at once, as libxml2 does for Rosetta.
2. **Parse time** (what Rosetta's ``parse_my_tag`` calls reject, first error only): names that
   are referenced but not defined (score functions, selectors, task operations, movers, packer
   palettes, move map factories), score-function weights that do not exist, ``Index``
   ``resnums`` that do not parse or lie outside the pose, residue types without params.

Unlike ``compile.parse_protocol`` (the inverse of this package's compiler, which only reads
back what it writes), this accepts any RosettaScripts the subset declares:
``PackRotamersMover``, ``weights="beta_nov16"``, a ``FastDesign`` without ``repeats``
(Rosetta's default is 5).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from .compile import WEIGHTS, ProtocolError

SCHEMA = "rosetta_scripts_subset.xsd"

_RESNUMS = re.compile(r"^\s*\d+[A-Z]?(\s*-\s*\d+[A-Z]?)?(\s*,\s*\d+[A-Z]?(\s*-\s*\d+[A-Z]?)?)*\s*$")
_SECTION_OF_REF = {
    "scorefxn": "SCOREFXNS",
    "scorefxn_name": "SCOREFXNS",
    "selector": "RESIDUE_SELECTORS",
    "residue_selector": "RESIDUE_SELECTORS",
    "secondary_selector": "RESIDUE_SELECTORS",
    "mover": "MOVERS",
    "mover_name": "MOVERS",
    "packer_palette": "PACKER_PALETTES",
    "movemap_factory": "MOVE_MAP_FACTORIES",
}
_LIST_REFS = {"selectors": "RESIDUE_SELECTORS", "task_operations": "TASKOPERATIONS"}


@lru_cache(maxsize=1)
def _schema() -> Any:
    try:
        import xmlschema
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise ImportError(
            "validate_rosetta_xml needs the pure-Python xmlschema package: "
            'pip install "icml26-agent-rosetta[xsd]"'
        ) from exc
    path = resources.files("icml26_agent_rosetta") / "data" / SCHEMA
    return xmlschema.XMLSchema10(path.read_text())


def xsd_errors(xml: str) -> list[str]:
    """Schema errors of ``xml`` against the subset XSD (empty when valid)."""
    try:
        root = ET.fromstring(xml.strip())
    except ET.ParseError as exc:
        return [f"the protocol is not well-formed XML: {exc}"]
    out = []
    for err in _schema().iter_errors(root):
        el = err.elem
        where = f"<{el.tag}>" if el is not None else "the protocol"
        out.append(f"{where}: {err.reason}")
    return out


def _names(root: ET.Element, section: str) -> set[str]:
    sec = root.find(section)
    if sec is None:
        return set()
    return {el.get("name", "") for el in sec.iter() if el is not sec and el.get("name")}


def validate_rosetta_xml(
    xml: str, n_res: int | None = None, palette: Sequence[str] | None = None
) -> None:
    """Raise ``ProtocolError`` when RosettaScripts would reject ``xml`` (see the module doc).

    ``n_res``: residues in the pose (``Index`` bounds); ``palette``: the residue types with
    params (``base_types``, ``residue_name3``, ``additional_residue_types``).
    """
    if not isinstance(xml, str):
        raise ProtocolError(f"xml must be text, got {type(xml).__name__}")
    errs = xsd_errors(xml)
    if errs:
        raise ProtocolError(
            "the protocol does not validate against the RosettaScripts XSD:\n"
            + "\n".join(f"- {e}" for e in errs)
        )
    root = ET.fromstring(xml.strip())
    names = {s: _names(root, s) for s in set(_SECTION_OF_REF.values()) | set(_LIST_REFS.values())}
    for sf in root.iter("ScoreFunction"):
        w = sf.get("weights")
        if w is not None and w not in WEIGHTS:
            raise ProtocolError(
                f"<ScoreFunction name={sf.get('name')!r} weights={w!r}>: no weights file {w}.wts "
                "in the Rosetta database"
            )
    known = set(palette) if palette is not None else None
    for el in root.iter():
        for key, section in _SECTION_OF_REF.items():
            v = el.get(key)
            if v is not None and v not in names[section]:
                raise ProtocolError(
                    f"<{el.tag} {key}={v!r}>: {v!r} is not defined in <{section}> "
                    f"(defined: {sorted(names[section])})"
                )
        for key, section in _LIST_REFS.items():
            v = el.get(key)
            if v is None:
                continue
            for part in v.split(","):
                if part.strip() not in names[section]:
                    raise ProtocolError(
                        f"<{el.tag} {key}={v!r}>: {part.strip()!r} is not defined in "
                        f"<{section}> (a comma-separated list of defined names)"
                    )
        if el.tag == "Index":
            spec = el.get("resnums", "")
            if not _RESNUMS.match(spec):
                raise ProtocolError(
                    f"<Index resnums={spec!r}>: cannot parse the residue numbers "
                    "(a comma-separated list of numbers and ranges such as 1-5,9)"
                )
            if n_res is not None:
                nums = [int(x) for x in re.findall(r"\d+", spec)]
                bad = [x for x in nums if not 1 <= x <= n_res]
                if bad:
                    raise ProtocolError(
                        f"<Index resnums={spec!r}>: residue {bad[0]} is out of range "
                        f"(pose has 1-{n_res})"
                    )
        if known is not None:
            for key in ("base_types", "residue_name3", "additional_residue_types"):
                v = el.get(key)
                if v is None:
                    continue
                unknown = [t.strip() for t in v.split(",") if t.strip() not in known]
                if unknown:
                    raise ProtocolError(
                        f"<{el.tag} {key}={v!r}>: unknown residue type(s) {unknown} "
                        "(no params loaded for them)"
                    )
