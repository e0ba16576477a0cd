import numpy as np
import pytest
from icml26_dra import auprc, average_precision, precision_recall_points

sklearn_metrics = pytest.importorskip("sklearn.metrics")


@pytest.mark.parametrize("seed", range(5))
def test_auprc_and_ap_match_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = (rng.random(300) < 0.1).astype(int)
    y[0] = 1
    s = np.round(rng.normal(size=300) + y, 1)  # rounding makes many ties
    p, r, _ = sklearn_metrics.precision_recall_curve(y, s)
    assert auprc(s, y) == pytest.approx(sklearn_metrics.auc(r, p), rel=1e-12)
    assert average_precision(s, y) == pytest.approx(
        sklearn_metrics.average_precision_score(y, s), rel=1e-12
    )


def test_closed_forms():
    # ranking: pos, neg, pos -> points (P, R) = (1, .5), (.5, .5), (2/3, 1)
    s, y = np.array([3.0, 2.0, 1.0]), np.array([1, 0, 1])
    p, r = precision_recall_points(s, y)
    np.testing.assert_allclose(p, [1.0, 0.5, 2 / 3])
    np.testing.assert_allclose(r, [0.5, 0.5, 1.0])
    assert average_precision(s, y) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    # trapezoid from (0, 1): .5*(1+1)/2 + 0 + .5*(.5+2/3)/2
    assert auprc(s, y) == pytest.approx(0.5 + 0.5 * (0.5 + 2 / 3) / 2)
    perfect = np.r_[np.ones(5), np.zeros(95)]
    assert auprc(-np.arange(100.0), perfect) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("s", "y", "msg"),
    [
        ([1.0, np.nan], [1, 0], "NaN"),
        ([1.0, 2.0], [1, 0, 0], "length"),
        ([1.0, 2.0], [0, 0], "no positive"),
        ([1.0, 2.0], [2, 0], "0/1"),
        ([], [], "empty"),
    ],
)
def test_bad_input(s, y, msg):
    with pytest.raises(ValueError, match=msg):
        auprc(s, y)
