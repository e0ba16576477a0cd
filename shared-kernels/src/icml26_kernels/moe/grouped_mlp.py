"""Grouped expert MLP over expert-sorted, block-padded tokens (see :mod:`.permute`).

Every block of rows belongs to one expert e = ``perm.block_expert[block]``; the block is run
through that expert's GELU MLP (Multi-Head LatentMoE §3.3: expert e holds K_e, V_e and computes
gelu(z K_eᵀ) V_e, which is exactly this two-matrix MLP without biases):

    y[r] = gelu(x[r] · W1[e]) · W2[e]          x (P, D), W1 (E, D, M), W2 (E, M, D_out)

Triton path (tensor-core tiles, fp32 accumulation):

* operands in x's dtype (bf16 / fp16: tensor cores; fp32: TF32 iff
  ``torch.backends.cuda.matmul.allow_tf32``, else IEEE). Weights in another dtype (fp32
  masters with bf16 tokens, the official setup) are cast once per call. Every ``tl.dot``
  accumulates in fp32; y and dx come back in x's dtype, dW1, dW2 in the weights' dtype.
* row tiles ``BLOCK_R`` in {16, 32, 64, 128}, autotuned among those that divide
  ``perm.block_size`` (>= 64 whenever the block size allows; the layers use 64);
* forward: one program owns a row tile and *all* D_out columns (up to 256; wider outputs are
  tiled and only then is x·W1 recomputed per tile), streams M in chunks and keeps
  gelu(x W1) in registers: the (P, M) hidden activations are never written;
* backward, four kernels, each tiled over D and D_out: (1) per (row tile, M chunk):
  h = gelu(x W1) and dpre = (dy W2ᵀ) ⊙ gelu'(x W1), written once as (P, M) (the memory a
  grouped-GEMM backward needs); (2) dx = dpre W1[e]ᵀ; (3, 4) dW1[e] = x[seg_e]ᵀ dpre[seg_e]
  and dW2[e] = h[seg_e]ᵀ dy[seg_e]: one program per (expert, output tile) reduces over that
  expert's rows inside the kernel. No atomics, so the weight gradients are deterministic.

    dpre = (dy W2ᵀ) ⊙ gelu'(x W1),   dx = dpre W1ᵀ,   dW1 = xᵀ dpre,   dW2 = gelu(x W1)ᵀ dy

Checked under ``TRITON_INTERPRET=1`` against the reference at small shapes, D != D_out != M,
fp16 operands; speed only on a GPU (``packages/latentmoe/benchmarks/bench_kernels.py``,
``tools/gpu_check.py``).

GELU is the exact (erf) form; gelu'(u) = Φ(u) + u φ(u).

Gated experts (``activation="swiglu"``, the FFN of Llama / Qwen / Mistral): W1 holds the gate
and up projections side by side, W1[e] = [W_g | W_u] of shape (D, 2M) (as a fused
``gate_up_proj``), and

    y[r] = (silu(x W_g[e]) ⊙ (x W_u[e])) · W2[e]        silu(u) = u σ(u)

The same kernels run it with a ``GATED`` constexpr: the forward keeps both (BLOCK_R, BLOCK_M)
accumulators in registers; the hidden backward writes h = silu(g) ⊙ u and dPre = [dg | du] with
dg = dh ⊙ u ⊙ silu'(g), du = dh ⊙ silu(g), silu'(g) = σ(g)(1 + g(1 − σ(g))), so dx = dPre W1ᵀ
and dW1 = xᵀ dPre are the ungated kernels with a reduction length of 2M.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from ..backend import interpreter_enabled, select_backend, triton_installed
from .permute import Permutation

__all__ = ["ACTIVATIONS", "grouped_mlp", "grouped_mlp_ref"]

ACTIVATIONS = ("gelu", "swiglu")


def _check(x, w1, w2, perm, activation="gelu"):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}; got {activation!r}")
    if not isinstance(perm, Permutation):
        raise TypeError(
            f"perm must be a Permutation from make_permutation; got {type(perm).__name__}"
        )
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != perm.num_rows:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be (P, D) with P = perm.num_rows = {perm.num_rows}; got {got}")
    e, d = perm.num_experts, x.shape[1]
    if w1.dim() != 3 or w1.shape[0] != e or w1.shape[1] != d:
        raise ValueError(f"w1 must be (E, D, M) = ({e}, {d}, M); got {tuple(w1.shape)}")
    if activation == "swiglu" and w1.shape[2] % 2:
        raise ValueError(
            f"w1 must be (E, D, 2M) = [gate | up] for activation='swiglu'; got {tuple(w1.shape)}"
        )
    m = w1.shape[2] // 2 if activation == "swiglu" else w1.shape[2]
    if w2.dim() != 3 or w2.shape[0] != e or w2.shape[1] != m:
        raise ValueError(
            f"w2 must be (E, M, D_out) = ({e}, {m}, D_out); got {tuple(w2.shape)}"
            + (" (w1 is (E, D, 2M) for activation='swiglu')" if activation == "swiglu" else "")
        )


def _act(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """Hidden activation from the first projection: gelu(pre), or silu(g) ⊙ u for pre = [g | u]."""
    if activation == "swiglu":
        g, u = pre.chunk(2, dim=-1)
        return F.silu(g) * u
    return F.gelu(pre)


def grouped_mlp_ref(
    x: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    perm: Permutation,
    activation: str = "gelu",
) -> torch.Tensor:
    """Per-expert loop over the segments: y[seg_e] = act(x[seg_e] W1[e]) W2[e]. (P, D_out).

    ``act`` is gelu, or for ``activation="swiglu"`` silu(g) ⊙ u of [g | u] = x W1[e].

    Under ``torch.compile`` the segment sizes (data) cannot become Python ints without a graph
    break, so the traced path is :func:`_grouped_mlp_blocks` (same result, static shapes).
    """
    _check(x, w1, w2, perm, activation)
    if torch.compiler.is_compiling():
        return _grouped_mlp_blocks(x, w1, w2, perm, activation)
    sizes = (perm.offsets[1:] - perm.offsets[:-1]).tolist()  # padded segment lengths, (E,)
    sizes[-1] += perm.num_rows - sum(sizes)  # a static-capacity tail is the last expert's padding
    # split / unbind (not slicing in a loop) keep the backward linear in P and E
    segs = x.split(sizes, dim=0)
    outs = [_act(seg @ a, activation) @ b for seg, a, b in zip(segs, w1.unbind(0), w2.unbind(0))]
    return torch.cat(outs, 0)


def _grouped_mlp_blocks(
    x: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    perm: Permutation,
    activation: str = "gelu",
) -> torch.Tensor:
    """Static-shape form: every block of ``block_size`` rows belongs to one expert, so gather
    that expert's weights per block and run one batched matmul, y_b = gelu(x_b W1[e_b]) W2[e_b].

    Nothing is read back from the device (``torch.compile(fullgraph=True)`` traces it). It
    materializes the gathered weights, (P / bs, D, M) and (P / bs, M, D_out): a portable
    fallback for compiled CPU / reference runs, not the GPU fast path (that is the Triton kernel).
    """
    bs, nb = perm.block_size, perm.num_rows // perm.block_size
    xb = x.view(nb, bs, x.shape[1])  # (P/bs, bs, D)
    h = _act(torch.bmm(xb, w1[perm.block_expert]), activation)  # (P/bs, bs, M)
    return torch.bmm(h, w2[perm.block_expert]).view(perm.num_rows, w2.shape[2])  # (P, D_out)


# --------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------
_BLOCK_RS = (128, 64, 32, 16)  # row tiles; the largest that divides perm.block_size is used
_MAX_BLOCK_O = 256  # widest D_out tile the forward keeps whole (one tile: no recomputation)


def _product(*lists):
    out: list[tuple] = [()]
    for values in lists:
        out = [(*t, v) for t in out for v in values]
    return out


if triton_installed():
    import triton
    import triton.language as tl

    def _configs(extra: dict[str, tuple[int, ...]]):
        """Autotuning space (a single config under the interpreter, where timing is moot)."""
        if interpreter_enabled():
            return [triton.Config({"BLOCK_R": 16} | {k: v[0] for k, v in extra.items()})]
        out = []
        for br in _BLOCK_RS:
            for vals in _product(*extra.values()):
                for warps in (4, 8):
                    cfg = {"BLOCK_R": br} | dict(zip(extra, vals))
                    out.append(triton.Config(cfg, num_warps=warps, num_stages=3))
        return out

    def _prune(configs, named_args, **kwargs):
        """Keep the row tiles that divide the permutation's block size (>= 64 when it allows)."""
        bs = named_args["BS"]
        ok = [c for c in configs if bs % c.kwargs["BLOCK_R"] == 0]
        big = [c for c in ok if c.kwargs["BLOCK_R"] >= 64]
        return big or ok or configs[-1:]

    @triton.jit
    def _gelu(u):
        return 0.5 * u * (1.0 + tl.math.erf(u * 0.7071067811865476))

    @triton.jit
    def _gelu_grad(u):
        cdf = 0.5 * (1.0 + tl.math.erf(u * 0.7071067811865476))
        pdf = 0.3989422804014327 * tl.exp(-0.5 * u * u)
        return cdf + u * pdf

    @triton.jit
    def _silu(u):
        return u / (1.0 + tl.exp(-u))

    @triton.jit
    def _silu_grad(u):
        s = 1.0 / (1.0 + tl.exp(-u))
        return s * (1.0 + u * (1.0 - s))

    @triton.autotune(
        configs=_configs({"BLOCK_D": (32, 64), "BLOCK_M": (32, 64)}),
        key=["D", "M", "DO", "BS"],
        prune_configs_by={"early_config_prune": _prune},
    )
    @triton.jit
    def _grouped_mlp_fwd_kernel(
        X,  # (P, D) permuted tokens (bf16 / fp16 / fp32)
        W1,  # (E, D, W1N) same dtype as X; W1N = M, or 2M = [gate | up] when GATED
        W2,  # (E, M, DO) same dtype as X
        BlockExpert,  # (P // BS,) int64: expert of each permutation block
        Y,  # (P, DO) out, X's dtype
        D,
        M,
        DO,
        BS,  # perm.block_size (a multiple of BLOCK_R)
        PREC: tl.constexpr,  # "ieee" / "tf32" for fp32 inputs; ignored for bf16 / fp16
        GATED: tl.constexpr,  # silu(x W_g) ⊙ (x W_u) instead of gelu(x W1)
        BLOCK_O: tl.constexpr,  # >= DO up to 256: every output column in one tile
        BLOCK_R: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_M: tl.constexpr,
    ):
        # one program: BLOCK_R rows of one expert and BLOCK_O output columns (all of them when
        # D_out <= 256), streaming the hidden dim M; gelu(x W1) stays in registers
        pid_r = tl.program_id(0)
        ocols = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
        o_ok = ocols < DO
        e = tl.load(BlockExpert + (pid_r * BLOCK_R) // BS)
        rows = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)  # 64-bit: rows·D passes 2^31
        W1N = 2 * M if GATED else M
        acc = tl.zeros((BLOCK_R, BLOCK_O), tl.float32)
        for m0 in range(0, M, BLOCK_M):
            mcols = m0 + tl.arange(0, BLOCK_M)
            m_ok = mcols < M
            pre = tl.zeros((BLOCK_R, BLOCK_M), tl.float32)  # fp32 accumulation (gate when GATED)
            pre_u = tl.zeros((BLOCK_R, BLOCK_M), tl.float32)  # up projection (GATED only)
            for d0 in range(0, D, BLOCK_D):
                dcols = d0 + tl.arange(0, BLOCK_D)
                d_ok = dcols < D
                x = tl.load(X + rows[:, None] * D + dcols[None, :], mask=d_ok[None, :], other=0.0)
                w1 = tl.load(
                    W1 + e * D * W1N + dcols[:, None] * W1N + mcols[None, :],
                    mask=d_ok[:, None] & m_ok[None, :],
                    other=0.0,
                )
                pre = tl.dot(x, w1, pre, input_precision=PREC)
                if GATED:
                    w1u = tl.load(
                        W1 + e * D * W1N + dcols[:, None] * W1N + (M + mcols)[None, :],
                        mask=d_ok[:, None] & m_ok[None, :],
                        other=0.0,
                    )
                    pre_u = tl.dot(x, w1u, pre_u, input_precision=PREC)
            if GATED:
                hf = _silu(pre) * pre_u
            else:
                hf = _gelu(pre)
            h = hf.to(X.dtype.element_ty)  # bf16 operand for the second tensor-core dot
            w2 = tl.load(
                W2 + e * M * DO + mcols[:, None] * DO + ocols[None, :],
                mask=m_ok[:, None] & o_ok[None, :],
                other=0.0,
            )
            acc = tl.dot(h, w2, acc, input_precision=PREC)
        tl.store(
            Y + rows[:, None] * DO + ocols[None, :], acc.to(Y.dtype.element_ty), mask=o_ok[None, :]
        )

    @triton.autotune(
        configs=_configs({"BLOCK_D": (32, 64), "BLOCK_M": (32, 64), "BLOCK_O": (32, 64)}),
        key=["D", "M", "DO", "BS"],
        prune_configs_by={"early_config_prune": _prune},
    )
    @triton.jit
    def _grouped_mlp_bwd_hidden_kernel(
        X,  # (P, D)
        W1,  # (E, D, W1N), W1N = M, or 2M = [gate | up] when GATED
        W2,  # (E, M, DO)
        BlockExpert,  # (P // BS,) int64
        DY,  # (P, DO)
        H,  # (P, M) out: act(x W1), X's dtype (the dW2 operand)
        DPre,  # (P, W1N) out: d(loss)/d(x W1), X's dtype (the dx, dW1 operand)
        D,
        M,
        DO,
        BS,
        PREC: tl.constexpr,
        GATED: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_O: tl.constexpr,
    ):
        # program (row block, M chunk): both reductions tiled over D and D_out
        pid_r = tl.program_id(0)
        mcols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
        m_ok = mcols < M
        e = tl.load(BlockExpert + (pid_r * BLOCK_R) // BS)
        rows = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)  # 64-bit: rows·D passes 2^31
        W1N = 2 * M if GATED else M
        pre = tl.zeros((BLOCK_R, BLOCK_M), tl.float32)
        pre_u = tl.zeros((BLOCK_R, BLOCK_M), tl.float32)
        for d0 in range(0, D, BLOCK_D):
            dcols = d0 + tl.arange(0, BLOCK_D)
            d_ok = dcols < D
            x = tl.load(X + rows[:, None] * D + dcols[None, :], mask=d_ok[None, :], other=0.0)
            w1 = tl.load(
                W1 + e * D * W1N + dcols[:, None] * W1N + mcols[None, :],
                mask=d_ok[:, None] & m_ok[None, :],
                other=0.0,
            )
            pre = tl.dot(x, w1, pre, input_precision=PREC)
            if GATED:
                w1u = tl.load(
                    W1 + e * D * W1N + dcols[:, None] * W1N + (M + mcols)[None, :],
                    mask=d_ok[:, None] & m_ok[None, :],
                    other=0.0,
                )
                pre_u = tl.dot(x, w1u, pre_u, input_precision=PREC)
        dh = tl.zeros((BLOCK_R, BLOCK_M), tl.float32)
        for o0 in range(0, DO, BLOCK_O):
            ocols = o0 + tl.arange(0, BLOCK_O)
            o_ok = ocols < DO
            dy = tl.load(DY + rows[:, None] * DO + ocols[None, :], mask=o_ok[None, :], other=0.0)
            w2t = tl.load(  # W2[e]ᵀ tile, (BLOCK_O, BLOCK_M)
                W2 + e * M * DO + mcols[None, :] * DO + ocols[:, None],
                mask=o_ok[:, None] & m_ok[None, :],
                other=0.0,
            )
            dh = tl.dot(dy, w2t, dh, input_precision=PREC)
        out = rows[:, None] * M + mcols[None, :]
        dout = rows[:, None] * W1N + mcols[None, :]
        if GATED:
            tl.store(H + out, (_silu(pre) * pre_u).to(H.dtype.element_ty), mask=m_ok[None, :])
            dg = dh * pre_u * _silu_grad(pre)  # d/dg of silu(g) u
            du = dh * _silu(pre)  # d/du
            tl.store(DPre + dout, dg.to(DPre.dtype.element_ty), mask=m_ok[None, :])
            tl.store(DPre + dout + M, du.to(DPre.dtype.element_ty), mask=m_ok[None, :])
        else:
            tl.store(H + out, _gelu(pre).to(H.dtype.element_ty), mask=m_ok[None, :])
            dpre = dh * _gelu_grad(pre)
            tl.store(DPre + dout, dpre.to(DPre.dtype.element_ty), mask=m_ok[None, :])

    @triton.autotune(
        configs=_configs({"BLOCK_N": (32, 64), "BLOCK_K": (32, 64)}),
        key=["K", "NO", "BS"],
        prune_configs_by={"early_config_prune": _prune},
    )
    @triton.jit
    def _rows_matmul_kernel(
        A,  # (P, K) rows
        B,  # (E, NO, K) per-expert matrix, used transposed: out[r] = A[r] · B[e(r)]ᵀ
        BlockExpert,  # (P // BS,) int64
        Out,  # (P, NO)
        K,
        NO,
        BS,
        PREC: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        # dx = DPre · W1[e]ᵀ, tiled over the output columns (D) and the reduction (M)
        pid_r = tl.program_id(0)
        ncols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        n_ok = ncols < NO
        e = tl.load(BlockExpert + (pid_r * BLOCK_R) // BS)
        rows = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)  # 64-bit: rows·D passes 2^31
        acc = tl.zeros((BLOCK_R, BLOCK_N), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kcols = k0 + tl.arange(0, BLOCK_K)
            k_ok = kcols < K
            a = tl.load(A + rows[:, None] * K + kcols[None, :], mask=k_ok[None, :], other=0.0)
            bt = tl.load(  # (BLOCK_K, BLOCK_N) tile of B[e]ᵀ
                B + e * NO * K + ncols[None, :] * K + kcols[:, None],
                mask=k_ok[:, None] & n_ok[None, :],
                other=0.0,
            )
            acc = tl.dot(a, bt, acc, input_precision=PREC)
        tl.store(
            Out + rows[:, None] * NO + ncols[None, :],
            acc.to(Out.dtype.element_ty),
            mask=n_ok[None, :],
        )

    @triton.autotune(
        configs=_configs({"BLOCK_1": (32, 64), "BLOCK_2": (32, 64)}),
        key=["K1", "K2", "BS"],
        prune_configs_by={"early_config_prune": _prune},
    )
    @triton.jit
    def _expert_weight_grad_kernel(
        A,  # (P, K1)
        B,  # (P, K2)
        Offsets,  # (E + 1,) int64: expert e owns rows Offsets[e] : Offsets[e + 1]
        Out,  # (E, K1, K2) fp32 out: Out[e] = A[seg_e]ᵀ · B[seg_e]
        K1,
        K2,
        BS,
        PREC: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_1: tl.constexpr,
        BLOCK_2: tl.constexpr,
    ):
        # dW of one expert and one (K1, K2) tile: a reduction over the expert's own rows inside
        # the program (no atomics; the summation order is fixed, so results are deterministic)
        e = tl.program_id(0).to(tl.int64)  # e·K1·K2 passes 2^31 at E = 64, 4096 × 14336
        c1 = tl.program_id(1) * BLOCK_1 + tl.arange(0, BLOCK_1)
        c2 = tl.program_id(2) * BLOCK_2 + tl.arange(0, BLOCK_2)
        ok1, ok2 = c1 < K1, c2 < K2
        start = tl.load(Offsets + e)
        end = tl.load(Offsets + e + 1)
        acc = tl.zeros((BLOCK_1, BLOCK_2), tl.float32)
        for r0 in range(start, end, BLOCK_R):
            rows = r0 + tl.arange(0, BLOCK_R)  # segments are padded to BS, a multiple of BLOCK_R
            at = tl.load(A + rows[None, :] * K1 + c1[:, None], mask=ok1[:, None], other=0.0)
            b = tl.load(B + rows[:, None] * K2 + c2[None, :], mask=ok2[None, :], other=0.0)
            acc = tl.dot(at, b, acc, input_precision=PREC)
        tl.store(
            Out + e * K1 * K2 + c1[:, None] * K2 + c2[None, :],
            acc,
            mask=ok1[:, None] & ok2[None, :],
        )


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << max(0, (int(n) - 1).bit_length()))


def _kernels() -> tuple:
    return (
        _grouped_mlp_fwd_kernel,
        _grouped_mlp_bwd_hidden_kernel,
        _rows_matmul_kernel,
        _expert_weight_grad_kernel,
    )


def gpu_tile_configs() -> list[dict[str, int]]:
    """The GPU autotuning space as one dict per row tile: BLOCK_R ∈ {128, 64, 32, 16}, crossed
    with both values of the column tiles (all of them set alike, 32 or 64)."""
    return [
        {"BLOCK_R": br} | {name: t for name in _TILE_NAMES} for br in _BLOCK_RS for t in (32, 64)
    ]


_TILE_NAMES = ("BLOCK_D", "BLOCK_M", "BLOCK_O", "BLOCK_N", "BLOCK_K", "BLOCK_1", "BLOCK_2")


@contextlib.contextmanager
def forced_tiles(config: dict[str, int], num_warps: int = 4) -> Iterator[None]:
    """Run every grouped-MLP kernel with one tile configuration, bypassing the autotuner.

    Under ``TRITON_INTERPRET=1`` the autotuner holds a single 16-row configuration; this is how
    the tests reach the GPU configurations (BLOCK_R 64/128, several row tiles per block) and
    check each against the torch reference. ``config`` holds ``BLOCK_R`` and any column tiles
    (each kernel takes the ones it has). ``perm.block_size`` must be a multiple of BLOCK_R.
    """
    if not triton_installed():
        raise RuntimeError("forced_tiles needs Triton")
    import triton

    unknown = set(config) - {"BLOCK_R", *_TILE_NAMES}
    if unknown or "BLOCK_R" not in config:
        raise ValueError(f"config needs BLOCK_R and tiles among {_TILE_NAMES}; got {config}")
    saved = [(k, k.configs, dict(k.cache)) for k in _kernels()]
    try:
        for k, configs, _ in saved:
            base = configs[0].kwargs
            kw = {name: config.get(name, base[name]) for name in base}
            k.configs = [triton.Config(kw, num_warps=num_warps, num_stages=configs[0].num_stages)]
            k.cache.clear()
        yield
    finally:
        for k, configs, cache in saved:
            k.configs = configs
            k.cache.clear()
            k.cache.update(cache)


def _precision(dtype: torch.dtype) -> str:
    """fp32 operands: TF32 tensor cores iff torch allows them for matmuls, else IEEE fp32.
    bf16 / fp16 operands always run on tensor cores (the flag only matters for fp32)."""
    if dtype == torch.float32 and (
        interpreter_enabled() or not torch.backends.cuda.matmul.allow_tf32
    ):
        return "ieee"
    return "tf32"


def _check_block(perm: Permutation) -> None:
    if perm.block_size % 16:
        raise ValueError(
            f"the Triton grouped MLP needs perm.block_size to be a multiple of 16; "
            f"got {perm.block_size} (use make_permutation(..., block_size=64·n) or backend='torch')"
        )


class _GroupedMLP(torch.autograd.Function):
    """Operands in x's dtype (weights cast once per call if they differ, e.g. fp32 masters
    with bf16 activations, as the official code does); fp32 accumulation; y in x's dtype."""

    @staticmethod
    def forward(ctx, x, w1, w2, perm, activation="gelu"):
        _check_block(perm)
        gated = activation == "swiglu"
        dt = x.dtype
        xc, w1c, w2c = x.contiguous(), w1.to(dt).contiguous(), w2.to(dt).contiguous()
        p, d = xc.shape
        m, do = w2c.shape[1], w2c.shape[2]
        y = torch.empty((p, do), dtype=dt, device=x.device)
        bs, prec = perm.block_size, _precision(dt)
        block_o = min(_MAX_BLOCK_O, _pow2(do))
        if p:
            grid = lambda meta: (p // meta["BLOCK_R"], triton.cdiv(do, block_o))
            _grouped_mlp_fwd_kernel[grid](
                xc,
                w1c,
                w2c,
                perm.block_expert,
                y,
                d,
                m,
                do,
                bs,
                PREC=prec,
                GATED=gated,
                BLOCK_O=block_o,
            )
        ctx.save_for_backward(xc, w1c, w2c)
        ctx.perm, ctx.wdtypes, ctx.gated = perm, (w1.dtype, w2.dtype), gated
        return y

    @staticmethod
    def backward(ctx, dy):
        xc, w1c, w2c = ctx.saved_tensors
        perm = ctx.perm
        dt = xc.dtype
        p, d = xc.shape
        e, m, do = w2c.shape
        w1n = w1c.shape[2]  # M, or 2M for gated experts
        bs, prec = perm.block_size, _precision(dt)
        dyc = dy.to(dt).contiguous()
        h = torch.empty((p, m), dtype=dt, device=xc.device)  # act(x W1)
        dpre = torch.empty((p, w1n), dtype=dt, device=xc.device)  # d/d(x W1)
        dx = torch.empty_like(xc)
        dw1 = torch.empty((e, d, w1n), dtype=torch.float32, device=xc.device)
        dw2 = torch.empty((e, m, do), dtype=torch.float32, device=xc.device)
        if p:
            be = perm.block_expert
            grid_h = lambda meta: (p // meta["BLOCK_R"], triton.cdiv(m, meta["BLOCK_M"]))
            _grouped_mlp_bwd_hidden_kernel[grid_h](
                xc, w1c, w2c, be, dyc, h, dpre, d, m, do, bs, PREC=prec, GATED=ctx.gated
            )
            grid_x = lambda meta: (p // meta["BLOCK_R"], triton.cdiv(d, meta["BLOCK_N"]))
            # dx = dpre · W1[e]ᵀ: W1 (E, D, W1N) is B with NO = D, K = W1N
            _rows_matmul_kernel[grid_x](dpre, w1c, be, dx, w1n, d, bs, PREC=prec)
            for a, b, out, k1, k2 in ((xc, dpre, dw1, d, w1n), (h, dyc, dw2, m, do)):
                grid_w = lambda meta, k1=k1, k2=k2: (
                    e,
                    triton.cdiv(k1, meta["BLOCK_1"]),
                    triton.cdiv(k2, meta["BLOCK_2"]),
                )
                _expert_weight_grad_kernel[grid_w](a, b, perm.offsets, out, k1, k2, bs, PREC=prec)
        else:
            dx.zero_()
            dw1.zero_()
            dw2.zero_()
        t1, t2 = ctx.wdtypes
        return dx, dw1.to(t1), dw2.to(t2), None, None


def grouped_mlp(
    x: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    perm: Permutation,
    *,
    activation: str = "gelu",
    backend: str = "auto",
) -> torch.Tensor:
    """Run each block of the permuted tokens through its expert's MLP (GELU or SwiGLU).

    Args:
        x: (P, D) tokens laid out by :func:`icml26_kernels.moe.permute`.
        w1: (E, D, M) and w2: (E, M, D_out) expert weights (no biases); for
            ``activation="swiglu"`` w1 is (E, D, 2M) = [gate | up] and
            y = (silu(x W1[:, :, :M]) ⊙ (x W1[:, :, M:])) W2.
        perm: the :class:`Permutation` that produced ``x``.
        activation: ``"gelu"`` (exact erf form) or ``"swiglu"``.
        backend: ``"auto"``, ``"triton"`` or ``"torch"`` (see :func:`icml26_kernels.select_backend`).

    Returns:
        (P, D_out); padding rows (zero inputs) give zero outputs.
    """
    _check(x, w1, w2, perm, activation)
    if select_backend(x.device, prefer=backend).backend == "torch":
        return grouped_mlp_ref(x, w1, w2, perm, activation)
    return _GroupedMLP.apply(x, w1, w2, perm, activation)
