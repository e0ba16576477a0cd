"""Flower: the same run on Flower's simulation engine equals the in-process simulator."""

from contextlib import contextmanager

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")
pytest.importorskip("ray")

from icml26_rcfcl import AsyncDriftScenario, RCFCLConfig, load_digits_xy, simulate
from icml26_rcfcl.flower import RCFCLStrategy, run_flower_simulation

torch.set_num_threads(1)

# Flower's simulation engine starts ray: on a loaded machine its raylet can abort at start-up
# (WaitForDashboardAgentPorts) and leave the driver waiting forever. The per-test timeout turns
# that hang into a failure that names the cause.
RAY_TIMEOUT_S = 300


@contextmanager
def _names_ray_on_timeout():
    try:
        yield
    except pytest.fail.Exception as exc:
        if "Timeout" not in str(exc):
            raise
        pytest.fail(
            f"the Flower simulation did not finish within {RAY_TIMEOUT_S} s: ray (Flower's "
            "simulation backend) most likely failed to start on this machine (raylet / dashboard "
            "agent; see /tmp/ray/session_latest/logs)",
            pytrace=False,
        )


def test_strategy_is_a_flower_fedavg():
    from flwr.serverapp.strategy import FedAvg

    assert issubclass(RCFCLStrategy, FedAvg)
    with pytest.raises(ValueError, match="beta"):
        RCFCLStrategy(beta=float("nan"))


@pytest.mark.timeout(RAY_TIMEOUT_S)
def test_flower_run_equals_simulator_and_survives_a_bad_client():
    x, y = load_digits_xy()
    m = np.isin(y, [0, 1, 2, 3])
    sc = AsyncDriftScenario.make(
        x[m], y[m], n_clients=3, n_tasks=1, rounds_per_task=2, n_drifting=0, seed=0
    )
    # client 0 inverts its images from round 2 on: flagged, so beta * m_0 matters
    sc.onset, sc.magnitude, sc.kind = {0: 1}, {0: 1.0}, {0: "virtual"}
    cfg = RCFCLConfig(method="rcfcl", gen_epochs=5, local_epochs=2, tolerance=0.0, beta=5.0)
    corrupt = {(1, 2): "shape"}  # client 2 sends a mis-shaped model in round 2
    ref = simulate(sc, cfg, seed=3, corrupt=corrupt)
    with _names_ray_on_timeout():
        params, strategy = run_flower_simulation(sc, cfg, seed=3, corrupt=corrupt)
    assert len(params) == len(ref.params)
    for a, b in zip(params, ref.params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # the round went on with clients 0 and 1; client 2's update was dropped with a reason
    assert set(strategy.rejected[2]) == {2} and "shape" in strategy.rejected[2][2]
    assert strategy.rejected[1] == {}
    assert set(strategy.drift[2]) == {0, 1}
    flag, m0 = strategy.drift[2][0]
    assert flag and m0 > 0.5  # the drifting client was down-weighted by exp(-beta m_0)
