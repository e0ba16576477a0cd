"""Token permutation by expert (sort-based, block-padded) and its inverse.

A routing assigns token n to experts ``indices[n, 0..k-1]``. :func:`make_permutation` sorts the
N·k assignments by expert (stable, so within an expert tokens keep their order) and lays them
out in a buffer where expert e owns rows ``offsets[e] : offsets[e+1]``; each segment is padded
to a multiple of ``block_size`` so that every block of rows belongs to exactly one expert
(``block_expert``) and a grouped GEMM can run one program per block. Padding rows are zero.

    permute:   xp[dest[n, j]] = x[n]                      (P, D), P = Σ_e ceil(c_e / bs)·bs
    unpermute: y[n] = Σ_j gates[n, j] · yp[dest[n, j]]     (N, D)

``unpermute(permute(x), gates=1/k)`` is the identity. Both are autograd functions; each has a
Triton kernel (a row gather and a weighted k-row combine) and a torch reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..backend import select_backend, triton_installed

__all__ = [
    "Permutation",
    "make_permutation",
    "max_rows",
    "permute",
    "permute_ref",
    "unpermute",
    "unpermute_ref",
]


@dataclass(frozen=True)
class Permutation:
    """Where each (token, slot) assignment lives in the expert-sorted, block-padded buffer."""

    dest: torch.Tensor  # (N, k) int64: buffer row of assignment (n, j)
    src_token: torch.Tensor  # (P,) int64: token held by each buffer row, -1 for padding
    counts: torch.Tensor  # (E,) int64: assignments per expert (unpadded)
    offsets: torch.Tensor  # (E + 1,) int64: first buffer row of each expert's segment
    block_expert: torch.Tensor  # (P // block_size,) int64: expert owning each block of rows
    block_size: int
    num_rows: int  # P

    @property
    def num_tokens(self) -> int:
        return self.dest.shape[0]

    @property
    def top_k(self) -> int:
        return self.dest.shape[1]

    @property
    def num_experts(self) -> int:
        return self.counts.shape[0]


def max_rows(num_assignments: int, num_experts: int, block_size: int) -> int:
    """Static capacity P_max: the largest buffer any routing of ``num_assignments`` can need,
    Σ_e ceil(c_e / bs)·bs <= N·k + E·(bs − 1), rounded down to a multiple of bs."""
    return (num_assignments + num_experts * (block_size - 1)) // block_size * block_size


def make_permutation(
    indices: torch.Tensor,
    num_experts: int,
    block_size: int = 128,
    *,
    num_rows: int | None = None,
) -> Permutation:
    """Sort the assignments ``indices`` (N, k) by expert into segments padded to ``block_size``.

    ``num_rows=None`` sizes the buffer exactly (P = offsets[E], read back from the device, and
    the indices are range-checked). ``num_rows=P_max`` (e.g. :func:`max_rows`) gives a buffer of
    static size: nothing is read back from the device (no host sync; it runs on the ``meta``
    device), rows past offsets[E] are padding owned by the last expert, and the indices are
    trusted (validate them at the boundary once per step).
    """
    if not isinstance(indices, torch.Tensor) or indices.dim() != 2:
        raise ValueError(f"indices must be an (N, k) integer tensor; got {_shape(indices)}")
    if indices.dtype.is_floating_point or indices.dtype == torch.bool:
        raise ValueError(f"indices must be an integer tensor; got dtype {indices.dtype}")
    if not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"num_experts must be a positive int; got {num_experts!r}")
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int; got {block_size!r}")
    n, k = indices.shape
    flat = indices.reshape(-1).long()  # (N·k,) assignment a = n·k + j
    if num_rows is None:
        if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
            raise ValueError(
                f"indices must lie in [0, num_experts={num_experts}); got values outside"
            )
    else:
        cap = max_rows(flat.numel(), num_experts, block_size)
        if not isinstance(num_rows, int) or num_rows < cap or num_rows % block_size:
            raise ValueError(
                f"num_rows must be a multiple of block_size={block_size} and >= max_rows = "
                f"{cap} (N·k = {flat.numel()}, E = {num_experts}); got {num_rows!r}"
            )
    dev = flat.device
    order = torch.argsort(flat, stable=True)  # assignments sorted by expert
    counts = torch.zeros(num_experts, dtype=torch.long, device=dev)
    counts.scatter_add_(0, flat, torch.ones_like(flat))  # (E,), static shape (unlike bincount)
    padded = (counts + block_size - 1) // block_size * block_size  # (E,)
    offsets = torch.zeros(num_experts + 1, dtype=torch.long, device=dev)
    offsets[1:] = torch.cumsum(padded, 0)
    starts = torch.cumsum(counts, 0) - counts  # unpadded segment starts
    sorted_e = flat[order]
    rank = torch.arange(flat.numel(), device=dev) - starts[sorted_e]  # position inside segment
    dest = torch.empty_like(flat)
    dest[order] = offsets[sorted_e] + rank
    if num_rows is None:
        num_rows = int(offsets[-1])
    src_token = torch.full((num_rows,), -1, dtype=torch.long, device=dev)
    src_token[dest] = torch.arange(flat.numel(), device=dev) // k
    # expert of each block: the segment whose [offsets[e], offsets[e+1]) holds its first row
    block_start = torch.arange(0, num_rows, block_size, device=dev)
    block_expert = torch.searchsorted(offsets[1:], block_start, right=True).clamp_(
        max=num_experts - 1
    )
    return Permutation(
        dest=dest.view(n, k),
        src_token=src_token,
        counts=counts,
        offsets=offsets,
        block_expert=block_expert,
        block_size=block_size,
        num_rows=num_rows,
    )


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__


def _check_x(x: torch.Tensor, perm: Permutation, rows: int, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != rows:
        raise ValueError(f"{name} must be a 2-D tensor with {rows} rows; got {_shape(x)}")


# --------------------------------------------------------------------------------------------
# torch references
# --------------------------------------------------------------------------------------------
def permute_ref(x: torch.Tensor, perm: Permutation) -> torch.Tensor:
    """(N, D) -> (P, D): copy each token to its k buffer rows; padding rows are zero."""
    _check_x(x, perm, perm.num_tokens, "x")
    out = x.new_zeros((perm.num_rows, x.shape[1]))
    return out.index_copy(0, perm.dest.reshape(-1), x.repeat_interleave(perm.top_k, dim=0))


def unpermute_ref(
    y: torch.Tensor, perm: Permutation, gates: torch.Tensor | None = None
) -> torch.Tensor:
    """(P, D) -> (N, D): y[n] = Σ_j gates[n, j] · yp[dest[n, j]] (gates default to 1)."""
    _check_x(y, perm, perm.num_rows, "y")
    rows = y[perm.dest]  # (N, k, D)
    if gates is None:
        return rows.sum(1)
    _check_gates(gates, perm)
    return (gates.to(rows.dtype)[..., None] * rows).sum(1)


def _check_gates(gates, perm):
    if not isinstance(gates, torch.Tensor) or tuple(gates.shape) != tuple(perm.dest.shape):
        raise ValueError(
            f"gates must have shape (N, k) = {tuple(perm.dest.shape)}; got {_shape(gates)}"
        )


# --------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------
if triton_installed():
    import triton
    import triton.language as tl

    @triton.jit
    def _gather_rows_kernel(
        Src,  # (S, D) source rows
        RowIdx,  # (R,) int64: source row of each output row, -1 = write zeros
        Scale,  # (R,) per-output-row factor (unused when HAS_SCALE is False)
        Out,  # (R, D) out
        R,
        D,
        HAS_SCALE: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        row_ok = rows < R
        src = tl.load(RowIdx + rows, mask=row_ok, other=-1)
        live = (src >= 0)[:, None] & (cols[None, :] < D)
        v = tl.load(Src + src[:, None] * D + cols[None, :], mask=live, other=0.0)
        if HAS_SCALE:
            v = v * tl.load(Scale + rows, mask=row_ok, other=0.0)[:, None]
        tl.store(
            Out + rows[:, None] * D + cols[None, :], v, mask=row_ok[:, None] & (cols[None, :] < D)
        )

    @triton.jit
    def _combine_rows_kernel(
        Y,  # (P, D) expert outputs in buffer order
        Dest,  # (N, K) int64: buffer row of assignment (n, j)
        Gates,  # (N, K) gate of each assignment (unused when HAS_GATES is False)
        Out,  # (N, D) out: Σ_j gates[n, j] · Y[dest[n, j]]
        N,
        D,
        K: tl.constexpr,
        HAS_GATES: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        row_ok = rows < N
        m2 = row_ok[:, None] & (cols[None, :] < D)
        acc = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
        for j in tl.static_range(K):
            r = tl.load(Dest + rows * K + j, mask=row_ok, other=0)
            v = tl.load(Y + r[:, None] * D + cols[None, :], mask=m2, other=0.0).to(tl.float32)
            if HAS_GATES:
                v = (
                    v
                    * tl.load(Gates + rows * K + j, mask=row_ok, other=0.0).to(tl.float32)[:, None]
                )
            acc += v
        tl.store(Out + rows[:, None] * D + cols[None, :], acc.to(Out.dtype.element_ty), mask=m2)


def _gather_rows(src, row_idx, scale=None):
    src = src.contiguous()
    r, d = row_idx.shape[0], src.shape[1]
    out = torch.empty((r, d), dtype=src.dtype, device=src.device)
    if r == 0:
        return out
    grid = (triton.cdiv(r, 32), triton.cdiv(d, 64))
    _gather_rows_kernel[grid](
        src,
        row_idx.contiguous(),
        scale.to(src.dtype).contiguous() if scale is not None else src,
        out,
        r,
        d,
        HAS_SCALE=scale is not None,
        BLOCK_R=32,
        BLOCK_D=64,
    )
    return out


def _combine_rows(y, dest, gates=None):
    y = y.contiguous()
    n, k = dest.shape
    d = y.shape[1]
    out = torch.empty((n, d), dtype=y.dtype, device=y.device)
    if n == 0:
        return out
    grid = (triton.cdiv(n, 32), triton.cdiv(d, 64))
    _combine_rows_kernel[grid](
        y,
        dest.contiguous(),
        gates.contiguous() if gates is not None else y,
        out,
        n,
        d,
        K=k,
        HAS_GATES=gates is not None,
        BLOCK_N=32,
        BLOCK_D=64,
    )
    return out


class _Permute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, perm):
        ctx.perm = perm
        return _gather_rows(x, perm.src_token)

    @staticmethod
    def backward(ctx, dout):
        # each token was copied to k rows: its gradient is the sum of those rows
        return _combine_rows(dout, ctx.perm.dest), None


class _Unpermute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, perm, gates):
        ctx.perm = perm
        ctx.save_for_backward(y, gates)
        return _combine_rows(y, perm.dest, gates)

    @staticmethod
    def backward(ctx, dout):
        y, gates = ctx.saved_tensors
        perm = ctx.perm
        # buffer row r = dest[n, j] receives gates[n, j] · dout[n]; padding rows get zero
        scale = torch.zeros(perm.num_rows, dtype=dout.dtype, device=dout.device)
        scale[perm.dest.reshape(-1)] = gates.reshape(-1).to(dout.dtype)
        dy = _gather_rows(dout, perm.src_token, scale)
        dgates = (y[perm.dest] * dout[:, None, :]).sum(-1).to(gates.dtype)  # (N, k)
        return dy, None, dgates


def permute(x: torch.Tensor, perm: Permutation, *, backend: str = "auto") -> torch.Tensor:
    """(N, D) -> (P, D): tokens in expert-sorted, block-padded order (padding rows zero)."""
    _check_x(x, perm, perm.num_tokens, "x")
    if select_backend(x.device, prefer=backend).backend == "torch":
        return permute_ref(x, perm)
    return _Permute.apply(x, perm)


def unpermute(
    y: torch.Tensor, perm: Permutation, gates: torch.Tensor | None = None, *, backend: str = "auto"
) -> torch.Tensor:
    """(P, D) -> (N, D): gate-weighted sum of each token's k expert outputs (gates default 1)."""
    _check_x(y, perm, perm.num_rows, "y")
    if select_backend(y.device, prefer=backend).backend == "torch":
        return unpermute_ref(y, perm, gates)
    if gates is None:
        return _UnpermuteNoGates.apply(y, perm)
    _check_gates(gates, perm)
    return _Unpermute.apply(y, perm, gates)


class _UnpermuteNoGates(torch.autograd.Function):
    """unpermute without gates: y[n] = Σ_j yp[dest[n, j]]; its adjoint is :func:`permute`."""

    @staticmethod
    def forward(ctx, y, perm):
        ctx.perm = perm
        return _combine_rows(y, perm.dest)

    @staticmethod
    def backward(ctx, dout):
        return _gather_rows(dout, ctx.perm.src_token), None
