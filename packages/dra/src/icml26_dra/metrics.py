"""Detection metrics for attribution scores: AUPRC (trapezoidal) and average precision.

Two areas under the precision-recall curve are in use and they differ:

* ``auprc``: the trapezoidal area ``sklearn.metrics.auc(recall, precision)`` over the points of
  ``sklearn.metrics.precision_recall_curve`` (with its appended (recall 0, precision 1) point).
  This is the AUPRC of DATE-LM's ``evaluate_application.py``, the benchmark this paper's
  protocol follows, so it is the headline metric here.
* ``average_precision``: ``AP = sum_n (R_n - R_{n-1}) P_n``, the step-wise area of
  ``sklearn.metrics.average_precision_score`` (no interpolation).

Both are computed here in numpy (tests check them against scikit-learn side by side); ties in
the scores form one threshold, as in scikit-learn.
"""

from __future__ import annotations

import numpy as np

__all__ = ["auprc", "average_precision", "precision_recall_points"]


def _check(scores: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or y.ndim != 1:
        raise ValueError(f"scores and labels must be 1-D; got shapes {s.shape} and {y.shape}")
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in length: {s.shape[0]} vs {y.shape[0]}")
    if s.size == 0:
        raise ValueError("scores is empty")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contains NaN or inf")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be 0/1 (or boolean)")
    y = y.astype(np.float64)
    if y.sum() == 0:
        raise ValueError("labels has no positive (unsafe) sample: precision-recall is undefined")
    return s, y


def precision_recall_points(scores: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    """(precision, recall) at every distinct threshold, highest threshold first.

    Same points as ``sklearn.metrics.precision_recall_curve`` before its final (R=0, P=1) point,
    in reverse order: recall is non-decreasing here.
    """
    s, y = _check(scores, labels)
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # last index of each tie group
    tps = np.cumsum(y)[last]
    fps = (last + 1) - tps
    return tps / (tps + fps), tps / tps[-1]


def auprc(scores: object, labels: object) -> float:
    """Trapezoidal area under the PR curve, ``auc(recall, precision)`` (DATE-LM's AUPRC)."""
    p, r = precision_recall_points(scores, labels)
    p, r = np.r_[1.0, p], np.r_[0.0, r]
    return float(np.sum(np.diff(r) * (p[1:] + p[:-1]) / 2.0))


def average_precision(scores: object, labels: object) -> float:
    """Step-wise AP = sum_n (R_n - R_{n-1}) P_n (scikit-learn's ``average_precision_score``)."""
    p, r = precision_recall_points(scores, labels)
    return float(np.sum(np.diff(np.r_[0.0, r]) * p))
