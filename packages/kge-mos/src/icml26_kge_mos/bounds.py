"""The rank-bottleneck theory, made checkable.

For a linear output layer the logits of all queries form ``H Eᵀ`` with ``H ∈ R^{Q×d}``,
``E ∈ R^{|E|×d}``: rank ≤ d, and the log-probability matrix ``H Eᵀ − lse·1ᵀ`` has rank ≤ d + 1.

* **Sign patterns (sufficient, paper Thm. 4.1 of v2).** If every query has at most c answers
  (max out-degree c), some ``H, E`` with ``d = 2c + 1`` give ``sign(H Eᵀ) = Y`` exactly.
  :func:`sign_construction` builds them (reconstructed: entities on the degree-2c moment curve
  in a Chebyshev basis; query q is the polynomial ``ε − Π_{o∈P_q}(t − t_o)²``, positive exactly
  at its answers).
* **Rankings (necessary).** The ranking of ``E h`` changes only across the hyperplanes
  ``(e_i − e_j)·h = 0``: at most as many rankings as cells of a central arrangement of
  ``m = C(|E|, 2)`` hyperplanes in R^d, ``2 Σ_{i<d} C(m − 1, i)`` (exact for d ≤ 2 and
  generic E; 2 rankings for d = 1, |E| = 3, the paper's toy).
* **Sign patterns (necessary).** With a per-query threshold, the answer sets a d-dimensional
  linear layer can single out as its top entities are cells of ``|E|`` central hyperplanes in
  R^{d+1}: at most ``2 Σ_{i≤d} C(|E| − 1, i)`` (Cover's function-counting bound). A graph with
  more distinct answer sets needs a larger d: :func:`necessary_dim` (reconstructed; the exact
  statement of the paper's v3 necessary bounds was not available).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.polynomial import chebyshev as C

__all__ = [
    "diagnostics",
    "exact_set_accuracy",
    "logprob_rank",
    "max_out_degree",
    "necessary_dim",
    "numerical_rank",
    "ranking_cells_upper_bound",
    "sample_rankings",
    "sign_construction",
    "sign_pattern_upper_bound",
    "sign_sufficient_dim",
]


def _int_arg(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def max_out_degree(triples: np.ndarray, *, reciprocal: bool = False) -> int:
    """Largest number of distinct objects of one ``(s, r)`` query (also ``(o, r⁻¹)`` if
    ``reciprocal``)."""
    t = np.asarray(triples)
    if t.ndim != 2 or t.shape[1] != 3:
        raise ValueError(f"triples must have shape (n, 3), got {t.shape}")
    if len(t) == 0:
        return 0
    t = np.unique(t.astype(np.int64), axis=0)
    _, counts = np.unique(t[:, :2], axis=0, return_counts=True)
    best = int(counts.max())
    if reciprocal:
        _, counts = np.unique(t[:, [2, 1]], axis=0, return_counts=True)
        best = max(best, int(counts.max()))
    return best


def sign_sufficient_dim(max_degree: int) -> int:
    """``2c + 1``: a dimension at which every graph of max out-degree c is sign-representable."""
    return 2 * _int_arg("max_degree", max_degree, 0) + 1


def sign_construction(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Explicit ``H (Q, 2c+1)``, ``E (N, 2c+1)`` with ``sign(H Eᵀ) = +1`` on answers, ``−1`` else.

    ``labels`` is a ``(Q, N)`` boolean answer matrix; c is its largest row sum. Entity o sits
    at ``t_o`` (Chebyshev nodes in (−1, 1)) with ``E_o = (T_0(t_o), …, T_{2c}(t_o))``; query q
    holds the Chebyshev coefficients of ``ε_q − Π_{o∈P_q} (t − t_o)²``, positive exactly at
    ``t_o, o ∈ P_q`` once ``ε_q`` is below that product at every non-answer.
    """
    y = np.asarray(labels)
    if y.ndim != 2 or y.dtype != bool:
        raise ValueError(f"labels must be a 2-d bool array, got {y.shape} {y.dtype}")
    n_q, n = y.shape
    c = int(y.sum(1).max()) if n_q else 0
    dim = 2 * c + 1
    t = np.cos(np.pi * (np.arange(n) + 0.5) / n)  # distinct nodes in (−1, 1)
    ent = C.chebvander(t, dim - 1)  # (N, 2c+1)
    h = np.zeros((n_q, dim))
    for q in range(n_q):
        pos = np.nonzero(y[q])[0]
        if len(pos) == 0:
            h[q, 0] = -1.0  # the constant −1: every entity negative
            continue
        coef = C.chebfromroots(np.repeat(t[pos], 2))  # Π (t − t_o)², degree 2|P|
        vals = ent[:, : len(coef)] @ coef  # ≥ 0, zero exactly at the answers
        neg = ~y[q]
        eps = 0.5 * vals[neg].min() if neg.any() else 1.0
        h[q, : len(coef)] = -coef
        h[q, 0] += eps
    return h, ent


def ranking_cells_upper_bound(n_entities: int, dim: int) -> int:
    """Upper bound on the number of distinct rankings ``argsort(E h)``, ``h ∈ R^d``.

    ``min(|E|!, 2 Σ_{i=0}^{d−1} C(m − 1, i))`` with ``m = C(|E|, 2)`` (cells of a central
    arrangement of m hyperplanes in R^d).
    """
    n = _int_arg("n_entities", n_entities, 1)
    d = _int_arg("dim", dim, 1)
    m = n * (n - 1) // 2
    if m == 0:
        return 1
    cells = 2 * sum(math.comb(m - 1, i) for i in range(min(d, m)))
    return min(math.factorial(n), cells)


def sign_pattern_upper_bound(n_entities: int, dim: int) -> int:
    """Upper bound on the answer sets ``{o : e_o·h > τ}`` of a d-dimensional linear layer with a
    per-query threshold τ: ``min(2^|E|, 2 Σ_{i=0}^{d} C(|E| − 1, i))`` (Cover, 1965)."""
    n = _int_arg("n_entities", n_entities, 1)
    d = _int_arg("dim", dim, 1)
    return min(2**n, 2 * sum(math.comb(n - 1, i) for i in range(min(d + 1, n))))


def necessary_dim(n_entities: int, n_answer_sets: int) -> int:
    """Smallest d whose :func:`sign_pattern_upper_bound` admits ``n_answer_sets`` distinct
    answer sets: below it no linear output layer (any KGE) can separate them all.

    A reconstruction (Cover's counting bound), **not** the paper's v3 necessary bound, which
    could not be read. It is valid but weak: 2–3 on UMLS / Kinships, where the measured
    free-query threshold (``benchmarks/reproduce.py``: headroom above the NLL floor) is far
    higher. Use it as a floor, and the measured threshold for what a graph actually needs."""
    n = _int_arg("n_entities", n_entities, 1)
    k = _int_arg("n_answer_sets", n_answer_sets, 0)
    if k > 2**n:
        raise ValueError(f"n_answer_sets={k} exceeds the 2^{n} subsets of {n} entities")
    d = 1
    while sign_pattern_upper_bound(n, d) < k:
        d += 1
    return d


@torch.no_grad()
def sample_rankings(entities: torch.Tensor, n_samples: int = 20_000, seed: int = 0) -> set:
    """Distinct rankings ``argsort(−E h)`` over ``n_samples`` Gaussian directions h."""
    if entities.dim() != 2:
        raise ValueError(f"entities must be (|E|, d), got {tuple(entities.shape)}")
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(n_samples, entities.shape[1], generator=gen, dtype=torch.float64)
    order = torch.argsort(-(h @ entities.double().T), dim=1)
    return {tuple(row) for row in order.tolist()}


def numerical_rank(matrix: torch.Tensor | np.ndarray, rtol: float = 1e-6) -> int:
    """Number of singular values above ``rtol · σ_max`` (float64 SVD)."""
    m = torch.as_tensor(np.asarray(matrix) if not isinstance(matrix, torch.Tensor) else matrix)
    if m.dim() != 2:
        raise ValueError(f"matrix must be 2-d, got shape {tuple(m.shape)}")
    s = torch.linalg.svdvals(m.double())
    if s.numel() == 0 or s[0] == 0:
        return 0
    return int((s > rtol * s[0]).sum())


@torch.no_grad()
def logprob_rank(model: torch.nn.Module, pairs: np.ndarray, rtol: float = 1e-6) -> int:
    """Numerical rank of the ``(Q, |E|)`` log-probability matrix of ``model`` on ``(s, r)``
    pairs (≤ d + 1 for a linear output layer)."""
    p = torch.as_tensor(np.asarray(pairs), dtype=torch.long)
    if p.dim() != 2 or p.shape[1] != 2:
        raise ValueError(f"pairs must be (Q, 2) (subject, relation), got {tuple(p.shape)}")
    was_training = model.training
    model.eval()
    logp = model(p[:, 0], p[:, 1])
    model.train(was_training)
    return numerical_rank(logp, rtol)


def exact_set_accuracy(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of rows whose answers all score strictly above every non-answer (sign accuracy
    with the best per-query threshold)."""
    if scores.shape != labels.shape or scores.dim() != 2:
        raise ValueError(
            f"scores and labels must be equal (Q, N), got {scores.shape}, {labels.shape}"
        )
    lab = labels.bool()
    inf = torch.tensor(float("inf"), dtype=scores.dtype)
    lo = torch.where(lab, scores, inf).min(1).values
    hi = torch.where(lab, -inf, scores).max(1).values
    return float((lo > hi).double().mean())


def diagnostics(
    model: torch.nn.Module, triples: np.ndarray, n_entities: int, *, rtol: float = 1e-6
) -> dict[str, int]:
    """Theory numbers of a graph next to a trained model's measured log-prob rank.

    Returns ``max_out_degree``, ``sign_sufficient_dim`` (2c + 1), ``n_answer_sets`` (distinct
    answer sets of the tail queries), ``necessary_dim``, ``dim`` and ``linear_rank_cap``
    (d + 1) of the model, and ``logprob_rank`` over all tail queries.
    """
    t = np.unique(np.asarray(triples, dtype=np.int64), axis=0)
    pairs, inv = np.unique(t[:, :2], axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    sets = {tuple(sorted(t[inv == q, 2].tolist())) for q in range(len(pairs))}
    c = max_out_degree(t)
    dim = int(getattr(model, "dim", 0))
    return {
        "max_out_degree": c,
        "sign_sufficient_dim": sign_sufficient_dim(c),
        "n_answer_sets": len(sets),
        "necessary_dim": necessary_dim(n_entities, len(sets)),
        "dim": dim,
        "linear_rank_cap": dim + 1,
        "logprob_rank": logprob_rank(model, pairs, rtol),
    }
