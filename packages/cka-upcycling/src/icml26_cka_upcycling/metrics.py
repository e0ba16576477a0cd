"""Continual-learning metrics from the accuracy matrix.

R is (T, T) with R[i, j] the accuracy on task j after training on tasks 0..i (Lopez-Paz &
Ranzato 2017; Chaudhry et al. 2018). With T tasks:

    average accuracy   A_T  = (1/T) Σ_j R[T-1, j]                          ("OP" in TRACE)
    backward transfer  BWT  = 1/(T-1) Σ_{j<T-1} (R[T-1, j] - R[j, j])
    forgetting         F_T  = 1/(T-1) Σ_{j<T-1} max_{i ∈ [j, T-2]} (R[i, j] - R[T-1, j])
    forward transfer   FWT  = 1/(T-1) Σ_{j>0} (R[j-1, j] - b_j)             (needs b, the
                                                                            accuracy at init)
    average incremental accuracy  (1/T) Σ_i (1/(i+1)) Σ_{j<=i} R[i, j]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["cl_metrics"]


def cl_metrics(
    R: Sequence[Sequence[float]] | np.ndarray, baseline: Sequence[float] | None = None
) -> dict[str, float]:
    """Average accuracy, BWT, forgetting, average incremental accuracy (and FWT given ``baseline``).

    Args:
        R: (T, T) accuracy matrix, R[i, j] = accuracy on task j after learning task i; entries
            above the diagonal are only read by FWT.
        baseline: (T,) accuracy of the initial model on each task, b_j.
    """
    A = np.asarray(R, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"R must be a square (T, T) accuracy matrix; got shape {A.shape}")
    T = A.shape[0]
    lower = A[np.tril_indices(T)]
    if not np.all(np.isfinite(lower)):
        raise ValueError(
            "R must be finite on and below the diagonal (the entries the metrics read)"
        )
    out = {
        "average_accuracy": float(A[-1].mean()),
        "average_incremental_accuracy": float(np.mean([A[i, : i + 1].mean() for i in range(T)])),
        "bwt": 0.0,
        "forgetting": 0.0,
    }
    if T > 1:
        out["bwt"] = float(np.mean([A[-1, j] - A[j, j] for j in range(T - 1)]))
        out["forgetting"] = float(
            np.mean([(A[j : T - 1, j] - A[-1, j]).max() for j in range(T - 1)])
        )
    if baseline is not None:
        b = np.asarray(baseline, dtype=np.float64)
        if b.shape != (T,):
            raise ValueError(
                f"baseline must have shape ({T},) (one accuracy per task); got {b.shape}"
            )
        if T > 1:
            fwt = [A[j - 1, j] - b[j] for j in range(1, T)]
            if not np.all(np.isfinite(fwt)):
                raise ValueError(
                    "R[j-1, j] must be finite (evaluate each task before learning it) for FWT"
                )
            out["fwt"] = float(np.mean(fwt))
        else:
            out["fwt"] = 0.0
    return out
