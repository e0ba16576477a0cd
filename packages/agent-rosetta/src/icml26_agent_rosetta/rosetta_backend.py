"""Backends that run real Rosetta: ``rosetta_scripts`` found by path, or PyRosetta.

Neither is on PyPI (Rosetta needs a licence; PyRosetta is downloaded from pyrosetta.org), so
both are exercised only by tests marked ``rosetta``, which skip when ``ROSETTA_SCRIPTS`` (the
path of a ``rosetta_scripts`` binary) is unset or PyRosetta is not importable. Designs carry
their PDB text as payload; metrics are read from Rosetta's score file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .actions import BackboneChange, RotamerChange
from .metrics import Design


def read_pdb(text: str) -> tuple[tuple[str, ...], np.ndarray]:
    """(residue names, CA coordinates (n, 3)) of the first model of a PDB text."""
    seq, ca = [], []
    for line in text.splitlines():
        if line.startswith("ENDMDL"):
            break
        if line.startswith(("ATOM", "HETATM")) and line[12:16].strip() == "CA":
            seq.append(line[17:20].strip())
            ca.append([float(line[30:38]), float(line[38:46]), float(line[46:54])])
    if not ca:
        raise ValueError("the PDB text has no CA atoms")
    return tuple(seq), np.array(ca)


def pdb_design(text: str) -> Design:
    """A design whose payload is its PDB text."""
    seq, ca = read_pdb(text)
    return Design(seq, ca, {}, payload=text)


def layers_from_ca(ca: np.ndarray, core: int = 16, surface: int = 10) -> list[str]:
    """Burial by CA neighbour count within 10 Å (an approximation of Rosetta's ``Layer``
    selector, which counts side-chain neighbours in a cone)."""
    d = np.linalg.norm(ca[:, None, :] - ca[None, :, :], axis=-1)
    k = (d < 10.0).sum(1) - 1
    return ["core" if c >= core else "surface" if c < surface else "boundary" for c in k]


def read_scorefile(text: str) -> dict[str, dict[str, float]]:
    """Rosetta ``score.sc``: description -> {column: value}."""
    header: list[str] = []
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.startswith("SCORE:"):
            continue
        cols = line.split()[1:]
        if cols and cols[0] == "total_score":
            header = cols
            continue
        row = dict(zip(header, cols))
        desc = row.pop("description", "")
        vals = {}
        for k, v in row.items():
            try:
                vals[k] = float(v)
            except ValueError:
                pass
        out[desc] = vals
    return out


@dataclass
class RosettaScriptsBackend:
    """``rosetta_scripts`` (or ``mpirun -np N rosetta_scripts.mpi...``) on the compiled protocol.

    ``exec_path``: the binary (default: ``$ROSETTA_SCRIPTS``); ``mpi``: a launcher prefix such
    as ``["mpirun", "-np", "8"]`` (the official runs use MPI for ``nstruct: 128``);
    ``extra_res``: params files of the task's non-canonical residues (``-extra_res_fa``).
    """

    exec_path: str | None = None
    mpi: Sequence[str] = ()
    extra_res: Sequence[str] = ()
    flags: Sequence[str] = ("-mute", "all")
    timeout: float = 3600.0  # the official environment's timeout
    name: str = "rosetta_scripts"
    _exe: str = field(init=False, default="")

    def __post_init__(self) -> None:
        exe = self.exec_path or os.environ.get("ROSETTA_SCRIPTS")
        if not exe or not (Path(exe).is_file() or shutil.which(exe)):
            raise FileNotFoundError(
                f"exec_path: no rosetta_scripts binary at {exe!r}; pass its path or set ROSETTA_SCRIPTS"
            )
        self._exe = exe
        for f in self.extra_res:
            if not Path(f).is_file():
                raise FileNotFoundError(f"extra_res: params file {f!r} does not exist")

    def layers(self, design: Design) -> list[str]:
        return layers_from_ca(design.ca)

    def score(self, design: Design) -> dict[str, float]:
        return dict(design.metrics) or {"total_score": float("nan")}

    def run(
        self,
        action: RotamerChange | BackboneChange,
        protocol: str,
        parents: Sequence[Design],
        nstruct: int,
        seed: int,
        palette: Sequence[str] = (),
    ) -> list[Design]:
        per = [nstruct // len(parents) + (i < nstruct % len(parents)) for i in range(len(parents))]
        out: list[Design] = []
        with tempfile.TemporaryDirectory(prefix="agent-rosetta-") as tmp:
            work = Path(tmp)
            (work / "protocol.xml").write_text(protocol)
            for i, (parent, k) in enumerate(zip(parents, per)):
                if k == 0:
                    continue
                if not isinstance(parent.payload, str):
                    raise ValueError(
                        "RosettaScriptsBackend needs designs whose payload is PDB text"
                    )
                inp = work / f"parent{i}.pdb"
                inp.write_text(parent.payload)
                outdir = work / f"out{i}"
                outdir.mkdir()
                cmd = [
                    *self.mpi,
                    self._exe,
                    "-s",
                    str(inp),
                    "-parser:protocol",
                    str(work / "protocol.xml"),
                ]
                cmd += [
                    "-nstruct",
                    str(k),
                    "-out:path:all",
                    str(outdir),
                    "-constant_seed",
                    "-jran",
                    str(seed % 2**31),
                ]
                if self.extra_res:
                    cmd += ["-extra_res_fa", *self.extra_res]
                cmd += list(self.flags)
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout)
                if res.returncode != 0:
                    tail = (res.stderr or res.stdout)[-2000:]
                    raise RuntimeError(f"rosetta_scripts exited with {res.returncode}:\n{tail}")
                scores = read_scorefile((outdir / "score.sc").read_text())
                for pdb in sorted(outdir.glob("*.pdb")):
                    d = pdb_design(pdb.read_text())
                    out.append(Design(d.sequence, d.ca, scores.get(pdb.stem, {}), d.payload))
        return out


class PyRosettaBackend:
    """The same protocols through PyRosetta's ``XmlObjects`` (when ``pyrosetta`` is importable)."""

    name = "pyrosetta"

    def __init__(self, init_flags: str = "-mute all", extra_res: Sequence[str] = ()) -> None:
        try:
            import pyrosetta  # type: ignore[import-not-found]
        except ImportError:
            raise ImportError(
                "PyRosettaBackend needs pyrosetta (pyrosetta.org; not on PyPI)"
            ) from None
        flags = init_flags + ("" if not extra_res else " -extra_res_fa " + " ".join(extra_res))
        pyrosetta.init(flags)
        self._pr = pyrosetta

    def layers(self, design: Design) -> list[str]:
        return layers_from_ca(design.ca)

    def score(self, design: Design) -> dict[str, float]:
        return dict(design.metrics)

    def run(self, action, protocol, parents, nstruct, seed, palette=()) -> list[Design]:  # type: ignore[no-untyped-def]
        pr = self._pr
        xml = pr.rosetta.protocols.rosetta_scripts.XmlObjects.create_from_string(protocol)
        mover = xml.get_mover("ParsedProtocol")
        sfxn = pr.create_score_function("ref2015")
        out = []
        for i in range(nstruct):
            pose = pr.pose_from_pdbstring(parents[i % len(parents)].payload)
            mover.apply(pose)
            buf = pr.rosetta.std.ostringstream()
            pose.dump_pdb(buf)
            d = pdb_design(buf.str())
            out.append(Design(d.sequence, d.ca, {"total_score": float(sfxn(pose))}, d.payload))
        return out
