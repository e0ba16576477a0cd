import icml26_latentmoe as L
import pytest
import torch


def _moe(k=2, **kw):
    torch.manual_seed(0)
    return L.MoE(16, 8, k, 12, **(dict(init_std=0.3, backend="torch") | kw))


@pytest.mark.parametrize("k", [2, 8])
def test_moe_equals_per_token_loop(k):
    m = _moe(k)
    m.router_bias.copy_(torch.randn(8))
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(m(x), L.moe_ref(m, x), rtol=1e-5, atol=1e-5)


def test_triton_backend_matches_torch_backend():
    x = torch.randn(11, 16)
    res = []
    for backend in ("triton", "torch"):
        m = _moe(2, backend=backend)
        xr = x.clone().requires_grad_()
        m(xr).square().sum().backward()
        res.append([xr.grad, m.router.grad, m.w1.grad, m.w2.grad])
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_aux_losses_are_exposed_in_training():
    m = _moe(2, aux_loss_coef=0.01, z_loss_coef=0.001)
    x = torch.randn(10, 16)
    m.train()
    m(x)
    logits = x @ m.router
    idx = torch.topk(logits, 2).indices
    from icml26_kernels.moe import router_z_loss, switch_aux_loss

    expect = 0.01 * switch_aux_loss(logits, idx) + 0.001 * router_z_loss(logits)
    torch.testing.assert_close(m.aux_loss, expect)
    m.aux_loss.backward()
    assert m.router.grad.abs().sum() > 0
    assert _moe(2).train()(x) is not None and _moe(2).aux_loss is None  # off by default


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="top_k must be <="):
        L.MoE(16, 4, 5, 8)
    with pytest.raises(ValueError, match="num_experts must be a positive int"):
        L.MoE(16, 0, 1, 8)
    with pytest.raises(ValueError, match="d_model=16"):
        _moe()(torch.randn(2, 3))
