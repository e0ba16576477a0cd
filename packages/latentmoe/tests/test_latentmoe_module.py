import math

import icml26_latentmoe as L
import pytest
import torch


def _layer(k=2, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(init_std=0.3, backend="torch") | kw
    return L.MultiHeadLatentMoE(16, 4, 8, 6, k, 12, **cfg)


@pytest.mark.parametrize("k", [2, 3, 6])
def test_layer_equals_per_token_loop(k):
    m = _layer(k)
    m.router_bias.copy_(torch.randn(4, 6))
    x = torch.randn(3, 5, 16)
    y = m(x)
    assert y.shape == x.shape
    torch.testing.assert_close(y, L.mh_latent_moe_ref(m, x), rtol=1e-5, atol=1e-5)


def test_layer_is_the_written_equation_for_one_token():
    # H = 2 heads of width 1, E = 2 experts of width 1, k = 2: every quantity by hand
    torch.manual_seed(0)
    m = L.MultiHeadLatentMoE(2, 2, 1, 2, 2, 1, backend="torch")
    with torch.no_grad():
        m.w_in.copy_(torch.eye(2))  # z = x
        m.router.copy_(torch.tensor([[[1.0, -1.0]], [[1.0, -1.0]]]))  # head h: logits (z, -z)
        m.w1.copy_(torch.tensor([2.0, 3.0, 5.0, 7.0]).view(2, 2, 1, 1))
        m.w2.copy_(torch.tensor([1.0, -2.0, 0.5, 4.0]).view(2, 2, 1, 1))
        m.w_out.copy_(torch.tensor([[1.0, 0.0], [0.0, 10.0]]))
    x = torch.tensor([[0.5, -0.25]])
    gelu, sig = torch.nn.functional.gelu, torch.sigmoid
    t = torch.tensor
    # gates softmax(z, -z) = (σ(2z), 1 − σ(2z)); expert e of head h: w2[h,e]·gelu(z·w1[h,e])
    y0 = sig(t(1.0)) * 1.0 * gelu(t(0.5 * 2.0)) + (1 - sig(t(1.0))) * -2.0 * gelu(t(0.5 * 3.0))
    y1 = sig(t(-0.5)) * 0.5 * gelu(t(-0.25 * 5.0)) + (1 - sig(t(-0.5))) * 4.0 * gelu(t(-0.25 * 7.0))
    torch.testing.assert_close(m(x)[0], torch.stack([y0, 10 * y1]))


def test_top_k_one_is_refused():
    # k = 1: the gate is softmax of one logit = 1, the router would get no gradient
    with pytest.raises(ValueError, match="top_k must be >= 2"):
        L.MultiHeadLatentMoE(16, 4, 8, 6, 1, 12)
    with pytest.raises(ValueError, match="top_k must be >= 2"):
        L.MoE(16, 6, 1, 12)
    L.MoE(16, 6, 1, 12, aux_loss_coef=0.01)  # the aux loss trains a k = 1 router


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_router_and_bias_stay_fp32_under_a_cast(dtype):
    ref = _layer(2)
    m = _layer(2).to(dtype)
    assert m.w1.dtype == m.w_in.dtype == dtype
    assert m.router.dtype == m.router_bias.dtype == torch.float32
    assert torch.equal(m.router, ref.router)  # restored from before the cast, not rounded
    with torch.no_grad():
        m.router_bias.fill_(1.0)
    before = m.router_bias.clone()
    m.expert_load.copy_(torch.arange(24).view(4, 6))  # every expert off the mean
    m.update_bias(1e-3)  # below half a bf16 ulp at 1.0: lost if the bias were bf16
    assert torch.all(m.router_bias != before)
    y = m(torch.randn(3, 16, dtype=dtype))
    assert y.dtype == dtype and torch.isfinite(y).all()
    moe = L.MoE(16, 6, 2, 12, backend="torch").to(dtype)
    assert moe.router.dtype == moe.router_bias.dtype == torch.float32
    moe.aux_loss_coef = 0.01
    assert moe.train()(torch.randn(3, 16, dtype=dtype)).dtype == dtype


def test_triton_backend_matches_torch_backend():
    x = torch.randn(2, 9, 16)
    dy = torch.randn(2, 9, 16)
    res = []
    for backend in ("triton", "torch"):
        m = _layer(3, backend=backend)
        m.router_bias.copy_(torch.linspace(-1, 1, 24).view(4, 6))
        xr = x.clone().requires_grad_()
        (m(xr) * dy).sum().backward()
        res.append([xr.grad] + [p.grad for p in (m.w_in, m.router, m.w1, m.w2, m.w_out)])
        res[-1].append(m.expert_load.clone().float())
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_gradients_against_finite_differences():
    torch.manual_seed(0)
    m = L.MultiHeadLatentMoE(4, 2, 2, 3, 2, 3, init_std=0.5, backend="torch").double()
    m.router_bias.copy_(torch.randn(2, 3))
    x = torch.randn(5, 4, dtype=torch.double)
    names = ["w_in", "router", "w1", "w2", "w_out"]
    fn = lambda t, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (t,))
    inputs = (x, *(getattr(m, n).detach() for n in names))
    assert torch.autograd.gradcheck(fn, tuple(t.clone().requires_grad_() for t in inputs))


def test_constant_bias_shift_per_head_changes_nothing():
    m = _layer(2)
    x = torch.randn(10, 16)
    m.router_bias.copy_(torch.randn(4, 6))
    y1 = m(x)
    m.router_bias += torch.tensor([[1.0], [-2.0], [0.5], [30.0]])
    torch.testing.assert_close(m(x), y1)


def test_expert_load_and_bias_update():
    m = _layer(2)
    x = torch.randn(20, 16)
    m.train()
    m(x)
    assert m.expert_load.shape == (4, 6)
    assert m.expert_load.sum(1).tolist() == [40] * 4  # N·k assignments per head
    bias0 = torch.randn(4, 6)
    m.router_bias.copy_(bias0)
    load = m.update_bias(0.1)
    assert m.expert_load.sum() == 0
    torch.testing.assert_close(m.router_bias.sum(1), bias0.sum(1))
    over = load > load.float().mean(1, keepdim=True)
    under = load < load.float().mean(1, keepdim=True)
    delta = m.router_bias - bias0
    assert torch.all(delta[over] < delta[under].min())  # over-loaded experts lose bias
    m.eval()
    m(x)
    assert m.expert_load.sum() == 0  # no counting in eval mode


def test_balancer_evens_out_a_skewed_layer():
    m = _layer(2, init_std=0.3)
    with torch.no_grad():
        m.router[:, 0, :2] += 3.0  # experts 0 and 1 of every head are favoured when z_0 > 0
        m.w_in[0, 0::8] = 1.0  # x_0 feeds z_0 of every head
    bal = L.AuxFreeBalancer(0.3)
    gen = torch.Generator().manual_seed(0)
    ratios = []
    for _ in range(40):
        x = torch.randn(64, 16, generator=gen)
        x[:, 0] = 2.0
        m(x)
        ratios.append(bal.step(m))
    assert ratios[0] > 2.0
    assert sum(ratios[-5:]) / 5 < 0.6 * ratios[0]
    torch.testing.assert_close(m.router_bias.sum(), torch.tensor(0.0), atol=1e-4, rtol=0)


def test_same_seed_same_bytes():
    outs = []
    for _ in range(2):
        m = _layer(2, seed=7)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        gen = torch.Generator().manual_seed(3)
        for _ in range(3):
            x = torch.randn(8, 16, generator=gen)
            loss = m(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            m.update_bias(0.01)
        outs.append(m(torch.ones(2, 16)).detach().numpy().tobytes())
    assert outs[0] == outs[1]


def test_single_rank_dispatch_combine_roundtrip():
    z = torch.randn(5, 4, 3)
    zl = L.dispatch(z, None)
    assert zl.shape == (4, 5, 3)
    assert torch.equal(L.combine(zl, None), z)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_k": 7}, "top_k must be <="),
        ({"top_k": 0}, "top_k must be a positive int"),
        ({"top_k": 1}, "top_k must be >= 2"),
        ({"num_heads": 2.0}, "num_heads must be a positive int"),
        ({"expert_size": -1}, "expert_size must be a positive int"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    cfg = dict(d_model=16, num_heads=4, head_dim=8, num_experts=6, top_k=2, expert_size=12) | kwargs
    with pytest.raises(ValueError, match=match):
        L.MultiHeadLatentMoE(**cfg)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="d_model=16"):
        _layer()(torch.randn(3, 15))
    with pytest.raises(ValueError, match=r"z must be \(N, H, d_h\)"):
        L.dispatch(torch.randn(3, 4), None)
    with pytest.raises(ValueError, match="update_rate"):
        L.AuxFreeBalancer(-1.0)
    with pytest.raises(ValueError, match="no MultiHeadLatentMoE"):
        L.AuxFreeBalancer().step(torch.nn.Linear(2, 2))


def test_router_init_std_sets_only_the_router_scale():
    torch.manual_seed(0)
    a = L.MultiHeadLatentMoE(64, 4, 16, 32, 2, 8, backend="torch")
    torch.manual_seed(0)
    b = L.MultiHeadLatentMoE(64, 4, 16, 32, 2, 8, router_init_std=0.25, backend="torch")
    assert abs(a.router.std().item() - 0.02) < 2e-3
    assert abs(b.router.std().item() - 0.25) < 2e-2
    torch.testing.assert_close(b.router, a.router * (0.25 / 0.02))  # same draw, rescaled
    torch.testing.assert_close(a.w1, b.w1)


@pytest.mark.parametrize("num_layers", [1, 8])
def test_init_scales_follow_the_official_code(num_layers):
    """W_in, routers, W1, W2 ~ N(0, 0.02²); W_out ~ N(0, (0.02/√(2L))²) (GPT-2's residual rule).

    The sample std of n Gaussian draws has relative SE 1/√(2n): 6 SE bands.
    """
    torch.manual_seed(0)
    m = L.MultiHeadLatentMoE(256, 8, 32, 64, 2, 8, num_layers=num_layers, backend="torch")
    for name, want in (
        ("w_in", 0.02),
        ("router", 0.02),
        ("w1", 0.02),
        ("w2", 0.02),
        ("w_out", 0.02 / math.sqrt(2 * num_layers)),
    ):
        p = getattr(m, name)
        assert abs(p.std().item() / want - 1) < 6 / math.sqrt(2 * p.numel()), name
        assert abs(p.mean().item()) < 6 * want / math.sqrt(p.numel()), name
    torch.manual_seed(0)
    moe = L.MoE(256, 8, 2, 64, num_layers=num_layers, backend="torch")
    want = 0.02 / math.sqrt(2 * num_layers)  # the baseline's W2 is its output projection
    assert abs(moe.w2.std().item() / want - 1) < 6 / math.sqrt(2 * moe.w2.numel())
    assert abs(moe.w1.std().item() / 0.02 - 1) < 6 / math.sqrt(2 * moe.w1.numel())


@pytest.mark.parametrize("reentrant", [False, True])
def test_load_counted_once_under_activation_checkpointing(reentrant):
    from torch.utils.checkpoint import checkpoint

    x = torch.randn(10, 16, requires_grad=True)
    for layer in (_layer(2), L.MoE(16, 6, 2, 12, backend="torch")):
        layer.train()
        y = checkpoint(layer, x, use_reentrant=reentrant)  # the forward runs again in backward
        y.square().sum().backward()
        heads = layer.expert_load.numel() // 6  # 4 for the multi-head layer, 1 for the MoE
        assert int(layer.expert_load.sum()) == heads * 10 * 2  # N·k per head, not twice that


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_static_capacity_gives_the_same_layer(backend):
    x = torch.randn(9, 16)
    dy = torch.randn(9, 16)
    res = []
    for static in (False, True):
        m = _layer(3, backend=backend, static_capacity=static)
        m.router_bias.copy_(torch.linspace(-1, 1, 24).view(4, 6))
        xr = x.clone().requires_grad_()
        (m(xr) * dy).sum().backward()
        res.append([xr.grad, m.w1.grad, m.w2.grad, m.router.grad, m.expert_load.float()])
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _static_pair(kind):
    """(exact-buffer eager layer, static-capacity copy with the same weights and bias)."""
    out = []
    for static in (False, True):
        torch.manual_seed(0)
        if kind == "multi_head":
            m = _layer(3, static_capacity=static)
            m.router_bias.copy_(torch.linspace(-1, 1, 24).view(4, 6))
        else:
            m = L.MoE(
                16, 6, 2, 12, init_std=0.3, aux_loss_coef=0.1, z_loss_coef=0.01,
                static_capacity=static, backend="torch",
            )  # fmt: skip
            m.router_bias.copy_(torch.linspace(-1, 1, 6))
        out.append(m.train())
    return out


@pytest.mark.parametrize("kind", ["multi_head", "moe"])
@pytest.mark.parametrize(
    "compiler", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]
)
def test_fullgraph_compile_matches_eager(kind, compiler):
    # fullgraph=True raises on any graph break (a device read-back, a tensor turned into a Python
    # int); aot_eager traces dynamo + AOT autograd (forward and backward graphs) without
    # inductor's C++ build, inductor (slow, ~35 s here) also generates the kernels.
    torch._dynamo.reset()
    eager, static = _static_pair(kind)
    compiled = torch.compile(static, fullgraph=True, backend=compiler)
    for step in range(2):  # a second call reuses the graph (new routing, same shapes)
        gen = torch.Generator().manual_seed(step)
        x = torch.randn(2, 5, 16, generator=gen)
        dy = torch.randn(2, 5, 16, generator=gen)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = eager(xa), compiled(xb)
        la = (ya * dy).sum() + (eager.aux_loss if kind == "moe" else 0)
        lb = (yb * dy).sum() + (static.aux_loss if kind == "moe" else 0)
        la.backward()
        lb.backward()
        torch.testing.assert_close(yb, ya, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(lb, la, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-5, atol=1e-6)
        for (name, pa), pb in zip(eager.named_parameters(), static.parameters()):
            torch.testing.assert_close(pb.grad, pa.grad, rtol=1e-5, atol=1e-6, msg=name)
        assert torch.equal(static.expert_load, eager.expert_load)  # the buffer update is traced
    assert int(static.expert_load.sum()) > 0


def test_moe_static_capacity_is_single_process_only():
    with pytest.raises(ValueError, match="static_capacity"):
        L.MoE(16, 6, 2, 12, static_capacity=True, process_group=object(), backend="torch")
