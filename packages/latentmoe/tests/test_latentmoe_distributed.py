"""Head Parallel and Expert Parallel on real gloo process groups (loopback, spawned ranks)."""

import socket
import sys
import time
from pathlib import Path

import pytest
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import the worker by name
import latentmoe_dist_worker

TIMEOUT_S = 240
# pytest-timeout as a second guard: the join loop below kills the ranks at TIMEOUT_S
pytestmark = pytest.mark.timeout(TIMEOUT_S + 60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(world: int, checks: str = "all") -> None:
    ctx = mp.start_processes(
        latentmoe_dist_worker.run,
        args=(world, _free_port(), checks),
        nprocs=world,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not ctx.join(timeout=5):  # raises ProcessRaisedException with the rank's traceback
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail(f"distributed test with world size {world} exceeded {TIMEOUT_S} s")


def test_hp_and_ep_match_single_process_world_2():
    _spawn(2)


def test_hp_x_dp_with_ddp_matches_single_process_world_4():
    # 2 HP × 2 DP: DDP and the manual all-reduce, SGD steps and bias updates vs one process
    _spawn(4, "hp_dp")


@pytest.mark.slow
def test_hp_and_ep_match_single_process_world_4():
    _spawn(4)
