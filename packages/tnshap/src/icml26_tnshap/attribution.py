"""Shapley values and interaction indices of a fitted surrogate, deterministically (Sec. 3.3).

The surrogate ``ν̂`` is multilinear, so it *is* its own multilinear extension, and for a set
``T`` (|T| = k) its mixed partial derivative on the diagonal is a polynomial in ``t``:

    ∂_T ν̂(t·1) = Σ_{S ⊇ T} m(S) t^{|S| − k},      m = Möbius transform of ν̂.

In the tensor network, ``∂_T ν̂(t·1)`` is one contraction with ``[−1, 1]`` at the nodes of ``T``
and ``[1 − t, t]`` everywhere else (a *probe*). The indices are integrals of it:

- Shapley value (Owen 1972):        φ_u   = ∫₀¹ ∂_u ν̂(t·1) dt
- SII (Grabisch–Roubens), any k:    I(T)  = ∫₀¹ ∂_T ν̂(t·1) dt          (degree n − k)
- STII (Shapley–Taylor), top k:     I(T)  = ∫₀¹ k (1 − t)^{k−1} ∂_T ν̂(t·1) dt   (degree n − 1)
- BII (Banzhaf), any k:             I(T)  = ∂_T ν̂(½·1)

Integrands are polynomials, so Gauss–Legendre with ``⌈(deg + 1)/2⌉`` nodes is exact: ⌈n/2⌉
contractions per set for φ. No model query and no Monte Carlo variance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import torch
from icml26_kernels.tensornet import probe

from .surrogate import GraphTN

__all__ = ["InteractionResult", "gauss_legendre_01", "interactions", "moebius", "shapley_values"]

INDICES = ("SII", "STII", "BII")
DERIV = (-1.0, 1.0)  # d/dz [1 − z, z]


def gauss_legendre_01(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of ``m``-point Gauss–Legendre on ``[0, 1]`` (exact to degree 2m − 1)."""
    if m < 1:
        raise ValueError(f"the number of quadrature nodes must be >= 1; got {m}")
    x, w = np.polynomial.legendre.leggauss(m)
    return (x + 1) / 2, w / 2


def _diag(ts: np.ndarray, n: int) -> np.ndarray:
    """``(M,) -> (M, n, 2)``: ``[1 − t, t]`` at every node."""
    b = np.stack([1 - ts, ts], axis=-1)  # (M, 2)
    return np.repeat(b[:, None, :], n, axis=1)


@torch.no_grad()
def _derivatives(tn: GraphTN, sets: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """``σ · ∂_T TN(t·1)`` for every row ``T`` of ``sets (P, k)`` and ``t`` in ``ts (M,)``: ``(P, M)``."""
    k, n = sets.shape[1], tn.n_players
    out = (
        probe(
            tn.topology,
            list(tn.cores),
            _diag(ts, n),
            sets,
            np.tile(np.asarray(DERIV), (k, 1)),
        )
        .cpu()
        .numpy()
    )  # (P, M)
    # anchor terms α Π(1 − z) + β Π z: [−1, 1] at the k sites, [1 − t, t] elsewhere
    a0, a1 = (float(a) for a in tn.anchors)
    out = out + (a0 * (-1.0) ** k * (1 - ts) ** (n - k) + a1 * ts ** (n - k))[None, :]
    out = float(tn.scale) * out
    if k in (1, 2) and bool(tn.prior_coef.any()):  # pairwise prior: ∂_u = a_u + Σ_v w_uv t
        coef = tn.prior_coef.cpu().numpy()
        edges = tn.prior_edges.cpu().numpy().reshape(-1, 2)
        w_e = coef[n + 1 :]  # (|E|,)
        if k == 1:
            a = coef[1 : n + 1].copy()[sets[:, 0]]  # (P,)
            nb = np.zeros(n)
            np.add.at(nb, edges[:, 0], w_e)
            np.add.at(nb, edges[:, 1], w_e)
            out = out + a[:, None] + nb[sets[:, 0]][:, None] * ts[None, :]
        else:  # ∂_uv = w_uv on a graph edge, 0 otherwise
            w_of = {(int(min(u, v)), int(max(u, v))): w for (u, v), w in zip(edges, w_e)}
            w_t = np.array([w_of.get((int(min(u, v)), int(max(u, v))), 0.0) for u, v in sets])
            out = out + w_t[:, None]
    return out


def shapley_values(tn: GraphTN, *, n_points: int | None = None) -> np.ndarray:
    """``φ (n,)``: ``φ_u = ∫₀¹ ∂_u ν̂(t·1) dt`` by Gauss–Legendre with ``⌈n/2⌉`` nodes (exact).

    ``n_points`` overrides the number of nodes (fewer than ⌈n/2⌉ is no longer exact).
    """
    tn.check_fitted()
    n = tn.n_players
    ts, w = gauss_legendre_01(n_points or max(1, math.ceil(n / 2)))
    sets = np.arange(n)[:, None]  # (n, 1)
    return _derivatives(tn, sets, ts) @ w


def moebius(tn: GraphTN, sets: Sequence[Sequence[int]]) -> np.ndarray:
    """Möbius coefficients ``m(T) = ∂_T ν̂(0)`` (for ``T = ∅``: ``ν̂(0)``)."""
    tn.check_fitted()
    out = np.empty(len(sets))
    for i, t in enumerate(sets):
        if len(t) == 0:
            out[i] = float(tn.value(np.zeros((1, tn.n_players)))[0])
        else:
            out[i] = _derivatives(tn, np.asarray([t]), np.zeros(1))[0, 0]
    return out


@dataclass(frozen=True)
class InteractionResult:
    """Interaction values ``values[i]`` of the sets ``sets[i]`` for ``index`` and ``order``."""

    index: str
    order: int
    sets: tuple[tuple[int, ...], ...]
    values: np.ndarray

    def to_dict(self) -> dict[tuple[int, ...], float]:
        return {s: float(v) for s, v in zip(self.sets, self.values)}

    def matrix(self, n: int) -> np.ndarray:
        """Order 2 only: the symmetric ``(n, n)`` matrix (zero where no pair was computed)."""
        if self.order != 2:
            raise ValueError(f"matrix() needs order=2 interactions; these are order {self.order}")
        m = np.zeros((n, n))
        for (u, v), val in zip(self.sets, self.values):
            m[u, v] = m[v, u] = val
        return m


def _resolve_sets(tn: GraphTN, pairs: Any, order: int) -> tuple[tuple[int, ...], ...]:
    n = tn.n_players
    if pairs is None:
        return tuple(combinations(range(n), order))
    if isinstance(pairs, str):
        if pairs != "edges" or order != 2:
            raise ValueError(
                f"pairs must be None, 'edges' (order 2) or a list of sets; got {pairs!r}"
            )
        return tuple(tn.graph_edges)
    sets = []
    for s in pairs:
        t = tuple(sorted(int(u) for u in s))
        if len(t) != order or len(set(t)) != order:
            raise ValueError(f"every set in pairs must hold {order} distinct nodes; got {tuple(s)}")
        if t[0] < 0 or t[-1] >= n:
            raise ValueError(f"pairs reference nodes outside [0, {n}); got {tuple(s)}")
        sets.append(t)
    return tuple(sets)


def interactions(
    tn: GraphTN,
    pairs: Any = None,
    index: str = "SII",
    order: int = 2,
) -> InteractionResult:
    """Interaction index of ``order`` for the sets in ``pairs`` (see the module docstring).

    Args:
        tn: a fitted :class:`GraphTN`.
        pairs: ``None`` (every subset of size ``order``), ``"edges"`` (the graph's edges, order
            2) or a sequence of node sets of size ``order``.
        index: ``"SII"``, ``"STII"`` (top-order Shapley–Taylor) or ``"BII"``.
        order: ``1 ≤ order ≤ n``; order 1 of SII/STII is the Shapley value.
    """
    if index not in INDICES:
        raise ValueError(f"index must be one of {INDICES}; got {index!r}")
    tn.check_fitted()
    n = tn.n_players
    if not isinstance(order, (int, np.integer)) or not 1 <= order <= n:
        raise ValueError(f"order must be an integer in [1, n_players={n}]; got {order!r}")
    sets = _resolve_sets(tn, pairs, order)
    if not sets:
        return InteractionResult(index, order, (), np.zeros(0))
    arr = np.asarray(sets, dtype=np.int64)
    if index == "BII":
        values = _derivatives(tn, arr, np.array([0.5]))[:, 0]
    elif index == "SII":
        ts, w = gauss_legendre_01(max(1, math.ceil((n - order + 1) / 2)))
        values = _derivatives(tn, arr, ts) @ w
    else:  # STII: weight k (1 − t)^{k−1}, integrand degree n − 1
        ts, w = gauss_legendre_01(max(1, math.ceil(n / 2)))
        values = _derivatives(tn, arr, ts) @ (w * order * (1 - ts) ** (order - 1))
    return InteractionResult(index, int(order), sets, values)
