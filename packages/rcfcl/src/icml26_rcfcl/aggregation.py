"""Drift-aware aggregation (RC-FCL, global calibration).

    alpha_k = n_k exp(-beta m_k) / sum_j n_j exp(-beta m_j),   theta = sum_k alpha_k theta_k

[recon] the abstract says only "a global aggregation strategy based on drift magnitude"; the
exponential down-weighting is our reconstruction. With every m_k = 0 (or beta = 0) this is
FedAvg's n_k / n weighting exactly, and it is invariant to the order of the clients.

Bad client updates (a magnitude outside [0, 1] or NaN, non-finite or mis-shaped parameters, n_k <= 0) are
rejected by ``validate_update`` with an error naming the client; ``robust_drift_average``
drops them and aggregates the rest, so one bad client does not lose the round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Params = list[np.ndarray]


def aggregation_weights(
    n: Sequence[float], magnitudes: Sequence[float] | None = None, beta: float = 0.0
) -> np.ndarray:
    """alpha_k proportional to n_k exp(-beta m_k), summing to 1. (K,) -> (K,)."""
    n_arr = np.asarray(n, dtype=np.float64)
    if n_arr.ndim != 1 or n_arr.size == 0:
        raise ValueError(f"n: expected a non-empty 1-d sequence of sample counts; got {n!r}")
    if not np.all(np.isfinite(n_arr)) or np.any(n_arr <= 0):
        bad = int(np.flatnonzero(~np.isfinite(n_arr) | (n_arr <= 0))[0])
        raise ValueError(f"n: client {bad} has sample count {n_arr[bad]}; expected > 0")
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta: expected a finite number >= 0; got {beta}")
    m = np.zeros_like(n_arr) if magnitudes is None else np.asarray(magnitudes, np.float64)
    if m.shape != n_arr.shape:
        raise ValueError(f"magnitudes: expected {n_arr.size} values (one per client); got {m.size}")
    if not np.all(np.isfinite(m)) or np.any((m < 0) | (m > 1)):
        bad = int(np.flatnonzero(~np.isfinite(m) | (m < 0) | (m > 1))[0])
        raise ValueError(
            f"magnitudes: client {bad} has drift magnitude {m[bad]}; expected in [0, 1]"
        )
    logw = np.log(n_arr) - beta * m
    w = np.exp(logw - logw.max())  # stable for large beta * m
    return w / w.sum()


def validate_update(params: Params, reference: Params, *, client: object = "?") -> None:
    """Raise ValueError naming ``client`` unless ``params`` match ``reference`` in count/shape
    and are finite."""
    if len(params) != len(reference):
        raise ValueError(
            f"client {client}: sent {len(params)} parameter arrays; the model has {len(reference)}"
        )
    for i, (p, r) in enumerate(zip(params, reference)):
        if np.shape(p) != np.shape(r):
            raise ValueError(
                f"client {client}: parameter {i} has shape {np.shape(p)}; expected {np.shape(r)}"
            )
        if not np.all(np.isfinite(p)):
            raise ValueError(f"client {client}: parameter {i} contains NaN or inf")


def drift_weighted_average(
    updates: Sequence[Params],
    n: Sequence[float],
    magnitudes: Sequence[float] | None = None,
    beta: float = 0.0,
) -> Params:
    """theta = sum_k alpha_k theta_k with alpha from ``aggregation_weights`` (float64 sum)."""
    if len(updates) == 0:
        raise ValueError("updates: no client updates to aggregate")
    if len(updates) != len(n):
        raise ValueError(f"n: expected {len(updates)} sample counts (one per update); got {len(n)}")
    for k, u in enumerate(updates):
        validate_update(u, updates[0], client=k)
    alpha = aggregation_weights(n, magnitudes, beta)  # (K,)
    out = []
    for i in range(len(updates[0])):
        stacked = np.stack([np.asarray(u[i], dtype=np.float64) for u in updates])  # (K, *shape)
        avg = np.tensordot(alpha, stacked, axes=1)
        out.append(avg.astype(np.asarray(updates[0][i]).dtype))
    return out


@dataclass
class RoundResult:
    params: Params
    accepted: list[object]  # client ids aggregated
    rejected: dict[object, str]  # client id -> reason


def robust_drift_average(
    updates: Mapping[Any, tuple[Params, float, float]],
    reference: Params,
    beta: float = 0.0,
) -> RoundResult:
    """Aggregate ``{client: (params, n_k, m_k)}``, dropping (not crashing on) bad clients.

    Each update is checked against ``reference`` (the global model sent this round) and its
    n_k, m_k; rejected clients and the reason are returned, the others are averaged. With no
    valid update the global model is kept unchanged.
    """
    good: list[tuple[object, Params, float, float]] = []
    rejected: dict[object, str] = {}
    for cid in sorted(updates, key=str):  # a fixed order: results do not depend on arrival
        params, n_k, m_k = updates[cid]
        try:
            validate_update(params, reference, client=cid)
            aggregation_weights([n_k], [m_k], beta)  # checks n_k > 0, m_k in [0, 1]
        except ValueError as exc:
            rejected[cid] = str(exc)
            continue
        good.append((cid, params, n_k, m_k))
    if not good:
        return RoundResult([np.array(r, copy=True) for r in reference], [], rejected)
    params = drift_weighted_average(
        [g[1] for g in good], [g[2] for g in good], [g[3] for g in good], beta
    )
    return RoundResult(params, [g[0] for g in good], rejected)
