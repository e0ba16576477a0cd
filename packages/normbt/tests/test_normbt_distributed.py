"""NormBTState under a 2-process gloo group: every rank ends with the same (global) m."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest
import torch

WORKER = textwrap.dedent(
    """
    import os, sys
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from icml26_normbt import NormBTState

    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=120))
    st = NormBTState(decay=0.5)
    # different batch sizes and scales per rank
    batches = [torch.arange(1.0, 4.0 + rank) * (rank + 1), torch.full((2 + rank,), 5.0 * (rank + 1))]
    ms = [st.update(d) for d in batches]
    local = NormBTState(decay=0.5, sync=False)
    ms_local = [local.update(d) for d in batches]
    torch.save({"m": torch.stack(ms), "m_local": torch.stack(ms_local)}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(300)
def test_all_reduce_gives_same_global_mean_on_both_ranks(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = str(_free_port())
    procs = [
        subprocess.Popen([sys.executable, str(script), str(r), port, str(tmp_path)]) for r in (0, 1)
    ]
    try:
        codes = [p.wait(timeout=240) for p in procs]
    except subprocess.TimeoutExpired:
        pytest.fail("the 2-rank gloo workers did not finish within 240 s (rendezvous hung?)")
    finally:
        for p in procs:  # never leave a worker behind
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert codes == [0, 0], f"worker exit codes {codes}"
    r0 = torch.load(tmp_path / "rank0.pt")
    r1 = torch.load(tmp_path / "rank1.pt")
    torch.testing.assert_close(r0["m"], r1["m"])
    # global batch means over both ranks (pooled over all pairs, not the mean of rank means)
    b1 = torch.cat([torch.arange(1.0, 4.0), torch.arange(1.0, 5.0) * 2]).mean()
    b2 = torch.cat([torch.full((2,), 5.0), torch.full((3,), 10.0)]).mean()
    # bias-corrected EMA, decay 0.5: m_2 = (0.5·0.5·b1 + 0.5·b2) / (1 − 0.5²)
    torch.testing.assert_close(r0["m"], torch.stack([b1, (0.25 * b1 + 0.5 * b2) / 0.75]))
    assert not torch.allclose(r0["m_local"], r1["m_local"])  # without sync the ranks differ
