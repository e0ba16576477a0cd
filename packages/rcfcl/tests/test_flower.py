"""Flower: the same run on Flower's simulation engine equals the in-process simulator."""

import ast
import inspect
import time
from contextlib import contextmanager

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")
pytest.importorskip("ray")

from icml26_rcfcl import AsyncDriftScenario, RCFCLConfig, load_digits_xy, simulate
from icml26_rcfcl import flower as fl
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


# ---- deployment checks that need no ray: replies are built by hand ----------------------------


def _context(node_config=None, run_config=None):
    from flwr.app import Context, RecordDict

    return Context(
        run_id=1,
        node_id=1,
        node_config=dict(node_config or {}),
        state=RecordDict(),
        run_config=dict(run_config or {}),
    )


def _reply(node, pid=None, params=None, n=10, m=0.0, error=None, drop=()):
    from flwr.app import ArrayRecord, Error, Message, Metadata, MetricRecord, RecordDict

    md = Metadata(
        run_id=1,
        message_id="",
        src_node_id=node,
        dst_node_id=0,
        reply_to_message_id="m",
        group_id="1",
        created_at=time.time(),
        ttl=3600.0,
        message_type="train",
    )
    if error is not None:
        return Message(error=Error(code=1, reason=error), metadata=md)
    metrics = {"num-examples": n, "drift-magnitude": m, "drift-flag": int(m > 0)}
    if pid is not None:
        metrics["partition-id"] = pid
    for key in drop:
        del metrics[key]
    content = RecordDict({"arrays": ArrayRecord(params), "metrics": MetricRecord(metrics)})
    return Message(content, metadata=md)


def _strategy_with_global(ref):
    strategy = RCFCLStrategy(beta=0.0)
    strategy._global = ref  # what configure_train stores from the round's ArrayRecord
    return strategy


def test_a_node_without_partition_id_raises_naming_it():
    with pytest.raises(KeyError, match="no partition-id in its node_config"):
        fl.partition_id(_context({}))
    assert fl.partition_id(_context({"partition-id": 3})) == 3
    # the client handler itself refuses (it used to default to shard 0)
    client = fl.RCFCLClient.__new__(fl.RCFCLClient)
    with pytest.raises(KeyError, match="no partition-id in its node_config"):
        client.train(None, _context({}))  # type: ignore[arg-type]


def test_duplicate_partition_ids_are_rejected_and_rejections_keyed_by_partition():
    ref = [np.zeros((2, 3), np.float32), np.zeros(3, np.float32)]
    one = [np.ones((2, 3), np.float32), np.ones(3, np.float32)]
    three = [3 * a for a in one]
    bad = [np.ones((2, 2), np.float32), np.ones(3, np.float32)]
    strategy = _strategy_with_global(ref)
    replies = [
        _reply(11, pid=0, params=one, n=10),
        _reply(12, pid=1, params=three, n=30),
        _reply(13, pid=2, params=one),  # two nodes both configured as partition 2
        _reply(14, pid=2, params=three),
        _reply(15, pid=4, params=bad),  # mis-shaped: keyed by its partition id, not node 15
        _reply(16, pid=5, params=one, m=5.0),  # a magnitude above 1
        _reply(19, pid=6, params=one, drop=("drift-magnitude",)),  # unreadable: keyed by pid 6
        _reply(17, pid=None, params=one),  # no partition id: attributable only to the node
        _reply(18, error="client crashed"),
    ]
    arrays, metrics = strategy.aggregate_train(1, replies)
    assert set(strategy.rejected[1]) == {2, 4, 5, 6}
    assert "2 replies claim" in strategy.rejected[1][2]
    assert "shape" in strategy.rejected[1][4]
    assert "magnitude" in strategy.rejected[1][5]
    assert "lacks 'drift-magnitude'" in strategy.rejected[1][6]
    assert set(strategy.unattributed[1]) == {17, 18}
    assert "partition-id" in strategy.unattributed[1][17]
    assert "crashed" in strategy.unattributed[1][18]
    # only partitions 0 and 1 are averaged: (10 * 1 + 30 * 3) / 40 = 2.5
    out = arrays.to_numpy_ndarrays()
    np.testing.assert_array_equal(out[0], np.full((2, 3), 2.5, np.float32))
    assert metrics["clients-aggregated"] == 2 and metrics["clients-rejected"] == 6


def test_no_private_fedavg_member_is_used():
    """The strategy may touch only Flower's public API: any ``self._x`` / ``super()._x`` it
    reads must be its own attribute, not one defined by FedAvg or its bases (those change
    without notice between Flower releases; 1.42's ``_check_and_log_replies`` was one)."""
    from flwr.serverapp.strategy import FedAvg

    flower_private = (
        {name for cls in FedAvg.__mro__ for name in vars(cls) if name.startswith("_")}
        - {name for name in dir(object)}
        - {"__init__", "__module__", "__doc__", "__dict__"}
    )
    tree = ast.parse(inspect.getsource(fl))
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_")
    }
    assert "_check_and_log_replies" in flower_private  # the check sees Flower's privates
    assert used & flower_private == set(), used & flower_private


def test_the_scenario_is_built_once_per_process():
    run_config = {"seed": 1, "num-clients": 6, "rounds-per-task": 1}
    a, _, _ = fl._from_run_config(_context({"partition-id": 0}, run_config))
    b, _, _ = fl._from_run_config(_context({"partition-id": 1}, run_config))
    assert a is b
    c, _, _ = fl._from_run_config(_context({"partition-id": 0}, {**run_config, "seed": 2}))
    assert c is not a


def test_the_client_carries_its_magnitude_in_the_node_state():
    """As simulate(): a round with nothing to test (the first of a task) sends the magnitude
    the node kept in ``context.state`` from its previous round; a tested round overwrites it."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, Metadata, MetricRecord, RecordDict

    x, y = load_digits_xy()
    m = np.isin(y, [0, 1, 2, 3])
    sc = AsyncDriftScenario.make(
        x[m], y[m], n_clients=2, n_tasks=2, rounds_per_task=2, n_drifting=0, seed=0
    )
    cfg = RCFCLConfig(gen_epochs=1, local_epochs=1)
    client = fl.RCFCLClient(sc, cfg, seed=0)
    params = fl.init_params(cfg, 0)

    def train(server_round, context):
        content = RecordDict(
            {"arrays": ArrayRecord(params), "config": ConfigRecord({"server-round": server_round})}
        )
        md = Metadata(
            run_id=1,
            message_id="m",
            src_node_id=0,
            dst_node_id=1,
            reply_to_message_id="",
            group_id="1",
            created_at=time.time(),
            ttl=3600.0,
            message_type="train",
        )
        msg = Message(content, metadata=md)
        reply = client.train(msg, context)
        return float(reply.content["metrics"]["drift-magnitude"])

    ctx = _context({"partition-id": 0})
    ctx.state["rcfcl"] = MetricRecord({"drift-magnitude": 0.6})
    assert train(3, ctx) == 0.6  # round 3 = the scenario's round 2, the first of task 1
    assert ctx.state["rcfcl"]["drift-magnitude"] == 0.6
    # a tested round: the test decides (as with no state at all), and the state follows
    tested = train(2, ctx)
    assert tested == train(2, _context({"partition-id": 0})) != 0.6
    assert ctx.state["rcfcl"]["drift-magnitude"] == tested
