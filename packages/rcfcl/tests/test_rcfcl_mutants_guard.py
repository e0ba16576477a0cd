"""The stratified drift test honours its tolerance (issue 67, finding 2).

``ClassConditionalDriftDetector.score`` pools its classes into one U statistic and tests
H0: AUC <= 1/2 + tolerance / 2. With one class the pooled test is that class's test exactly,
for every tolerance; and the tolerance moves the decision on a known AUC. A pooled test that
ignored the tolerance was caught only by a distillation-calibration test elsewhere.
"""

import math

import numpy as np
import pytest
from icml26_rcfcl import ClassConditionalDriftDetector, auc_null_pvalue


def _shifted(seed, shift=0.6, n=120, classes=1):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), n)
    x_ref = rng.normal(size=(len(y), 3))
    x_cur = rng.normal(size=(len(y), 3)) + np.array([shift, 0.0, 0.0])
    return x_ref, x_cur, y


@pytest.mark.parametrize("tolerance", [0.0, 0.1, 0.3])
def test_stratified_p_value_equals_the_single_class_test(tolerance):
    x_ref, x_cur, y = _shifted(0)
    det = ClassConditionalDriftDetector(tolerance=tolerance).fit_reference(x_ref, y)
    rep = det.score(x_cur, y)
    (c,) = rep.per_class
    v = rep.per_class[c]
    want = auc_null_pvalue(v["auc"], int(v["n1"]), int(v["n2"]), tolerance)
    assert v["p_value"] == pytest.approx(want, rel=1e-12)
    assert rep.p_value == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_stratified_p_value_pools_classes_with_the_tolerance():
    """Two classes: U = sum U_c, null mean (1/2 + tol/2) sum n1 n2, variance the sum of the
    classes' variances: computed here by hand from the per-class AUCs."""
    tol = 0.2
    x_ref, x_cur, y = _shifted(1, classes=2)
    rep = ClassConditionalDriftDetector(tolerance=tol).fit_reference(x_ref, y).score(x_cur, y)
    pc = list(rep.per_class.values())
    pairs = sum(v["n1"] * v["n2"] for v in pc)
    u = sum(v["auc"] * v["n1"] * v["n2"] for v in pc)
    var = sum(v["n1"] * v["n2"] * (v["n1"] + v["n2"] + 1) / 12 for v in pc)
    z = (u - (0.5 + 0.5 * tol) * pairs) / math.sqrt(var)
    assert rep.p_value == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)), rel=1e-12)


def test_tolerance_changes_the_decision_on_a_known_auc():
    """Same data, same split (the seed fixes it): the AUC a is the same for every tolerance.
    tolerance 0 flags the shift; a tolerance above 2a - 1 (the drift magnitude) does not."""
    x_ref, x_cur, y = _shifted(2, shift=0.8)
    strict = ClassConditionalDriftDetector(tolerance=0.0).fit_reference(x_ref, y).score(x_cur, y)
    (v,) = strict.per_class.values()
    a = v["auc"]
    assert a > 0.6 and strict.drift and strict.p_value < 1e-3
    tol = min(0.99, 2 * a - 1 + 0.1)  # the null's edge 1/2 + tol/2 lies above a
    lenient = ClassConditionalDriftDetector(tolerance=tol).fit_reference(x_ref, y)
    rep = lenient.score(x_cur, y)
    assert rep.per_class[0]["auc"] == a  # the same statistic
    assert not rep.drift and rep.p_value > 0.5
    assert rep.magnitude == strict.magnitude  # the tolerance moves the test, not the magnitude
