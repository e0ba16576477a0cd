"""The paper's bounds as functions (constants are not stated in what could be read: set to 1).

* Gradient descent, lower bound (this paper): some instance makes GD with step eta and horizon T
  on m samples have generalization gap Omega(sqrt(eta T / m^{3/2})) (for eta T <= m^{3/2}).
* Gradient descent, upper bound (the stability bound the paper compares with): O(eta T / m); the
  full non-smooth stability bound of Bassily et al. (2020) is O(eta sqrt(T) + eta T / m).
* Feldman's instance: the exact probability that at least one of N codewords is in none of the
  m samples (each w in V_i independently w.p. p), i.e. that an ERM with excess risk
  p (1 - theta) exists: 1 - (1 - (1 - p)^m)^N.
"""

from __future__ import annotations

import math

from .codes import binary_entropy


def _pos(v: float, name: str) -> float:
    v = float(v)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {v}")
    return v


def gd_lower_bound(eta: float, T: float, m: float) -> float:
    """sqrt(eta T / m^{3/2}), capped at 1 (the loss is 1-Lipschitz on the unit ball)."""
    eta, T, m = _pos(eta, "eta (step size)"), _pos(T, "T (horizon)"), _pos(m, "m (sample size)")
    return min(1.0, math.sqrt(eta * T / m**1.5))


def gd_upper_bound(eta: float, T: float, m: float) -> float:
    """eta T / m: the stability upper bound the paper's lower bound is compared with."""
    eta, T, m = _pos(eta, "eta (step size)"), _pos(T, "T (horizon)"), _pos(m, "m (sample size)")
    return eta * T / m


def gd_stability_bound(eta: float, T: float, m: float) -> float:
    """eta sqrt(T) + eta T / m: uniform stability of non-smooth GD (Bassily et al., 2020)."""
    eta, T, m = _pos(eta, "eta (step size)"), _pos(T, "T (horizon)"), _pos(m, "m (sample size)")
    return eta * math.sqrt(T) + eta * T / m


def overfit_erm_probability(m: int, N: int, p: float = 0.5) -> float:
    """P(some w in W lies in none of the m sampled V_i) = 1 - (1 - (1 - p)^m)^N, exact."""
    m, N = int(_pos(m, "m (sample size)")), int(_pos(N, "N (number of codewords)"))
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    miss = (1.0 - p) ** m
    return -math.expm1(N * math.log1p(-miss))


def paper_dimension(m: int) -> int:
    """d = 6m: the paper's dimension (linear in the sample size m)."""
    return 6 * int(_pos(m, "m (sample size)"))


def paper_lambda(m: float) -> float:
    """lam = m^{-3/2}: the paper's strong-convexity scale Theta(m^{-3/2}) with constant 1."""
    return _pos(m, "m (sample size)") ** -1.5


def gv_rate(rel_distance: float = 0.25) -> float:
    """Gilbert-Varshamov rate 1 - H(delta): random linear codes of lower rate reach distance delta d."""
    if not 0.0 < rel_distance < 0.5:
        raise ValueError(f"rel_distance must lie in (0, 1/2), got {rel_distance}")
    return 1.0 - binary_entropy(rel_distance)


def code_dimension(m: int, d: int | None = None, rel_distance: float = 0.25) -> int:
    """Largest k with k / d <= 1 - H(delta); d = 6m by default (the paper's dimension).

    The overfitting ERM needs 2^k >> 2^m, i.e. k > m: with d = 6m, k = floor(6m * 0.189) ~ 1.13 m.
    """
    m = int(_pos(m, "m (sample size)"))
    d = paper_dimension(m) if d is None else int(_pos(d, "d (dimension)"))
    return max(1, math.floor(d * gv_rate(rel_distance)))
