"""Issue 67: properties of the torch references the mutation list needs that no other test states
on the reference itself (the router tests exercise the Triton path against it)."""

import math

import pytest
import torch
from icml26_kernels.moe.balancing import router_z_loss
from icml26_kernels.moe.router import topk_router_ref


def test_router_z_loss_is_the_mean_of_squared_logsumexps_over_tokens():
    """L_z = mean_n (logsumexp_e s_ne)^2: with two tokens whose logsumexps are log 2 and log 4
    it is (log² 2 + log² 4) / 2, not ((log 2 + log 4) / 2)² (the two agree for one token only)."""
    x = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]], dtype=torch.float64)
    want = (math.log(2.0) ** 2 + math.log(4.0) ** 2) / 2
    assert router_z_loss(x).item() == pytest.approx(want, rel=1e-12)


def test_reference_router_bias_moves_selection_but_gates_use_clean_logits():
    """Aux-free balancing: the bias enters the top-k selection only; the gates are the softmax
    of the *clean* logits of the selected experts (on the torch reference itself)."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(1, 16, 16, generator=gen)
    w = torch.randn(1, 16, 16, generator=gen)
    b = 10 * torch.randn(1, 16, generator=gen)
    idx_b, gates_b = topk_router_ref(x, w, b, 2)
    idx_0, _ = topk_router_ref(x, w, None, 2)
    assert not torch.equal(idx_b, idx_0)
    clean = torch.gather(torch.bmm(x, w), -1, idx_b)
    torch.testing.assert_close(gates_b, torch.softmax(clean, -1), rtol=1e-5, atol=1e-6)
