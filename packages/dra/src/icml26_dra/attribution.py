"""DRA: Denoised Representation Attribution, and the attribution baselines in the same API.

Score every training sample by its similarity to M unsafe targets (Pan et al., 2025, Sec. 3):

    z = Denoise(h)                            step 1: center / whiten on the training pool
    S = select_dims_leave_target_out(Z, Z_T)  step 2: keep the dims where targets stand out
    s_i = agg_{t in T} cos(z_i[S], z_t[S])    agg = mean (default) or max

Baselines (no denoising), each ``fit(train_reps, target_reps).score()``:

    RepSim   s_i = mean_t cos(h_i, h_t)                 hidden states (raw representation sim.)
    GradDot  s_i = mean_t <g_i, g_t>                    per-sample (projected) gradients
    GradSim  s_i = mean_t cos(g_i, g_t)
    TracIn   s_i = mean_t sum_c eta_c <g_i^c, g_t^c>    checkpoints c with learning rates eta_c
    LESS     s_i = mean_t sum_c eta_c cos(g_i^c, g_t^c) (Xia et al. 2024, matching.py: the mean
             over one subtask's validation examples; the max over subtasks is ``agg="max"``
             only when every target is its own subtask)

``filter(dataset, budget)`` removes the ``budget`` highest-scoring samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .denoise import (
    Denoiser,
    DimSelection,
    check_representations,
    cosine_scores,
    select_dims_leave_target_out,
)

__all__ = ["DRA", "LESS", "GradDot", "GradSim", "RepSim", "TracIn", "filter_top"]


def filter_top(dataset: Any, scores: np.ndarray, budget: int) -> Any:
    """``dataset`` without its ``budget`` highest-scoring samples (order otherwise kept).

    A ``datasets.Dataset`` (anything with ``.select``) is returned through ``select``; a numpy
    array is indexed; any other sequence becomes a list.
    """
    scores = np.asarray(scores)
    n = scores.shape[0]
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise TypeError(f"budget must be an int (samples to remove); got {type(budget).__name__}")
    if not 0 <= budget <= n:
        raise ValueError(f"budget must lie in [0, {n}] (the dataset size); got {budget}")
    if len(dataset) != n:
        raise ValueError(f"dataset has {len(dataset)} samples but {n} were scored")
    if not np.all(np.isfinite(scores)):  # argsort puts NaN last: NaN rows would be kept silently
        bad = np.flatnonzero(~np.isfinite(scores))
        raise ValueError(
            f"scores has NaN/inf for {bad.size} samples (first: {bad[:5].tolist()}); "
            "cannot rank them for filtering"
        )
    drop = np.argsort(-scores, kind="stable")[:budget]
    keep = np.setdiff1d(np.arange(n), drop)  # sorted: original order
    if hasattr(dataset, "select"):
        return dataset.select(keep.tolist())
    if isinstance(dataset, np.ndarray):
        return dataset[keep]
    return [dataset[int(i)] for i in keep]


class _Attributor:
    """fit(train_reps, target_reps) -> self; score() -> (N,); filter(dataset, budget)."""

    agg: str = "mean"
    scores_: np.ndarray | None = None

    def score(self) -> np.ndarray:
        if self.scores_ is None:
            raise RuntimeError(f"{type(self).__name__}.score called before fit")
        return self.scores_.copy()

    def filter(self, dataset: Any, budget: int) -> Any:
        """``dataset`` (the one whose representations were fitted) minus the top ``budget``."""
        return filter_top(dataset, self.score(), budget)

    def fit_score(self, train_reps: object, target_reps: object, **kw: Any) -> np.ndarray:
        return self.fit(train_reps, target_reps, **kw).score()  # type: ignore[attr-defined]


def _check_agg(agg: str) -> str:
    if agg not in ("mean", "max"):
        raise ValueError(f"agg must be 'mean' or 'max'; got {agg!r}")
    return agg


class DRA(_Attributor):
    """Denoised Representation Attribution [recon: see denoise.py].

    Args:
        representation: ``"hidden"`` or ``"gradient"``: which space the representations come
            from (``DRAFilter`` extracts it; the scoring maths is the same for both).
        center, whiten, shrinkage: the ``Denoiser`` (step 1). ``whiten=None`` (default) is
            ``"shrinkage"`` (full whitening, a = 0.1) for hidden states: the pre-registered
            benchmark (12 paired seeds) found it +0.47 AUPRC over RepSim and +0.45 over
            ``"diag"``; ``"diag"`` for gradients (full whitening of 2048-dim projected
            gradients with N = 1000 collapsed: AUPRC 0.37 vs GradSim 0.91, 3 seeds) and
            whenever N <= d (a rank-deficient covariance). ``denoiser_.whiten`` says which.
        k: ``"auto"`` (leave-target-out selection over ``ks``), ``"all"`` (no selection), or
            an int (the top-k dims by target discriminability on all targets).
        ks: candidate k values for ``"auto"`` (default 4, 8, 16, ..., d).
        agg: ``"mean"`` or ``"max"`` over targets.
        min_targets, margin: the fallback of ``k="auto"`` to all dimensions (fewer targets than
            ``min_targets``, or no k beating k = d by ``margin``; see
            ``select_dims_leave_target_out``).

    After ``fit``: ``denoiser_``, ``dims_`` (kept dims), ``selection_`` (``DimSelection`` when
    k="auto"), ``scores_``.
    """

    def __init__(
        self,
        representation: str = "hidden",
        *,
        center: bool = True,
        whiten: str | None = None,
        shrinkage: float = 0.1,
        k: int | str = "auto",
        ks: Sequence[int] | None = None,
        agg: str = "mean",
        min_targets: int = 20,
        margin: float = 0.02,
    ) -> None:
        if representation not in ("hidden", "gradient"):
            raise ValueError(
                f"representation must be 'hidden' or 'gradient'; got {representation!r}"
            )
        if not (k in ("auto", "all") or (isinstance(k, (int, np.integer)) and k >= 1)):
            raise ValueError(f"k must be 'auto', 'all' or a positive int; got {k!r}")
        self.representation = representation
        self.whiten = whiten  # None: resolved in fit (it depends on N and d)
        self.denoiser_ = Denoiser(center=center, whiten=whiten or "diag", shrinkage=shrinkage)
        self.k = k
        self.ks = ks
        self.agg = _check_agg(agg)
        self.min_targets, self.margin = min_targets, margin
        self.dims_: np.ndarray | None = None
        self.selection_: DimSelection | None = None

    def fit(
        self, train_reps: object, target_reps: object, *, benign_reference: object = None
    ) -> DRA:
        """``benign_reference``: (R, d) representations of known-benign samples; when given, the
        denoiser's mean and whitening come from it instead of the training pool (which is
        unsafe-contaminated, badly so when unsafe data are not rare)."""
        h, t = check_representations(train_reps, target_reps)
        assert t is not None
        fit_on = h
        if benign_reference is not None:
            fit_on, _ = check_representations(benign_reference, train_name="benign_reference")
            if fit_on.shape[1] != h.shape[1]:
                raise ValueError(
                    f"benign_reference has dimension {fit_on.shape[1]} but train_reps has "
                    f"{h.shape[1]}"
                )
        if self.whiten is None:  # the benchmark's evidence (issue 45) is for hidden states only
            full = self.representation == "hidden" and fit_on.shape[0] > h.shape[1]
            self.denoiser_.whiten = "shrinkage" if full else "diag"
        self.denoiser_.fit(fit_on)
        z, zt = self.denoiser_.transform(h), self.denoiser_.transform(t)
        d = h.shape[1]
        self.selection_ = None
        if self.k == "auto":
            self.selection_ = select_dims_leave_target_out(
                z, zt, self.ks, agg=self.agg, min_targets=self.min_targets, margin=self.margin
            )
            self.dims_ = self.selection_.dims
        elif self.k == "all":
            self.dims_ = np.arange(d)
        else:
            if int(self.k) > d:
                raise ValueError(f"k={self.k} exceeds the representation dimension {d}")
            self.dims_ = np.argsort(-np.abs(zt.mean(axis=0)), kind="stable")[: int(self.k)]
        self.scores_ = cosine_scores(z[:, self.dims_], zt[:, self.dims_], self.agg)
        return self


class RepSim(_Attributor):
    """Raw representation similarity: s_i = agg_t cos(h_i, h_t) (no denoising)."""

    def __init__(self, *, agg: str = "mean") -> None:
        self.agg = _check_agg(agg)

    def fit(self, train_reps: object, target_reps: object) -> RepSim:
        h, t = check_representations(train_reps, target_reps)
        assert t is not None
        self.scores_ = cosine_scores(h, t, self.agg)
        return self


def _checkpoint_stack(
    train_reps: object, target_reps: object, weights: Sequence[float] | None
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Per-checkpoint (N, d) / (M, d) arrays from (C, N, d) / (C, M, d) or single (N, d) inputs."""
    tr = np.asarray(train_reps, dtype=np.float64)
    ta = np.asarray(target_reps, dtype=np.float64)
    shapes = (tr.shape, ta.shape)
    if tr.ndim == 2:
        tr = tr[None]
    if ta.ndim == 2:
        ta = ta[None]
    if tr.ndim != 3 or ta.ndim != 3:
        raise ValueError(
            f"train_reps / target_reps must be (N, d) or (C, N, d) per checkpoint; got "
            f"{shapes[0]} and {shapes[1]}"
        )
    if tr.shape[0] != ta.shape[0]:
        raise ValueError(
            f"train_reps has {tr.shape[0]} checkpoints but target_reps has {ta.shape[0]}"
        )
    w = np.ones(tr.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (tr.shape[0],):
        raise ValueError(
            f"weights must hold one value per checkpoint ({tr.shape[0]}); got {w.shape}"
        )
    pairs = [check_representations(a, b) for a, b in zip(tr, ta)]
    return [p[0] for p in pairs], [p[1] for p in pairs], w  # type: ignore[misc]


class _GradAttributor(_Attributor):
    normalize = False

    def __init__(self, *, agg: str = "mean") -> None:
        self.agg = _check_agg(agg)
        self.pairwise_: np.ndarray | None = None

    def fit(
        self, train_reps: object, target_reps: object, weights: Sequence[float] | None = None
    ) -> _GradAttributor:
        """train_reps (N, d) or (C, N, d); target_reps (M, d) or (C, M, d); weights (C,)."""
        trs, tas, w = _checkpoint_stack(train_reps, target_reps, weights)
        pair = np.zeros((trs[0].shape[0], tas[0].shape[0]))  # (N, M)
        for g, gt, eta in zip(trs, tas, w):
            if self.normalize:
                g = g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-30)
                gt = gt / np.maximum(np.linalg.norm(gt, axis=1, keepdims=True), 1e-30)
            pair += eta * (g @ gt.T)
        self.pairwise_ = pair
        self.scores_ = pair.mean(axis=1) if self.agg == "mean" else pair.max(axis=1)
        return self


class GradDot(_GradAttributor):
    """s_i = agg_t <g_i, g_t> (one checkpoint, or a weight-1 sum over checkpoints)."""


class GradSim(_GradAttributor):
    """s_i = agg_t cos(g_i, g_t)."""

    normalize = True


class TracIn(_GradAttributor):
    """s_i = agg_t sum_c eta_c <g_i^c, g_t^c>: pass ``weights`` = the learning rates eta_c."""


class LESS(_GradAttributor):
    """s_i = agg_t sum_c eta_c cos(g_i^c, g_t^c) (LESS matching; Adam-preconditioned train
    gradients are the caller's choice of ``train_reps``)."""

    normalize = True
