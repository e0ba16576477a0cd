"""Non-canonical residues from the PDB Chemical Component Dictionary (biotite, extra ``[openmm]``).

biotite ships the whole CCD, so a three-letter code (TRF, MSE, AIB, DAL, NLE...) resolves to
its atoms, elements and bonds without network access. Used for: checking that a task's
non-canonical types exist; classifying them hydrophobic/polar for the HP backend (a side chain
with no N, O or S... donor/acceptor heavy atom is H); telling whether OpenMM's amber14 can
parametrize them (only when the heavy-atom graph equals a canonical residue's, i.e. the
D-enantiomers of the canonical residues; everything else needs GAFF/OpenFF, not included).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .actions import CANONICAL

BACKBONE = frozenset({"N", "CA", "C", "O", "OXT"})


@dataclass(frozen=True)
class ResidueInfo:
    """One CCD component: its heavy atoms (name -> element) and heavy-atom bonds."""

    code: str
    atoms: dict[str, str]  # heavy atom name -> element
    bonds: frozenset[frozenset[str]]  # heavy-atom bonds
    n_atoms: int  # including hydrogens

    @property
    def side_chain(self) -> dict[str, str]:
        return {a: e for a, e in self.atoms.items() if a not in BACKBONE}

    @property
    def hydrophobic(self) -> bool:
        """H when the side chain has heavy atoms and none is N or O (S and Se count as H)."""
        sc = self.side_chain
        return bool(sc) and not any(e in ("N", "O") for e in sc.values())


@lru_cache(maxsize=256)
def resolve_residue(code: str) -> ResidueInfo:
    """The CCD entry for ``code``; ``KeyError`` naming the code when the dictionary lacks it."""
    try:
        from biotite.structure.info import residue
    except ImportError:  # pragma: no cover - the extra is installed in CI
        raise ImportError(
            "non-canonical residues need biotite: pip install 'icml26-agent-rosetta[openmm]'"
        ) from None
    try:
        arr = residue(code.upper())
    except KeyError:
        raise KeyError(
            f"residue {code!r} is not in the PDB Chemical Component Dictionary"
        ) from None
    heavy = {str(a): str(e) for a, e in zip(arr.atom_name, arr.element) if e != "H"}
    bonds = set()
    for i, j, _ in arr.bonds.as_array():
        a, b = str(arr.atom_name[i]), str(arr.atom_name[j])
        if a in heavy and b in heavy:
            bonds.add(frozenset((a, b)))
    return ResidueInfo(code.upper(), heavy, frozenset(bonds), len(arr))


def canonical_parent(code: str) -> str | None:
    """The canonical residue with the same heavy atoms and bonds (D-enantiomers: DAL -> ALA).

    Such residues are the only non-canonical ones OpenMM's amber14 templates can parametrize
    (template matching is by bonded graph and atom names, not chirality).
    """
    info = resolve_residue(code)
    for can in CANONICAL:
        ref = resolve_residue(can)
        if ref.atoms == info.atoms and ref.bonds == info.bonds and can != info.code:
            return can
    return None


def classify_hydrophobic(codes: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The codes (canonical or not) in the HP model's H class."""
    from .hp import HYDROPHOBIC

    return frozenset(
        c for c in codes if (c in HYDROPHOBIC if c in CANONICAL else resolve_residue(c).hydrophobic)
    )
