"""The paper's two Rosetta tasks as code, on any backend (HP lattice here; Rosetta where installed).

- ``pack_ncaa_task``: place exactly one non-canonical residue (the paper: TRF in 6V67) in the
  core. Official metrics and Pareto fields: ``ncaa_core_success`` (1 when exactly one NCAA
  residue sits in a core position, max), ``total_score``, ``cav_vol`` (Rosetta's
  ``CavityVolume`` filter), ``rg`` (radius of gyration), ``rmsd_to_init`` (all min).
- ``fixed_backbone_task``: design a sequence for a fixed backbone; official Pareto fields:
  ``esmfold_ca_plddt`` (max), ``esmfold_rmsd_to_init`` (the predicted structure against the
  start, min), ``total_score`` (min). The structure predictor is pluggable: ``scorer(design)``
  returns ``confidence`` and ``pred_rmsd_to_init`` (ESMFold's pLDDT/100 and RMSD with Rosetta;
  the default on the HP lattice is exact: the Boltzmann probability of the target fold among
  every self-avoiding walk, and the RMSD of the sequence's ground state to it).

Reconstructions, named: ``cavity_volume`` is a grid proxy (empty grid points enclosed by the
chain along every axis direction), not Rosetta's ``CavityVolume``; the HP confidence is a
folding-specificity proxy, not pLDDT.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .env import Task
from .hp import HYDROPHOBIC, contact_matrix, hp_optimum, lattice_design
from .hp import self_avoiding_walks as _walks
from .metrics import Design, kabsch_rmsd


def radius_of_gyration(ca: np.ndarray) -> float:
    """Rg = sqrt(1/n Σ_i |x_i - x̄|²) over CA positions (n, 3)."""
    x = np.asarray(ca, dtype=float)
    if x.ndim != 2 or x.shape[1] != 3 or not len(x):
        raise ValueError(f"ca must be (n, 3) with n >= 1, got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("ca has non-finite coordinates")
    return float(np.sqrt(((x - x.mean(0)) ** 2).sum(1).mean()))


def cavity_volume(
    ca: np.ndarray, spacing: float = 1.0, r_empty: float = 0.5, r_perp: float = 0.5
) -> float:
    """Grid proxy of the cavity volume (a reconstruction, not Rosetta's ``CavityVolume``).

    Grid points (spacing h) in the chain's bounding box that are empty (farther than
    ``r_empty`` from every CA) and enclosed: along each axis direction ±e_d of the extended
    dimensions some CA lies ahead within ``r_perp`` of the ray. Returns count · h^D. On the
    HP lattice (h = 1) it counts the empty sites the chain surrounds.
    """
    x = np.asarray(ca, dtype=float)  # (n, 3)
    if x.ndim != 2 or x.shape[1] != 3 or not np.isfinite(x).all():
        raise ValueError("ca must be a finite (n, 3) array")
    if spacing <= 0:
        raise ValueError(f"spacing must be > 0, got {spacing}")
    lo, hi = x.min(0), x.max(0)
    dims = [d for d in range(3) if hi[d] - lo[d] > 1e-9]
    if not dims:
        return 0.0
    axes = [
        np.arange(lo[d], hi[d] + spacing / 2, spacing) if d in dims else np.array([lo[d]])
        for d in range(3)
    ]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)  # (G, 3)
    diff = x[None, :, :] - grid[:, None, :]  # (G, n, 3)
    empty = (np.linalg.norm(diff, axis=-1) > r_empty).all(1)  # (G,)
    enclosed = np.ones(len(grid), dtype=bool)
    for d in dims:
        perp = np.linalg.norm(np.delete(diff, d, axis=-1), axis=-1)  # (G, n)
        on_ray = perp <= r_perp
        enclosed &= (on_ray & (diff[..., d] > 0)).any(1) & (on_ray & (diff[..., d] < 0)).any(1)
    return float((empty & enclosed).sum() * spacing ** len(dims))


def ncaa_core_metrics(design: Design, layers: list[str], ncaa: str) -> dict[str, float]:
    """The official NCAA inclusion metrics: counts, and success = exactly one in the core."""
    at = [i for i, s in enumerate(design.sequence) if s == ncaa]
    core = [i for i in at if layers[i] == "core"]
    success = float(len(core) == 1)
    return {
        "ncaa_count": float(len(at)),
        "ncaa_core_count": float(len(core)),
        "ncaa_core_success": success,
        "ncaa_core_miss": 1.0 - success,  # for Task.constraints (metric <= 0)
    }


def _hp_start(n: int, n_h: int) -> Design:
    """The HP ground state of (n, n_h): a compact fold with its optimal H pattern (LEU/SER)."""
    _, h, xy = hp_optimum(n, n_h)
    return lattice_design(["LEU" if b else "SER" for b in h], xy)


def pack_ncaa_task(
    backend: Any,
    start: Design | None = None,
    ncaa: str = "TRF",
    *,
    n: int = 10,
    n_h: int = 5,
    nstruct: int = 16,
    max_steps: int = 20,
) -> Task:
    """Pack exactly one ``ncaa`` residue into the core (the paper's 6V67 + TRF task).

    ``start``: the structure to redesign (default on the HP lattice: the ground state of
    ``hp_optimum(n, n_h)`` written with LEU/SER); ``backend``: anything with ``layers`` (the
    core selection: Rosetta's ``Layer`` selector, or CA-neighbour counts). Feasible means
    ``ncaa_core_success`` = 1; the headline is ``total_score`` among feasible designs.
    """
    if not hasattr(backend, "layers"):
        raise TypeError("backend must provide layers(design) (the core selection)")
    start = _hp_start(n, n_h) if start is None else start

    def metrics(d: Design) -> dict[str, float]:
        out = ncaa_core_metrics(d, backend.layers(d), ncaa)
        out["rg"] = radius_of_gyration(d.ca)
        out["cav_vol"] = cavity_volume(d.ca)
        return out

    return Task(
        name=f"pack_ncaa_{ncaa}",
        description=(
            f"redesign the protein so that exactly one {ncaa} residue sits in the core, keeping "
            "the energy low, the structure compact (radius of gyration), without cavities and "
            "close to the start"
        ),
        start=start,
        objectives={
            "ncaa_core_success": "max",
            "total_score": "min",
            "cav_vol": "min",
            "rg": "min",
            "rmsd_to_init": "min",
        },
        primary="total_score",
        constraints={"ncaa_core_miss": 0.0},
        ncaa=(ncaa,),
        extra_metrics=metrics,
        nstruct=nstruct,
        max_steps=max_steps,
    )


def hp_fold_confidence(
    target: Design, kt: float = 0.5, hydrophobic: frozenset[str] = HYDROPHOBIC
) -> Callable[[Design], dict[str, float]]:
    """The HP lattice's exact structure-confidence scorer for a fixed backbone ``target``.

    For a design's sequence s, every self-avoiding walk w (up to symmetry) has energy E(s, w);
    ``confidence`` = exp(-E(s, target)/kT) / Σ_w exp(-E(s, w)/kT) (how specifically s folds
    into the target, the role of pLDDT) and ``pred_rmsd_to_init`` = RMSD of s's ground state
    (first minimum) to the target (the role of the predicted structure's RMSD).
    """
    if kt <= 0:
        raise ValueError(f"kt must be > 0, got {kt}")
    xy_t = np.asarray(target.payload)
    n = len(xy_t)
    walks = _walks(n)  # (W, n, 2)
    d = np.abs(walks[:, :, None, :] - walks[:, None, :, :]).sum(-1)  # (W, n, n)
    far = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) > 1
    contacts = ((d == 1) & far).astype(float)  # (W, n, n)
    c_t = contact_matrix(xy_t).astype(float)  # (n, n)
    ca_t = np.asarray(target.ca)

    def score(design: Design) -> dict[str, float]:
        h = np.array([s in hydrophobic for s in design.sequence], dtype=float)  # (n,)
        e = -np.einsum("i,wij,j->w", h, contacts, h) / 2  # (W,)
        e_t = -float(h @ c_t @ h) / 2
        z = np.exp(-(e - e.min()) / kt).sum()
        conf = float(np.exp(-(e_t - e.min()) / kt) / z)
        g = walks[int(np.argmin(e))]
        ca_g = np.concatenate([g, np.zeros((n, 1))], 1).astype(float)
        return {"confidence": min(conf, 1.0), "pred_rmsd_to_init": kabsch_rmsd(ca_g, ca_t)}

    return score


def fixed_backbone_task(
    start: Design | None = None,
    scorer: Callable[[Design], Mapping[str, float]] | None = None,
    *,
    n: int = 10,
    n_h: int = 5,
    nstruct: int = 16,
    max_steps: int = 20,
) -> Task:
    """Design a sequence that folds into the fixed backbone of ``start`` (the paper's
    fixed-backbone sequence design, scored by ESMFold there).

    ``scorer(design)`` must return ``confidence`` (max) and ``pred_rmsd_to_init`` (min); the
    default, on the HP lattice, is ``hp_fold_confidence(start)``. Objectives: confidence,
    pred_rmsd_to_init, total_score. The start is the HP ground state written all polar (SER),
    so its confidence is low and design has headroom.
    """
    if start is None:
        folded = _hp_start(n, n_h)
        start = lattice_design(["SER"] * n, np.asarray(folded.payload))
    scorer = hp_fold_confidence(start) if scorer is None else scorer

    def metrics(d: Design) -> dict[str, float]:
        out = dict(scorer(d))
        missing = {"confidence", "pred_rmsd_to_init"} - set(out)
        if missing:
            raise ValueError(
                f"scorer must return confidence and pred_rmsd_to_init; missing {missing}"
            )
        return out

    return Task(
        name="fixed_backbone",
        description=(
            "design a sequence for this fixed backbone: high structure-prediction confidence, "
            "predicted structure close to the backbone, low energy"
        ),
        start=start,
        objectives={"confidence": "max", "pred_rmsd_to_init": "min", "total_score": "min"},
        primary="confidence",
        extra_metrics=metrics,
        nstruct=nstruct,
        max_steps=max_steps,
    )


__all__ = [
    "cavity_volume",
    "fixed_backbone_task",
    "hp_fold_confidence",
    "ncaa_core_metrics",
    "pack_ncaa_task",
    "radius_of_gyration",
]
