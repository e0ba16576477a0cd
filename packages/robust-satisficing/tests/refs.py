"""Independent numpy references (no package code): brute force over the simplex, root of (2)."""

from __future__ import annotations

import numpy as np


def simplex_grid(k: int, n: int) -> np.ndarray:
    """Interior points of the k-simplex on a grid of step 1/n, shape (M, k)."""
    if k == 2:
        a = np.arange(1, n) / n
        return np.stack([a, 1 - a], 1)
    assert k == 3
    i, j = np.meshgrid(np.arange(1, n), np.arange(1, n), indexing="ij")
    keep = i + j < n
    a, b = i[keep] / n, j[keep] / n
    return np.stack([a, b, 1 - a - b], 1)


def kl(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    return (P * np.log(P / pi)).sum(-1)


def brute_kappa(L, pi, tau, n):
    """sup_P (P·L − τ)/KL(P‖π) over a simplex grid (a lower bound that tightens with n)."""
    P = simplex_grid(len(L), n)
    d = kl(P, pi)
    ok = d > 1e-10
    return ((P @ L - tau)[ok] / d[ok]).max()


def root_h(L, pi, tau, lo=1e-8, hi=1e4, iters=300):
    """h* with (1/h) log Σ π exp(h L) = τ by bisection (needs π·L < τ < max L)."""
    L, pi = np.asarray(L, float), np.asarray(pi, float)

    def cgf_over_h(h):
        m = (h * L).max()
        return (m + np.log((pi * np.exp(h * L - m)).sum())) / h

    for _ in range(iters):
        mid = np.sqrt(lo * hi)
        if cgf_over_h(mid) < tau:
            lo = mid
        else:
            hi = mid
    return np.sqrt(lo * hi)


def random_instance(rng, k):
    """Group losses, a prior and a τ strictly between π·L and max L (κ > 0, h* in range)."""
    while True:
        L = rng.uniform(0.05, 2.0, k)
        pi = rng.dirichlet(np.ones(k)) * 0.9 + 0.1 / k
        mean = pi @ L
        tau = mean + rng.uniform(0.15, 0.7) * (L.max() - mean)
        h = root_h(L, pi, tau)
        if 0.05 < h < 20:
            return L, pi, tau
