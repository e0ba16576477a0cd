import contextlib
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
F = torch.nn.functional

from icml26_kernels.moe import (  # noqa: E402
    grouped_mlp,
    grouped_mlp_ref,
    make_permutation,
    permute,
    unpermute,
)


def _setup(N, k, E, D, M, DO, bs, seed=0):
    gen = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(N)])
    perm = make_permutation(idx, E, bs)
    x = torch.randn(N, D, generator=gen)
    g = torch.rand(N, k, generator=gen)
    w1 = torch.randn(E, D, M, generator=gen) / D**0.5
    w2 = torch.randn(E, M, DO, generator=gen) / M**0.5
    return idx, perm, x, g, w1, w2


def _fwd_bwd(xp, w1, w2, perm, dy, backend, activation="gelu"):
    """y and the gradients of <y, dy> wrt x, W1, W2 on fresh leaf copies, for one backend."""
    a, b, c = (t.clone().requires_grad_() for t in (xp, w1, w2))
    y = grouped_mlp(a, b, c, perm, activation=activation, backend=backend)
    (y * dy).sum().backward()
    return y.detach(), a.grad, b.grad, c.grad


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_moe_pipeline_equals_per_token_expert_loop(backend):
    N, k, E, D, M = 13, 2, 4, 12, 20
    idx, perm, x, g, w1, w2 = _setup(N, k, E, D, M, D, 16)
    y = unpermute(
        grouped_mlp(permute(x, perm, backend=backend), w1, w2, perm, backend=backend),
        perm,
        g,
        backend=backend,
    )
    expect = torch.zeros(N, D)
    for n in range(N):
        for j in range(k):
            e = int(idx[n, j])
            expect[n] += g[n, j] * (F.gelu(x[n] @ w1[e]) @ w2[e])
    torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_swiglu_experts_equal_a_per_token_llama_mlp(backend):
    """Gated experts, W1[e] = [W_g | W_u]: y = (silu(x W_g) ⊙ x W_u) W2, written per token with
    the gate and up halves as two separate matrices (as in LlamaMLP's gate_proj / up_proj)."""
    N, k, E, D, M, DO = 13, 2, 4, 12, 20, 9
    idx, perm, x, g, w1, w2 = _setup(N, k, E, D, 2 * M, DO, 16)
    w2 = w2[:, :M]  # (E, M, DO)
    y = unpermute(
        grouped_mlp(
            permute(x, perm, backend=backend), w1, w2, perm, activation="swiglu", backend=backend
        ),
        perm,
        g,
        backend=backend,
    )
    expect = torch.zeros(N, DO)
    for n in range(N):
        for j in range(k):
            e = int(idx[n, j])
            gate, up = x[n] @ w1[e, :, :M], x[n] @ w1[e, :, M:]
            expect[n] += g[n, j] * ((gate * torch.sigmoid(gate) * up) @ w2[e])
    torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5)


def test_swiglu_reference_gradient_against_finite_differences():
    _, perm, x, _, w1, w2 = _setup(5, 2, 3, 4, 12, 4, 2, seed=3)
    xp = permute(x, perm, backend="torch").double().requires_grad_()
    fn = lambda a, b, c: grouped_mlp_ref(a, b, c, perm, activation="swiglu")
    assert torch.autograd.gradcheck(
        fn, (xp, w1.double().requires_grad_(), w2[:, :6].double().requires_grad_())
    )


def test_swiglu_bad_input_raises():
    _, perm, x, _, w1, w2 = _setup(4, 2, 3, 4, 6, 4, 16)
    xp = permute(x, perm, backend="torch")
    with pytest.raises(ValueError, match="w2 must be .*swiglu"):
        grouped_mlp(xp, w1, w2, perm, activation="swiglu", backend="torch")  # w2 has M = 6 rows
    with pytest.raises(ValueError, match="2M"):
        grouped_mlp(xp, w1[:, :, :5], w2[:, :2], perm, activation="swiglu", backend="torch")
    with pytest.raises(ValueError, match="activation must be"):
        grouped_mlp(xp, w1, w2, perm, activation="relu", backend="torch")


@pytest.mark.parametrize(("D", "M", "DO"), [(12, 20, 12), (16, 96, 8), (70, 16, 33)])
def test_triton_matches_reference_forward_and_backward(D, M, DO):
    N, k, E = 11, 2, 3
    _, perm, x, _g, w1, w2 = _setup(N, k, E, D, M, DO, 16, seed=1)
    xp = permute(x, perm, backend="torch")
    dy = torch.randn(perm.num_rows, DO, generator=torch.Generator().manual_seed(2))
    res = [_fwd_bwd(xp, w1, w2, perm, dy, be) for be in ("triton", "torch")]
    for p, q in zip(*res):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    assert torch.all(res[0][0][perm.src_token == -1] == 0)  # padding rows stay zero


def test_reference_gradient_against_finite_differences():
    _, perm, x, _, w1, w2 = _setup(5, 2, 3, 4, 6, 4, 2, seed=3)
    xp = permute(x, perm, backend="torch").double().requires_grad_()
    fn = lambda a, b, c: grouped_mlp_ref(a, b, c, perm)
    assert torch.autograd.gradcheck(
        fn, (xp, w1.double().requires_grad_(), w2.double().requires_grad_())
    )


def test_bad_input_raises():
    _, perm, x, _, w1, w2 = _setup(4, 2, 3, 4, 6, 4, 4)
    xp = permute(x, perm, backend="torch")
    with pytest.raises(ValueError, match="multiple of 16"):
        grouped_mlp(xp, w1, w2, perm, backend="triton")
    with pytest.raises(ValueError, match="w1 must be"):
        grouped_mlp(xp, w1[:2], w2, perm, backend="torch")
    with pytest.raises(ValueError, match="w2 must be"):
        grouped_mlp(xp, w1, w2[:, :3], perm, backend="torch")
    with pytest.raises(ValueError, match="x must be"):
        grouped_mlp(xp[:-1], w1, w2, perm, backend="torch")
    with pytest.raises(TypeError, match="perm must be"):
        grouped_mlp(xp, w1, w2, None, backend="torch")


@pytest.mark.parametrize("bs", [16, 64])
def test_triton_with_wide_blocks_and_d_out_unlike_d(bs):
    # D != D_out != M: a wrong W2 / W1 expert stride, or a transposed tile, changes the result;
    # blocks of 64 rows (the tensor-core tile) with segments of very different lengths
    N, k, E, D, M, DO = 40, 3, 4, 24, 40, 10
    _, perm, x, _g, w1, w2 = _setup(N, k, E, D, M, DO, bs, seed=4)
    xp = permute(x, perm, backend="torch")
    dy = torch.randn(perm.num_rows, DO, generator=torch.Generator().manual_seed(5))
    res = [_fwd_bwd(xp, w1, w2, perm, dy, be) for be in ("triton", "torch")]
    for p, q in zip(*res):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_triton_half_precision_operands_accumulate_in_fp32():
    # fp16 tokens with fp32 master weights (cast once per call): y and dx in fp16, dW in fp32,
    # all within fp16 rounding of the fp32 reference (an fp16 accumulator over M = 96 would not be)
    N, k, E, D, M, DO = 24, 2, 3, 32, 96, 16
    _, perm, x, _g, w1, w2 = _setup(N, k, E, D, M, DO, 16, seed=6)
    xp = permute(x, perm, backend="torch")
    dy = torch.randn(perm.num_rows, DO, generator=torch.Generator().manual_seed(7))
    a = xp.half().requires_grad_()
    b, c = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    y = grouped_mlp(a, b, c, perm, backend="triton")
    (y.float() * dy).sum().backward()
    assert y.dtype == a.grad.dtype == torch.float16 and b.grad.dtype == torch.float32
    a32, b32, c32 = (t.clone().requires_grad_() for t in (xp.half().float(), w1, w2))
    y32 = grouped_mlp_ref(a32, b32, c32, perm)
    (y32 * dy).sum().backward()
    for got, want in ((y, y32), (a.grad, a32.grad), (b.grad, b32.grad), (c.grad, c32.grad)):
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("static", [False, True])
def test_block_gathered_form_used_under_compile_equals_the_brute_force(static):
    from icml26_kernels.moe import max_rows
    from icml26_kernels.moe.grouped_mlp import _grouped_mlp_blocks

    N, k, E, D, M, DO, bs = 11, 3, 5, 6, 7, 4, 4
    idx, _, x, _, w1, w2 = _setup(N, k, E, D, M, DO, bs, seed=3)
    perm = make_permutation(idx, E, bs, num_rows=max_rows(N * k, E, bs) if static else None)
    w1r, w2r = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    xp = permute(x, perm, backend="torch").requires_grad_()
    y = _grouped_mlp_blocks(xp, w1r, w2r, perm)
    # brute force: every buffer row through the MLP of the expert whose segment holds it
    owner = torch.searchsorted(perm.offsets[1:], torch.arange(perm.num_rows), right=True)
    owner = owner.clamp(max=E - 1)
    want = torch.stack([F.gelu(xp[r] @ w1[e]) @ w2[e] for r, e in enumerate(owner.tolist())])
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-6)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    ref = [t.detach().clone().requires_grad_() for t in (xp, w1, w2)]
    (grouped_mlp_ref(*ref, perm) * dy).sum().backward()
    for a, b in zip((xp, w1r, w2r), ref):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


from icml26_kernels.moe.grouped_mlp import (  # noqa: E402
    _TILE_NAMES,
    _kernels,
    forced_tiles,
    gpu_tile_configs,
)


def _cfg_id(c):
    return "R{BLOCK_R}-T{BLOCK_D}".format(**c)


# the default suite forces two tile configurations (several row tiles per 128-row block, and
# one), the second also with 8 warps (the interpreter runs whole tiles in numpy, so warps only
# reach the launch); every configuration x 4/8 warps runs under ``-m tiles`` (5-18 s each)
_DEFAULT_TILES = {"R64-T32", "R128-T64", "R128-T64-w8"}


def _tile_params(warps=(4,), default=_DEFAULT_TILES):
    out = []
    for c in gpu_tile_configs():
        for w in warps:
            name = _cfg_id(c) + ("" if w == 4 else f"-w{w}")
            marks = () if name in default else (pytest.mark.tiles,)
            out.append(pytest.param(c, w, id=name, marks=marks))
    return out


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize(("config", "warps"), _tile_params(warps=(4, 8)))
def test_every_gpu_tile_configuration_matches_the_reference(config, warps, activation):
    """Each GPU autotuning configuration, forced under the interpreter (which autotunes over a
    single 16-row config): 128-row blocks, so BLOCK_R 16/32/64 run several row tiles per block
    and 128 one; D_out = 300 > 256 gives the forward two output tiles; D, M, D_out are not
    multiples of the column tiles (masked edges). Gated experts read W1 with a row stride of
    2M and the up half at column offset M, which a wrong stride or offset would break."""
    N, k, E, D, M, DO, bs = 40, 2, 3, 80, 96, 300, 128
    w1_cols = 2 * M if activation == "swiglu" else M
    _, perm, x, _g, w1, w2 = _setup(N, k, E, D, w1_cols, DO, bs, seed=8)
    w2 = w2[:, :M].contiguous()
    xp = permute(x, perm, backend="torch")
    dy = torch.randn(perm.num_rows, DO, generator=torch.Generator().manual_seed(9))
    with forced_tiles(config, num_warps=warps):
        res = [_fwd_bwd(xp, w1, w2, perm, dy, be, activation) for be in ("triton", "torch")]
    for name, p, q in zip(("y", "dx", "dw1", "dw2"), *res):
        # fp32 with IEEE dots: rounding of reductions of length <= max(D, M, D_out, rows)
        atol = 8 * torch.finfo(torch.float32).eps * q.abs().max().item() * 384**0.5
        torch.testing.assert_close(p, q, rtol=1e-5, atol=atol, msg=lambda m, n=name: f"{n}: {m}")


# ----------------------------------------------------------------------------- half precision


def _rounded_ref(x, w1, w2, perm, dy, activation="gelu"):
    """The kernel's arithmetic in fp64, rounded where the kernel rounds to x's dtype: the
    operands (x, W1, W2, dy), the hidden activation h (a tensor-core operand in the forward;
    stored by the backward) and dPre (stored), y and dx (returned in x's dtype); dW1 and dW2
    are fp32 outputs, not rounded. Returns y, dx, dW1, dW2 (fp64)."""
    dt = x.dtype
    r = lambda t: t.detach().to(dt).double()
    x, w1, w2, dy = r(x), r(w1), r(w2), r(dy)
    sizes = (perm.offsets[1:] - perm.offsets[:-1]).tolist()
    sizes[-1] += perm.num_rows - sum(sizes)
    ys, dxs, dw1, dw2, s0 = [], [], [], [], 0
    for e, n in enumerate(sizes):
        xs, dys = x[s0 : s0 + n], dy[s0 : s0 + n]
        s0 += n
        pre, dh = xs @ w1[e], dys @ w2[e].T
        if activation == "swiglu":
            g, u = pre.chunk(2, -1)
            sg = torch.sigmoid(g)
            h = r(g * sg * u)
            dpre = torch.cat([dh * u * sg * (1 + g * (1 - sg)), dh * g * sg], -1)
        else:
            h = r(F.gelu(pre))
            pdf = torch.exp(-0.5 * pre * pre) / (2 * math.pi) ** 0.5
            dpre = dh * (0.5 * (1 + torch.erf(pre / 2**0.5)) + pre * pdf)
        dpre = r(dpre)
        ys.append(h @ w2[e])
        dxs.append(dpre @ w1[e].T)
        dw1.append(xs.T @ dpre)
        dw2.append(h.T @ dys)
    return r(torch.cat(ys)), r(torch.cat(dxs)), torch.stack(dw1), torch.stack(dw2)


def half_precision_tolerance(dtype):
    """Relative RMS error allowed against :func:`_rounded_ref`: eps_dtype / 8 (bf16: 2^-7 / 8
    = 9.8e-4). What is left once the reference rounds like the kernel is fp32 accumulation
    (~sqrt(n) eps_fp32 ~ 1e-6) and the rare one-ulp flips of a bf16 rounding (h, dPre, y) that
    fp32 and fp64 put on two sides of a rounding boundary: heavy-tailed, measured over 30
    seeded runs (R64 tiles, both activations) at median 1e-5, worst 3.7e-4 (2.6x below the
    bound). A bf16 accumulator adds ~eps_bf16 / (2 sqrt 3) = 2.3e-3 per rounded K step
    (measured: 3.7e-3 to 6.1e-3 at 2-3 steps, >= 3.8x above), a wrong stride or tile O(1)."""
    return torch.finfo(dtype).eps / 8


def _half_precision_errors(config, warps, activation, dtype, shape, device="cpu", seed=10):
    """Relative RMS and max errors of y, dx, dW1, dW2 (tokens in ``dtype``, fp32 master
    weights, forced tiles or the autotuner's pick when ``config`` is None) vs _rounded_ref."""
    N, k, E, D, M, DO, bs = shape
    w1_cols = 2 * M if activation == "swiglu" else M
    idx, _, x, _g, w1, w2 = _setup(N, k, E, D, w1_cols, DO, bs, seed=seed)
    w2 = w2[:, :M].contiguous()
    perm = make_permutation(idx.to(device), E, bs)
    xp = permute(x.to(device), perm, backend="torch").to(dtype)
    dy = torch.randn(perm.num_rows, DO, generator=torch.Generator().manual_seed(seed + 1))
    dy = dy.to(device, dtype)
    a = xp.clone().requires_grad_()
    b, c = w1.to(device).requires_grad_(), w2.to(device).requires_grad_()
    tiles = forced_tiles(config, num_warps=warps) if config else contextlib.nullcontext()
    with tiles:
        y = grouped_mlp(a, b, c, perm, activation=activation, backend="triton")
        (y.float() * dy.float()).sum().backward()
    assert y.dtype == a.grad.dtype == dtype and b.grad.dtype == torch.float32
    want = _rounded_ref(xp.cpu(), w1, w2, perm, dy.cpu(), activation)
    errs = {}
    for name, got, ref in zip(("y", "dx", "dw1", "dw2"), (y, a.grad, b.grad, c.grad), want):
        d = got.detach().double().cpu() - ref
        errs[name] = (
            float(d.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()),
            float(d.abs().max() / ref.abs().max()),
        )
    return errs


def _assert_within(errs, dtype, what):
    tol = half_precision_tolerance(dtype)
    eps = torch.finfo(dtype).eps
    for name, (rms, mx) in errs.items():
        assert rms <= tol, f"{name}: relative RMS error {rms:.2e} > {tol:.2e} ({what})"
        assert mx <= eps, f"{name}: relative max error {mx:.2e} > one ulp {eps:.2e} ({what})"


# interpreted sizes: 64-row blocks with segments of different lengths, D, M, D_out not
# multiples of the 32/64 column tiles (masked edges), D != M != D_out (a swapped stride shows)
_HALF_SHAPE = (40, 2, 3, 80, 96, 72, 64)
_HALF_DEFAULT = {"R64-T64", "R32-T32"}


def _half_params():
    out = [pytest.param(None, 4, id="autotuned")]  # interpreted: the 16-row config
    for c in gpu_tile_configs():
        for w in (4, 8):
            name = _cfg_id(c) + ("" if w == 4 else f"-w{w}")
            if 64 % c["BLOCK_R"]:  # _HALF_SHAPE's 64-row blocks
                continue
            marks = () if name in _HALF_DEFAULT else (pytest.mark.tiles,)
            out.append(pytest.param(c, w, id=name, marks=marks))
    return out


@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param(torch.bfloat16, id="bf16"),
        pytest.param(torch.float16, id="fp16", marks=pytest.mark.tiles),
    ],
)
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize(("config", "warps"), _half_params())
def test_half_precision_tiles_match_a_reference_that_rounds_like_the_kernel(
    config, warps, activation, dtype, bf16_interpreter
):
    """bf16 / fp16 tokens, fp32 master weights, fp32 accumulation: y, dx, dW1, dW2 against the
    rounding-aware fp64 reference, at eps_dtype / 8 relative RMS and one ulp max. Under the
    interpreter bf16 needs the conftest patch (its own bf16 dot is wrong by ~1e9 and its
    fp32 -> bf16 cast truncates); on a GPU this is the compiled kernel. Bound: eps_dtype / 8
    relative RMS and one ulp max (:func:`half_precision_tolerance`)."""
    errs = _half_precision_errors(config, warps, activation, dtype, _HALF_SHAPE)
    _assert_within(errs, dtype, f"{config}, {warps} warps, {activation}, {dtype}")


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_bf16_tolerance_catches_a_bf16_accumulator(activation, bf16_interpreter):
    """The planted mutant (conftest: every dot's fp32 accumulator rounded to bf16 after each K
    step) must fail the check the kernel passes: measured RMS 3.7e-3 to 6.1e-3 (5 seeds: mean
    3.70e-3, 95% t-interval [3.67e-3, 3.74e-3] for gelu, the weakest), >= 3.8x the bound at
    the widest tiles (fewest K steps)."""
    cfg = {"BLOCK_R": 64} | dict.fromkeys(_TILE_NAMES, 64)
    with bf16_interpreter.bf16_accumulator():
        errs = _half_precision_errors(cfg, 4, activation, torch.bfloat16, _HALF_SHAPE)
    tol = half_precision_tolerance(torch.bfloat16)
    assert all(rms > 2 * tol for rms, _ in errs.values()), errs


def test_forced_tiles_restores_the_autotuner():
    before = [(list(k.configs), dict(k.cache)) for k in _kernels()]
    with forced_tiles({"BLOCK_R": 64, "BLOCK_D": 64}):
        assert all(k.configs[0].kwargs["BLOCK_R"] == 64 for k in _kernels())
    assert [(list(k.configs), dict(k.cache)) for k in _kernels()] == before
    with pytest.raises(ValueError, match="BLOCK_R"):
        with forced_tiles({"BLOCK_D": 64}):
            pass


def test_row_and_expert_offsets_are_64_bit():
    """A reasoned test: 524,288 rows × D = 4,096 (the MoE baseline at 65k tokens, k = 8) is past
    2^31, where an int32 `rows * D` wraps to a negative address, and so is e·K1·K2 for the
    weight gradient at E = 64, 4,096 × 14,336. Every kernel forms those offsets in int64: rows
    from an int64 cast, experts from the int64 block-expert table or an int64 program id."""
    import inspect

    assert 524_288 * 4096 > 2**31 - 1 and 63 * 4096 * 14336 > 2**31 - 1
    for kernel in _kernels():
        src = inspect.getsource(kernel.fn.fn)
        if "pid_r" in src:  # row-tiled kernels
            assert "tl.arange(0, BLOCK_R)).to(tl.int64)" in src, kernel.fn.__name__
            assert "tl.load(BlockExpert" in src  # e comes from an int64 tensor
        else:  # the per-expert weight-gradient kernel
            assert "tl.program_id(0).to(tl.int64)" in src
            assert "tl.load(Offsets" in src  # row bounds from the int64 offsets


def _gpu_half_params():
    """bf16 on every tile configuration with 4 warps and, for the row tiles the pruner keeps at
    128-row blocks (64, 128), 8 warps; the autotuner's own pick in bf16 and fp16."""
    out = [pytest.param(None, 4, dt, id=f"autotuned-{n}") for dt, n in _HALF_DTYPES]
    for c in gpu_tile_configs():
        for w in (4, 8) if c["BLOCK_R"] >= 64 else (4,):
            out.append(pytest.param(c, w, torch.bfloat16, id=_cfg_id(c) + f"-w{w}-bf16"))
    return out


_HALF_DTYPES = ((torch.bfloat16, "bf16"), (torch.float16, "fp16"))


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize(("config", "warps", "dtype"), _gpu_half_params())
def test_half_precision_tiles_on_the_gpu_match_the_fp32_reference(config, warps, dtype, activation):
    """The paper's dtype (bf16) and fp16 on real tensor cores, every tile configuration and
    both warp counts, and the autotuner's own pick, at a size the interpreter cannot afford.
    Reference: :func:`_rounded_ref` (fp64 arithmetic, rounded to the dtype where the kernel
    rounds). Bound: :func:`half_precision_tolerance` = eps_dtype / 8 relative RMS (bf16: eps =
    2^-7, so 9.8e-4) and one ulp max; a bf16 accumulator is >= 3.8x above it (see
    test_bf16_tolerance_catches_a_bf16_accumulator). The earlier bound, 8 eps + 8 eps_fp32
    sqrt(n) = 6.3e-2 on max error against an unrounded fp32 reference, let such a mutant pass."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    shape = (600, 2, 4, 96, 160, 300, 128)
    errs = _half_precision_errors(config, warps, activation, dtype, shape, device="cuda")
    _assert_within(errs, dtype, f"{config}, {warps} warps, {activation}, {dtype}")
