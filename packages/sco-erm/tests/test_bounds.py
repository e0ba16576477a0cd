import math

import icml26_sco_erm as sco
import numpy as np
import pytest


def test_gd_bounds_closed_forms():
    assert sco.gd_lower_bound(0.1, 100, 16) == pytest.approx(math.sqrt(10 / 64), rel=1e-12)
    assert sco.gd_upper_bound(0.1, 100, 16) == pytest.approx(10 / 16, rel=1e-12)
    assert sco.gd_stability_bound(0.1, 100, 16) == pytest.approx(1 + 10 / 16, rel=1e-12)
    # the two meet at eta T = sqrt(m); above it the lower bound sits below the upper bound
    m = 64
    assert sco.gd_lower_bound(1.0, 8, m) == pytest.approx(sco.gd_upper_bound(1.0, 8, m))
    assert sco.gd_lower_bound(1.0, 100, m) < sco.gd_upper_bound(1.0, 100, m)
    assert sco.gd_lower_bound(1.0, 10**6, m) == 1.0  # capped: losses are 1-Lipschitz on B


def test_overfit_probability_exact_small_case_and_monte_carlo():
    # N = 2 codewords, m = 1 sample: P(some codeword missing from V_1) = 1 - 1/4
    assert sco.overfit_erm_probability(1, 2) == pytest.approx(0.75, rel=1e-12)
    rng = np.random.default_rng(0)
    m, N, reps = 6, 50, 4000
    masks = rng.random((reps, m, N)) < 0.5
    mc = (~masks.any(axis=1)).any(axis=1).mean()
    p = sco.overfit_erm_probability(m, N)
    assert abs(mc - p) < 4 * math.sqrt(p * (1 - p) / reps)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sco.gd_lower_bound(0.0, 10, 10),
        lambda: sco.gd_lower_bound(-1.0, 10, 10),
        lambda: sco.gd_upper_bound(0.1, 10, 0),
        lambda: sco.gd_stability_bound(float("nan"), 10, 10),
        lambda: sco.overfit_erm_probability(0, 10),
    ],
)
def test_bad_bound_arguments_raise(call):
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        call()


def test_paper_constants_d_6m_lambda_m_to_minus_three_halves_and_code_dimension():
    assert sco.paper_dimension(10) == 60 and sco.paper_dimension(14) == 84
    assert sco.paper_lambda(16) == pytest.approx(1 / 64, rel=1e-15)
    assert sco.paper_lambda(9) == pytest.approx(1 / 27, rel=1e-15)
    # k = floor(6m (1 - H(1/4))), 1 - H(1/4) = 0.188722...: 48 -> 9.06, 60 -> 11.32, 84 -> 15.85
    rate = 1 - (0.25 * 2 + 0.75 * math.log2(4 / 3))
    for m, k in ((6, 6), (8, 9), (10, 11), (12, 13), (14, 15)):
        assert math.floor(6 * m * rate) == k
        assert sco.code_dimension(m) == k
