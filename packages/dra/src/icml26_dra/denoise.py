"""Denoising of representations (DRA step 1) and leave-target-out dimension selection (step 2).

[recon] No public code: reconstructed from the paper's summary ("denoises training and target
representations via centering/whitening and dimension selection guided by leave-target-out
discriminability"). Neutral tokens (stop words, fluent filler, benign facts) add a component
that every sample shares and that varies along "style" directions; centering on the training
pool removes the shared part, whitening stops high-variance style directions from dominating
the cosine, and dimension selection keeps the few directions where the unsafe targets stand out.

Notation: training pool H in R^{N x d}, targets T in R^{M x d}; mu = mean(H), sigma_j = std(H_j).

    diag:       z = (h - mu) / sigma                                  (per-dimension z-score)
    shrinkage:  z = S^{-1/2} (h - mu),  S = (1 - a) C + a (tr C / d) I  (C = cov(H), a = shrinkage)
    none:       z = h - mu                                            (centering only)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Denoiser",
    "DimSelection",
    "check_representations",
    "default_ks",
    "select_dims_leave_target_out",
]

WHITEN = ("diag", "shrinkage", "none")


def check_representations(
    train: object,
    target: object | None = None,
    *,
    train_name: str = "train_reps",
    target_name: str = "target_reps",
) -> tuple[np.ndarray, np.ndarray | None]:
    """float64 copies of (N, d) train and (M, d) target representations, or a ValueError."""
    h = np.asarray(train, dtype=np.float64)
    if h.ndim != 2 or h.shape[0] == 0 or h.shape[1] == 0:
        raise ValueError(f"{train_name} must be a non-empty (N, d) array; got shape {h.shape}")
    if not np.all(np.isfinite(h)):
        bad = np.flatnonzero(~np.all(np.isfinite(h), axis=1))
        raise ValueError(f"{train_name} has NaN/inf in {bad.size} rows (first: {bad[:5].tolist()})")
    if target is None:
        return h, None
    t = np.asarray(target, dtype=np.float64)
    if t.ndim == 1:
        t = t[None, :]
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError(
            f"{target_name} must be a non-empty (M, d) array of unsafe targets; got shape {t.shape}"
        )
    if t.shape[1] != h.shape[1]:
        raise ValueError(
            f"{target_name} has dimension {t.shape[1]} but {train_name} has {h.shape[1]}: "
            "train and target representations must come from the same space"
        )
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{target_name} contains NaN or inf")
    return h, t


class Denoiser:
    """Center on the training pool and whiten (DRA step 1) [recon].

    Args:
        center: subtract the training-pool mean (removes the component every sample shares).
        whiten: ``"diag"`` (divide by the pool's per-dimension std), ``"shrinkage"`` (full
            whitening with Ledoit-Wolf-style shrinkage towards a scaled identity) or ``"none"``.
        shrinkage: a in S = (1 - a) C + a (tr C / d) I, for ``whiten="shrinkage"``; 0 is exact
            full (Mahalanobis) whitening, which needs N > d.
        eps: dimensions whose std is below ``eps * max std`` are constant on the pool and carry no
            information; they are mapped to 0 instead of being divided by ~0.
    """

    def __init__(
        self,
        *,
        center: bool = True,
        whiten: str = "diag",
        shrinkage: float = 0.1,
        eps: float = 1e-8,
    ) -> None:
        if whiten not in WHITEN:
            raise ValueError(f"whiten must be one of {WHITEN}; got {whiten!r}")
        if not 0.0 <= shrinkage <= 1.0:
            raise ValueError(f"shrinkage must lie in [0, 1]; got {shrinkage}")
        self.center = center
        self.whiten = whiten
        self.shrinkage = shrinkage
        self.eps = eps
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None  # (d,) for diag
        self.whitener_: np.ndarray | None = None  # (d, d) for shrinkage

    def fit(self, train_reps: object) -> Denoiser:
        """Estimate mu and the whitening from the (N, d) training pool."""
        h, _ = check_representations(train_reps)
        n, d = h.shape
        if self.center and n < 2:
            raise ValueError(
                f"train_reps needs at least 2 samples to center on the pool; got N={n} "
                "(a single row centers to zero and every score would be 0)"
            )
        self.mean_ = h.mean(axis=0) if self.center else np.zeros(d)
        x = h - self.mean_  # (N, d)
        # scale-safe statistics: x / c has entries in [-1, 1], so x² cannot overflow (1e200)
        c = float(np.abs(x).max())
        # rounding of the mean leaves |x| up to ~N eps |h| on a constant pool: that is no signal
        if not c > max(16, n) * np.finfo(np.float64).eps * float(np.abs(h).max()):
            raise ValueError(
                "train_reps is constant (every row equals the pool mean): there is no variation "
                "to denoise and every score would be 0"
            )
        xs = x / c  # (N, d)
        self.scale_ = self.whitener_ = None
        if self.whiten == "diag":
            std = c * np.sqrt(np.mean(xs * xs, axis=0))  # about mu (or 0 when not centering)
            floor = self.eps * max(float(std.max()), np.finfo(np.float64).tiny)
            self.scale_ = np.where(std > floor, std, np.inf)  # constant dims -> 0
        elif self.whiten == "shrinkage":
            if self.shrinkage == 0.0 and n <= d:
                raise ValueError(
                    f"full whitening (shrinkage=0) needs more samples than dimensions; got N={n}, "
                    f"d={d}: use shrinkage > 0"
                )
            if n <= d:
                warnings.warn(
                    f"full (shrinkage) whitening with N={n} <= d={d}: the pool covariance is "
                    "rank-deficient and its null directions are scaled up to the shrinkage "
                    "floor (gradient DRA at d=2048, N=1000 collapsed in the benchmark); "
                    "prefer whiten='diag' or a smaller projection",
                    stacklevel=3,
                )
            cov = xs.T @ xs / n  # (d, d), the covariance of x / c
            a = self.shrinkage
            cov = (1.0 - a) * cov + a * (np.trace(cov) / d) * np.eye(d)
            w, v = np.linalg.eigh(cov)
            floor = self.eps * max(float(w.max()), np.finfo(np.float64).tiny)
            inv_sqrt = np.where(w > floor, 1.0 / np.sqrt(np.maximum(w, floor)), 0.0)
            # S(x)^{-1/2} = S(x/c)^{-1/2} / c: the whitened vectors are the same
            self.whitener_ = (v * inv_sqrt) @ v.T / c  # S^{-1/2}, symmetric
        return self

    def transform(self, reps: object) -> np.ndarray:
        """z for each row of an (n, d) array (train or targets), with the pool's statistics."""
        if self.mean_ is None:
            raise RuntimeError("Denoiser.transform called before fit")
        x = np.asarray(reps, dtype=np.float64)
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.mean_.shape[0]:
            raise ValueError(
                f"reps must be (n, {self.mean_.shape[0]}) like the fitted pool; got {x.shape}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError("reps contains NaN or inf")
        x = x - self.mean_
        if self.scale_ is not None:
            return x / self.scale_
        if self.whitener_ is not None:
            return x @ self.whitener_
        return x

    def fit_transform(self, train_reps: object) -> np.ndarray:
        return self.fit(train_reps).transform(train_reps)


def _unit(x: np.ndarray) -> np.ndarray:
    # divide by the row's largest entry first: ‖x‖ of entries near 1e200 would overflow to inf
    big = np.abs(x).max(axis=-1, keepdims=True)
    x = x / np.where(big > 0, big, 1.0)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def cosine_scores(z_train: np.ndarray, z_target: np.ndarray, agg: str = "mean") -> np.ndarray:
    """s_i = agg_t cos(z_i, z_t): (N, d), (M, d) -> (N,); a zero vector has cosine 0."""
    sim = _unit(z_train) @ _unit(z_target).T  # (N, M)
    return sim.mean(axis=1) if agg == "mean" else sim.max(axis=1)


def default_ks(d: int) -> tuple[int, ...]:
    """Candidate numbers of kept dimensions: 4, 8, 16, ... below d, and d itself."""
    ks = [k for k in (2**i for i in range(2, 40)) if k < d]
    return (*ks, d)


def discriminability(z_target: np.ndarray) -> np.ndarray:
    """delta_j = |mean_t z_tj|: the targets' standardized mean shift from the pool, per dim."""
    return np.abs(z_target.mean(axis=0))


@dataclass
class DimSelection:
    """What ``select_dims_leave_target_out`` chose and why."""

    dims: np.ndarray  # (k,) selected dimensions, most discriminative first
    k: int
    ks: tuple[int, ...]
    percentile: np.ndarray  # (len(ks),) mean held-out-target percentile in the pool, per k
    zscore: np.ndarray  # (len(ks),) mean held-out-target z-score in the pool, per k (tie-break)
    per_target: np.ndarray = field(repr=False)  # (len(ks), M) percentiles
    # why k = d was kept instead of the best k: "few_targets" (M < min_targets: the held-out
    # percentile of M targets is too noisy to choose k), "no_margin" (the best k does not beat
    # k = d by ``margin``), or None (the best k was kept)
    fallback: str | None = None
    best_k: int = 0  # the k with the highest held-out percentile, before any fallback


def select_dims_leave_target_out(
    z_train: object,
    z_target: object,
    ks: Sequence[int] | None = None,
    *,
    agg: str = "mean",
    min_targets: int = 20,
    margin: float = 0.02,
) -> DimSelection:
    """Choose the kept dimensions S by leave-target-out discriminability (DRA step 2) [recon].

    For each candidate k and each target t: rank dimensions by delta_j computed on the other
    targets T \\ {t}, keep the top k, score the held-out t and the whole pool against T \\ {t}
    (cosine on the kept dims), and record t's percentile among the pool's scores (the fraction
    of pool samples scored strictly below it). The k with the highest mean percentile wins;
    ties (e.g. several k at 100%) go to the highest mean z-score of t within the pool. The
    returned dims are the top k by delta_j on all targets.

    Robust fallback to all d dimensions (k = d is always evaluated, added to ``ks`` if absent):
    when there are fewer than ``min_targets`` targets (with M ~ 10 the mean held-out percentile
    is too noisy to choose k: on the benchmark it picked k in {8, 16, 32} on 6 of 10 seeds and
    lost AUPRC on average), or when the best k's mean held-out percentile does not exceed
    k = d's by more than ``margin``. ``DimSelection.fallback`` says which; ``best_k`` keeps the
    k the percentile preferred.

    Args:
        z_train: (N, d) denoised training pool.
        z_target: (M, d) denoised targets, M >= 2.
        ks: candidate k values (default ``default_ks(d)``: 4, 8, ..., d).
        agg: how a sample's cosines to the targets are combined, ``"mean"`` or ``"max"``.
        min_targets: below this many targets, keep all d dimensions (``fallback="few_targets"``).
        margin: the best k must beat k = d's mean held-out percentile by more than this
            (a fraction of the pool, default 2 points) or all d dims are kept.
    """
    h, t = check_representations(z_train, z_target, train_name="z_train", target_name="z_target")
    assert t is not None
    m, d = t.shape
    if m < 2:
        raise ValueError(f"leave-target-out selection needs at least 2 targets; got {m}")
    if agg not in ("mean", "max"):
        raise ValueError(f"agg must be 'mean' or 'max'; got {agg!r}")
    ks = default_ks(d) if ks is None else tuple(int(k) for k in ks)
    if not ks or any(k < 1 or k > d for k in ks):
        raise ValueError(f"every k in ks must lie in [1, {d}]; got {ks}")
    if isinstance(min_targets, bool) or not isinstance(min_targets, (int, np.integer)):
        raise TypeError(f"min_targets must be an int; got {type(min_targets).__name__}")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must lie in [0, 1) (a fraction of the pool); got {margin}")
    if d not in ks:
        ks = (*ks, d)  # the fallback compares against k = d
    pct = np.zeros((len(ks), m))
    zs = np.zeros((len(ks), m))
    for ti in range(m):
        rest = np.delete(t, ti, axis=0)  # (M-1, d)
        order = np.argsort(-discriminability(rest), kind="stable")
        for ki, k in enumerate(ks):
            s = order[:k]
            pool = cosine_scores(h[:, s], rest[:, s], agg)  # (N,)
            held = cosine_scores(t[ti : ti + 1, s], rest[:, s], agg)[0]
            pct[ki, ti] = np.mean(pool < held)
            zs[ki, ti] = (held - pool.mean()) / max(pool.std(), 1e-12)
    mean_pct, mean_z = pct.mean(axis=1), zs.mean(axis=1)
    best = np.flatnonzero(mean_pct >= mean_pct.max() - 1e-12)
    ki = int(best[np.argmax(mean_z[best])])
    best_k = k = ks[ki]
    fallback = None
    if m < min_targets:
        fallback, k = "few_targets", d
    elif k != d and mean_pct[ki] <= mean_pct[ks.index(d)] + margin:
        fallback, k = "no_margin", d
    dims = np.argsort(-discriminability(t), kind="stable")[:k]
    return DimSelection(
        dims=dims,
        k=k,
        ks=ks,
        percentile=mean_pct,
        zscore=mean_z,
        per_target=pct,
        fallback=fallback,
        best_k=best_k,
    )
