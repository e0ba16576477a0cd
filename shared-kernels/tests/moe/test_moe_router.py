import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from icml26_kernels import select_backend  # noqa: E402
from icml26_kernels.moe import topk_router, topk_router_ref  # noqa: E402

# (G, N, D, E, k): E not a multiple of the tile, k = 1, k = E, several groups (heads)
CASES = [
    (1, 19, 24, 40, 3),
    (3, 17, 16, 16, 2),
    (2, 5, 8, 70, 8),
    (1, 9, 12, 5, 5),
    (2, 33, 16, 20, 1),
]


def _inputs(G, N, D, E, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(G, N, D, generator=gen).to(device)
    w = torch.randn(G, D, E, generator=gen).to(device)
    b = torch.randn(G, E, generator=gen).to(device)
    return x, w, b


def test_backend_is_triton_when_kernels_are_tested(device):
    # the kernels below must really run (on the GPU or the interpreter), not the reference
    assert select_backend(device).backend in ("triton", "triton_interpret")


@pytest.mark.parametrize("case", CASES)
def test_reference_is_brute_force_topk_of_biased_scores(case):
    G, N, D, E, k = case
    x, w, b = (t.double() for t in _inputs(G, N, D, E, "cpu"))
    idx, gates = topk_router_ref(x, w, b, k)
    logits = torch.einsum("gnd,gde->gne", x, w)
    for g in range(G):
        for n in range(N):
            scores = (logits[g, n] + b[g]).tolist()
            best = sorted(range(E), key=lambda e: -scores[e])[:k]
            assert idx[g, n].tolist() == best
            clean = torch.tensor([logits[g, n, e].item() for e in best], dtype=torch.double)
            expect = torch.exp(clean - clean.max()) / torch.exp(clean - clean.max()).sum()
            torch.testing.assert_close(gates[g, n], expect)


@pytest.mark.parametrize("case", CASES)
def test_triton_forward_matches_reference(case, device):
    G, N, D, E, k = case
    x, w, b = _inputs(G, N, D, E, device, seed=1)
    idx, gates = topk_router(x, w, b, k=k, backend="triton")
    ridx, rgates = topk_router_ref(x, w, b, k)
    assert idx.dtype == torch.int64 and idx.shape == (G, N, k)
    assert torch.equal(idx, ridx)
    torch.testing.assert_close(gates, rgates, rtol=1e-5, atol=1e-6)


def test_without_bias_and_2d_input(device):
    x, w, _ = _inputs(1, 21, 16, 24, device, seed=2)
    idx, gates = topk_router(x[0], w[0], None, k=4, backend="triton")
    ridx, rgates = topk_router_ref(x[0], w[0], None, 4)
    assert idx.shape == (21, 4)
    assert torch.equal(idx, ridx)
    torch.testing.assert_close(gates, rgates, rtol=1e-5, atol=1e-6)
    assert torch.equal(idx, torch.topk(x[0] @ w[0], 4).indices)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_constant_bias_shift_changes_nothing(backend, device):
    x, w, b = _inputs(2, 18, 16, 24, device, seed=3)
    i1, g1 = topk_router(x, w, b, k=3, backend=backend)
    i2, g2 = topk_router(
        x, w, b + torch.tensor([[7.0], [-3.0]], device=device), k=3, backend=backend
    )
    assert torch.equal(i1, i2)
    torch.testing.assert_close(g1, g2)


def test_bias_moves_selection_but_gates_use_clean_logits(device):
    x, w, b = _inputs(1, 16, 16, 16, device, seed=4)
    b = b * 10  # large enough to change many selections
    idx_b, gates_b = topk_router(x, w, b, k=2, backend="triton")
    idx_0, _ = topk_router(x, w, None, k=2, backend="triton")
    assert not torch.equal(idx_b, idx_0)
    clean = torch.gather(torch.bmm(x, w), -1, idx_b)
    torch.testing.assert_close(gates_b, torch.softmax(clean, -1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES[:3])
def test_triton_backward_matches_autograd_of_reference(case, device):
    G, N, D, E, k = case
    x, w, b = _inputs(G, N, D, E, device, seed=5)
    dg = torch.randn(G, N, k, generator=torch.Generator().manual_seed(6)).to(device)
    grads = []
    for fn in (lambda a, c: topk_router(a, c, b, k=k, backend="triton")[1],
               lambda a, c: topk_router_ref(a, c, b, k)[1]):  # fmt: skip
        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
        (fn(xr, wr) * dg).sum().backward()
        grads.append((xr.grad, wr.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-4, atol=1e-5)


def test_reference_gradient_against_finite_differences():
    x, w, b = (t.double() for t in _inputs(2, 6, 5, 7, "cpu", seed=7))
    fn = lambda a, c: topk_router_ref(a, c, b, 3)[1]
    assert torch.autograd.gradcheck(fn, (x.requires_grad_(), w.requires_grad_()))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((torch.randn(4, 8), torch.randn(8, 6), None), {"k": 7}, "k must be"),
        ((torch.randn(4, 8), torch.randn(8, 6), None), {"k": 0}, "k must be"),
        ((torch.randn(4, 8), torch.randn(9, 6), None), {"k": 2}, "weight must be"),
        ((torch.randn(4, 8), torch.randn(2, 8, 6), None), {"k": 2}, "weight must have shape"),
        ((torch.randn(4, 8), torch.randn(8, 6), torch.randn(5)), {"k": 2}, "bias must have shape"),
        ((torch.randn(8), torch.randn(8, 6), None), {"k": 2}, "x must be"),
    ],
)
def test_bad_input_raises(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        topk_router(*args, **kwargs, backend="torch")


def test_bad_backend_raises():
    with pytest.raises(ValueError, match="prefer must be one of"):
        topk_router(torch.randn(4, 8), torch.randn(8, 6), k=2, backend="cuda")


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_ties_go_to_the_higher_expert_index(backend, device):
    # integer-valued logits: many exact ties, inside a 64-wide expert tile and across tiles
    # (E = 70); the order is the paper's packed key (score desc, then expert index desc),
    # checked by brute force on both paths
    G, N, E, k = 2, 40, 70, 3
    gen = torch.Generator().manual_seed(11)
    x = torch.randint(-2, 3, (G, N, 4), generator=gen).float()
    w = torch.randint(-1, 2, (G, 4, E), generator=gen).float()
    b = torch.randint(-1, 2, (G, E), generator=gen).float()
    idx, _ = topk_router(x.to(device), w.to(device), b.to(device), k=k, backend=backend)
    scores = (x @ w + b[:, None, :]).tolist()
    for g in range(G):
        for n in range(N):
            s = scores[g][n]
            best = sorted(range(E), key=lambda e: (-s[e], -e))[:k]
            assert idx[g, n].tolist() == best
            assert s[best[0]] == s[sorted(range(E), key=lambda e: (-s[e], e))[0]]


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_logits_raise(backend, bad, device):
    x, w, b = _inputs(1, 9, 8, 20, device, seed=4)
    x[0, 3, 2] = bad
    with pytest.raises(ValueError, match="router logits x·weight are not finite"):
        topk_router(x, w, b, k=2, backend=backend)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_half_precision_inputs_and_autocast_route_in_fp32(backend, device):
    x, w, b = _inputs(2, 16, 16, 24, device, seed=5)
    xh = x.bfloat16()
    ridx, rgates = topk_router_ref(xh.float(), w, b, 3)  # fp32 routing of the bf16 tokens
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        idx, gates = topk_router(xh, w, b, k=3, backend=backend)
    assert gates.dtype == torch.float32
    assert torch.equal(idx, ridx)
    torch.testing.assert_close(gates, rgates, rtol=1e-5, atol=1e-6)  # bf16 logits: ~1e-2 off


def test_triton_reads_a_transposed_half_precision_view_in_place(device):
    # the layers hand the router (H, N, d_h) views of (N, H, d_h) activations: strides, not copies
    x, w, b = _inputs(3, 20, 16, 24, device, seed=8)
    xt = x.transpose(0, 1).contiguous().half().transpose(0, 1)  # (G, N, D) view, non-contiguous
    assert not xt.is_contiguous()
    xr = xt.detach().clone().requires_grad_()
    idx, gates = topk_router(xt.requires_grad_(), w, b, k=3, backend="triton")
    ridx, rgates = topk_router_ref(xr, w, b, 3)
    assert torch.equal(idx, ridx)
    torch.testing.assert_close(gates, rgates, rtol=1e-5, atol=1e-6)
    dg = torch.randn_like(gates)
    (gx,) = torch.autograd.grad((gates * dg).sum(), xt)
    (rx,) = torch.autograd.grad((rgates * dg).sum(), xr)
    assert gx.dtype == torch.float16
    torch.testing.assert_close(gx.float(), rx.float(), rtol=1e-2, atol=1e-3)
