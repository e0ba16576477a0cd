"""Drift detector: calibration under H0, the optimal discriminator's AUC, density-ratio weights."""

import math

import numpy as np
import pytest
from icml26_rcfcl import (
    ClassConditionalDriftDetector,
    auc,
    auc_null_pvalue,
    discriminator_weights,
)


def _phi(z):
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_auc_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 30).astype(float), rng.integers(0, 5, 41).astype(float)
    brute = np.mean([(x > y) + 0.5 * (x == y) for x in a for y in b])
    assert auc(a, b) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("n_classes", [1, 3])
def test_false_positive_rate_is_alpha_without_drift(n_classes):
    # current and reference from the same distribution: rejections ~ Binomial(reps, alpha)
    alpha, reps = 0.05, 400
    rng = np.random.default_rng(1)
    rejections = 0
    for rep in range(reps):
        y_ref = np.repeat(np.arange(n_classes), 80)
        y_cur = np.repeat(np.arange(n_classes), 60)
        x_ref = rng.normal(size=(len(y_ref), 3)) + y_ref[:, None]
        x_cur = rng.normal(size=(len(y_cur), 3)) + y_cur[:, None]
        det = ClassConditionalDriftDetector(alpha=alpha, seed=rep).fit_reference(x_ref, y_ref)
        rejections += det.score(x_cur, y_cur).drift
    # 99.9% binomial interval around alpha*reps = 20 (sd 4.36)
    sd = math.sqrt(reps * alpha * (1 - alpha))
    assert abs(rejections - alpha * reps) <= 3.3 * sd, rejections


def test_detects_a_mean_shift():
    rng = np.random.default_rng(2)
    y = np.zeros(80, dtype=int)
    det = ClassConditionalDriftDetector().fit_reference(rng.normal(size=(80, 3)), y)
    rep = det.score(rng.normal(size=(80, 3)) + np.array([1.5, 0, 0]), y)
    assert rep.drift and rep.p_value < 1e-4 and rep.magnitude > 0.5


def test_optimal_discriminator_auc_matches_closed_form():
    # equal-variance Gaussians, mean shift delta: the Bayes discriminator is logistic and its
    # AUC is Phi(||delta|| / (sqrt(2) sigma))
    rng = np.random.default_rng(3)
    sigma, delta = 1.5, np.array([1.2, -0.9])
    n = 20_000
    y = np.zeros(n, dtype=int)
    x_ref = rng.normal(scale=sigma, size=(n, 2))
    x_cur = rng.normal(scale=sigma, size=(n, 2)) + delta
    rep = ClassConditionalDriftDetector(l2=1e-6).fit_reference(x_ref, y).score(x_cur, y)
    expected = _phi(np.linalg.norm(delta) / (math.sqrt(2) * sigma))
    got = rep.per_class[0]["auc"]
    assert got == pytest.approx(expected, rel=0.015), (got, expected)
    assert rep.magnitude == pytest.approx(2 * expected - 1, rel=0.05)


def test_density_ratio_weights_match_gaussian_closed_form():
    # w(x) = p_cur(x) / p_ref(x) = exp((|x - mu0|^2 - |x - mu1|^2) / (2 sigma^2)), with unequal
    # sample sizes so that the prior correction n_ref / n_cur matters
    rng = np.random.default_rng(4)
    sigma, mu1 = 1.0, np.array([0.8, 0.4])
    n_cur, n_ref = 8_000, 24_000
    x_cur = rng.normal(scale=sigma, size=(n_cur, 2)) + mu1
    x_ref = rng.normal(scale=sigma, size=(n_ref, 2))
    det = ClassConditionalDriftDetector(l2=1e-6, clip=(1e-4, 1e4))
    rep = det.fit_reference(x_ref, np.zeros(n_ref, int)).score(x_cur, np.zeros(n_cur, int))
    closed = np.exp(((x_cur**2).sum(1) - ((x_cur - mu1) ** 2).sum(1)) / (2 * sigma**2))
    central = np.linalg.norm(x_cur - mu1 / 2, axis=1) < 1.5  # where the fit is well determined
    rel = np.abs(rep.weights[central] / closed[central] - 1)
    assert np.median(rel) < 0.03 and rel.max() < 0.15, (np.median(rel), rel.max())


def test_discriminator_weights_formula_and_clipping():
    p = np.array([0.5, 0.8, 0.999, 0.001])
    w = discriminator_weights(p, prior_ratio=2.0, clip=(0.1, 10.0))
    np.testing.assert_allclose(w, [2.0, 8.0, 10.0, 0.1])
    w = discriminator_weights(p[:2], normalize=True)
    np.testing.assert_allclose(w, np.array([1.0, 4.0]) / 2.5)


def test_null_pvalue_is_uniform_center():
    assert auc_null_pvalue(0.5, 50, 50) == pytest.approx(0.5)
    assert auc_null_pvalue(0.6, 50, 50, tolerance=0.2) == pytest.approx(0.5)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="probs"):
        discriminator_weights(np.array([0.2, np.nan]))
    with pytest.raises(ValueError, match="alpha"):
        ClassConditionalDriftDetector(alpha=1.5)
    rng = np.random.default_rng(5)
    det = ClassConditionalDriftDetector().fit_reference(rng.normal(size=(20, 2)), np.zeros(20, int))
    with pytest.raises(ValueError, match="class 0 has 0 current"):
        det.score(rng.normal(size=(10, 2)), np.ones(10, int), classes=[0])
    with pytest.raises(ValueError, match="x: contains NaN"):
        det.score(np.full((10, 2), np.nan), np.zeros(10, int))
    # a class the client has no data for is simply not tested when classes is not given
    rep = det.score(rng.normal(size=(10, 2)), np.ones(10, int))
    assert rep.per_class == {} and not rep.drift and np.all(rep.weights == 1)


def test_client_magnitude_is_the_class_share_weighted_mean():
    # class 0 (30 current samples): current and reference are two distinct points, so every
    # held-out current score exceeds every reference score: AUC 1, m_0 = 1. Class 1 (10
    # samples): current = reference = one point, every score tied: AUC 1/2, m_1 = 0.
    # m_k = (30 * 1 + 10 * 0) / 40 = 0.75; a plain class mean would give 0.5.
    x_ref = np.concatenate([np.full((40, 2), -1.0), np.zeros((40, 2))])
    y_ref = np.repeat([0, 1], 40)
    x_cur = np.concatenate([np.full((30, 2), 1.0), np.zeros((10, 2))])
    y_cur = np.repeat([0, 1], [30, 10])
    rep = ClassConditionalDriftDetector().fit_reference(x_ref, y_ref).score(x_cur, y_cur)
    assert rep.per_class[0]["auc"] == 1.0 and rep.per_class[1]["auc"] == 0.5
    assert rep.magnitude == pytest.approx(0.75, abs=1e-12)


def test_a_feature_dimension_mismatch_is_named():
    rng = np.random.default_rng(6)
    det = ClassConditionalDriftDetector().fit_reference(rng.normal(size=(20, 3)), np.zeros(20, int))
    with pytest.raises(ValueError, match="x: expected 3 features"):
        det.score(rng.normal(size=(20, 2)), np.zeros(20, int))
