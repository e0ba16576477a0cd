"""UpcycledMoE on the Triton kernels (the GPU path), run by Triton's CPU interpreter.

``TRITON_INTERPRET`` must be set before the kernels are imported, so the check runs in a
subprocess. It covers the GPU path's settings that the CPU default does not take: the Triton
backend, 64-row blocks and the statically sized permuted buffer (``static_rows``), against the
dense reference, values and gradients, with grown (and then perturbed) copies in the slots.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

SCRIPT = textwrap.dedent(
    """
    import json, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from icml26_cka_upcycling import UpcycledMoE, moe_ref
    torch.manual_seed(0)
    def layer(**kw):
        moe = UpcycledMoE(16, 4, 2, 32, init_std=0.3, **kw)
        moe.grow([1, 3], freeze_source=False)
        return moe
    ref = layer(backend="torch")
    with torch.no_grad():
        ref.copy_router.normal_()
        ref.w1.add_(0.1 * torch.randn_like(ref.w1))  # copies differ from their sources
    x = torch.randn(40, 16, generator=torch.Generator().manual_seed(1))
    yr = moe_ref(ref, x)
    gr = torch.autograd.grad(yr.square().sum(), [ref.w1, ref.w2, ref.copy_router])
    out = {}
    for static in (False, True):
        for bs in (16, 64):
            tri = layer(backend="triton", static_rows=static, block_size=bs)
            tri.load_state_dict(ref.state_dict())
            y = tri(x)
            g = torch.autograd.grad(y.square().sum(), [tri.w1, tri.w2, tri.copy_router])
            pairs = [(y, yr)] + list(zip(g, gr))
            out[f"{static}-{bs}"] = [float((a - b).abs().max() / b.abs().max()) for a, b in pairs]
    print(json.dumps(out))
    """
)


@pytest.mark.timeout(300)
def test_triton_path_with_static_rows_and_64_row_blocks_matches_the_reference():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    try:
        r = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=240
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the Triton-interpreter check did not finish within 240 s")
    assert r.returncode == 0, r.stderr[-3000:]
    errs = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(errs) == {"False-16", "False-64", "True-16", "True-64"}
    # fp32 throughout; reductions of length <= 40 tokens x 32 hidden: relative error ~1e-6
    for cfg, e in errs.items():
        assert max(e) < 1e-4, (cfg, e)
