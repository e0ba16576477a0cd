"""RC-FCL on Flower (``pip install "flwr[simulation]>=1.22"``): a ClientApp and a FedAvg strategy.

* ``RCFCLClient``: the client's round (``local_update``: reference from the received generator,
  drift test, weighted local adaptation) as a Flower ``ClientApp`` ``train`` handler. It replies
  with one ArrayRecord (classifier + generator) and one MetricRecord carrying ``num-examples``,
  ``drift-magnitude``, ``drift-flag``, ``p-value`` and ``partition-id``.
* ``RCFCLStrategy``: a subclass of ``flwr.serverapp.strategy.FedAvg`` whose ``aggregate_train``
  weights client k by n_k exp(-beta m_k). Unlike FedAvg, which skips the whole aggregation when
  one reply is inconsistent, a reply with mismatched arrays, NaN parameters or a NaN / negative
  magnitude is dropped with a logged reason (``strategy.rejected[round]``, keyed by partition
  id) and the round goes on with the other clients. Two replies naming the same partition id
  are both dropped (two SuperNodes configured with one shard). Only Flower's public API is
  used (tests/test_flower.py checks that no private FedAvg member is touched).
* Every node needs ``partition-id`` in its ``node_config`` (``flower-supernode --node-config
  "partition-id=K"``); a node without one raises a ``KeyError`` naming it instead of
  silently training shard 0.

The simulator (``icml26_rcfcl.simulate``) and this app share ``local_update``, ``client_seed``
and ``robust_drift_average``, so a Flower run reproduces the in-process run parameter for
parameter (tests/test_flower.py). ``client_app`` / ``server_app`` below are the module-level
apps for ``flwr run`` (see the README); they read the run config keys documented in
``_from_run_config``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from logging import WARNING
from typing import Any

import numpy as np

try:
    import flwr  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without Flower
    raise ImportError(
        'icml26_rcfcl.flower needs Flower: pip install "flwr[simulation]>=1.22"'
    ) from exc
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.common import log
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from .aggregation import Params, robust_drift_average
from .rcfcl import RCFCLConfig, client_seed, corrupt_update, init_params, local_update
from .scenarios import AsyncDriftScenario, load_digits_xy


class RCFCLStrategy(FedAvg):
    """FedAvg with drift-aware weights alpha_k ~ n_k exp(-beta m_k) and per-client rejection.

    ``beta = 0`` is FedAvg (up to the float64 sum). After ``start``: ``rejected[round]`` maps a
    partition id to the reason its update was dropped (duplicates included);
    ``unattributed[round]`` maps a node id to the reason its reply was dropped when it names
    no readable partition id (an error reply); ``drift[round]`` maps a partition id to
    (flag, magnitude).
    """

    def __init__(self, *, beta: float = 5.0, **kwargs: Any) -> None:
        kwargs.setdefault("fraction_evaluate", 0.0)
        super().__init__(**kwargs)
        if not (np.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta: expected a finite number >= 0; got {beta}")
        self.beta = beta
        self._global: Params = []
        self.rejected: dict[int, dict[int, str]] = {}  # round -> partition id -> reason
        self.unattributed: dict[int, dict[int, str]] = {}  # round -> node id -> reason
        self.drift: dict[int, dict[int, tuple[bool, float]]] = {}

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._global = arrays.to_numpy_ndarrays()  # what each reply is checked against
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        # Only public Message API here (no FedAvg internals): a reply carrying an error, or one
        # whose partition id cannot be read, cannot be attributed to a partition and is
        # recorded in ``unattributed[round]`` by node id; every other rejection is keyed by
        # the partition id the reply names.
        unattributed: dict[int, str] = {}
        by_pid: dict[int, list[tuple[Params, float, float, bool]]] = {}
        rejected: dict[int, str] = {}
        for msg in replies:
            node = int(msg.metadata.src_node_id)
            if msg.has_error():
                unattributed[node] = f"the reply carries an error: {msg.error}"
                continue
            try:
                cid = _reply_partition_id(msg.content)
            except ValueError as exc:
                unattributed[node] = str(exc)
                continue
            try:
                by_pid.setdefault(cid, []).append(_unpack_reply(msg.content, self.weighted_by_key))
            except ValueError as exc:
                by_pid.setdefault(cid, [])
                rejected[cid] = str(exc)
        updates: dict[int, tuple[Params, float, float]] = {}
        drift: dict[int, tuple[bool, float]] = {}
        for cid, got in by_pid.items():
            n_replies = len(got) + (cid in rejected)
            if n_replies > 1:  # two nodes claim one shard: neither is trusted
                rejected[cid] = (
                    f"partition-id {cid}: {n_replies} replies claim this partition; each node "
                    "needs its own node_config partition-id"
                )
                continue
            if cid in rejected:
                continue
            params, n, m, flag = got[0]
            updates[cid] = (params, n, m)
            drift[cid] = (flag, m)
        out = robust_drift_average(updates, self._global, beta=self.beta)
        rejected.update({int(str(k)): v for k, v in out.rejected.items()})
        for cid, reason in sorted(rejected.items()):
            log(WARNING, "aggregate_train: dropped the update of partition %s: %s", cid, reason)
        for node, reason in sorted(unattributed.items()):
            log(WARNING, "aggregate_train: dropped the reply of node %s: %s", node, reason)
        self.rejected[server_round] = rejected
        self.unattributed[server_round] = unattributed
        self.drift[server_round] = {int(str(c)): drift[int(str(c))] for c in out.accepted}
        if not out.accepted:
            return None, None
        mags = [updates[int(str(c))][2] for c in out.accepted]
        metrics = MetricRecord(
            {
                "clients-aggregated": len(out.accepted),
                "clients-rejected": len(rejected) + len(unattributed),
                "mean-drift-magnitude": float(np.mean(mags)),
                "clients-flagged": int(sum(f for f, _ in self.drift[server_round].values())),
            }
        )
        return ArrayRecord(out.params), metrics


def _reply_partition_id(content: RecordDict) -> int:
    if len(content.metric_records) != 1:
        raise ValueError("reply: expected exactly one MetricRecord (with 'partition-id')")
    metrics = next(iter(content.metric_records.values()))
    if "partition-id" not in metrics:
        raise ValueError("reply: the MetricRecord lacks 'partition-id'")
    return int(metrics["partition-id"])  # type: ignore[arg-type]


def _unpack_reply(content: RecordDict, n_key: str) -> tuple[Params, float, float, bool]:
    cid = _reply_partition_id(content)
    if len(content.array_records) != 1:
        raise ValueError(f"partition-id {cid}: expected exactly one ArrayRecord in the reply")
    metrics = next(iter(content.metric_records.values()))
    for key in (n_key, "drift-magnitude"):
        if key not in metrics:
            raise ValueError(f"partition-id {cid}: the reply's MetricRecord lacks {key!r}")
    params = next(iter(content.array_records.values())).to_numpy_ndarrays()
    return (
        params,
        float(metrics[n_key]),  # type: ignore[arg-type]
        float(metrics["drift-magnitude"]),  # type: ignore[arg-type]
        bool(metrics.get("drift-flag", 0)),
    )


def partition_id(context: Context) -> int:
    """The node's ``partition-id`` (``node_config``); a KeyError naming it when absent."""
    if "partition-id" not in context.node_config:
        raise KeyError(
            "partition-id: this node has no partition-id in its node_config (start each "
            "SuperNode with --node-config partition-id=K); without it every node would train "
            "shard 0"
        )
    return int(context.node_config["partition-id"])  # type: ignore[arg-type]


class RCFCLClient:
    """Client k of ``scenario``: ``train`` runs its RC-FCL round; ``app`` is the ClientApp.

    Flower's ``server-round`` r (1-based) is the scenario's round r - 1; the client's index is
    the node's ``partition-id``. The model (classifier, generator) arrives with the message;
    the only client state is its last drift magnitude (``context.state["rcfcl"]``, carried
    over rounds where it cannot test, as ``simulate`` does).
    """

    def __init__(
        self,
        scenario: AsyncDriftScenario,
        cfg: RCFCLConfig,
        *,
        seed: int = 0,
        corrupt: dict[tuple[int, int], str] | None = None,
    ) -> None:
        if cfg.method == "feddrift":
            raise ValueError("cfg: method 'feddrift' keeps several models; use simulate()")
        self.scenario, self.cfg, self.seed = scenario, cfg, seed
        self.corrupt = corrupt or {}  # {(round, client): kind}: fault injection, as simulate()
        self.app = ClientApp()
        self.app.train()(self.train)

    def train(self, msg: Message, context: Context) -> Message:
        k = partition_id(context)
        r = int(msg.content["config"]["server-round"]) - 1  # type: ignore[arg-type]
        params = msg.content["arrays"].to_numpy_ndarrays()  # type: ignore[union-attr]
        x, y = self.scenario.client_data(k, r)
        state = context.state.metric_records.get("rcfcl")
        carried = float(state["drift-magnitude"]) if state is not None else 0.0  # type: ignore[arg-type]
        res = local_update(
            params,
            x,
            y,
            seen_classes=self.scenario.seen_classes(r),
            old_classes=self.scenario.old_classes(r),
            cfg=self.cfg,
            seed=client_seed(self.seed, r, k),
            carried_magnitude=carried,
        )
        context.state["rcfcl"] = MetricRecord({"drift-magnitude": res.magnitude})
        res = corrupt_update(res, self.corrupt.get((r, k)))
        metrics = MetricRecord(
            {
                "num-examples": res.n,
                "drift-magnitude": res.magnitude,
                "drift-flag": int(res.drift),
                "p-value": res.p_value,
                "partition-id": k,
            }
        )
        content = RecordDict({"arrays": ArrayRecord(res.params), "metrics": metrics})
        return Message(content=content, reply_to=msg)


def make_server_app(
    cfg: RCFCLConfig, *, num_rounds: int, num_clients: int, seed: int = 0
) -> tuple[ServerApp, RCFCLStrategy]:
    """A ServerApp running ``RCFCLStrategy`` for ``num_rounds``; the strategy keeps
    ``final_arrays`` (the last global model) and its per-round ``rejected`` / ``drift``."""
    strategy = RCFCLStrategy(
        beta=cfg.beta if cfg.uses_drift else 0.0,
        min_train_nodes=num_clients,
        min_available_nodes=num_clients,
    )
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(init_params(cfg, seed)),
            num_rounds=num_rounds,
        )
        strategy.final_arrays = result.arrays.to_numpy_ndarrays()  # type: ignore[attr-defined]

    return app, strategy


def run_flower_simulation(
    scenario: AsyncDriftScenario,
    cfg: RCFCLConfig,
    *,
    seed: int = 0,
    backend_config: dict[str, Any] | None = None,
    corrupt: dict[tuple[int, int], str] | None = None,
) -> tuple[Params, RCFCLStrategy]:
    """Run the scenario on Flower's simulation engine (ray); returns the final global model."""
    from flwr.simulation import run_simulation

    client = RCFCLClient(scenario, cfg, seed=seed, corrupt=corrupt)
    server, strategy = make_server_app(
        cfg, num_rounds=scenario.n_rounds, num_clients=scenario.n_clients, seed=seed
    )
    run_simulation(
        server_app=server,
        client_app=client.app,
        num_supernodes=scenario.n_clients,
        backend_config=backend_config  # type: ignore[arg-type]
        or {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}},
    )
    final = getattr(strategy, "final_arrays", None)
    if final is None:
        raise RuntimeError("the Flower run ended without a final model (see the Flower log)")
    return final, strategy


def _from_run_config(context: Context) -> tuple[AsyncDriftScenario, RCFCLConfig, int]:
    """Run config keys (pyproject ``[tool.flwr.app.config]``): ``seed``, ``method``, ``beta``,
    ``num-clients``, ``rounds-per-task``, ``num-drifting`` (default: half the clients) and, for the
    ServerApp, ``num-rounds`` (default: every round of the scenario, 5 tasks x rounds-per-task); the
    digits scenario is rebuilt identically on every node from ``seed``, once per process
    (``_scenario`` caches it)."""
    rc = context.run_config
    seed = int(rc.get("seed", 0))  # type: ignore[arg-type]
    cfg = replace(
        RCFCLConfig(),
        method=str(rc.get("method", "rcfcl")),
        beta=float(rc.get("beta", RCFCLConfig.beta)),  # type: ignore[arg-type]
    )
    n_clients = int(rc.get("num-clients", 10))  # type: ignore[arg-type]
    scenario = _scenario(
        n_clients,
        int(rc.get("rounds-per-task", 3)),  # type: ignore[arg-type]
        seed,
        int(rc.get("num-drifting", n_clients // 2)),  # type: ignore[arg-type]
    )
    return scenario, cfg, seed


@lru_cache(maxsize=4)
def _scenario(
    n_clients: int, rounds_per_task: int, seed: int, n_drifting: int = 5
) -> AsyncDriftScenario:
    """The digits scenario of a run config, built once per process (not once per message)."""
    x, y = load_digits_xy()
    return AsyncDriftScenario.make(
        x,
        y,
        n_clients=n_clients,
        rounds_per_task=rounds_per_task,
        n_drifting=n_drifting,
        seed=seed,
    )


# module-level apps for `flwr run` (pyproject: serverapp = "icml26_rcfcl.flower:server_app")
client_app = ClientApp()


@client_app.train()
def _train(msg: Message, context: Context) -> Message:
    scenario, cfg, seed = _from_run_config(context)
    return RCFCLClient(scenario, cfg, seed=seed).train(msg, context)


server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    scenario, cfg, seed = _from_run_config(context)
    num_rounds = int(context.run_config.get("num-rounds", scenario.n_rounds))  # type: ignore[arg-type]
    if not 1 <= num_rounds <= scenario.n_rounds:
        raise ValueError(
            f"num-rounds: expected in [1, {scenario.n_rounds}] (the scenario's rounds); "
            f"got {num_rounds}"
        )
    _, strategy = make_server_app(
        cfg, num_rounds=num_rounds, num_clients=scenario.n_clients, seed=seed
    )
    strategy.start(
        grid=grid, initial_arrays=ArrayRecord(init_params(cfg, seed)), num_rounds=num_rounds
    )
