"""Information given to the online algorithm before the first good arrives (paper §4-§6).

* ``NormalizationInfo``: each agent's total value T_i = v_i(M) (equivalently, normalized
  valuations). Noisy version: predictions T̂_i with (1 - ε) T_i <= T̂_i <= (1 + ε) T_i.
* ``FrequencyPrediction``: the value multisets without the order, in two readings
  - ``kind="joint"``: the multiset of goods' value vectors {(v_1(g), ..., v_n(g)) : g ∈ M};
  - ``kind="per_agent"``: for each agent i the multiset {v_i(g) : g ∈ M}, rows unlinked
    (column k of row i is *some* good, not the same good across rows).
  Noisy version: a bijection π from true goods to predicted goods with
  (1 - ε) v_i(g) <= p̂_i(π(g)) <= (1 + ε) v_i(g) for every agent i (per row for "per_agent").

``validate(instance)`` raises a clear ``ValueError`` when the information is inconsistent with
the instance beyond its declared error (wrong number of agents or goods, totals that do not match,
a multiset that is not within ε of the true one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from ._tol import RTOL
from .instance import OnlineInstance
from .notions import check_values

__all__ = ["FrequencyPrediction", "NormalizationInfo"]


def _check_eps(eps) -> float:
    eps = float(eps)
    if not (0.0 <= eps < 1.0):
        raise ValueError(f"rel_error must be in [0, 1), got {eps}")
    return eps


def _noise(shape, eps: float, rng, mode: str) -> np.ndarray:
    """Multiplicative factors in [1 - ε, 1 + ε]: uniform, or at the endpoints (worst case)."""
    rng = np.random.default_rng(rng)
    if mode == "uniform":
        return rng.uniform(1 - eps, 1 + eps, shape)
    if mode == "extreme":
        return 1 + eps * rng.choice([-1.0, 1.0], shape)
    raise ValueError(f"mode must be 'uniform' or 'extreme', got {mode!r}")


@dataclass(frozen=True)
class NormalizationInfo:
    """Predicted totals T̂ (n,) with declared relative error ε: (1-ε) T_i <= T̂_i <= (1+ε) T_i."""

    totals: np.ndarray
    rel_error: float = 0.0

    def __post_init__(self):
        t = np.asarray(self.totals, dtype=float)
        if t.ndim != 1 or t.size < 1:
            raise ValueError(
                f"totals must be a non-empty 1-D array (one per agent), got shape {t.shape}"
            )
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            raise ValueError("totals must be finite and non-negative")
        t.setflags(write=False)
        object.__setattr__(self, "totals", t)
        object.__setattr__(self, "rel_error", _check_eps(self.rel_error))

    @property
    def n(self) -> int:
        return self.totals.size

    @classmethod
    def exact(cls, instance: OnlineInstance) -> NormalizationInfo:
        return cls(instance.values.sum(1))

    @classmethod
    def noisy(
        cls, instance: OnlineInstance, eps: float, rng=None, mode: str = "uniform"
    ) -> NormalizationInfo:
        """T̂_i = T_i * f_i with f_i in [1-ε, 1+ε] (uniform or at the endpoints)."""
        eps = _check_eps(eps)
        t = instance.values.sum(1) * _noise(instance.n, eps, rng, mode)
        return cls(t, eps)

    def validate(self, instance: OnlineInstance) -> None:
        if self.n != instance.n:
            raise ValueError(
                f"totals has {self.n} entries but the instance has {instance.n} agents"
            )
        true = instance.values.sum(1)
        lo = (1 - self.rel_error - RTOL) * true  # relative: scale-free
        hi = (1 + self.rel_error + RTOL) * true
        bad = np.flatnonzero((self.totals < lo) | (self.totals > hi))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"totals do not match the values: agent {i} has total {true[i]:.6g} but "
                f"totals[{i}] = {self.totals[i]:.6g} (declared rel_error {self.rel_error})"
            )


@dataclass(frozen=True)
class FrequencyPrediction:
    """Predicted value multisets (n, m): joint columns or per-agent rows, with error ε."""

    values: np.ndarray
    kind: str = "joint"
    rel_error: float = 0.0

    def __post_init__(self):
        if self.kind not in ("joint", "per_agent"):
            raise ValueError(f"kind must be 'joint' or 'per_agent', got {self.kind!r}")
        v = check_values(self.values, "prediction values").copy()
        v.setflags(write=False)
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "rel_error", _check_eps(self.rel_error))

    @property
    def n(self) -> int:
        return self.values.shape[0]

    @property
    def m(self) -> int:
        return self.values.shape[1]

    @classmethod
    def exact(cls, instance: OnlineInstance, kind: str = "joint", rng=None) -> FrequencyPrediction:
        """The true multiset, shuffled (so no order leaks): columns for joint, each row for per-agent."""
        rng = np.random.default_rng(rng)
        v = instance.values[:, rng.permutation(instance.m)]
        if kind == "per_agent":
            v = np.stack([row[rng.permutation(instance.m)] for row in v])
        return cls(v, kind)

    @classmethod
    def noisy(
        cls,
        instance: OnlineInstance,
        eps: float,
        kind: str = "joint",
        rng=None,
        mode: str = "uniform",
    ) -> FrequencyPrediction:
        """Every predicted entry is the true one times a factor in [1-ε, 1+ε]."""
        eps = _check_eps(eps)
        rng = np.random.default_rng(rng)
        exact = cls.exact(instance, kind, rng)
        return cls(exact.values * _noise(exact.values.shape, eps, rng, mode), kind, eps)

    def validate(self, instance: OnlineInstance) -> None:
        if self.values.shape != instance.values.shape:
            raise ValueError(
                f"prediction has the wrong size: shape {self.values.shape}, but the instance has "
                f"{instance.n} agents and {instance.m} goods"
            )
        eps = self.rel_error
        if self.kind == "per_agent":
            # 1-D multiplicative bands: a band-respecting bijection exists iff sorted matching works
            for i in range(self.n):
                t, p = np.sort(instance.values[i]), np.sort(self.values[i])
                if np.any(p < (1 - eps - RTOL) * t) or np.any(p > (1 + eps + RTOL) * t):
                    raise ValueError(
                        f"per-agent prediction for agent {i} is not within rel_error={eps} of the "
                        "true value multiset"
                    )
            return
        t = instance.values.T[:, None, :]  # (m_true, 1, n)
        p = self.values.T[None, :, :]  # (1, m_pred, n)
        ok = np.all((p >= (1 - eps - RTOL) * t) & (p <= (1 + eps + RTOL) * t), 2)
        match = maximum_bipartite_matching(csr_matrix(ok.astype(np.int8)), perm_type="column")
        if np.any(match < 0):
            raise ValueError(
                f"joint prediction is not within rel_error={eps} of the true multiset of value vectors"
            )
