"""The Rosetta backends: helpers here, the real binary only where ROSETTA_SCRIPTS is set."""

import os

import numpy as np
import pytest
from icml26_agent_rosetta import (
    IndexSelector,
    RosettaEnv,
    RosettaScriptsBackend,
    RotamerChange,
    Task,
    compile_protocol,
)
from icml26_agent_rosetta.rosetta_backend import (
    layers_from_ca,
    pdb_design,
    read_pdb,
    read_scorefile,
)

PDB = """\
ATOM      1  N   ALA A   1      -0.677  -1.230  -0.491  1.00  0.00           N
ATOM      2  CA  ALA A   1       0.000   0.000   0.000  1.00  0.00           C
ATOM      3  C   ALA A   1       1.500   0.000   0.000  1.00  0.00           C
ATOM      4  N   GLY A   2       2.100   1.100   0.000  1.00  0.00           N
ATOM      5  CA  GLY A   2       3.550   1.200   0.000  1.00  0.00           C
MODEL        2
"""

SCORES = """\
SEQUENCE:
SCORE: total_score aa_composition fa_rep description
SCORE:    -120.5          1.000  12.25 parent0_0001
SCORE:     -98.0          0.000   9.00 parent0_0002
"""


def test_read_pdb_and_scorefile():
    seq, ca = read_pdb(PDB)
    assert seq == ("ALA", "GLY") and ca[1] == pytest.approx([3.55, 1.2, 0.0])
    s = read_scorefile(SCORES)
    assert s["parent0_0001"] == {"total_score": -120.5, "aa_composition": 1.0, "fa_rep": 12.25}
    assert s["parent0_0002"]["total_score"] == -98.0
    with pytest.raises(ValueError, match="no CA"):
        read_pdb("HEADER nothing\n")


def test_layers_from_neighbour_counts():
    # a 5x5x5 grid of CAs 3.8 Å apart: the centre has 80 neighbours within 10 Å (core);
    # a straight chain of 8 CAs: at most 4 neighbours each (surface)
    g = np.stack(np.meshgrid(*[np.arange(5) * 3.8] * 3, indexing="ij"), -1).reshape(-1, 3)
    assert layers_from_ca(g)[62] == "core"
    line = np.stack([np.arange(8) * 3.8, np.zeros(8), np.zeros(8)], 1)
    assert set(layers_from_ca(line)) == {"surface"}
    assert layers_from_ca(g, core=81)[62] == "boundary"


def test_missing_binary_is_named():
    with pytest.raises(FileNotFoundError, match="exec_path"):
        RosettaScriptsBackend(exec_path="/nonexistent/rosetta_scripts")


@pytest.mark.rosetta
@pytest.mark.skipif(
    not os.environ.get("ROSETTA_SCRIPTS"), reason="set ROSETTA_SCRIPTS to a rosetta_scripts binary"
)
def test_rosetta_scripts_runs_a_compiled_protocol(tmp_path):  # pragma: no cover - needs Rosetta
    from icml26_agent_rosetta.openmm_backend import helix_backbone_pdb

    backend = RosettaScriptsBackend()
    start = pdb_design(helix_backbone_pdb(["ALA"] * 8))
    a = RotamerChange(design_selector=IndexSelector(resnums="2-7"), restrict=["LEU", "ALA"])
    out = backend.run(a, compile_protocol(a), [start], nstruct=2, seed=0)
    assert len(out) == 2 and all(np.isfinite(d.metrics["total_score"]) for d in out)
    env = RosettaEnv(
        Task("h", "d", start, {"total_score": "min", "rmsd_to_init": "min"}, nstruct=2), backend
    )
    env.step('<action tag="choose"><name>rotamer_change</name></action>')
    *_, info = env.step(
        '<action tag="run"><name>rotamer_change</name><design_selector>{"type":"index","resnums":"2-7"}</design_selector></action>'
    )
    assert info["valid"] is True
