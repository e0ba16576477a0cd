"""Grouped expert MLP over expert-sorted, block-padded tokens (see :mod:`.permute`).

Every block of rows belongs to one expert e = ``perm.block_expert[block]``; the block is run
through that expert's GELU MLP (Multi-Head LatentMoE §3.3: expert e holds K_e, V_e and computes
gelu(z K_eᵀ) V_e, which is exactly this two-matrix MLP without biases):

    y[r] = gelu(x[r] · W1[e]) · W2[e]          x (P, D), W1 (E, D, M), W2 (E, M, D_out)

The Triton forward kernel is IO-aware in the same way as the paper's expert computation: it
streams the hidden dimension M in chunks and keeps gelu(x W1) in registers, so the (P, M)
hidden activations are never written to memory. The backward kernel recomputes them chunk by
chunk and accumulates dW1, dW2 with ``tl.atomic_add`` (summation order differs run to run on a
GPU; use the torch reference when bitwise determinism of weight gradients matters).

    dpre = (dy W2ᵀ) ⊙ gelu'(x W1),   dx = dpre W1ᵀ,   dW1 += xᵀ dpre,   dW2 += gelu(x W1)ᵀ dy

GELU is the exact (erf) form; gelu'(u) = Φ(u) + u φ(u).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..backend import select_backend, triton_installed
from .permute import Permutation

__all__ = ["grouped_mlp", "grouped_mlp_ref"]


def _check(x, w1, w2, perm):
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
    if w2.dim() != 3 or w2.shape[0] != e or w2.shape[1] != w1.shape[2]:
        raise ValueError(
            f"w2 must be (E, M, D_out) = ({e}, {w1.shape[2]}, D_out); got {tuple(w2.shape)}"
        )


def grouped_mlp_ref(
    x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, perm: Permutation
) -> torch.Tensor:
    """Per-expert loop over the segments: y[seg_e] = gelu(x[seg_e] W1[e]) W2[e]. (P, D_out)."""
    _check(x, w1, w2, perm)
    sizes = (perm.offsets[1:] - perm.offsets[:-1]).tolist()  # padded segment lengths, (E,)
    # split / unbind (not slicing in a loop) keep the backward linear in P and E
    segs = x.split(sizes, dim=0)
    outs = [F.gelu(seg @ a) @ b for seg, a, b in zip(segs, w1.unbind(0), w2.unbind(0))]
    return torch.cat(outs, 0)


# --------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------
if triton_installed():
    import triton
    import triton.language as tl

    @triton.jit
    def _gelu(u):
        return 0.5 * u * (1.0 + tl.math.erf(u * 0.7071067811865476))

    @triton.jit
    def _gelu_grad(u):
        cdf = 0.5 * (1.0 + tl.math.erf(u * 0.7071067811865476))
        pdf = 0.3989422804014327 * tl.exp(-0.5 * u * u)
        return cdf + u * pdf

    @triton.jit
    def _grouped_mlp_fwd_kernel(
        X,  # (P, D) permuted tokens, fp32
        W1,  # (E, D, M) first expert matrices, fp32
        W2,  # (E, M, DO) second expert matrices, fp32
        RowBlockExpert,  # (P // BLOCK_R,) int64: expert of each row block
        Y,  # (P, DO) out
        D,
        M,
        DO,
        BLOCK_R: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_O: tl.constexpr,
    ):
        pid_r = tl.program_id(0)
        ocols = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
        o_ok = ocols < DO
        e = tl.load(RowBlockExpert + pid_r)
        rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
        acc = tl.zeros((BLOCK_R, BLOCK_O), tl.float32)
        for m0 in range(0, M, BLOCK_M):
            mcols = m0 + tl.arange(0, BLOCK_M)
            m_ok = mcols < M
            pre = tl.zeros((BLOCK_R, BLOCK_M), tl.float32)  # x W1[e][:, m-chunk], registers only
            for d0 in range(0, D, BLOCK_D):
                dcols = d0 + tl.arange(0, BLOCK_D)
                d_ok = dcols < D
                x = tl.load(X + rows[:, None] * D + dcols[None, :], mask=d_ok[None, :], other=0.0)
                w1 = tl.load(
                    W1 + e * D * M + dcols[:, None] * M + mcols[None, :],
                    mask=d_ok[:, None] & m_ok[None, :],
                    other=0.0,
                )
                pre += tl.dot(x, w1, input_precision="ieee")
            h = _gelu(pre)
            w2 = tl.load(
                W2 + e * M * DO + mcols[:, None] * DO + ocols[None, :],
                mask=m_ok[:, None] & o_ok[None, :],
                other=0.0,
            )
            acc += tl.dot(h, w2, input_precision="ieee")
        tl.store(Y + rows[:, None] * DO + ocols[None, :], acc, mask=o_ok[None, :])

    @triton.jit
    def _grouped_mlp_bwd_kernel(
        X,  # (P, D) permuted tokens, fp32
        W1,  # (E, D, M)
        W2,  # (E, M, DO)
        RowBlockExpert,  # (P // BLOCK_R,) int64
        DY,  # (P, DO) incoming gradient
        DX,  # (P, D) out
        DW1,  # (E, D, M) out, accumulated with atomics
        DW2,  # (E, M, DO) out, accumulated with atomics
        D,
        M,
        DO,
        BLOCK_R: tl.constexpr,
        BLOCK_D: tl.constexpr,  # >= D
        BLOCK_M: tl.constexpr,
        BLOCK_O: tl.constexpr,  # >= DO
    ):
        pid_r = tl.program_id(0)
        e = tl.load(RowBlockExpert + pid_r)
        rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
        dcols = tl.arange(0, BLOCK_D)
        ocols = tl.arange(0, BLOCK_O)
        d_ok = dcols < D
        o_ok = ocols < DO
        x = tl.load(X + rows[:, None] * D + dcols[None, :], mask=d_ok[None, :], other=0.0)
        dy = tl.load(DY + rows[:, None] * DO + ocols[None, :], mask=o_ok[None, :], other=0.0)
        dx = tl.zeros((BLOCK_R, BLOCK_D), tl.float32)
        for m0 in range(0, M, BLOCK_M):
            mcols = m0 + tl.arange(0, BLOCK_M)
            m_ok = mcols < M
            w1_ptr = e * D * M + dcols[:, None] * M + mcols[None, :]  # (BLOCK_D, BLOCK_M)
            w1_mask = d_ok[:, None] & m_ok[None, :]
            w2_ptr = e * M * DO + mcols[:, None] * DO + ocols[None, :]  # (BLOCK_M, BLOCK_O)
            w2_mask = m_ok[:, None] & o_ok[None, :]
            w1 = tl.load(W1 + w1_ptr, mask=w1_mask, other=0.0)
            w2 = tl.load(W2 + w2_ptr, mask=w2_mask, other=0.0)
            pre = tl.dot(x, w1, input_precision="ieee")  # (BLOCK_R, BLOCK_M)
            h = _gelu(pre)
            dh = tl.dot(dy, tl.trans(w2), input_precision="ieee")  # (BLOCK_R, BLOCK_M)
            dpre = dh * _gelu_grad(pre)
            dx += tl.dot(dpre, tl.trans(w1), input_precision="ieee")
            tl.atomic_add(
                DW2 + w2_ptr, tl.dot(tl.trans(h), dy, input_precision="ieee"), mask=w2_mask
            )
            tl.atomic_add(
                DW1 + w1_ptr, tl.dot(tl.trans(x), dpre, input_precision="ieee"), mask=w1_mask
            )
        tl.store(DX + rows[:, None] * D + dcols[None, :], dx, mask=d_ok[None, :])


_BLOCK_R = 16  # rows per program; must divide perm.block_size


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << max(0, (int(n) - 1).bit_length()))


def _row_block_expert(perm: Permutation) -> torch.Tensor:
    if perm.block_size % _BLOCK_R:
        raise ValueError(
            f"the Triton grouped MLP needs perm.block_size to be a multiple of {_BLOCK_R}; "
            f"got {perm.block_size} (use make_permutation(..., block_size=16·n) or backend='torch')"
        )
    return perm.block_expert.repeat_interleave(perm.block_size // _BLOCK_R).contiguous()


class _GroupedMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, w2, perm):
        xf, w1f, w2f = (t.detach().float().contiguous() for t in (x, w1, w2))
        rbe = _row_block_expert(perm)
        p, d = xf.shape
        m, do = w2f.shape[1], w2f.shape[2]
        y = torch.empty((p, do), dtype=torch.float32, device=x.device)
        if p:
            block_o = min(64, _pow2(do))
            grid = (rbe.shape[0], triton.cdiv(do, block_o))
            _grouped_mlp_fwd_kernel[grid](
                xf, w1f, w2f, rbe, y, d, m, do,
                BLOCK_R=_BLOCK_R, BLOCK_D=min(64, _pow2(d)), BLOCK_M=min(64, _pow2(m)), BLOCK_O=block_o,
            )  # fmt: skip
        ctx.save_for_backward(xf, w1f, w2f, rbe)
        ctx.dtypes = (x.dtype, w1.dtype, w2.dtype)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xf, w1f, w2f, rbe = ctx.saved_tensors
        p, d = xf.shape
        m, do = w2f.shape[1], w2f.shape[2]
        dx = torch.empty_like(xf)
        dw1 = torch.zeros_like(w1f)
        dw2 = torch.zeros_like(w2f)
        if p:
            _grouped_mlp_bwd_kernel[(rbe.shape[0],)](
                xf, w1f, w2f, rbe, dy.float().contiguous(), dx, dw1, dw2, d, m, do,
                BLOCK_R=_BLOCK_R, BLOCK_D=_pow2(d), BLOCK_M=min(32, _pow2(m)), BLOCK_O=_pow2(do),
            )  # fmt: skip
        tx, t1, t2 = ctx.dtypes
        return dx.to(tx), dw1.to(t1), dw2.to(t2), None


def grouped_mlp(
    x: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    perm: Permutation,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Run each block of the permuted tokens through its expert's GELU MLP.

    Args:
        x: (P, D) tokens laid out by :func:`icml26_kernels.moe.permute`.
        w1: (E, D, M) and w2: (E, M, D_out) expert weights (no biases).
        perm: the :class:`Permutation` that produced ``x``.
        backend: ``"auto"``, ``"triton"`` or ``"torch"`` (see :func:`icml26_kernels.select_backend`).

    Returns:
        (P, D_out); padding rows (zero inputs) give zero outputs.
    """
    _check(x, w1, w2, perm)
    if select_backend(x.device, prefer=backend).backend == "torch":
        return grouped_mlp_ref(x, w1, w2, perm)
    return _GroupedMLP.apply(x, w1, w2, perm)
