"""Upcycling: exact function preservation in fp64, kernel path vs dense reference, freezing."""

import pytest
import torch
import torch.nn.functional as F
from icml26_cka_upcycling import UpcycledMoE, moe_ref, upcycle_ffn, upcycle_moe
from torch import nn

D = torch.float64


def _ffn(d=8, m=16, seed=0, bias=True):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, m, bias=False), nn.GELU(), nn.Linear(m, d, bias=bias)).to(D)


def _x(n=40, d=8, seed=1):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=D)


def _portable_atol(ref: torch.Tensor, n: int) -> float:
    """The tolerance between two *different* kernels computing the same fp64 function.

    The upcycled MoE runs a grouped MLP, the dense FFN ``nn.Linear``: the same maths through
    different BLAS kernels, whose rounding differs between CPUs (AVX-512 vs AVX2 vs default),
    so a bit-exact check passes on one machine and fails on another. ``n`` is the length of
    the longest reduction (the FFN's hidden width): 8 eps sqrt(n) max|ref|.
    """
    return 8 * torch.finfo(ref.dtype).eps * n**0.5 * float(ref.detach().abs().max())


def _dense(x, W1, W2):
    return F.gelu(x @ W1) @ W2


def test_upcycle_ffn_zero_router_preserves_the_function_in_fp64():
    ffn, x = _ffn(), _x()
    moe = upcycle_ffn(ffn, 4, top_k=2, router_init="zero", backend="torch")
    y = ffn(x)
    # gates exactly 1/2, two equal experts; grouped MLP vs nn.Linear: rounding, not bits
    torch.testing.assert_close(moe(x), y, rtol=0, atol=_portable_atol(y, 16))


@pytest.mark.parametrize("router_init", ["orthogonal", "normal"])
@pytest.mark.parametrize("top_k", [1, 3])
def test_upcycle_ffn_preserves_function_for_any_router(router_init, top_k):
    ffn, x = _ffn(), _x()
    moe = upcycle_ffn(
        ffn, 4, top_k=top_k, router_init=router_init, generator=torch.Generator().manual_seed(0)
    )
    y = ffn(x)
    assert (moe(x) - y).abs().max() <= _portable_atol(y, 16)
    assert (
        moe.router.T @ moe.router
    ).diag().std() < 1e-12 or router_init == "normal"  # orthogonal columns


def test_noise_breaks_symmetry_and_exactness():
    ffn, x = _ffn(), _x()
    moe = upcycle_ffn(
        ffn, 4, router_init="orthogonal", noise=0.1, generator=torch.Generator().manual_seed(0)
    )
    assert (moe(x) - ffn(x)).abs().max() > 1e-4
    assert torch.equal(moe.w1[0], ffn[0].weight.T)  # the first copy stays the pretrained FFN


def test_grow_is_function_preserving_repeatedly_and_freezes_sources():
    ffn, x = _ffn(), _x()
    moe = upcycle_ffn(ffn, 4, top_k=2, router_init="orthogonal")
    with torch.no_grad():  # make the slots differ, as after training
        moe.w1.add_(0.3 * torch.randn_like(moe.w1))
        moe.copy_router.normal_()
    y0 = moe(x)
    new = moe.grow([1, 3])
    assert new == [4, 5] and moe.copies_per_slot() == [1, 2, 1, 2]
    assert moe.frozen.tolist() == [False, True, False, True, False, False]
    with torch.no_grad():  # the new copies learn something, the copy logits change
        moe.w2[4:].add_(0.3 * torch.randn_like(moe.w2[4:]))
        moe.copy_bias.normal_()
    y1 = moe(x)
    moe.grow([1])  # third copy of slot 1: splits the newest copy's mass
    y2 = moe(x)
    assert (y1 - y0).abs().max() > 1e-3
    assert (y2 - y1).abs().max() <= 1e-13 * y1.abs().max()


def test_kernel_path_matches_dense_reference_values_and_gradients():
    torch.manual_seed(0)
    moe = UpcycledMoE(6, 5, 2, 7, init_std=0.5, backend="torch").to(D)
    moe.grow([0, 2], freeze_source=False)
    moe.grow([2], freeze_source=False)
    with torch.no_grad():
        moe.w1.normal_(0, 0.5)
        moe.copy_router.normal_()
        moe.copy_bias.normal_()
    x = _x(30, 6)
    y, yr = moe(x), moe_ref(moe, x)
    assert torch.allclose(y, yr, rtol=1e-12, atol=1e-14)
    g = torch.autograd.grad(y.square().sum(), list(moe.parameters()))
    gr = torch.autograd.grad(yr.square().sum(), list(moe.parameters()))
    for a, b in zip(g, gr):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_presence_zero_equals_the_layer_without_the_copy():
    torch.manual_seed(0)
    moe = UpcycledMoE(6, 3, 2, 5, init_std=0.5).to(D)
    x = _x(20, 6)
    y_before = moe(x)
    moe.grow([0, 1, 2], provisional=True, freeze_source=False)
    with torch.no_grad():
        moe.w1[3:].normal_()
    moe.presence = torch.tensor([0.0, 1.0, 0.0], dtype=D)
    y_mixed = moe(x)
    moe.presence = torch.zeros(3, dtype=D)
    assert torch.allclose(moe(x), y_before, rtol=1e-13, atol=0)
    grown = moe.commit([False, True, False])
    assert grown == [1] and moe.copies_per_slot() == [1, 2, 1]
    assert moe.frozen.tolist() == [False, True, False, False]
    assert torch.allclose(moe(x), y_mixed, rtol=1e-13, atol=0)


def test_frozen_copies_get_no_gradient():
    moe = upcycle_ffn(_ffn(), 2, top_k=2)
    moe.grow([0])
    moe(_x()).square().sum().backward()
    assert moe.w1.grad[0].abs().sum() == 0  # frozen source
    assert moe.w1.grad[1].abs().sum() > 0 and moe.w1.grad[2].abs().sum() > 0


class _PlainMoE(nn.Module):
    """An existing top-k MoE with the attribute layout of icml26_latentmoe.MoE."""

    def __init__(self, d=8, E=4, m=6, k=2):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.router = nn.Parameter(torch.randn(d, E, generator=g, dtype=D))
        self.w1 = nn.Parameter(torch.randn(E, d, m, generator=g, dtype=D))
        self.w2 = nn.Parameter(torch.randn(E, m, d, generator=g, dtype=D))
        self.top_k = k

    def forward(self, x):
        logits = x @ self.router
        top = torch.topk(logits, self.top_k, -1)
        g = torch.softmax(top.values, -1)
        outs = torch.stack([_dense(x, self.w1[e], self.w2[e]) for e in range(self.w1.shape[0])], 1)
        return (g[..., None] * outs[torch.arange(x.shape[0])[:, None], top.indices]).sum(1)


def test_upcycle_moe_preserves_an_existing_moe():
    old, x = _PlainMoE(), _x()
    new = upcycle_moe(old, 3)
    assert new.copies_per_slot() == [3, 3, 3, 3]
    y = old(x)
    assert (new(x) - y).abs().max() <= 1e-13 * y.abs().max()


def test_bad_input():
    with pytest.raises(ValueError, match="num_experts"):
        upcycle_ffn(_ffn(), 0)
    with pytest.raises(ValueError, match="top_k"):
        upcycle_ffn(_ffn(), 2, top_k=3)
    with pytest.raises(ValueError, match="SiLU"):
        upcycle_ffn(_GatedMLP(act=nn.GELU()), 2)
    with pytest.raises(ValueError, match="both have a bias"):
        g = _GatedMLP()
        g.gate_proj = nn.Linear(8, 12, bias=True).to(D)
        upcycle_ffn(g, 2)
    with pytest.raises(ValueError, match="activation must be"):
        UpcycledMoE(4, 2, 1, 4, activation="relu")
    with pytest.raises(ValueError, match="ffn must be"):
        upcycle_ffn(nn.Linear(4, 4), 2)
    with pytest.raises(ValueError, match="router_init"):
        upcycle_ffn(_ffn(), 2, router_init="xavier")
    moe = upcycle_ffn(_ffn(), 2)
    with pytest.raises(ValueError, match="slots must lie"):
        moe.grow([2])
    with pytest.raises(ValueError, match="d_model"):
        moe(torch.randn(3, 5, dtype=D))
    with pytest.raises(ValueError, match="num_copies"):
        upcycle_moe(moe, 0)


class _GatedMLP(nn.Module):
    """A Llama/Qwen2-style gated MLP written out by hand: down(silu(gate(x)) * up(x))."""

    def __init__(self, d=8, m=12, bias=False, act=None, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.gate_proj = nn.Linear(d, m, bias=bias).to(D)
        self.up_proj = nn.Linear(d, m, bias=bias).to(D)
        self.down_proj = nn.Linear(m, d, bias=bias).to(D)
        self.act_fn = nn.SiLU() if act is None else act

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


@pytest.mark.parametrize("bias", [False, True])
def test_upcycle_gated_mlp_gives_swiglu_experts_that_preserve_the_function(bias):
    """A pretrained gated MLP (the FFN of Llama, Qwen2, Mistral) upcycles into SwiGLU experts
    with W1 = [W_g | W_u]: the same function to fp64 rounding, any router, with mlp_bias too."""
    mlp, x = _GatedMLP(bias=bias), _x()
    if bias:
        with torch.no_grad():  # non-zero biases everywhere
            for lin in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
                lin.bias.normal_()
    moe = upcycle_ffn(
        mlp, 4, top_k=2, router_init="normal", generator=torch.Generator().manual_seed(0)
    )
    assert moe.activation == "swiglu" and moe.w1.shape == (4, 8, 24) and moe.w2.shape == (4, 12, 8)
    assert (moe.b1 is not None) == bias
    y = mlp(x)
    assert (moe(x) - y).abs().max() <= _portable_atol(y, 12)
    torch.testing.assert_close(moe_ref(moe, x), y, rtol=0, atol=_portable_atol(y, 12))


def test_upcycle_biased_gelu_ffn_preserves_the_function():
    torch.manual_seed(3)
    ffn = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)).to(D)  # biases on both
    with torch.no_grad():
        ffn[0].bias.normal_()
    x = _x()
    moe = upcycle_ffn(ffn, 3, top_k=2, router_init="orthogonal")
    assert moe.b1 is not None and torch.equal(moe.b1[2], ffn[0].bias)
    y = ffn(x)
    assert (moe(x) - y).abs().max() <= _portable_atol(y, 16)


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_hidden_bias_and_gated_kernel_path_match_the_dense_reference(activation):
    """The kernel path ([x, 1] through the grouped MLP with [W1; b1], fused gate/up) against the
    dense per-copy reference, values and gradients (b1 included), after growth with distinct
    copies and a frozen source; the frozen copy's b1 gets no gradient."""
    torch.manual_seed(0)
    moe = UpcycledMoE(6, 4, 2, 5, init_std=0.5, activation=activation, hidden_bias=True).to(D)
    moe.grow([0, 2], freeze_source=False)  # the dense reference has no freezing
    with torch.no_grad():
        moe.w1.normal_(0, 0.5)
        moe.b1.normal_()
        moe.copy_router.normal_()
    x = _x(30, 6)
    y, yr = moe(x), moe_ref(moe, x)
    torch.testing.assert_close(y, yr, rtol=1e-12, atol=1e-13)
    params = [moe.w1, moe.w2, moe.b1, moe.router, moe.copy_router, moe.copy_bias]
    g = torch.autograd.grad(y.square().sum(), params)
    gr = torch.autograd.grad(yr.square().sum(), params)
    for a, b in zip(g, gr):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    moe.frozen[0] = True
    gb1 = torch.autograd.grad(moe(x).square().sum(), moe.b1)[0]
    assert gb1[0].abs().sum() == 0  # frozen copy: no gradient into its hidden bias
    assert gb1[1:].abs().sum(1).min() > 0


def test_grow_and_commit_carry_the_hidden_bias():
    moe = upcycle_ffn(_GatedMLP(bias=True, seed=1), 3, top_k=2, router_init="normal")
    x = _x()
    y0 = moe(x)
    moe.grow([0, 1, 2], provisional=True, freeze_source=False)
    assert moe.b1.shape == (6, 24) and torch.equal(moe.b1[3], moe.b1[0])
    moe.presence = torch.ones(3, dtype=D)
    assert (moe(x) - y0).abs().max() <= 1e-13 * y0.abs().max()
    with torch.no_grad():
        moe.b1[4].add_(1.0)  # copy 4 (slot 1) learns something
    y_kept = moe(x)
    moe.commit([False, True, False])
    assert moe.b1.shape == (4, 24)
    torch.testing.assert_close(moe(x), y_kept, rtol=1e-13, atol=0)


def test_add_experts_grows_the_router_exactly_while_the_new_slot_is_unselected():
    """Growth as new router columns: slot 3 (k=2 of S=4 -> 5) replicates slot 1 with its router
    column; with a large selection-bias offset no token selects it and the function is exact;
    with offset 0 it ties slot 1 and enters top-k sets, displacing other slots (not exact)."""
    moe = upcycle_ffn(_GatedMLP(seed=2), 4, top_k=2, router_init="normal")
    with torch.no_grad():  # distinct experts, a slot with two copies
        moe.w1.add_(0.3 * torch.randn_like(moe.w1))
    moe.grow([1])
    x = _x()
    y0 = moe(x)
    new = moe.add_experts([1])
    assert new == [4] and moe.num_experts == 5 and moe.router.shape == (8, 5)
    assert moe.copies_per_slot() == [1, 2, 1, 1, 2]
    assert torch.equal(moe.router[:, 4], moe.router[:, 1])
    assert moe.router_bias[4] == moe.router_bias[1] - 1e4
    torch.testing.assert_close(moe(x), y0, rtol=1e-13, atol=0)
    torch.testing.assert_close(moe_ref(moe, x), y0, rtol=1e-12, atol=1e-13)
    moe.router_bias[4] = moe.router_bias[1]  # offset 0: the replica competes at once
    assert (moe(x) - y0).abs().max() > 1e-6
    with pytest.raises(ValueError, match="sources must lie"):
        moe.add_experts([5])
    with pytest.raises(ValueError, match="bias_offset"):
        moe.add_experts([0], bias_offset=float("inf"))


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_dense_backend_equals_the_kernel_path_values_and_gradients(activation):
    """backend='dense' (every copy on every token, two GEMMs) against the permuted grouped-MLP
    path: same function, same gradients, with presence, hidden bias and a frozen copy."""
    torch.manual_seed(1)
    layers = [
        UpcycledMoE(
            6, 4, 2, 5, init_std=0.5, activation=activation, hidden_bias=True, backend=b
        ).to(D)
        for b in ("torch", "dense")
    ]
    layers[1].load_state_dict(layers[0].state_dict())
    for moe in layers:
        moe.grow([0, 3], provisional=True, freeze_source=False)
        moe.frozen[1] = True
        with torch.no_grad():
            g2, g3 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(3)
            moe.w1.copy_(torch.randn(moe.w1.shape, generator=g2, dtype=D))
            moe.copy_router.copy_(torch.randn(moe.copy_router.shape, generator=g3, dtype=D))
        moe.presence = torch.tensor([0.3, 1.0], dtype=D)
    x = _x(25, 6)
    ys = [moe(x) for moe in layers]
    torch.testing.assert_close(ys[1], ys[0], rtol=1e-12, atol=1e-12)
    grads = [
        torch.autograd.grad(y.square().sum(), list(m.parameters())) for y, m in zip(ys, layers)
    ]
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-11)
    with pytest.raises(ValueError, match="backend must be"):
        UpcycledMoE(4, 2, 1, 4, backend="cuda")


@pytest.mark.parametrize("block_size", [None, 4, 64])
def test_static_row_buffer_gives_the_same_layer_values_and_gradients(block_size):
    """``static_rows`` (the GPU path: a buffer of max_rows rows, nothing read back from the
    device) computes the function of the exactly sized buffer; only padding rows differ."""
    torch.manual_seed(0)
    layers = []
    for static in (False, True):
        moe = UpcycledMoE(
            6, 5, 2, 7, init_std=0.5, backend="torch", block_size=block_size, static_rows=static
        ).to(D)
        moe.grow([0, 2], freeze_source=False)
        layers.append(moe)
    layers[1].load_state_dict(layers[0].state_dict())
    with torch.no_grad():
        for moe in layers:
            moe.copy_router.copy_(
                torch.linspace(-1, 1, moe.copy_router.numel()).view_as(moe.copy_router).to(D)
            )
    x = _x(30, 6)
    ys = [moe(x) for moe in layers]
    yr = moe_ref(layers[0], x)
    for y in ys:
        assert torch.allclose(y, yr, rtol=1e-12, atol=_portable_atol(yr, 7))
    gs = [torch.autograd.grad(y.square().sum(), list(m.parameters())) for y, m in zip(ys, layers)]
    for a, b in zip(*gs):
        assert torch.allclose(a, b, rtol=1e-10, atol=_portable_atol(b, 30))


def test_cached_slot_structure_follows_in_place_and_replaced_buffers():
    """The slot table is cached between forwards; a state_dict load (an in-place write into
    ``slot_of``), a grow (new buffers) and a commit must each be seen by the next forward."""
    torch.manual_seed(0)
    a = UpcycledMoE(6, 4, 2, 5, init_std=0.5, backend="torch").to(D)
    b = UpcycledMoE(6, 4, 2, 5, init_std=0.5, backend="torch").to(D)
    a.grow([0], freeze_source=False)
    b.grow([3], freeze_source=False)  # same number of copies, the 5th copy in another slot
    with torch.no_grad():
        for m in (a, b):
            m.copy_router.normal_()
    x = _x(20, 6)
    a(x)  # caches a's slot table
    a.load_state_dict(b.state_dict())
    assert torch.equal(a.slot_of, b.slot_of)
    assert torch.allclose(a(x), moe_ref(b, x), rtol=1e-12, atol=_portable_atol(b(x), 5))
    n = a.grow([1, 2], provisional=True, freeze_source=False)
    a.presence = torch.tensor([1.0, 0.0], dtype=D)
    assert torch.allclose(a(x), moe_ref(a, x), rtol=1e-12, atol=_portable_atol(b(x), 5))
    a.commit([True, False])
    assert a.num_copies == 6 and n == [5, 6]
    assert torch.allclose(a(x), moe_ref(a, x), rtol=1e-12, atol=_portable_atol(b(x), 5))
