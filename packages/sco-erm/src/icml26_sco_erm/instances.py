"""Stochastic convex optimization instances: Feldman's function over a code, and its perturbation.

Feldman (2016), over a set W of unit vectors with pairwise inner products <= theta = 1/2:

    g_V(x) = max{ theta, max_{w in V} <w, x> },   x in the unit ball B of R^d,          (1)

with the sample z = V drawn by including each w in W independently with probability p = 1/2.
At a codeword w0 the population risk is exactly p * 1 + (1 - p) * theta = 3/4 and at 0 it is
theta = 1/2 (the population minimum), while a codeword that lies in none of the m sampled V_i
has empirical risk theta, the empirical minimum: an ERM that overfits by 1/4 exists as soon
as some codeword is unseen, which needs |W| >> 2^m, i.e. d linear in m with a good code.

The paper (Burla & Livni, arXiv 2602.08350) adds noise and a Theta(m^{-3/2}) strongly convex
regulariser so that the ERM is *unique* and overfits. Its exact perturbation could not be read
(see the package README), so the unique-ERM claim is not tested. This module implements the
[recon] control family

    f(x; V, xi) = a * g_V(x) + alpha * <xi, x> + (lam / 2) * ||x||^2,   a = 1 - alpha - lam,   (2)

with xi uniform on {-1, +1}^d / sqrt(d) (mean zero, norm 1), so f is convex and 1-Lipschitz on
B, its population risk is a * E g_V(x) + lam/2 ||x||^2 (minimum a * theta at x = 0), and lam > 0
makes the empirical minimiser unique. alpha = lam = 0 is exactly Feldman's instance (1).

Why (2) cannot overfit: xi is independent of V, so the ERM drifts along -xi_bar, a direction
independent of which codewords are unseen. Its best correlation with the |U| ~ 2^{k-m} unseen
codewords is about sqrt(2 ln |U| / d) -> 0.18 at d = 6m, k ~ 1.13m, while entering a cap needs
1/2 (tests/test_solvers.py::test_recon_noise_cannot_reach_an_unseen_cap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .codes import codeword_vectors, min_distance


def _positive_int(v: object, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class Sample:
    """m draws z_i = (V_i, xi_i): masks (m, N) bool, V_i = {w_j : masks[i, j]}; xi (m, d)."""

    masks: np.ndarray  # (m, N) bool
    xi: np.ndarray  # (m, d) float64, entries +-1/sqrt(d)

    @property
    def m(self) -> int:
        return int(self.masks.shape[0])


class FeldmanInstance:
    """The SCO instance (2) over the rows of W (N, d); alpha = lam = 0 gives Feldman's (1).

    Args:
        W: (N, d) unit vectors with pairwise inner products <= theta (certified on construction).
        p: probability that a sample's V contains a given w (Feldman: 1/2).
        theta: the floor of g_V (Feldman: 1/2); must bound every pairwise inner product.
        alpha: weight of the mean-zero linear noise <xi, x> ([recon] perturbation).
        lam: strong-convexity weight of (lam/2)||x||^2 ([recon]; the paper's is Theta(m^{-3/2})).
        max_inner: a certified bound on max_{w != w'} <w, w'> (e.g. from a code's distance);
            computed exactly from the Gram matrix when omitted.
    """

    def __init__(
        self,
        W: np.ndarray,
        *,
        p: float = 0.5,
        theta: float = 0.5,
        alpha: float = 0.0,
        lam: float = 0.0,
        max_inner: float | None = None,
    ) -> None:
        W = np.asarray(W, dtype=np.float64)
        if W.ndim != 2 or W.shape[0] < 1 or W.shape[1] < 1:
            raise ValueError(f"W must be a non-empty (N, d) matrix, got shape {W.shape}")
        if not np.all(np.isfinite(W)):
            raise ValueError("W must be finite")
        norms = np.linalg.norm(W, axis=1)
        if not np.allclose(norms, 1.0, rtol=1e-9, atol=0.0):
            raise ValueError("the rows of W must be unit vectors (Lipschitz constant 1 needs it)")
        for name, v, lo, hi in (("p", p, 0.0, 1.0), ("theta", theta, 0.0, 1.0)):
            if not (lo < float(v) < hi):
                raise ValueError(f"{name} must lie in ({lo}, {hi}), got {v}")
        if not (float(alpha) >= 0.0 and float(lam) >= 0.0 and alpha + lam < 1.0):
            raise ValueError(
                f"alpha and lam must be >= 0 with alpha + lam < 1 (the weight a = 1 - alpha - lam "
                f"of g_V must stay positive and f 1-Lipschitz), got alpha={alpha}, lam={lam}"
            )
        if max_inner is None:
            if W.shape[0] > 8192:
                raise ValueError(
                    f"N = {W.shape[0]} rows: pass max_inner (e.g. use FeldmanInstance.from_code) "
                    "instead of the O(N^2 d) Gram certificate"
                )
            G = W @ W.T
            np.fill_diagonal(G, -np.inf)
            max_inner = float(G.max()) if W.shape[0] > 1 else -1.0
        if max_inner > theta + 1e-12:
            raise ValueError(
                f"the construction needs pairwise inner products <= theta = {theta}, got "
                f"max <w, w'> = {max_inner:.4f} (a code of relative distance >= (1 - theta)/2)"
            )
        self.W = W  # (N, d)
        self.p, self.theta = float(p), float(theta)
        self.alpha, self.lam = float(alpha), float(lam)
        self.a = 1.0 - self.alpha - self.lam
        self.max_inner = float(max_inner)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_code(cls, C: np.ndarray, **kw: float) -> FeldmanInstance:
        """Instance over the codeword vectors of a linear code C (2^k, d), distance certified."""
        C = np.asarray(C)
        d = C.shape[1]
        dist = min_distance(C)
        max_inner = 1.0 - 2.0 * dist / d
        theta = float(kw.get("theta", 0.5))
        if max_inner > theta + 1e-12:
            raise ValueError(
                f"the code's distance {dist} < {(1 - theta) / 2} * d = {(1 - theta) / 2 * d:.1f}: "
                f"inner products reach {max_inner:.3f} > theta = {theta}"
            )
        return cls(codeword_vectors(C), max_inner=max_inner, **kw)

    @property
    def d(self) -> int:
        return int(self.W.shape[1])

    @property
    def N(self) -> int:
        return int(self.W.shape[0])

    def sample(self, m: int, rng: np.random.Generator) -> Sample:
        """m i.i.d. draws: V_i includes each w independently w.p. p; xi_i uniform signs/sqrt(d)."""
        m = _positive_int(m, "m (sample size)")
        masks = rng.random((m, self.N)) < self.p  # (m, N)
        xi = rng.choice(np.array([-1.0, 1.0]), size=(m, self.d)) / math.sqrt(self.d)  # (m, d)
        return Sample(masks=masks, xi=xi)

    def _check_x(self, x: np.ndarray, name: str = "x") -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.d,):
            raise ValueError(f"{name} must have shape ({self.d},), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must be finite")
        return x

    def _check_sample(self, S: Sample) -> Sample:
        if not isinstance(S, Sample):
            raise TypeError(f"S must be a Sample (from instance.sample), got {type(S).__name__}")
        if S.masks.ndim != 2 or S.masks.shape[1] != self.N or S.masks.shape[0] < 1:
            raise ValueError(f"S.masks must be (m >= 1, N={self.N}), got {S.masks.shape}")
        if S.xi.shape != (S.masks.shape[0], self.d):
            raise ValueError(f"S.xi must be (m, d={self.d}), got {S.xi.shape}")
        return S

    # ------------------------------------------------------------------ losses
    def g(self, x: np.ndarray, S: Sample) -> np.ndarray:
        """g_{V_i}(x) for every sample i, (m,)."""
        x, S = self._check_x(x), self._check_sample(S)
        s = self.W @ x  # (N,)
        vals = np.where(S.masks, s[None, :], -np.inf).max(axis=1)  # (m,)
        return np.maximum(self.theta, vals)

    def losses(self, x: np.ndarray, S: Sample) -> np.ndarray:
        """f(x; z_i) for every sample i, (m,)."""
        x = self._check_x(x)
        return self.a * self.g(x, S) + self.alpha * (S.xi @ x) + 0.5 * self.lam * float(x @ x)

    def empirical_risk(self, x: np.ndarray, S: Sample) -> float:
        """F_S(x) = (1/m) sum_i f(x; z_i)."""
        return float(self.losses(x, S).mean())

    def expected_g(self, x: np.ndarray) -> float:
        """E_V g_V(x), exact: sort the values s_j = <w_j, x> > theta decreasingly; then

        E max{theta, max_{w in V} <w, x>} = sum_j s_(j) p (1 - p)^(j - 1) + theta (1 - p)^K,

        since the max is s_(j) exactly when w_(j) is in V and w_(1..j-1) are not.
        """
        x = self._check_x(x)
        s = self.W @ x
        top = np.sort(s[s > self.theta])[::-1]  # (K,)
        K = top.size
        q = 1.0 - self.p
        weights = self.p * q ** np.arange(K)
        return float(top @ weights + self.theta * q**K)

    def population_risk(self, x: np.ndarray) -> float:
        """F(x) = a E g_V(x) + lam/2 ||x||^2 (E xi = 0 exactly), closed form."""
        x = self._check_x(x)
        return self.a * self.expected_g(x) + 0.5 * self.lam * float(x @ x)

    @property
    def population_min(self) -> float:
        """min_B F = F(0) = a * theta: both E g_V >= theta and ||x||^2 >= 0 are minimised at 0."""
        return self.a * self.theta

    def excess_risk(self, x: np.ndarray) -> float:
        return self.population_risk(x) - self.population_min

    def unseen(self, S: Sample) -> np.ndarray:
        """Indices of the rows of W that lie in no sampled V_i (each an ERM when alpha=lam=0)."""
        S = self._check_sample(S)
        return np.flatnonzero(~S.masks.any(axis=0))

    # ------------------------------------------------------------------ certificates
    def lipschitz_bound(self, radius: float = 1.0) -> float:
        """Analytic: a * max||w|| + alpha * ||xi|| + lam * radius = a + alpha + lam * radius <= 1."""
        return self.a * 1.0 + self.alpha * 1.0 + self.lam * radius

    def subgradients(self, x: np.ndarray, S: Sample) -> np.ndarray:
        """One subgradient of f(.; z_i) at x per sample, (m, d)."""
        x, S = self._check_x(x), self._check_sample(S)
        s = self.W @ x
        masked = np.where(S.masks, s[None, :], -np.inf)  # (m, N)
        j = masked.argmax(axis=1)
        active = masked[np.arange(S.m), j] > self.theta  # (m,)
        gw = np.where(active[:, None], self.W[j], 0.0)  # (m, d)
        return self.a * gw + self.alpha * S.xi + self.lam * x[None, :]

    def sampled_lipschitz(self, S: Sample, rng: np.random.Generator, n: int = 2000) -> float:
        """max |f(x; z) - f(y; z)| / ||x - y|| over n random pairs in B and samples z in S."""
        n = _positive_int(n, "n")
        worst = 0.0
        for _ in range(n):
            x, y = _ball_point(rng, self.d), _ball_point(rng, self.d)
            if rng.random() < 0.5:  # half the pairs close together, where the slope is local
                y = np.clip(x + 1e-3 * rng.standard_normal(self.d), -1, 1)
                y = y / max(1.0, float(np.linalg.norm(y)))
            diff = np.abs(self.losses(x, S) - self.losses(y, S)).max()
            worst = max(worst, float(diff / np.linalg.norm(x - y)))
        return worst

    def convexity_defect(self, S: Sample, rng: np.random.Generator, n: int = 2000) -> float:
        """min over random chords of t f(x) + (1-t) f(y) - f(tx + (1-t)y): >= 0 iff convex there."""
        n = _positive_int(n, "n")
        worst = np.inf
        for _ in range(n):
            x, y, t = _ball_point(rng, self.d), _ball_point(rng, self.d), rng.random()
            gap = t * self.losses(x, S) + (1 - t) * self.losses(y, S)
            gap = gap - self.losses(t * x + (1 - t) * y, S)
            worst = min(worst, float(gap.min()))
        return worst


def _ball_point(rng: np.random.Generator, d: int) -> np.ndarray:
    """Uniform point of the unit ball of R^d, with half the mass put on the sphere and the caps."""
    v = rng.standard_normal(d)
    v /= np.linalg.norm(v)
    return v * (1.0 if rng.random() < 0.5 else rng.random() ** (1.0 / d))
