"""Asynchronous drift scenarios and detection scoring."""

import numpy as np
import pytest
from icml26_rcfcl import AsyncDriftScenario, detection_scores


def _toy(**kw):
    rng = np.random.default_rng(0)
    x = rng.random((400, 6)).astype(np.float32)
    y = np.repeat(np.arange(4), 100)
    return AsyncDriftScenario.make(x, y, n_clients=4, n_tasks=2, rounds_per_task=3, **kw)


def test_deterministic_and_drift_applied_from_onset():
    a, b = _toy(n_drifting=4, seed=3), _toy(n_drifting=4, seed=3)
    assert a.onset == b.onset and a.magnitude == b.magnitude
    for k in range(4):
        on, m = a.onset[k], a.magnitude[k]
        assert on % 3 != 0  # never the first round of a task
        for r in range(a.n_rounds):
            xa, ya = a.client_data(k, r)
            xb, yb = b.client_data(k, r)
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)
            idx = a._shards[a.task_of(r)][k]
            x0, y0 = a.x_train[idx], a.y_train[idx]
            if r < on:
                np.testing.assert_array_equal(xa, x0)
                np.testing.assert_array_equal(ya, y0)
            elif a.kind[k] == "virtual":
                np.testing.assert_allclose(xa, (1 - m) * x0 + m * (1 - x0), rtol=1e-6)
            else:  # labels swapped inside the pair, a fraction of about m
                swapped = ya != y0
                assert np.all(ya[swapped] == (y0[swapped] ^ 1))
                assert set(ya) <= set(a.tasks[a.task_of(r)])


def test_seen_and_old_classes():
    s = _toy(n_drifting=0)
    assert s.seen_classes(0) == [] and s.seen_classes(1) == [0, 1] and s.seen_classes(3) == [0, 1]
    assert (
        s.seen_classes(4) == [0, 1, 2, 3] and s.old_classes(4) == [0, 1] and s.old_classes(2) == []
    )


def test_detection_scores_by_hand():
    s = _toy(n_drifting=0)
    s.onset = {0: 2, 1: 4}
    flags = np.zeros((4, 6), bool)
    flags[0, 3] = True  # TP, delay 1
    flags[2, 1] = True  # FP (never drifts); client 1 missed: FN
    d = detection_scores(flags, s)
    assert d["precision"] == 0.5 and d["recall"] == 0.5 and d["f1"] == 0.5 and d["delay"] == 1.0


def test_bad_input():
    with pytest.raises(ValueError, match="magnitude: client 0"):
        s = _toy(n_drifting=0)
        AsyncDriftScenario(
            s.x_train,
            s.y_train,
            s.x_test,
            s.y_test,
            s.tasks,
            n_clients=4,
            magnitude={0: float("nan")},
        )
    with pytest.raises(ValueError, match="k: client index"):
        _toy(n_drifting=0).client_data(7, 0)


def test_river_sea_stream_has_its_drift_at_the_known_rounds():
    pytest.importorskip("river")
    from icml26_rcfcl import StreamDriftScenario

    sc = StreamDriftScenario.river_sea(n_clients=6, n_rounds=5, per_round=400, n_drifting=3, seed=1)
    assert len(sc.onset) == 3 and all(1 <= o < 5 for o in sc.onset.values())
    theta = {0: 8.0, 1: 9.0, 2: 7.0, 3: 9.5}  # SEA (Street & Kim 2001): y = x1 + x2 > theta
    for k in range(6):
        for r in range(5):
            x, y = sc.client_data(k, r)
            assert x.shape == (400, 3) and x.min() >= 0 and x.max() <= 1
            s = 10.0 * (x[:, 0].astype(np.float64) + x[:, 1])
            v = sc.variant[k] if k in sc.onset and r >= sc.onset[k] else 0
            # the label follows the concept of the round, exactly from the onset on
            far = np.abs(s - theta[v]) > 1e-4  # float32 rounding at the boundary
            np.testing.assert_array_equal(y[far], (s[far] > theta[v]).astype(np.int64))
            if v:  # and the switch relabels the band between the two thresholds
                a, b = sorted((theta[0], theta[v]))
                band = (s > a + 1e-4) & (s <= b - 1e-4)
                assert band.any() and np.all((y[band] == 1) == (theta[v] < theta[0]))
    # magnitude = P(label changes) = (b^2 - a^2) / 200, against a Monte Carlo estimate
    rng = np.random.default_rng(0)
    u = rng.uniform(0, 10, size=(200_000, 2)).sum(1)
    for k, v in sc.variant.items():
        mc = np.mean((u > theta[0]) != (u > theta[v]))
        assert sc.magnitude[k] == pytest.approx(mc, rel=0.03)
    # the first round is clean for every client, and a drifting scenario scores with F1
    x_te, y_te = sc.test_data(0)
    np.testing.assert_array_equal(y_te, (10.0 * (x_te[:, 0] + x_te[:, 1]) > 8.0).astype(np.int64))
    with pytest.raises(ValueError, match="n_drifting"):
        StreamDriftScenario.river_sea(n_clients=2, n_drifting=3)


def test_task_end_drift_stops_at_the_task_boundary():
    s = _toy(n_drifting=4, seed=3, drift_until="task_end")
    p = _toy(n_drifting=4, seed=3)  # the same draws, persistent drift
    assert s.onset == p.onset and s.magnitude == p.magnitude
    for k, on in s.onset.items():
        end = (on // 3 + 1) * 3  # the first round of the next task
        for r in range(s.n_rounds):
            assert s.is_drifted(k, r) == (on <= r < end)
            assert p.is_drifted(k, r) == (r >= on)
            x, y = s.client_data(k, r)
            idx = s._shards[s.task_of(r)][k]
            if r >= end:  # clean again: the shard as stored
                np.testing.assert_array_equal(x, s.x_train[idx])
                np.testing.assert_array_equal(y, s.y_train[idx])
    with pytest.raises(ValueError, match="drift_until"):
        _toy(n_drifting=0, drift_until="forever")


def test_without_drift_keeps_the_data_and_removes_the_drift():
    s = _toy(n_drifting=4, seed=5)
    c = s.without_drift()
    assert c.onset == {} and c.magnitude == {} and c.kind == {}
    for k in range(4):
        for r in range(s.n_rounds):
            assert not c.is_drifted(k, r)
            np.testing.assert_array_equal(c._shards[s.task_of(r)][k], s._shards[s.task_of(r)][k])
    np.testing.assert_array_equal(c.x_test, s.x_test)


def test_detection_scores_count_flags_after_a_task_end_drift_as_false():
    s = _toy(n_drifting=0, drift_until="task_end")
    s.onset = {0: 1}  # drifted in rounds 1 and 2 only (task 0 is rounds 0-2)
    flags = np.zeros((4, 6), bool)
    flags[0, 4] = True  # after the drift ended: a false positive and a miss
    d = detection_scores(flags, s)
    assert d["precision"] == 0.0 and d["recall"] == 0.0 and d["f1"] == 0.0
    flags[0, 2] = True  # inside the episode: delay 1, but the late flag is still false
    d = detection_scores(flags, s)
    assert d["precision"] == 0.5 and d["recall"] == 1.0 and d["delay"] == 1.0
