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


def test_kd_term_is_lambda_t_squared_times_the_kl_at_temperature_t(monkeypatch):
    """Each local step with replay adds lambda T^2 KL(softmax(teacher/T) || softmax(student/T)).

    The KL is replaced by a constant K (no gradient, so the trajectory is the same for every K):
    the loss handed to autograd then moves by exactly lambda T^2 K between K = 0 and K = 1. The
    KL's arguments are the student's log-probabilities and the teacher's probabilities, both at
    temperature T (each row normalised; the target is not the student's)."""
    import torch
    from icml26_rcfcl import RCFCLConfig, load_digits_xy, local_update
    from icml26_rcfcl import rcfcl as rc
    from icml26_rcfcl.rcfcl import init_params

    x, y = load_digits_xy()
    keep = np.isin(y, [0, 1, 2, 3])
    x, y = x[keep][:120], y[keep][:120]
    cfg = RCFCLConfig(
        gen_epochs=0, local_epochs=1, weighting=False, detect=False, kd=0.7, kd_temperature=3.0
    )
    params = init_params(cfg, seed=0)
    kw = dict(seen_classes=[0, 1, 2, 3], old_classes=[0, 1], seed=3, cfg=cfg)
    mask = np.isin(y, [2, 3])

    def run(k_value):
        losses, seen = [], []
        real_grad = torch.autograd.grad

        def fake_kl(inp, target, reduction="mean", **kwargs):
            seen.append((inp.detach().clone(), target.detach().clone(), inp.requires_grad,
                         target.requires_grad))  # fmt: skip
            return torch.tensor(k_value, dtype=inp.dtype)

        def grad_spy(outputs, inputs, *args, **kwargs):
            losses.append(float(outputs.detach()))
            return real_grad(outputs, inputs, *args, **kwargs)

        monkeypatch.setattr(rc.F, "kl_div", fake_kl)
        monkeypatch.setattr(rc.torch.autograd, "grad", grad_spy)
        res = local_update(params, x[mask], y[mask], **kw)
        monkeypatch.undo()
        return res, losses, seen

    r0, l0, seen = run(0.0)
    r1, l1, _ = run(1.0)
    assert r0.magnitude == 0.0 and len(seen) > 0  # no detection: lambda = lambda_0
    for a, b in zip(r0.params, r1.params):
        np.testing.assert_array_equal(a, b)  # the constant KL does not change the trajectory
    diffs = np.array(l1) - np.array(l0)
    steps = diffs[np.abs(diffs) > 1e-9]
    assert len(steps) == len(seen)
    np.testing.assert_allclose(steps, 0.7 * 3.0**2, rtol=1e-6)  # float32 losses
    for logp, q, student_grad, teacher_grad in seen:
        np.testing.assert_allclose(logp.exp().sum(1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(q.sum(1), 1.0, rtol=1e-5)
        assert torch.all(q > 0)  # probabilities, not log-probabilities, as the target
        assert student_grad and not teacher_grad  # KL(teacher || student): the student learns
    # the first step: the student is still the teacher, so at the same temperature the two
    # distributions agree (a teacher softened at another temperature would not)
    logp, q = seen[0][0], seen[0][1]
    torch.testing.assert_close(logp.exp(), q, rtol=1e-5, atol=1e-6)
