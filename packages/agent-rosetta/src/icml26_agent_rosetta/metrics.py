"""Designs, Pareto fronts, Kabsch RMSD and ideal helices (numpy only).

The official reward computes per-design metrics, keeps the Pareto-optimal designs
(``paretoset``) and applies the next action to those only; RMSD is CA-only after optimal
superposition (``biotite.structure.superimpose``). Both are reimplemented here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Sense = Literal["min", "max"]


@dataclass(frozen=True)
class Design:
    """One design: its residue types, CA coordinates (n, 3), metrics and backend payload."""

    sequence: tuple[str, ...]
    ca: np.ndarray  # (n, 3) CA coordinates (Å, or lattice units for the HP backend)
    metrics: Mapping[str, float] = field(default_factory=dict)
    payload: object = None  # backend-specific: lattice coordinates, PDB text...

    def __post_init__(self) -> None:
        ca = np.asarray(self.ca, dtype=float)
        if ca.shape != (len(self.sequence), 3):
            raise ValueError(f"ca must have shape ({len(self.sequence)}, 3), got {ca.shape}")
        object.__setattr__(self, "ca", ca)


def pareto_front(values: np.ndarray, sense: Sequence[Sense]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``values`` (N, M).

    Row a dominates row b when a is no worse in every objective and strictly better in one
    (``sense[j]`` says whether objective j is minimised or maximised). Duplicates of a
    non-dominated row are all kept (``paretoset(..., distinct=False)``). O(N² M).
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ValueError(f"values must be (N, M), got shape {v.shape}")
    if len(sense) != v.shape[1] or any(s not in ("min", "max") for s in sense):
        raise ValueError(f"sense must be {v.shape[1]} of 'min'/'max', got {list(sense)}")
    if not np.isfinite(v).all():
        raise ValueError(
            "values must be finite (a failed design should be dropped, not scored NaN)"
        )
    v = v * np.array([1.0 if s == "min" else -1.0 for s in sense])  # all minimised
    le = (v[:, None, :] <= v[None, :, :]).all(-1)  # (N, N): a no worse than b everywhere
    lt = (v[:, None, :] < v[None, :, :]).any(-1)  # (N, N): a strictly better somewhere
    dominated = (le & lt).any(0)  # b is dominated by some a
    return ~dominated


def kabsch_rmsd(p: np.ndarray, q: np.ndarray) -> float:
    """RMSD between (n, 3) point sets after the optimal rotation and translation (Kabsch).

    min_R,t sqrt(1/n Σ_i |R p_i + t - q_i|²), R proper (det +1): SVD of the covariance of the
    centred sets with the reflection sign fixed.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 2 or p.shape[1] != 3 or len(p) == 0:
        raise ValueError(f"p and q must both be (n, 3) with n >= 1, got {p.shape} and {q.shape}")
    for name, x in (("p", p), ("q", q)):
        if not np.isfinite(x).all():
            raise ValueError(f"{name} has non-finite (NaN/inf) coordinates; cannot superpose")
    pc, qc = p - p.mean(0), q - q.mean(0)
    u, s, vt = np.linalg.svd(pc.T @ qc)  # (3, 3)
    d = np.sign(np.linalg.det(u @ vt)) or 1.0
    s[-1] *= d
    msd = ((pc**2).sum() + (qc**2).sum() - 2 * s.sum()) / len(p)
    return float(np.sqrt(max(msd, 0.0)))


def ideal_helix_ca(
    n: int, rise: float = 1.5, turn_deg: float = 100.0, radius: float = 2.3
) -> np.ndarray:
    """CA trace of an ideal α-helix (n, 3): 1.5 Å rise and 100° per residue, radius 2.3 Å."""
    t = np.deg2rad(turn_deg) * np.arange(n)
    return np.stack([radius * np.cos(t), radius * np.sin(t), rise * np.arange(n)], axis=1)


def fit_reference_energies(
    sequences: Sequence[Sequence[str]],
    energies: Sequence[float],
    types: Sequence[str],
    ridge: float = 1e-8,
) -> dict[str, float]:
    """Per-residue-type reference energies fitted on a reference set (ref2015's idea).

    Least squares over the reference designs k: E_k ≈ Σ_a n_{k,a} r_a, with n_{k,a} the count
    of type a in sequence k, i.e. r = argmin |N r - E|² + ridge |r|² (N: (K, A) counts). A
    design's energy minus Σ_a n_a r_a (``reference_corrected``) then compares designs of
    different sequences: what is left is how much better than its composition's expectation
    the design is. Types absent from the reference set get r = 0 (the ridge term).
    """
    if len(sequences) != len(energies) or not len(sequences):
        raise ValueError(
            f"sequences and energies must be non-empty and of equal length, "
            f"got {len(sequences)} and {len(energies)}"
        )
    e = np.asarray(energies, dtype=float)  # (K,)
    if not np.isfinite(e).all():
        raise ValueError("energies must be finite")
    index = {t: j for j, t in enumerate(types)}
    counts = np.zeros((len(sequences), len(types)))  # (K, A)
    for k, seq in enumerate(sequences):
        for s in seq:
            if s not in index:
                raise ValueError(f"sequences: residue type {s!r} is not in types")
            counts[k, index[s]] += 1
    lhs = counts.T @ counts + ridge * np.eye(len(types))  # (A, A)
    r = np.linalg.solve(lhs, counts.T @ e)  # (A,)
    return {t: float(r[j]) for t, j in index.items()}


def reference_corrected(sequence: Sequence[str], energy: float, ref: Mapping[str, float]) -> float:
    """``energy - Σ_i ref[sequence_i]``: an energy comparable across sequences."""
    missing = sorted({s for s in sequence if s not in ref})
    if missing:
        raise ValueError(f"ref has no reference energy for {missing}")
    return float(energy - sum(ref[s] for s in sequence))
