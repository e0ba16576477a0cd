"""An open physics backend that runs anywhere: OpenMM + PDBFixer (extra ``[openmm]``).

Not Rosetta: a stand-in so the whole loop runs on a laptop with a real all-atom energy.

- ``rotamer_change``: for each design, ``candidates`` random sequences over the designable
  positions (palette = ``restrict`` or every canonical type, minus ``prohibit``) are built with
  PDBFixer (``applyMutations``, missing atoms, hydrogens at pH 7), minimized, and the one with
  the lowest ``energy + Σ composition penalties`` is kept (a sampled FastDesign, not a packer);
- ``backbone_change``: Metropolis over Gaussian displacements (σ = ``angle_max``/60 Å) of the
  selected residues' atoms, each trial minimized, at kT = ``temperature`` · 2.494 kJ/mol;
- ``total_score``: the minimized potential energy in kJ/mol (amber14 + OBC2 implicit solvent,
  no cutoff). It is an absolute energy, so it mostly measures composition (poly-Glu scores far
  below poly-Leu); with ``reference`` (per-type reference energies, ``fit_reference``, in the
  spirit of ref2015's reference terms) ``score`` also reports ``design_score`` = total_score -
  Σ_i ref[type_i], which compares different sequences; use it as the task's objective.
- ``backbone_change``'s ``nmoves`` Metropolis trials are run exactly; each is a minimization,
  so ``nmoves`` above ``max_trials`` is refused with an error (it used to be capped silently).

Non-canonical residues: amber14 has templates for the canonical residues (and protonation
states, caps) only, so a non-canonical type in a palette is refused with a message (see
``ncaa.canonical_parent`` for the D-enantiomers, whose graph matches an L template).
"""

from __future__ import annotations

import io
import random
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import openmm
from openmm import app, unit
from pdbfixer import PDBFixer

from .actions import CANONICAL, BackboneChange, RotamerChange, resolve_selector
from .metrics import Design, fit_reference_energies, reference_corrected
from .rosetta_backend import layers_from_ca, read_pdb

KT_KJ = 2.494  # kT at 300 K, kJ/mol

# ideal backbone geometry (Engh & Huber): bond lengths Å, angles degrees
_B = {"N-CA": 1.458, "CA-C": 1.525, "C-N": 1.329, "C-O": 1.231}
_A = {"N-CA-C": 111.2, "CA-C-N": 116.2, "C-N-CA": 121.7, "CA-C-O": 120.5}


def _place(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, bond: float, angle: float, torsion: float
) -> np.ndarray:
    """NeRF: the point d with |cd| = bond, angle(b, c, d) = angle, dihedral(a, b, c, d) = torsion."""
    ang, tor = np.deg2rad(angle), np.deg2rad(torsion)
    bc = (c - b) / np.linalg.norm(c - b)
    n = np.cross(b - a, bc)
    n /= np.linalg.norm(n)
    m = np.stack([bc, np.cross(n, bc), n], axis=1)  # (3, 3)
    d2 = bond * np.array([-np.cos(ang), np.sin(ang) * np.cos(tor), np.sin(ang) * np.sin(tor)])
    return c + m @ d2


def helix_backbone_pdb(sequence: Sequence[str], phi: float = -57.0, psi: float = -47.0) -> str:
    """PDB text of an ideal α-helix backbone (N, CA, C, O) for ``sequence`` (three-letter)."""
    n = len(sequence)
    if n < 2:
        raise ValueError(f"sequence needs at least 2 residues, got {n}")
    bad = [s for s in sequence if s not in CANONICAL]
    if bad:
        raise ValueError(f"sequence: OpenMM can build canonical residues only, got {bad}")
    t = np.deg2rad(_A["N-CA-C"])
    # first N, CA at the origin, C at the ideal N-CA-C angle; then NeRF along the chain
    bb = [
        np.array([0.0, _B["N-CA"], 0.0]),
        np.zeros(3),
        _B["CA-C"] * np.array([np.sin(t), np.cos(t), 0.0]),
    ]
    for _ in range(1, n):
        bb.append(_place(bb[-3], bb[-2], bb[-1], _B["C-N"], _A["CA-C-N"], psi))  # N
        bb.append(_place(bb[-3], bb[-2], bb[-1], _B["N-CA"], _A["C-N-CA"], 180.0))  # CA (ω)
        bb.append(_place(bb[-3], bb[-2], bb[-1], _B["CA-C"], _A["N-CA-C"], phi))  # C
    lines = []
    k = 1
    for i in range(n):
        n_i, ca, c = bb[3 * i : 3 * i + 3]
        if i + 1 < n:  # O in the peptide plane, trans to the next N
            o = _place(bb[3 * i + 3], ca, c, _B["C-O"], _A["CA-C-O"], 0.0)
        else:
            o = _place(n_i, ca, c, _B["C-O"], _A["CA-C-O"], psi + 180.0)
        for name, xyz, el in (("N", n_i, "N"), ("CA", ca, "C"), ("C", c, "C"), ("O", o, "O")):
            lines.append(
                f"ATOM  {k:5d}  {name:<3s} {sequence[i]:>3s} A{i + 1:4d}    "
                f"{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}  1.00  0.00          {el:>2s}"
            )
            k += 1
    return "\n".join([*lines, "TER", "END"]) + "\n"


class OpenMMBackend:
    """OpenMM + PDBFixer behind the ``Backend`` protocol (CPU, one thread by default)."""

    name = "openmm"

    def __init__(
        self,
        *,
        forcefield: Sequence[str] = ("amber14-all.xml", "implicit/obc2.xml"),
        max_iterations: int = 200,
        candidates: int = 2,
        max_trials: int = 4,
        threads: int = 1,
        platform: str = "CPU",
        reference: Mapping[str, float] | None = None,
    ) -> None:
        if max_iterations < 1 or candidates < 1 or max_trials < 1 or threads < 1:
            raise ValueError("max_iterations, candidates, max_trials and threads must be >= 1")
        self.ff = app.ForceField(*forcefield)
        self.max_iterations, self.candidates, self.max_trials = (
            max_iterations,
            candidates,
            max_trials,
        )
        self.platform = openmm.Platform.getPlatformByName(platform)
        self.properties = {"Threads": str(threads)} if platform == "CPU" else {}
        self._reference = openmm.Platform.getPlatformByName("Reference")
        self.reference = dict(reference) if reference is not None else None

    # --- structures -----------------------------------------------------------------------
    def complete(self, pdb: str, mutations: Sequence[str] = ()) -> tuple[app.Topology, list]:
        """PDBFixer: apply ``mutations`` ("ALA-3-LEU"), add missing heavy atoms and hydrogens.

        Deterministic: PDBFixer and OpenMM's ``Modeller.addHydrogens`` draw start positions from
        Python's global ``random`` and minimize on the default platform (all cores), so both
        run here under a seed derived from the input (the caller's ``random`` state is
        restored) on the Reference platform.
        """
        saved = random.getstate()
        random.seed(zlib.crc32((pdb + "|".join(mutations)).encode()))
        try:
            fixer = PDBFixer(pdbfile=io.StringIO(pdb), platform=self._reference)
            if mutations:
                fixer.applyMutations(list(mutations), "A")
            fixer.findMissingResidues()
            fixer.missingResidues = {}
            fixer.findMissingAtoms()
            fixer.addMissingAtoms(seed=0)
            fixer.addMissingHydrogens(7.0)
        finally:
            random.setstate(saved)
        return fixer.topology, fixer.positions

    def _context(self, topology: app.Topology) -> openmm.Context:
        system = self.ff.createSystem(topology, nonbondedMethod=app.NoCutoff, constraints=None)
        integrator = openmm.VerletIntegrator(0.001)
        return openmm.Context(system, integrator, self.platform, self.properties)

    def energy(self, topology: app.Topology, positions) -> float:  # type: ignore[no-untyped-def]
        """Potential energy in kJ/mol."""
        ctx = self._context(topology)
        ctx.setPositions(positions)
        return float(
            ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
        )

    def minimize(self, topology: app.Topology, positions) -> tuple[np.ndarray, float]:  # type: ignore[no-untyped-def]
        """L-BFGS minimization; (positions (N, 3) nm, energy kJ/mol)."""
        ctx = self._context(topology)
        ctx.setPositions(positions)
        openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, self.max_iterations)
        st = ctx.getState(getEnergy=True, getPositions=True)
        pos = np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
        return pos, float(st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole))

    def to_design(self, topology: app.Topology, pos_nm: np.ndarray, energy: float) -> Design:
        buf = io.StringIO()
        app.PDBFile.writeFile(topology, pos_nm * unit.nanometer, buf, keepIds=True)
        seq, ca = read_pdb(buf.getvalue())
        return Design(seq, ca, {"total_score": energy}, payload=buf.getvalue())

    def prepare(self, sequence: Sequence[str]) -> Design:
        """An ideal helix of ``sequence``, completed and minimized: a start design."""
        top, pos = self.complete(helix_backbone_pdb(sequence))
        p, e = self.minimize(top, pos)
        return self.to_design(top, p, e)

    # --- Backend protocol ---------------------------------------------------------------------
    def layers(self, design: Design) -> list[str]:
        return layers_from_ca(design.ca)

    def score(self, design: Design) -> dict[str, float]:
        top, pos = self.complete(str(design.payload))
        out = {"total_score": self.energy(top, pos)}
        if self.reference is not None:
            out["design_score"] = reference_corrected(
                design.sequence, out["total_score"], self.reference
            )
        return out

    def fit_reference(
        self, sequences: Sequence[Sequence[str]], types: Sequence[str] = tuple(CANONICAL)
    ) -> dict[str, float]:
        """Fit per-type reference energies on ideal helices of ``sequences`` (prepared and
        minimized here) and use them from now on (``design_score``); returns them."""
        designs = [self.prepare(list(s)) for s in sequences]
        energies = [self.energy(*self.complete(str(d.payload))) for d in designs]
        self.reference = fit_reference_energies(sequences, energies, types)
        return self.reference

    def run(
        self,
        action: RotamerChange | BackboneChange,
        protocol: str,
        parents: Sequence[Design],
        nstruct: int,
        seed: int,
        palette: Sequence[str] = tuple(CANONICAL),
    ) -> list[Design]:
        rng = np.random.default_rng(seed)
        out = []
        for i in range(nstruct):
            parent = parents[i % len(parents)]
            if not isinstance(parent.payload, str):
                raise ValueError("OpenMMBackend needs designs whose payload is PDB text")
            if isinstance(action, RotamerChange):
                out.append(self._design(action, parent, rng, palette))
            else:
                out.append(self._move(action, parent, rng))
        return out

    def _design(
        self, a: RotamerChange, parent: Design, rng: np.random.Generator, palette: Sequence[str]
    ) -> Design:
        pos = np.flatnonzero(
            resolve_selector(a.design_selector, parent.sequence, self.layers(parent))
        )
        allowed = (
            set(a.restrict) if a.restrict is not None else set(palette) & set(CANONICAL)
        ) - set(a.prohibit)
        ncaa = sorted(allowed - set(CANONICAL))
        if ncaa:
            raise ValueError(
                f"OpenMM (amber14) cannot parametrize the non-canonical type(s) {ncaa}; "
                "use the Rosetta backend with their params files, or canonical types"
            )
        choices = sorted(allowed)
        best: tuple[float, Design] | None = None
        for _ in range(self.candidates):
            seq = list(parent.sequence)
            for j in pos:
                seq[j] = choices[int(rng.integers(len(choices)))]
            muts = [
                f"{parent.sequence[j]}-{j + 1}-{seq[j]}"
                for j in pos
                if seq[j] != parent.sequence[j]
            ]
            top, p0 = self.complete(str(parent.payload), muts)
            p, e = self.minimize(top, p0)
            pen = sum(
                c.weight
                * abs(
                    sum(seq[j] in c.types for j in pos)
                    - (c.target * len(pos) if c.fraction else c.target)
                )
                for c in a.composition_penalties
            )
            if best is None or e + pen < best[0]:
                best = (e + pen, self.to_design(top, p, e))
        assert best is not None
        return best[1]

    def _move(self, a: BackboneChange, parent: Design, rng: np.random.Generator) -> Design:
        top, p0 = self.complete(str(parent.payload))
        pos, e = self.minimize(top, p0)
        mask = resolve_selector(a.selector, parent.sequence, self.layers(parent))
        atoms = np.array([mask[at.residue.index] for at in top.atoms()])
        sigma = a.angle_max / 60.0 / 10.0  # Å -> nm
        kt = a.temperature * KT_KJ
        if a.nmoves > self.max_trials:
            raise ValueError(
                f"nmoves={a.nmoves} exceeds this backend's max_trials={self.max_trials} "
                "(each Metropolis trial is a minimization); lower nmoves or build "
                "OpenMMBackend(max_trials=...)"
            )
        for _ in range(a.nmoves):
            trial = pos.copy()
            trial[atoms] += rng.normal(0.0, sigma, size=(int(atoms.sum()), 3))
            tp, te = self.minimize(top, trial)
            if te <= e or rng.random() < np.exp(-(te - e) / kt):
                pos, e = tp, te
        return self.to_design(top, pos, e)
