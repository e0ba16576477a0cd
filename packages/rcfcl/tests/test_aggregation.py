"""Drift-aware aggregation: FedAvg at zero drift, permutation invariance, closed form, bad input."""

import math

import numpy as np
import pytest
from icml26_rcfcl import (
    aggregation_weights,
    drift_weighted_average,
    robust_drift_average,
)


def _updates(rng, k=5):
    return [[rng.normal(size=(3, 4)), rng.normal(size=(4,))] for _ in range(k)]


def test_zero_drift_is_fedavg():
    rng = np.random.default_rng(0)
    ups, n = _updates(rng), [10, 30, 5, 25, 30]
    avg = drift_weighted_average(ups, n, [0.0] * 5, beta=7.0)
    for i in range(2):
        fedavg = sum(nk * u[i] for nk, u in zip(n, ups)) / sum(n)
        np.testing.assert_allclose(avg[i], fedavg, rtol=1e-12)
    # beta = 0 ignores the magnitudes
    avg0 = drift_weighted_average(ups, n, [0.3, 0.9, 0.0, 0.5, 0.1], beta=0.0)
    np.testing.assert_allclose(avg0[0], avg[0], rtol=1e-12)


def test_permutation_invariant():
    rng = np.random.default_rng(1)
    ups, n, m = _updates(rng), [10, 30, 5, 25, 30], [0.1, 0.0, 0.8, 0.4, 0.2]
    a = drift_weighted_average(ups, n, m, beta=3.0)
    perm = rng.permutation(5)
    b = drift_weighted_average(
        [ups[i] for i in perm], [n[i] for i in perm], [m[i] for i in perm], beta=3.0
    )
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12)


def test_closed_form_two_clients():
    # m = (0, 1), beta = ln 3: client 2 counts a third of its samples
    w = aggregation_weights([10, 30], [0.0, 1.0], beta=math.log(3))
    np.testing.assert_allclose(w, [0.5, 0.5], rtol=1e-12)
    w = aggregation_weights([10, 10], [0.0, 0.5], beta=2.0)
    np.testing.assert_allclose(w, [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))])


def test_bad_input_is_named():
    rng = np.random.default_rng(2)
    ups = _updates(rng, 3)
    with pytest.raises(ValueError, match=r"magnitudes: client 1 .* nan"):
        drift_weighted_average(ups, [1, 1, 1], [0.0, float("nan"), 0.0], beta=1.0)
    bad = [*ups[:2], [ups[2][0][:2], ups[2][1]]]
    with pytest.raises(ValueError, match=r"client 2: parameter 0 has shape \(2, 4\)"):
        drift_weighted_average(bad, [1, 1, 1])
    with pytest.raises(ValueError, match="n: client 0"):
        aggregation_weights([0, 1])


def test_robust_average_drops_bad_clients_and_keeps_the_rest():
    rng = np.random.default_rng(3)
    ups = _updates(rng, 4)
    ref = [np.zeros((3, 4)), np.zeros(4)]
    nan = [u.copy() for u in ups[1]]
    nan[1][2] = np.nan
    out = robust_drift_average(
        {
            0: (ups[0], 10, 0.0),
            1: (nan, 10, 0.0),  # NaN parameters
            2: ([ups[2][0]], 10, 0.0),  # a missing array
            3: (ups[3], 20, float("nan")),  # NaN magnitude
            4: (ups[1], 30, 0.5),
        },
        ref,
        beta=2.0,
    )
    assert sorted(out.rejected) == [1, 2, 3] and out.accepted == [0, 4]
    assert "NaN" in out.rejected[1] and "sent 1 parameter arrays" in out.rejected[2]
    assert "magnitude" in out.rejected[3]
    expected = drift_weighted_average([ups[0], ups[1]], [10, 30], [0.0, 0.5], beta=2.0)
    for a, b in zip(out.params, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    none = robust_drift_average({1: (nan, 10, 0.0)}, ref)
    assert none.accepted == [] and all(np.array_equal(a, b) for a, b in zip(none.params, ref))


def test_a_magnitude_above_one_is_rejected():
    # m_k = 2 AUC - 1 averaged over classes lies in [0, 1]; 5 is a corrupt or mis-scaled report
    with pytest.raises(ValueError, match="magnitudes: client 1 has drift magnitude 5"):
        aggregation_weights([10, 10], [0.0, 5.0], beta=1.0)
    aggregation_weights([10, 10], [0.0, 1.0], beta=1.0)  # the bound itself is valid
    ref = [np.zeros(2)]
    out = robust_drift_average({0: ([np.ones(2)], 5, 0.2), 1: ([np.ones(2)], 5, 1.5)}, ref, 1.0)
    assert out.accepted == [0] and "[0, 1]" in out.rejected[1]
