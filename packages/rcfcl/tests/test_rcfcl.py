"""The client round and the simulator: determinism, detection of a drifting client, robust rounds."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from icml26_rcfcl import AsyncDriftScenario, RCFCLConfig, load_digits_xy, local_update, simulate
from icml26_rcfcl.rcfcl import init_params

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def small():
    x, y = load_digits_xy()
    m = np.isin(y, [0, 1, 2, 3])
    return AsyncDriftScenario.make(
        x[m], y[m], n_clients=4, n_tasks=2, rounds_per_task=2, n_drifting=0, seed=0
    )


def test_local_update_is_deterministic(small):
    cfg = RCFCLConfig(gen_epochs=2, local_epochs=2)
    p = init_params(cfg, 0)
    x, y = small.client_data(0, 1)
    a = local_update(p, x, y, seen_classes=[0, 1], old_classes=[], cfg=cfg, seed=5)
    b = local_update(p, x, y, seen_classes=[0, 1], old_classes=[], cfg=cfg, seed=5)
    assert all(np.array_equal(u, v) for u, v in zip(a.params, b.params))


@pytest.fixture(scope="module")
def trained(small):
    """Global model after both tasks of ``small`` (classes 0-3), FedAvg + generative replay."""
    return simulate(small, RCFCLConfig(method="fedavg_gr", gen_epochs=20, local_epochs=5), seed=0)


def test_a_drifting_client_is_flagged_and_down_weighted(small, trained):
    # after training on the first task, client 0's data inverted (virtual drift m = 1)
    cfg = RCFCLConfig(gen_epochs=20, local_epochs=5, tolerance=0.3)
    p = trained.params
    reports = []
    for k in range(4):
        x, y = small.client_data(k, 0)
        if k == 0:
            x = 1.0 - x
        reports.append(
            local_update(p, x, y, seen_classes=[0, 1, 2, 3], old_classes=[], cfg=cfg, seed=k)
        )
    assert reports[0].drift and reports[0].magnitude > 0.8
    assert not any(r.drift for r in reports[1:]), [r.raw_magnitude for r in reports]
    # the magnitude sent to the server is gated by the test: 0 unless drift is flagged
    assert all(r.magnitude == 0.0 and r.raw_magnitude > 0 for r in reports[1:])
    assert reports[0].magnitude == reports[0].raw_magnitude


def test_kd_weight_is_calibrated_by_the_flagged_magnitude(small, trained):
    # lambda(m) = lambda_0 (1 - m): a flagged client with magnitude m and KD weight lambda_0 must
    # train exactly like the same client left unflagged (same data, same random stream: the
    # test still runs, tolerance 0.99 keeps it from flagging) with KD weight lambda_0 (1 - m)
    x, y = small.client_data(0, 2)  # task 1 (classes 2, 3): classes 0, 1 are replayed
    flip = np.random.default_rng(0).random(len(y)) < 0.7
    y = np.where(flip, 5 - y, y)  # real drift: 70% of the labels swapped 2 <-> 3
    kw = dict(seen_classes=[0, 1, 2, 3], old_classes=[0, 1], seed=3)
    base = RCFCLConfig(gen_epochs=0, local_epochs=2, weighting=False, tolerance=0.3, kd=4.0)
    flagged = local_update(trained.params, x, y, cfg=base, **kw)
    m = flagged.magnitude
    assert flagged.drift and 0.5 < m < 1.0, m
    quiet = replace(base, tolerance=0.99, alpha=1e-6, kd=4.0 * (1.0 - m))
    unflagged = local_update(trained.params, x, y, cfg=quiet, **kw)
    assert not unflagged.drift and unflagged.raw_magnitude == m
    for a, b in zip(flagged.params, unflagged.params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)
    # ... and the KD term is active: the uncalibrated weight lambda_0 trains differently
    plain = local_update(trained.params, x, y, cfg=replace(quiet, kd=4.0), **kw)
    assert max(np.abs(a - b).max() for a, b in zip(flagged.params, plain.params)) > 1e-3


def test_simulate_rounds_go_on_past_bad_clients(small):
    cfg = RCFCLConfig(gen_epochs=1, local_epochs=1)
    res = simulate(
        small, cfg, seed=0, corrupt={(0, 1): "nan", (1, 2): "shape", (2, 0): "magnitude"}
    )
    assert (
        set(res.rejected[0]) == {1} and set(res.rejected[1]) == {2} and set(res.rejected[2]) == {0}
    )
    assert "NaN" in res.rejected[0][1] and "shape" in res.rejected[1][2]
    assert all(np.all(np.isfinite(p)) for p in res.params)
    assert res.acc[-1].mean() > 0.3


def test_bad_config_and_data():
    with pytest.raises(ValueError, match="method"):
        RCFCLConfig(method="fedprox")
    cfg = RCFCLConfig()
    with pytest.raises(ValueError, match="no local data"):
        local_update(
            init_params(cfg),
            np.zeros((0, 64)),
            np.zeros(0),
            seen_classes=[],
            old_classes=[],
            cfg=cfg,
            seed=0,
        )


def test_fedavg_gr_is_rcfcl_without_detection_and_distillation(small):
    # with the test off (m_k = 0, w = 1) and lambda_0 = 0, RC-FCL's round is FedAvg + GR's round:
    # same data, same replay, same random stream, same kernels, so equal bit for bit
    kw = dict(gen_epochs=2, local_epochs=1)
    gr = simulate(small, RCFCLConfig(method="fedavg_gr", **kw), seed=4)
    rc = simulate(small, RCFCLConfig(method="rcfcl", detect=False, kd=0.0, **kw), seed=4)
    assert len(gr.params) == len(rc.params)
    for a, b in zip(gr.params, rc.params):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(gr.acc, rc.acc)


def test_sample_weights_apply_without_a_flag(small, trained):
    # documented choice (README, "Design"): the flag gates m_k (KD weight, aggregation), not
    # the per-sample density-ratio weights, which correct within a client whether or not the
    # client-level test has the power to flag it
    x, y = small.client_data(0, 2)
    kw = dict(seen_classes=[0, 1, 2, 3], old_classes=[0, 1], seed=3)
    quiet = RCFCLConfig(gen_epochs=0, local_epochs=2, tolerance=0.99, alpha=1e-6, kd=0.0)
    weighted = local_update(trained.params, x, y, cfg=quiet, **kw)
    plain = local_update(trained.params, x, y, cfg=replace(quiet, weighting=False), **kw)
    assert not weighted.drift and weighted.magnitude == 0.0
    assert max(np.abs(a - b).max() for a, b in zip(weighted.params, plain.params)) > 1e-3


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": 0.0}, "alpha"),
        ({"tolerance": 2.0}, "tolerance"),
        ({"tolerance": -0.1}, "tolerance"),
        ({"tolerance": 2.0, "alpha": 1.5}, "alpha"),
    ],
)
def test_config_checks_the_test_level_and_tolerance_at_construction(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RCFCLConfig(**kwargs)


def test_labels_and_features_out_of_range_are_named():
    cfg = RCFCLConfig()
    p = init_params(cfg)
    x = np.zeros((5, 64), np.float32)
    kw = dict(seen_classes=[], old_classes=[], cfg=cfg, seed=0)
    with pytest.raises(
        ValueError, match=r"y: labels must be in \[0, cfg.n_classes=10\); got \[12\]"
    ):
        local_update(p, x, np.array([0, 1, 2, 3, 12]), **kw)
    with pytest.raises(ValueError, match="y: labels"):
        local_update(p, x, np.array([0, 1, -1, 3, 4]), **kw)
    with pytest.raises(ValueError, match="old_classes: labels"):
        local_update(p, x, np.zeros(5), **{**kw, "old_classes": [10]})
    with pytest.raises(ValueError, match=r"expected \(n, 64\)"):
        local_update(p, np.zeros((5, 63)), np.zeros(5), **kw)


def test_an_untestable_round_carries_the_last_magnitude(small, trained):
    # round 2 is the first of task 1: the client holds classes 2, 3, the reference only 0, 1,
    # so nothing can be tested and m_k is the carried value; the KD weight follows it
    x, y = small.client_data(0, 2)
    kw = dict(seen_classes=[0, 1], old_classes=[0, 1], seed=3)
    cfg = RCFCLConfig(gen_epochs=0, local_epochs=1, kd=2.0)
    carried = local_update(trained.params, x, y, cfg=cfg, carried_magnitude=0.6, **kw)
    assert carried.magnitude == 0.6 and not carried.drift
    # lambda(m) = lambda_0 (1 - m) with the carried m: as the same round at KD weight 0.8
    same = local_update(trained.params, x, y, cfg=replace(cfg, kd=0.8), **kw)
    assert same.magnitude == 0.0
    for a, b in zip(carried.params, same.params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)
    off = local_update(
        trained.params, x, y, cfg=replace(cfg, carry_magnitude=False), carried_magnitude=0.6, **kw
    )
    assert off.magnitude == 0.0
    # a testable round ignores the carried value (the test decides)
    x1, y1 = small.client_data(1, 1)
    tested = local_update(
        trained.params,
        x1,
        y1,
        cfg=cfg,
        carried_magnitude=0.6,
        seen_classes=[0, 1],
        old_classes=[],
        seed=1,
    )
    assert not tested.drift and tested.magnitude == 0.0
    with pytest.raises(ValueError, match="carried_magnitude"):
        local_update(trained.params, x, y, cfg=cfg, carried_magnitude=1.5, **kw)


def test_simulate_carries_a_flagged_magnitude_into_the_next_task(small):
    sc = replace(small)  # a copy: client 0 inverts its images from round 1 on
    sc.onset, sc.magnitude, sc.kind = {0: 1}, {0: 1.0}, {0: "virtual"}
    cfg = RCFCLConfig(gen_epochs=5, local_epochs=2, tolerance=0.0)
    res = simulate(sc, cfg, seed=3)
    assert res.flags[0, 1] and res.magnitudes[0, 1] > 0.5
    assert not res.flags[:, 2].any()  # round 2 (first of task 1) cannot be tested ...
    np.testing.assert_array_equal(res.magnitudes[:, 2], res.magnitudes[:, 1])  # ... m_k kept
    off = simulate(sc, replace(cfg, carry_magnitude=False), seed=3)
    np.testing.assert_array_equal(off.magnitudes[:, 1], res.magnitudes[:, 1])
    assert np.all(off.magnitudes[:, 2] == 0.0)


def test_oracle_drop_leaves_drifted_clients_out_of_their_rounds(small):
    # every client drifts from round 1 on: with the oracle, round 1 has no participant, so the
    # model after rounds 0-1 equals the model after round 0 alone (same shards, same seeds)
    x, y = load_digits_xy()
    m = np.isin(y, [0, 1])
    two = AsyncDriftScenario.make(
        x[m], y[m], n_clients=3, n_tasks=1, rounds_per_task=2, n_drifting=0, seed=0
    )
    one = replace(two, rounds_per_task=1)
    two.onset = {k: 1 for k in range(3)}
    two.magnitude, two.kind = {k: 1.0 for k in range(3)}, {k: "real" for k in range(3)}
    cfg = RCFCLConfig(method="fedavg_gr", gen_epochs=1, local_epochs=1)
    dropped = simulate(two, cfg, seed=2, oracle_drop=True)
    ref = simulate(one, cfg, seed=2)
    for a, b in zip(dropped.params, ref.params):
        np.testing.assert_array_equal(a, b)
    kept = simulate(two, cfg, seed=2)
    assert max(np.abs(a - b).max() for a, b in zip(kept.params, ref.params)) > 1e-3
