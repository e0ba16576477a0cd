"""IO-aware top-k router: logits + bias -> top-k experts and gates, without storing the logits.

For every group (head) g and token n (Multi-Head LatentMoE, arXiv 2602.04870, §3 "router"):

    s      = x_g[n] · R_g                    (E,)  clean logits
    idx    = top-k_e ( s + b_g )             selection on biased scores (aux-loss-free bias)
    gates  = softmax( s[idx] )               softmax over the k *clean* logits

A plain top-k MoE router is the case G = 1. The bias only chooses experts: it never enters the
gates, and adding a constant to it changes nothing.

The Triton kernel streams over the experts in tiles of ``BLOCK_E``: a tile of logits is computed
with ``tl.dot`` (``input_precision="ieee"``: the paper found TF32 unstable for routing), merged
into a running top-k kept in registers, and dropped. The (G, N, E) logits are never written to
memory. The merge takes k rounds of "largest head of the two candidate lists"; ties go to the
**higher** expert index, the order of the paper's packed uint64 key (monotone score << 32 | index),
kept here as two reductions per round. The reference uses the same order (a stable sort, since
``torch.topk`` leaves ties unspecified). A row with a NaN / inf logit raises ``ValueError`` on
both paths (the kernel flags the row; it never returns an out-of-range index).

Precision: logits, bias and gates are fp32 (fp64 for fp64 inputs) on both paths, with autocast
off, whatever dtype x and the weight arrive in (the paper's router is fp32, IEEE dots).

Backward (gates depend on the k selected logits only, the selection is piecewise constant):

    dl_j      = g_j (dg_j − Σ_i g_i dg_i)               softmax backward
    dx[n]     = Σ_j dl_j · R[:, idx_j]                  gather of k router columns
    dR[:, e] += Σ_{(n, j): idx_j = e} x[n] · dl_j       scatter with ``tl.atomic_add``

Shapes: x (G, N, D) or (N, D); weight (G, D, E) or (D, E); bias (G, E) or (E,) or None.
"""

from __future__ import annotations

import torch

from ..backend import select_backend, triton_installed

__all__ = ["topk_router", "topk_router_ref"]


# --------------------------------------------------------------------------------------------
# torch reference
# --------------------------------------------------------------------------------------------
def topk_router_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    k: int,
    *,
    check_finite: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference router: materializes the logits. Returns (indices int64, gates), both (..., N, k).

    Computed in fp32 (fp64 if an input is fp64) with autocast off, whatever the input dtype.
    Ties go to the **higher** expert index, as in the paper's packed (score, index) key.
    """
    x3, w3, b2, squeeze = _normalize(x, weight, bias, k)
    dt = _router_dtype(x3, w3)
    with torch.autocast(device_type=x3.device.type, enabled=False):
        logits = torch.matmul(x3.to(dt), w3.to(dt))  # (G, N, E)
    if check_finite:
        _check_finite(logits)
    scores = logits if b2 is None else logits + b2[:, None, :].to(dt)
    idx = _topk_high_index_ties(scores, k)  # (G, N, k)
    gates = torch.softmax(torch.gather(logits, -1, idx), dim=-1)  # (G, N, k)
    if squeeze:
        return idx[0], gates[0]
    return idx, gates


def _router_dtype(x: torch.Tensor, w: torch.Tensor) -> torch.dtype:
    """fp32, or fp64 when an input is fp64: the router never runs in half precision."""
    return torch.float64 if torch.float64 in (x.dtype, w.dtype) else torch.float32


def _topk_high_index_ties(scores: torch.Tensor, k: int) -> torch.Tensor:
    """top-k along the last dim, descending; equal scores ordered by decreasing expert index.

    ``torch.topk`` leaves the order of ties unspecified; a stable sort of the expert-reversed
    scores makes it the paper's (its uint64 key (score << 32 | index) prefers the higher index).
    """
    e = scores.shape[-1]
    order = torch.sort(scores.flip(-1), dim=-1, descending=True, stable=True).indices[..., :k]
    return (e - 1) - order


def _check_finite(logits: torch.Tensor) -> None:
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(
            "router logits x·weight are not finite (NaN or inf in x or weight); "
            "check the inputs and the training for divergence"
        )


def _normalize(x, weight, bias, k):
    """Checks arguments; returns x (G, N, D), weight (G, D, E), bias (G, E) | None, squeeze flag."""
    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
        raise ValueError(f"x must be a tensor of shape (N, D) or (G, N, D); got {_shape(x)}")
    if not isinstance(weight, torch.Tensor) or weight.dim() != x.dim():
        raise ValueError(
            f"weight must have shape (D, E) for x (N, D), or (G, D, E) for x (G, N, D); "
            f"got weight {_shape(weight)} for x {tuple(x.shape)}"
        )
    squeeze = x.dim() == 2
    x3 = x[None] if squeeze else x
    w3 = weight[None] if squeeze else weight
    if w3.shape[0] != x3.shape[0] or w3.shape[1] != x3.shape[2]:
        raise ValueError(
            f"weight must be (G, D, E) matching x (G, N, D) = {tuple(x3.shape)}; got {tuple(w3.shape)}"
        )
    num_experts = w3.shape[2]
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= num_experts:
        raise ValueError(f"k must be an int in [1, num_experts={num_experts}]; got {k!r}")
    b2 = None
    if bias is not None:
        b2 = bias[None] if bias.dim() == 1 else bias
        if tuple(b2.shape) != (w3.shape[0], num_experts):
            raise ValueError(
                f"bias must have shape (G, E) = {(w3.shape[0], num_experts)} (or (E,) when G = 1); "
                f"got {tuple(bias.shape)}"
            )
    return x3, w3, b2, squeeze


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__


# --------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------
if triton_installed():
    import triton
    import triton.language as tl

    @triton.jit
    def _router_fwd_kernel(
        X,  # (G, N, D) tokens, any float dtype, any strides (upcast to fp32 in registers)
        W,  # (G, D, E) router weights, fp32
        Bias,  # (G, E) selection bias, fp32 (unused when HAS_BIAS is False)
        Idx,  # (G, N, K) out: selected experts, int32
        Gates,  # (G, N, K) out: softmax over the K clean logits, fp32
        N,
        D,
        E,
        sxg,  # x strides (group, token, feature): a transposed view is read in place
        sxn,
        sxd,
        HAS_BIAS: tl.constexpr,
        K: tl.constexpr,
        K_PAD: tl.constexpr,  # next power of two >= K
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_E: tl.constexpr,  # >= K_PAD, so the first tile alone holds K candidates
    ):
        pid_n = tl.program_id(0)
        g = tl.program_id(1)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        kcols = tl.arange(0, K_PAD)
        neg_inf = float("-inf")
        # running top-K per row: biased score (selection key), clean logit, expert id (E = empty)
        run_s = tl.full((BLOCK_N, K_PAD), neg_inf, tl.float32)
        run_l = tl.zeros((BLOCK_N, K_PAD), tl.float32)
        run_i = tl.zeros((BLOCK_N, K_PAD), tl.int32) + E
        finite = tl.full((BLOCK_N,), 1, tl.int32)  # 0 once a row has met a NaN / inf logit
        for e0 in range(0, E, BLOCK_E):
            ecols = e0 + tl.arange(0, BLOCK_E)
            e_ok = ecols < E
            logits = tl.zeros((BLOCK_N, BLOCK_E), tl.float32)  # (BLOCK_N, BLOCK_E), registers only
            for d0 in range(0, D, BLOCK_D):
                dcols = d0 + tl.arange(0, BLOCK_D)
                d_ok = dcols < D
                x = tl.load(
                    X + g * sxg + rows[:, None] * sxn + dcols[None, :] * sxd,
                    mask=row_ok[:, None] & d_ok[None, :],
                    other=0.0,
                ).to(tl.float32)
                w = tl.load(
                    W + g * D * E + dcols[:, None] * E + ecols[None, :],
                    mask=d_ok[:, None] & e_ok[None, :],
                    other=0.0,
                )
                logits += tl.dot(x, w, input_precision="ieee")
            bad = (logits != logits) | (tl.abs(logits) == float("inf"))
            finite = finite & (tl.max(tl.where(bad & e_ok[None, :], 1, 0), axis=1) == 0)
            scores = logits
            if HAS_BIAS:
                b = tl.load(Bias + g * E + ecols, mask=e_ok, other=0.0)
                scores = logits + b[None, :]
            scores = tl.where(e_ok[None, :], scores, neg_inf)
            tile_i = tl.zeros((BLOCK_N, BLOCK_E), tl.int32) + ecols[None, :]
            # merge the running list with the tile: K rounds of "take the best remaining head"
            new_s = tl.full((BLOCK_N, K_PAD), neg_inf, tl.float32)
            new_l = tl.zeros((BLOCK_N, K_PAD), tl.float32)
            new_i = tl.zeros((BLOCK_N, K_PAD), tl.int32) + E
            for j in tl.static_range(K):
                best = tl.maximum(tl.max(run_s, axis=1), tl.max(scores, axis=1))  # (BLOCK_N,)
                from_run = tl.max(tl.where(run_s == best[:, None], run_i, -1), axis=1)
                from_tile = tl.max(tl.where(scores == best[:, None], tile_i, -1), axis=1)
                sel = tl.maximum(from_run, from_tile)  # highest expert index among ties
                in_run = run_i == sel[:, None]
                in_tile = tile_i == sel[:, None]
                sel_l = tl.sum(tl.where(in_run, run_l, 0.0), axis=1) + tl.sum(
                    tl.where(in_tile, logits, 0.0), axis=1
                )
                slot = kcols[None, :] == j
                new_s = tl.where(slot, best[:, None], new_s)
                new_l = tl.where(slot, sel_l[:, None], new_l)
                new_i = tl.where(slot, sel[:, None], new_i)
                run_s = tl.where(in_run, neg_inf, run_s)
                scores = tl.where(in_tile, neg_inf, scores)
            run_s = new_s
            run_l = new_l
            run_i = new_i
        # gates: softmax over the K clean logits
        k_ok = kcols < K
        lk = tl.where(k_ok[None, :], run_l, neg_inf)
        p = tl.exp(lk - tl.max(lk, axis=1)[:, None])
        gates = p / tl.sum(p, axis=1)[:, None]
        out = g * N * K + rows[:, None] * K + kcols[None, :]
        omask = row_ok[:, None] & k_ok[None, :]
        run_i = tl.where(finite[:, None] != 0, run_i, -1)  # -1 marks a non-finite row
        tl.store(Idx + out, run_i, mask=omask)
        tl.store(Gates + out, gates, mask=omask)

    @triton.jit
    def _router_bwd_kernel(
        X,  # (G, N, D) tokens, any float dtype, any strides
        W,  # (G, D, E) router weights, fp32
        Idx,  # (G, N, K) selected experts, int32
        Gates,  # (G, N, K) gates from the forward, fp32
        DGates,  # (G, N, K) incoming gradient, fp32
        DX,  # (G, N, D) out: gradient w.r.t. x, fp32
        DW,  # (G, D, E) out (accumulated with atomics): gradient w.r.t. weight, fp32
        N,
        D,
        E,
        sxg,
        sxn,
        sxd,
        K: tl.constexpr,
        K_PAD: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        pid_n = tl.program_id(0)
        g = tl.program_id(1)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        kcols = tl.arange(0, K_PAD)
        kmask = row_ok[:, None] & (kcols[None, :] < K)
        kbase = g * N * K + rows * K
        gk = tl.load(Gates + kbase[:, None] + kcols[None, :], mask=kmask, other=0.0)
        dgk = tl.load(DGates + kbase[:, None] + kcols[None, :], mask=kmask, other=0.0)
        gdg = tl.sum(gk * dgk, axis=1)  # (BLOCK_N,) Σ_i g_i dg_i
        for d0 in range(0, D, BLOCK_D):
            dcols = d0 + tl.arange(0, BLOCK_D)
            m2 = row_ok[:, None] & (dcols[None, :] < D)
            x = tl.load(
                X + g * sxg + rows[:, None] * sxn + dcols[None, :] * sxd, mask=m2, other=0.0
            ).to(tl.float32)
            dx = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
            for j in tl.static_range(K):
                e_j = tl.load(Idx + kbase + j, mask=row_ok, other=0)
                g_j = tl.load(Gates + kbase + j, mask=row_ok, other=0.0)
                dg_j = tl.load(DGates + kbase + j, mask=row_ok, other=0.0)
                dl_j = g_j * (dg_j - gdg)  # softmax backward, (BLOCK_N,)
                wptr = g * D * E + dcols[None, :] * E + e_j[:, None]  # column e_j of R_g
                w = tl.load(W + wptr, mask=m2, other=0.0)
                dx += dl_j[:, None] * w
                tl.atomic_add(DW + wptr, x * dl_j[:, None], mask=m2)
            tl.store(DX + g * N * D + rows[:, None] * D + dcols[None, :], dx, mask=m2)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _router_fwd_triton(x3, w3, b2, k):
    G, N, D = x3.shape
    E = w3.shape[2]
    k_pad = _next_pow2(k)
    idx = torch.empty((G, N, k), dtype=torch.int32, device=x3.device)
    gates = torch.empty((G, N, k), dtype=torch.float32, device=x3.device)
    block_e = max(16, k_pad, min(64, _next_pow2(E)))
    block_n = 16 if N <= 16 else 32
    block_d = max(16, min(64, _next_pow2(D)))
    grid = (triton.cdiv(N, block_n), G)
    _router_fwd_kernel[grid](
        x3,
        w3,
        b2 if b2 is not None else x3,  # dummy pointer when there is no bias
        idx,
        gates,
        N,
        D,
        E,
        *x3.stride(),
        HAS_BIAS=b2 is not None,
        K=k,
        K_PAD=k_pad,
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        BLOCK_E=block_e,
    )
    return idx, gates


def _router_bwd_triton(x3, w3, idx, gates, dgates):
    G, N, D = x3.shape
    E = w3.shape[2]
    k = idx.shape[2]
    dx = torch.empty((G, N, D), dtype=torch.float32, device=x3.device)
    dw = torch.zeros_like(w3)
    block_n = 16
    block_d = max(16, min(64, _next_pow2(D)))
    grid = (triton.cdiv(N, block_n), G)
    _router_bwd_kernel[grid](
        x3,
        w3,
        idx,
        gates,
        dgates,
        dx,
        dw,
        N,
        D,
        E,
        *x3.stride(),
        K=k,
        K_PAD=_next_pow2(k),
        BLOCK_N=block_n,
        BLOCK_D=block_d,
    )
    return dx, dw


class _FusedRouter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x3, w3, b2, k, check_finite):
        xf = x3.detach()  # read in place by the kernel (strides, upcast in registers): no copy
        wf = w3.detach().float().contiguous()  # the fp32 router weights: no copy
        bf = None if b2 is None else b2.detach().float().contiguous()
        idx, gates = _router_fwd_triton(xf, wf, bf, k)
        if check_finite and bool((idx < 0).any()):  # the kernel flags non-finite rows with -1
            _check_finite(torch.tensor(float("nan")))
        ctx.save_for_backward(xf, wf, idx, gates)
        ctx.dtypes = (x3.dtype, w3.dtype)
        ctx.mark_non_differentiable(idx)
        return idx, gates

    @staticmethod
    def backward(ctx, _didx, dgates):
        xf, wf, idx, gates = ctx.saved_tensors
        if dgates is None:
            return None, None, None, None, None
        dx, dw = _router_bwd_triton(xf, wf, idx, gates, dgates.float().contiguous())
        return dx.to(ctx.dtypes[0]), dw.to(ctx.dtypes[1]), None, None, None


# --------------------------------------------------------------------------------------------
# public entry point
# --------------------------------------------------------------------------------------------
def topk_router(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    k: int,
    backend: str = "auto",
    check_finite: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing with the aux-loss-free selection bias; differentiable in ``x`` and ``weight``.

    Args:
        x: tokens, (N, D) or (G, N, D) for G independent routers (one per head).
        weight: router weights, (D, E) or (G, D, E).
        bias: selection bias, (E,) or (G, E), or None. It changes which experts are chosen,
            never the gates; it receives no gradient.
        k: experts per token.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``, passed to
            :func:`icml26_kernels.select_backend` as ``prefer``.
        check_finite: raise ``ValueError`` on NaN / inf logits (one device-to-host read).
            With False nothing is read back: a non-finite row gets index -1 (Triton) or an
            arbitrary expert (torch) and NaN gates, so the NaN reaches the loss.

    Returns:
        ``(indices, gates)``: int64 expert ids and gates = softmax over the k clean logits, each
        (N, k) or (G, N, k). The Triton path computes in fp32 and returns fp32 gates.
    """
    x3, w3, b2, squeeze = _normalize(x, weight, bias, k)
    choice = select_backend(x.device, prefer=backend)
    if choice.backend == "torch":
        idx, gates = topk_router_ref(x3, w3, b2, k, check_finite=check_finite)
    else:
        idx, gates = _FusedRouter.apply(x3, w3, b2, k, check_finite)
        idx = idx.long()
    if squeeze:
        return idx[0], gates[0]
    return idx, gates
