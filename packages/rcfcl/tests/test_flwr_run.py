"""`flwr run` on loopback: a local SuperLink, two SuperNodes (partition-id 0 and 1) and this
package's ``server_app`` / ``client_app``, all as subprocesses of the test.

Slow (each round starts one ``flwr-clientapp`` process per SuperNode, which imports torch):
200 s wall on two cores at load 10 (this session), most of it process start-up. Flower 1.42 gives a started ClientApp process 30 s
(HEARTBEAT_DEFAULT_INTERVAL) to claim its task; on a heavily loaded machine the process can take
longer to import, its token expires, the task is re-queued and the round never completes: the
test then fails (after three expired tokens, or at its timeout) naming that cause, with the
processes' logs attached; it does not hang.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

RUN_TIMEOUT_S = 420  # the whole `flwr run` (2 rounds); the test's own timeout is above it
ENTRY_POINTS = ("flwr", "flower-superlink", "flower-supernode")
TOKEN_EXPIRED = "Runtime task-token authentication failed"


def _entry_point(name: str) -> str | None:
    here = Path(sys.executable).parent / name  # the test interpreter's own environment first
    return str(here) if here.exists() else shutil.which(name)


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the SuperLink exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    pytest.fail(f"the SuperLink did not listen on {port} within {timeout} s:\n{log.read_text()}")


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group (SuperNodes spawn SuperExec and ClientApp children), then
    SIGKILL what is left after 10 s."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:  # children outlive their parent's SIGTERM: kill the whole group
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


APP_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "rcfcl-loopback"
version = "0.1.0"
description = "RC-FCL on a loopback Flower deployment (test app)"
license = "Apache-2.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "icml26"

[tool.flwr.app.components]
serverapp = "icml26_rcfcl.flower:server_app"
clientapp = "icml26_rcfcl.flower:client_app"

[tool.flwr.app.config]
seed = 0
method = "rcfcl"
beta = 5.0
num-clients = 2
num-drifting = 1
rounds-per-task = 1
num-rounds = 2
"""


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_flwr_run_on_loopback_with_two_supernodes(tmp_path):
    exe = {name: _entry_point(name) for name in ENTRY_POINTS}
    missing = [name for name, path in exe.items() if path is None]
    if missing:
        pytest.skip(f"the Flower CLI entry points {missing} are not installed")
    app, home = tmp_path / "app", tmp_path / "flwr-home"
    app.mkdir()
    home.mkdir()
    (app / "pyproject.toml").write_text(APP_PYPROJECT)
    link_port, node0_port, node1_port = _free_ports(3)
    # `flwr run . loopback` reads the SuperLink connection from $FLWR_HOME/config.toml
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n'
        f'address = "127.0.0.1:{link_port}"\ninsecure = true\n'
    )
    env = {**os.environ, "FLWR_HOME": str(home), "OMP_NUM_THREADS": "1"}
    # the apps' processes are started by the SuperLink / SuperNodes from their own PATH
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    procs: list[subprocess.Popen] = []
    logs: dict[str, Path] = {}

    def start(name: str, *args: str) -> subprocess.Popen:
        logs[name] = tmp_path / f"{name}.log"
        p = subprocess.Popen(
            args,
            env=env,
            cwd=tmp_path,
            stdout=logs[name].open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole in _stop
        )
        procs.append(p)
        return p

    def tails() -> str:
        return "\n".join(f"--- {n}\n{p.read_text()[-2500:]}" for n, p in logs.items())

    try:
        link = start(
            "superlink",
            exe["flower-superlink"],  # type: ignore[arg-type]
            "--insecure",
            "--port",
            str(link_port),
            "--database",
            ":flwr-in-memory-state:",
            "--disable-runtime-dependency-installation",  # offline: no `uv sync` of the app
        )
        _wait_for_port(link_port, link, logs["superlink"], timeout=120)
        for k, port in enumerate((node0_port, node1_port)):
            start(
                f"supernode{k}",
                exe["flower-supernode"],  # type: ignore[arg-type]
                "--insecure",
                "--superlink",
                f"127.0.0.1:{link_port}",
                "--port",
                str(port),
                "--node-config",
                f"partition-id={k} num-partitions=2",
            )
        logs["flwr-run"] = tmp_path / "flwr-run.log"
        run = subprocess.Popen(
            [exe["flwr"], "run", str(app), "loopback", "--stream"],  # type: ignore[list-item]
            env=env,
            cwd=tmp_path,
            stdout=logs["flwr-run"].open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(run)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while run.poll() is None:
            expired = sum(logs[f"supernode{k}"].read_text().count(TOKEN_EXPIRED) for k in (0, 1))
            if expired >= 6:  # three ClientApp starts lost their token: the loop never ends
                pytest.fail(
                    "Flower 1.42 expired the task token of the flwr-clientapp processes "
                    "(a ClientApp must claim its task within 30 s of being started; this "
                    f"machine is too loaded for that):\n{tails()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"`flwr run` did not finish within {RUN_TIMEOUT_S} s:\n{tails()}")
            time.sleep(1.0)
        out = logs["flwr-run"].read_text()
        assert run.returncode == 0, tails()
        # both rounds ran with both SuperNodes' updates aggregated and none rejected
        for r in (1, 2):
            assert f"[ROUND {r}/2]" in out, tails()
        rounds = re.findall(r"Aggregated MetricRecord: (\{.*\})", out)
        assert len(rounds) == 2, tails()
        for line in rounds:
            assert "'clients-aggregated': 2" in line and "'clients-rejected': 0" in line, tails()
    finally:
        _stop(procs)
