"""Local drift detection and discriminator sample weights (RC-FCL, local calibration).

Each client compares its current data of class y with the reference R_y synthesised by the
global generator, with a discriminator D(x) = P(current | x) (a classifier two-sample test,
Lopez-Paz & Oquab, 2017):

* two-sample test: D is fitted on one half of both samples; on the other half its scores give
  AUC_y = P(D(x_cur) > D(x_ref)). Under H0 (same distribution) the held-out scores are
  exchangeable, so AUC_y is a Mann-Whitney U statistic over (n1 n2) with mean 1/2 and variance
  (n1 + n2 + 1) / (12 n1 n2): the analytic null, one-sided, AUC > 1/2 + tolerance / 2.
  The client's test pools its classes (stratified U = sum_y U_y, null moments summed): one
  test with the power of all its samples, exact under H0 like each per-class test.
* magnitude:        m_y = max(0, 2 AUC_y - 1),   m_k = sum_y pi_{k,y} m_y   (pi: class shares)
* sample weights:   w_i = clip( (n_ref / n_cur) D(x_i) / (1 - D(x_i)), lo, hi )
  the density ratio p_cur(x_i) / p_ref(x_i) when D is the Bayes discriminator.

[recon] the paper's discriminator, test and weight formula are not public: the magnitude
2 AUC - 1, the analytic AUC null, the stratified test pooled over classes (one U statistic,
not a Bonferroni union of per-class tests; the per-class p-values in ``per_class`` are
reported only) and the clipped density-ratio weights are our reconstruction from the abstract.

The discriminator is an L2-regularised logistic regression fitted by Newton's method in
float64 (the Bayes discriminator for equal-covariance Gaussians is exactly logistic, which
the closed-form tests use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def _sigmoid(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))  # stable for large |t|


@dataclass
class LogisticDiscriminator:
    """P(label = 1 | x) = sigmoid(x @ w + b), L2 penalty ``l2 / 2 ||w||^2`` (not on b)."""

    l2: float = 1.0
    iters: int = 25
    w: np.ndarray = field(default_factory=lambda: np.zeros(0))
    b: float = 0.0

    def fit(self, x: np.ndarray, t: np.ndarray) -> LogisticDiscriminator:
        x = np.asarray(x, dtype=np.float64)  # (n, d)
        t = np.asarray(t, dtype=np.float64)  # (n,) in {0, 1}
        n, d = x.shape
        xb = np.concatenate([x, np.ones((n, 1))], axis=1)  # (n, d + 1)
        theta = np.zeros(d + 1)
        reg = np.full(d + 1, self.l2)
        reg[-1] = 1e-8  # the bias is not penalised
        for _ in range(self.iters):
            p = _sigmoid(xb @ theta)
            grad = xb.T @ (p - t) + reg * theta
            hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(reg)
            step = np.linalg.solve(hess, grad)
            theta -= step
            if np.max(np.abs(step)) < 1e-10:
                break
        self.w, self.b = theta[:-1], float(theta[-1])
        return self

    def logit(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.float64) @ self.w + self.b

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return _sigmoid(self.logit(x))


def auc(scores_pos: np.ndarray, scores_neg: np.ndarray) -> float:
    """P(s_pos > s_neg) + P(s_pos = s_neg) / 2 (Mann-Whitney U / (n1 n2)), ties averaged."""
    sp, sn = np.asarray(scores_pos, np.float64), np.asarray(scores_neg, np.float64)
    n1, n2 = sp.size, sn.size
    if n1 == 0 or n2 == 0:
        raise ValueError(f"auc: both samples must be non-empty; got sizes {n1} and {n2}")
    allv = np.concatenate([sp, sn])
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty(allv.size)
    sorted_v = allv[order]
    i = 0
    while i < allv.size:  # average ranks over ties
        j = i
        while j + 1 < allv.size and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i : j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    return float(u / (n1 * n2))


def auc_null_pvalue(a: float, n1: int, n2: int, tolerance: float = 0.0) -> float:
    """One-sided p-value of H0: AUC <= 1/2 + tolerance/2 (normal approximation of U)."""
    se = math.sqrt((n1 + n2 + 1) / (12.0 * n1 * n2))
    z = (a - 0.5 - 0.5 * tolerance) / se
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def discriminator_weights(
    probs: np.ndarray,
    *,
    prior_ratio: float = 1.0,
    clip: tuple[float, float] = (0.1, 10.0),
    normalize: bool = False,
) -> np.ndarray:
    """Density-ratio weights w = clip(prior_ratio * D / (1 - D), *clip) [recon].

    ``probs`` are D(x) = P(current | x); ``prior_ratio`` = n_ref / n_cur corrects for the
    class balance the discriminator was trained with, so that w = p_cur(x) / p_ref(x) for the
    Bayes D. ``normalize`` rescales the weights to mean 1.
    """
    p = np.asarray(probs, dtype=np.float64)
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("probs: discriminator probabilities must be finite and in [0, 1]")
    lo, hi = clip
    if not (0 < lo <= hi):
        raise ValueError(f"clip: expected 0 < lo <= hi; got {clip}")
    if not (math.isfinite(prior_ratio) and prior_ratio > 0):
        raise ValueError(f"prior_ratio: expected a positive finite number; got {prior_ratio}")
    eps = 1e-12
    w = prior_ratio * p / np.maximum(1.0 - p, eps)
    w = np.clip(w, lo, hi)
    if normalize and w.size:
        w = w / w.mean()
    return w


@dataclass
class DriftReport:
    """What ``ClassConditionalDriftDetector.score`` found on one client's current data."""

    magnitude: float  # m_k = sum_y pi_y m_y over the tested classes (0 if none tested)
    p_value: float  # stratified test over the tested classes, U = sum_y U_y (1.0 if none)
    drift: bool  # p_value < alpha
    per_class: dict[int, dict[str, float]]  # y -> {"auc", "p_value", "magnitude", "n"}
    weights: np.ndarray  # (n,) density-ratio weights, 1.0 for classes not tested


class ClassConditionalDriftDetector:
    """Class-conditional classifier two-sample test against a reference sample.

    >>> det = ClassConditionalDriftDetector(alpha=0.05).fit_reference(x_ref, y_ref)
    >>> report = det.score(x_cur, y_cur)   # report.drift, report.magnitude, report.weights
    """

    def __init__(
        self,
        *,
        alpha: float = 0.05,
        tolerance: float = 0.0,
        l2: float = 1.0,
        clip: tuple[float, float] = (0.1, 10.0),
        min_samples: int = 4,
        seed: int = 0,
    ) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha: expected a level in (0, 1); got {alpha}")
        if not 0 <= tolerance < 1:
            raise ValueError(f"tolerance: expected a magnitude in [0, 1); got {tolerance}")
        self.alpha, self.tolerance, self.l2, self.clip = alpha, tolerance, l2, clip
        self.min_samples, self.seed = min_samples, seed
        self._ref: dict[int, np.ndarray] = {}

    def fit_reference(self, x_ref: np.ndarray, y_ref: np.ndarray) -> ClassConditionalDriftDetector:
        x_ref, y_ref = _check_xy(x_ref, y_ref, "x_ref", "y_ref")
        self._ref = {int(c): x_ref[y_ref == c] for c in np.unique(y_ref)}
        return self

    @property
    def classes(self) -> list[int]:
        return sorted(self._ref)

    def score(self, x: np.ndarray, y: np.ndarray, classes: list[int] | None = None) -> DriftReport:
        """Test each class present in both ``y`` and the reference (or exactly ``classes``).

        A class named in ``classes`` with fewer than ``min_samples`` current or reference
        samples is an error (a client with no data for a class cannot be tested on it).
        """
        x, y = _check_xy(x, y, "x", "y")
        d_ref = next(iter(self._ref.values())).shape[1] if self._ref else x.shape[1]
        if x.shape[1] != d_ref:
            raise ValueError(
                f"x: expected {d_ref} features (the reference's dimension); got {x.shape[1]}"
            )
        if classes is None:
            present = set(np.unique(y).tolist())
            todo = [
                c
                for c in self.classes
                if c in present
                and (y == c).sum() >= self.min_samples
                and len(self._ref[c]) >= self.min_samples
            ]
        else:
            todo = [int(c) for c in classes]
            for c in todo:
                n_cur, n_ref = int((y == c).sum()), len(self._ref.get(c, ()))
                if n_cur < self.min_samples or n_ref < self.min_samples:
                    raise ValueError(
                        f"classes: class {c} has {n_cur} current and {n_ref} reference samples; "
                        f"at least min_samples={self.min_samples} of each are needed"
                    )
        rng = np.random.default_rng(self.seed)
        weights = np.ones(len(y))
        per_class: dict[int, dict[str, float]] = {}
        for c in todo:
            idx_cur = np.flatnonzero(y == c)
            xc, xr = x[idx_cur], self._ref[c]
            pc, pr = rng.permutation(len(xc)), rng.permutation(len(xr))
            hc, hr = len(xc) // 2, len(xr) // 2
            # fit on the first halves, test on the second halves
            disc = LogisticDiscriminator(l2=self.l2).fit(
                np.concatenate([xc[pc[:hc]], xr[pr[:hr]]]),
                np.concatenate([np.ones(hc), np.zeros(hr)]),
            )
            s_cur, s_ref = disc.logit(xc[pc[hc:]]), disc.logit(xr[pr[hr:]])
            a = auc(s_cur, s_ref)
            p = auc_null_pvalue(a, len(s_cur), len(s_ref), self.tolerance)
            per_class[c] = {
                "auc": a,
                "p_value": p,
                "magnitude": max(0.0, 2.0 * a - 1.0),
                "n": float(len(xc)),
                "n1": float(len(s_cur)),
                "n2": float(len(s_ref)),
            }
            weights[idx_cur] = discriminator_weights(
                disc.predict_proba(xc), prior_ratio=hr / hc, clip=self.clip
            )
        if per_class:
            # m_k = sum_y pi_y m_y, pi_y = n_y / n the class shares among the tested classes;
            # (min: a sum of shares times m_y <= 1 may round one ulp above 1)
            n_tot = sum(v["n"] for v in per_class.values())
            magnitude = min(1.0, sum(v["n"] / n_tot * v["magnitude"] for v in per_class.values()))
            # one stratified test over the classes: U = sum_c U_c, exact null moments
            pairs = sum(v["n1"] * v["n2"] for v in per_class.values())
            u = sum(v["auc"] * v["n1"] * v["n2"] for v in per_class.values())
            var = sum(
                v["n1"] * v["n2"] * (v["n1"] + v["n2"] + 1) / 12.0 for v in per_class.values()
            )
            z = (u - (0.5 + 0.5 * self.tolerance) * pairs) / math.sqrt(var)
            p_value = 0.5 * math.erfc(z / math.sqrt(2.0))
        else:
            magnitude, p_value = 0.0, 1.0
        return DriftReport(
            magnitude=float(magnitude),
            p_value=float(p_value),
            drift=bool(p_value < self.alpha),
            per_class=per_class,
            weights=weights,
        )


def _check_xy(x: np.ndarray, y: np.ndarray, xn: str, yn: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y).reshape(-1)
    if x.ndim != 2:
        raise ValueError(f"{xn}: expected a 2-d array (n, d); got shape {x.shape}")
    if len(y) != len(x):
        raise ValueError(f"{yn}: expected {len(x)} labels (one per row of {xn}); got {len(y)}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{xn}: contains NaN or inf")
    return x, y.astype(np.int64)
