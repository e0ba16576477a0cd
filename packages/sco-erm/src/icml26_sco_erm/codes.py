"""Random binary linear codes with a certified minimum distance, and their codeword vectors.

Feldman's instance (and the paper's, which builds on it) needs a set W of unit vectors in R^d
with pairwise inner products at most 1/2 and |W| exponential in d. A binary code C of length d
with minimum distance at least d/4 gives one:

    w_c = (-1)^c / sqrt(d),   <w_c, w_c'> = 1 - 2 dist(c, c') / d  <=  1/2.

A random linear code of rate k/d below the Gilbert-Varshamov rate 1 - H(1/4) ~ 0.189 reaches
relative distance 1/4 with high probability (asymptotically good codes); with d = 6m this gives
2^k ~ 2^{1.13 m} codewords, more than the 2^m a sample of size m can "see".

For k <= MAX_K the distance is certified exhaustively: every one of the 2^k codewords is listed
(the distance of a linear code is its minimum nonzero weight).
"""

from __future__ import annotations

import math

import numpy as np

MAX_K = 20  # 2^20 codewords of length d: the most an exhaustive certificate enumerates on a CPU
GV_RATE_QUARTER = 1.0 - (-(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75)))  # 1 - H(1/4)


def binary_entropy(p: float) -> float:
    """H(p) = -p log2 p - (1 - p) log2(1 - p), with H(0) = H(1) = 0."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if p in (0.0, 1.0):
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def _check_dk(d: int, k: int) -> tuple[int, int]:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d (code length) must be a positive integer, got {d!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k (code dimension) must be a positive integer, got {k!r}")
    if k > d:
        raise ValueError(f"k (code dimension) must be <= d (length), got k={k}, d={d}")
    if k > MAX_K:
        raise ValueError(
            f"k={k} > {MAX_K}: the exhaustive distance certificate enumerates 2^k codewords; "
            f"use k <= {MAX_K}"
        )
    return int(d), int(k)


def all_messages(k: int) -> np.ndarray:
    """All 2^k binary messages, (2^k, k) uint8, message j = the binary digits of j."""
    j = np.arange(2**k, dtype=np.int64)[:, None]  # (N, 1)
    return ((j >> np.arange(k)) & 1).astype(np.uint8)  # (N, k)


def codewords(G: np.ndarray) -> np.ndarray:
    """Every codeword of the linear code with generator G (k, d): (2^k, d) uint8, mG mod 2."""
    G = np.asarray(G)
    if G.ndim != 2:
        raise ValueError(f"G (generator) must be a (k, d) matrix, got shape {G.shape}")
    _check_dk(G.shape[1], G.shape[0])
    M = all_messages(G.shape[0]).astype(np.int64)  # (N, k)
    return ((M @ G.astype(np.int64)) & 1).astype(np.uint8)  # (N, d)


def rank_gf2(G: np.ndarray) -> int:
    """Rank of a binary matrix over GF(2) (Gaussian elimination)."""
    A = np.array(G, dtype=np.uint8) & 1
    rank, rows, cols = 0, A.shape[0], A.shape[1]
    for c in range(cols):
        pivot = next((r for r in range(rank, rows) if A[r, c]), None)
        if pivot is None:
            continue
        A[[rank, pivot]] = A[[pivot, rank]]
        for r in range(rows):
            if r != rank and A[r, c]:
                A[r] ^= A[rank]
        rank += 1
    return rank


def min_distance(C: np.ndarray) -> int:
    """Minimum distance of a *linear* code from its full codeword list (2^k, d): min nonzero weight.

    Exhaustive, exact. For a linear code dist(c, c') = weight(c + c') and c + c' is a codeword,
    so the minimum over pairs equals the minimum nonzero weight. Raises if C has repeated
    codewords (a rank-deficient generator), where the distance is 0.
    """
    C = np.asarray(C, dtype=np.uint8)
    w = C.sum(axis=1)
    nonzero = w[w > 0]
    if nonzero.size != C.shape[0] - 1:
        raise ValueError("C must list 2^k distinct codewords of a full-rank linear code")
    return int(nonzero.min())


def min_distance_bruteforce(C: np.ndarray) -> int:
    """Minimum pairwise Hamming distance over all pairs (any code; O(N^2 d), for checking)."""
    C = np.asarray(C, dtype=np.int64)
    D = (C[:, None, :] != C[None, :, :]).sum(-1)  # (N, N)
    np.fill_diagonal(D, C.shape[1] + 1)
    return int(D.min())


def random_linear_code(d: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A uniformly random full-rank generator G (k, d) over GF(2) and its 2^k codewords (2^k, d)."""
    d, k = _check_dk(d, k)
    while True:
        G = rng.integers(0, 2, size=(k, d), dtype=np.uint8)
        if rank_gf2(G) == k:
            return G, codewords(G)


def good_code(
    d: int,
    k: int,
    rng: np.random.Generator,
    rel_distance: float = 0.25,
    max_tries: int = 200,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Draw random linear codes until one has certified distance >= rel_distance * d.

    Returns (G, C, distance). The construction needs rate k/d below the Gilbert-Varshamov rate
    1 - H(rel_distance); above it (or if max_tries draws all fail) a ValueError says so.
    """
    d, k = _check_dk(d, k)
    if not 0.0 < rel_distance < 0.5:
        raise ValueError(f"rel_distance must lie in (0, 1/2), got {rel_distance}")
    gv = 1.0 - binary_entropy(rel_distance)
    if k / d > gv:
        raise ValueError(
            f"rate k/d = {k}/{d} = {k / d:.3f} exceeds the Gilbert-Varshamov rate "
            f"1 - H({rel_distance}) = {gv:.3f}: the construction needs d >= {math.ceil(k / gv)} "
            f"for k = {k}"
        )
    need = math.ceil(rel_distance * d)
    for _ in range(max_tries):
        G, C = random_linear_code(d, k, rng)
        dist = min_distance(C)
        if dist >= need:
            return G, C, dist
    raise ValueError(
        f"no random linear [{d}, {k}] code with distance >= {need} in {max_tries} draws; "
        "lower k or raise d (finite-length codes fall short of the asymptotic GV rate)"
    )


def codeword_vectors(C: np.ndarray) -> np.ndarray:
    """Unit vectors w_c = (-1)^c / sqrt(d), (N, d) float64: <w_c, w_c'> = 1 - 2 dist / d."""
    C = np.asarray(C)
    if C.ndim != 2:
        raise ValueError(f"C (codewords) must be (N, d), got shape {C.shape}")
    d = C.shape[1]
    return (1.0 - 2.0 * C.astype(np.float64)) / math.sqrt(d)
