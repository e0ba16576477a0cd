"""The open physics backend (OpenMM + PDBFixer) and non-canonical residues from biotite's CCD."""

import numpy as np
import pytest
from icml26_agent_rosetta import (
    IndexSelector,
    RosettaEnv,
    RotamerChange,
    Task,
    ideal_helix_ca,
    kabsch_rmsd,
)

pytest.importorskip("openmm")


def test_helix_builder_matches_the_closed_form_helix():
    from icml26_agent_rosetta.openmm_backend import helix_backbone_pdb
    from icml26_agent_rosetta.rosetta_backend import read_pdb

    seq, ca = read_pdb(helix_backbone_pdb(["ALA"] * 12))
    assert seq == ("ALA",) * 12
    # NeRF from ideal bond geometry and φ/ψ = -57/-47 vs 1.5 Å rise, 100°/residue, radius 2.3 Å
    assert kabsch_rmsd(ca, ideal_helix_ca(12)) < 0.3
    assert np.linalg.norm(np.diff(ca, axis=0), axis=1) == pytest.approx(np.full(11, 3.80), abs=0.02)


def test_minimization_lowers_the_energy_of_a_perturbed_helix(openmm_backend):
    from icml26_agent_rosetta.openmm_backend import helix_backbone_pdb

    b = openmm_backend
    top, pos = b.complete(helix_backbone_pdb(["ALA", "LEU", "GLU", "LYS", "ALA", "LEU"]))
    p0, e0 = b.minimize(top, pos)
    rng = np.random.default_rng(0)
    perturbed = p0 + rng.normal(scale=0.02, size=p0.shape)  # 0.2 Å noise, in nm
    e_pert = b.energy(top, perturbed)
    _, e1 = b.minimize(top, perturbed)
    assert e_pert > e0 + 50  # the perturbation costs energy...
    assert e1 < e_pert - 50  # ...and minimization gets it back
    assert np.isfinite(e1)


def test_backend_is_deterministic(openmm_backend):
    a = openmm_backend.prepare(["ALA", "LYS", "LEU", "GLU"])
    b = openmm_backend.prepare(["ALA", "LYS", "LEU", "GLU"])
    assert a.metrics == b.metrics and a.payload == b.payload


def test_rotamer_change_mutates_only_designable_positions(openmm_backend):
    b = openmm_backend
    start = b.prepare(["ALA"] * 6)
    a = RotamerChange(design_selector=IndexSelector(resnums="2-3"), restrict=["LEU", "TRP"])
    (d,) = b.run(a, "", [start], nstruct=1, seed=0)
    assert d.sequence[0] == "ALA" and d.sequence[3:] == ("ALA",) * 3
    assert set(d.sequence[1:3]) <= {"LEU", "TRP"}
    n_atoms = sum(line.startswith("ATOM") for line in d.payload.splitlines())
    internal = {"ALA": 10, "LEU": 19, "TRP": 24}  # atoms with hydrogens of a chain residue
    assert n_atoms == sum(internal[s] for s in d.sequence) + 3  # N-terminal H2, H3 and OXT
    env_task = Task("helix", "d", start, {"total_score": "min", "rmsd_to_init": "min"}, nstruct=1)
    env = RosettaEnv(env_task, b)
    env.step('<action tag="choose"><name>rotamer_change</name></action>')
    obs, *_ = env.step(
        '<action tag="run"><name>rotamer_change</name><design_selector>{"type":"index","resnums":"1-2"}</design_selector><restrict>DAL</restrict></action>'
    )
    assert "unknown residue type(s) ['DAL']" in obs  # not in this task's palette


def test_openmm_refuses_non_canonical_types_with_a_message(openmm_backend):
    b = openmm_backend
    start = b.prepare(["ALA"] * 4)
    with pytest.raises(ValueError, match="cannot parametrize the non-canonical type"):
        b.run(
            RotamerChange(design_selector=IndexSelector(resnums="2"), restrict=["TRF", "ALA"]),
            "",
            [start],
            1,
            0,
        )


@pytest.mark.parametrize(
    ("code", "heavy", "hydrophobic", "parent"),
    [
        ("TRF", 17, False, None),  # N1-formyl-tryptophan, C12H12N2O3 (the paper's NCAA)
        ("MSE", 9, True, None),  # selenomethionine: Se in place of S
        ("AIB", 7, True, None),  # α-aminoisobutyric acid: two methyls on CA
        ("NLE", 9, True, None),  # norleucine, C6H13NO2
        ("DAL", 6, True, "ALA"),  # D-alanine: the same graph as L-alanine
    ],
)
def test_non_canonical_residues_from_the_ccd(code, heavy, hydrophobic, parent):
    pytest.importorskip("biotite")
    from icml26_agent_rosetta.ncaa import canonical_parent, resolve_residue

    info = resolve_residue(code)
    assert len(info.atoms) == heavy  # heavy atoms of the free amino acid (with OXT)
    assert info.hydrophobic is hydrophobic
    assert canonical_parent(code) == parent


def test_ccd_chemistry_facts():
    pytest.importorskip("biotite")
    from icml26_agent_rosetta.ncaa import classify_hydrophobic, resolve_residue

    assert "SE" in resolve_residue("MSE").atoms.values()
    assert {"CB1", "CB2"} <= set(resolve_residue("AIB").atoms)
    assert classify_hydrophobic(("LEU", "SER", "TRF", "NLE")) == {"LEU", "NLE"}
    # the CCD rule on canonical side chains: O or N makes it polar, S does not
    polar = {
        c: not resolve_residue(c).hydrophobic
        for c in ("SER", "THR", "TYR", "HIS", "MET", "CYS", "LEU", "GLY")
    }
    assert polar == {
        "SER": True,
        "THR": True,
        "TYR": True,
        "HIS": True,
        "MET": False,
        "CYS": False,
        "LEU": False,
        "GLY": True,
    }
    with pytest.raises(KeyError, match="not in the PDB Chemical Component Dictionary"):
        resolve_residue("Q_Q")


def test_nmoves_above_max_trials_is_refused_not_capped(openmm_backend):
    from icml26_agent_rosetta import BackboneChange

    start = openmm_backend.prepare(["ALA", "LEU", "GLU", "LYS"])
    move = BackboneChange(mover="small", selector=IndexSelector(resnums="2-3"), nmoves=5)
    with pytest.raises(ValueError, match="nmoves=5 exceeds this backend's max_trials=1"):
        openmm_backend.run(move, "", [start], 1, 0)


def test_design_score_is_the_reference_corrected_energy(openmm_backend):
    from icml26_agent_rosetta.openmm_backend import OpenMMBackend

    ref = {t: -10.0 * (i + 1) for i, t in enumerate(["ALA", "GLU", "LEU", "LYS"])}
    b = OpenMMBackend(max_iterations=50, candidates=1, max_trials=1, reference=ref)
    d = openmm_backend.prepare(["ALA", "LEU", "GLU", "LYS"])
    m = b.score(d)
    assert m["design_score"] == pytest.approx(m["total_score"] - (-10 - 30 - 20 - 40), abs=1e-9)
