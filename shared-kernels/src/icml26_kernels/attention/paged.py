"""Paged attention with deferred RoPE (LazyAttention, ICML 2026): prefill and decode kernels.

KV lives once in a pool of fixed-size blocks, ``k_pool, v_pool: (n_pool_blocks, block_size,
H_kv, D)``. Keys were rotated at their *local* positions (a document prefilled on its own, from
position 0). A request reads blocks through a packed block table (see :mod:`.block_table`)
whose entries carry an offset Δ_b: the key in slot j of block b is logically at Δ_b + j.
Instead of re-rotating (and copying) K, the kernels de-rotate the query per block::

    score(q at p, key k stored at j in block b) = ⟨R(p) q, R(Δ_b + j) k⟩ / √D
                                                = ⟨R(−Δ_b) R(p) q, R(j) k⟩ / √D

(§3 of the paper: ⟨R(p_q)q, R(p_k)k⟩ = ⟨R(p_q − p_k)q, k⟩), so one physical KV copy serves any
number of requests at any positions. Trailing ``pad`` slots of a block never score; documents
are padded to whole blocks so a block never holds two documents.

- :func:`paged_prefill`: ``Tq`` new query tokens (already rotated at their logical positions)
  attend to the paged context and, causally, to their own new keys/values (offset 0); online
  softmax over KV tiles of several pool blocks (``tile_n`` keys), BLOCK_M query rows per
  program (autotuned on a GPU), GQA by sharing a KV head across ``H / H_kv`` query heads.
- :func:`paged_decode`: one new token per request over the paged context only (the caller
  appends the token's own KV to a private block first), FlashDecoding-style: one program per
  (request, KV head, KV split), the query group packed in one ``tl.dot`` tile, splits merged by
  log-sum-exp.

Which side is rotated: the query. A KV tile never crosses a change of Δ (a document boundary),
and Q is rotated by R(−Δ) when Δ changes, once per document, always from the original Q (no
rounding accumulates along the table). Rotating K instead (as a materializing implementation
would) costs a rotation of every key of every tile, for every query tile, and puts a
register transform between the K load and the matrix unit; rotating Q costs BLOCK_M × r/2
multiply-adds per document. The price is that a document shorter than a tile leaves the rest
of that tile unused (at most one partial tile per document). bf16/fp16 inputs are multiplied
as such (rotated Q cast back to the input dtype) with fp32 accumulation; fp32 inputs use exact
fp32 products (``input_precision="ieee"``, no TF32) and fp64 stays fp64.

Plan / run split (as FlashInfer's ``plan``/``run``): :func:`plan_paged` validates a block table
once per request step (block indices in the pool, left packing, no all-padding block), counts
the used entries per row, finds the largest offset and builds the cos/sin table; every host
read (device→host sync) happens there. ``paged_prefill(..., plan=plan)`` / ``paged_decode``
then check only shapes and dtypes (host metadata) and launch: the per-layer path reads nothing
back from the device. Without ``plan=`` each call plans for itself (convenient, not sync-free).

Each has a torch reference (``*_ref``) that gathers the blocks and spells out the maths; the
Triton kernels are checked against them (``TRITON_INTERPRET=1`` on the CPU, compiled on CUDA).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from ..backend import select_backend, triton_installed
from .block_table import unpack_block_table
from .rope import RopeConfig, rope_cos_sin, rope_table, rotate_pairs

if triton_installed():  # installed and importable (a broken triton counts as absent)
    import triton
    import triton.language as tl
else:  # pragma: no cover - the [torch] extra has no triton
    triton = None

__all__ = [
    "PagedPlan",
    "paged_decode",
    "paged_decode_ref",
    "paged_prefill",
    "paged_prefill_ref",
    "plan_paged",
]


# ----------------------------------------------------------------------------- validation


def _check_block_table(block_table: object) -> None:
    """The packed table's type: a 2-D int64 tensor (its contents are checked by plan_paged)."""
    if (
        not isinstance(block_table, torch.Tensor)
        or block_table.dtype != torch.int64
        or block_table.dim() != 2
    ):
        raise TypeError(
            "block_table must be a 2-D int64 tensor (batch, max_blocks) from pack_block_table"
        )


def _check_common(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    cfg: RopeConfig,
) -> None:
    if not isinstance(cfg, RopeConfig):
        raise TypeError(f"cfg must be a RopeConfig; got {type(cfg).__name__}")
    if k_pool.dim() != 4 or k_pool.shape != v_pool.shape:
        raise ValueError(
            "k_pool and v_pool must both have shape (n_blocks, block_size, H_kv, D); got "
            f"{tuple(k_pool.shape)} and {tuple(v_pool.shape)}"
        )
    if not (q.dtype == k_pool.dtype == v_pool.dtype):
        raise TypeError(
            f"q, k_pool and v_pool must share a dtype; got {q.dtype}, {k_pool.dtype}, {v_pool.dtype}"
        )
    if not q.dtype.is_floating_point:
        raise TypeError(f"q must be a floating tensor; got {q.dtype}")
    h, d = q.shape[-2], q.shape[-1]
    h_kv = k_pool.shape[2]
    if d != cfg.head_dim or k_pool.shape[3] != d:
        raise ValueError(
            f"head dim mismatch: q {d}, k_pool {k_pool.shape[3]}, cfg.head_dim {cfg.head_dim}"
        )
    if h % h_kv:
        raise ValueError(f"query heads ({h}) must be a multiple of KV heads ({h_kv}) for GQA")
    _check_block_table(block_table)
    if block_table.shape[0] != q.shape[0]:
        raise ValueError(
            f"block_table has {block_table.shape[0]} rows but q has batch {q.shape[0]}"
        )


@dataclass(frozen=True)
class PagedPlan:
    """Everything the kernels need to know about a block table, computed once per step.

    Built by :func:`plan_paged` (which validates the table; all host reads happen there) and
    passed to :func:`paged_prefill` / :func:`paged_decode` for every layer.
    """

    block_table: torch.Tensor  # (B, M) int64 packed entries, on the compute device
    n_blocks: torch.Tensor  # (B,) int32 used entries per row, on the device
    n_blocks_host: tuple[int, ...]  # the same on the host (the torch path slices rows with it)
    block_size: int  # pool block size the table was validated against
    n_pool_blocks: int  # pool rows the table was validated against
    max_offset: int  # largest Δ of any used entry (0 for an empty table)
    cos: torch.Tensor  # (P >= max_offset + 1, r/2) cos table indexed by Δ
    sin: torch.Tensor  # (P, r/2)
    cfg: RopeConfig


def plan_paged(
    block_table: torch.Tensor,
    *,
    block_size: int,
    n_pool_blocks: int,
    cfg: RopeConfig,
    table: tuple[torch.Tensor, torch.Tensor] | None = None,
    dtype: torch.dtype = torch.float32,
    need_blocks: bool = False,
) -> PagedPlan:
    """Validate a packed ``block_table (B, M)`` once and precompute what every layer reuses.

    Checks (each a clear ``ValueError``/``TypeError`` naming the argument): int64 2-D table;
    left-packed rows (used entries, then zeros); block index ``< n_pool_blocks``; pad
    ``< block_size`` (a block that is all padding would score nothing: NaN in an online
    softmax); ``need_blocks`` (decode): every row has >= 1 entry; ``table`` covers the largest
    offset. ``table = rope_table(cfg, P, dtype=...)`` is built here when None (``dtype`` of q).
    """
    if not isinstance(cfg, RopeConfig):
        raise TypeError(f"cfg must be a RopeConfig; got {type(cfg).__name__}")
    _check_block_table(block_table)
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int; got {block_size!r}")
    ids, off, pad, used = unpack_block_table(block_table)
    n_used = used.sum(1)
    if not torch.equal(
        used, torch.arange(used.shape[1], device=used.device)[None, :] < n_used[:, None]
    ):
        raise ValueError("block_table entries must be left-packed: used entries first, then zeros")
    if bool((used & (ids >= n_pool_blocks)).any()):
        raise ValueError(f"block_table refers to a block >= n_pool_blocks={n_pool_blocks}")
    if bool((used & (pad >= block_size)).any()):
        raise ValueError(
            f"block_table has an entry whose pad >= block_size={block_size} (a block that is "
            "all padding); every used block must hold at least one token"
        )
    n_host = tuple(int(n) for n in n_used.tolist())
    if need_blocks and min(n_host, default=1) < 1:
        raise ValueError("every decode request needs at least one block (its own token's KV)")
    max_off = int(off[used].max()) if any(n_host) else 0
    if table is None:
        table = rope_table(cfg, max_off + 1, dtype=dtype, device=block_table.device)
    cos, sin = table
    if cos.shape[0] < max_off + 1 or cos.shape[-1] != cfg.half or sin.shape != cos.shape:
        raise ValueError(
            f"table must cover offsets < {max_off + 1} with {cfg.half} frequencies; "
            f"got {tuple(cos.shape)}"
        )
    return PagedPlan(
        block_table=block_table,
        n_blocks=n_used.to(torch.int32),
        n_blocks_host=n_host,
        block_size=block_size,
        n_pool_blocks=n_pool_blocks,
        max_offset=max_off,
        cos=cos,
        sin=sin,
        cfg=cfg,
    )


def _check_plan(
    plan: PagedPlan, k_pool: torch.Tensor, block_table: torch.Tensor, cfg: RopeConfig
) -> None:
    """Host-metadata checks that a plan belongs to this call (no device reads)."""
    if not isinstance(plan, PagedPlan):
        raise TypeError(f"plan must be a PagedPlan from plan_paged; got {type(plan).__name__}")
    if plan.block_table is not block_table:
        raise ValueError("plan was made for another block_table; pass plan.block_table")
    if plan.block_size != k_pool.shape[1] or plan.n_pool_blocks != k_pool.shape[0]:
        raise ValueError(
            f"plan was validated for a pool of {plan.n_pool_blocks} blocks of {plan.block_size}; "
            f"k_pool has {k_pool.shape[0]} of {k_pool.shape[1]}"
        )
    if plan.cfg != cfg:
        raise ValueError("plan was made for another RopeConfig")


def _check_triton(k_pool: torch.Tensor, tensors: dict[str, torch.Tensor]) -> None:
    bs = k_pool.shape[1]
    if bs & (bs - 1):
        raise ValueError(f"the Triton kernels need a power-of-two block_size; got {bs}")
    for name, t in {"k_pool": k_pool, **tensors}.items():
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in the last (head_dim) axis")


# ----------------------------------------------------------------------------- references


def _attend_ref(
    q: torch.Tensor,  # (Tq, H, D), rotated at logical positions
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    row: torch.Tensor,  # (n,) the used packed entries of one request
    cfg: RopeConfig,
    scale: float,
    k_new: torch.Tensor | None,  # (Tq, H_kv, D) or None
    v_new: torch.Tensor | None,
    new_start: torch.Tensor | int = 0,  # first new key that exists (left padding before it)
) -> torch.Tensor:
    cd = torch.float64 if q.dtype == torch.float64 else torch.float32
    t, h, d = q.shape
    bs, h_kv = k_pool.shape[1], k_pool.shape[2]
    g = h // h_kv
    ids, off, pad, _ = unpack_block_table(row)
    n = ids.numel()
    # context: de-rotate Q once per block by its offset Δ_b
    cos, sin = rope_cos_sin(off, cfg, cd)  # (n, r/2)
    qd = rotate_pairs(
        q.to(cd)[None], cos[:, None, None, :], sin[:, None, None, :], cfg, inverse=True
    )  # (n, Tq, H, D)
    k = k_pool[ids].to(cd).repeat_interleave(g, dim=2)  # (n, bs, H, D)
    v = v_pool[ids].to(cd).repeat_interleave(g, dim=2)
    s_ctx = torch.einsum("nthd,nshd->htns", qd, k).reshape(h, t, n * bs) * scale
    slot = torch.arange(bs, device=q.device)
    valid = (slot[None, :] < (bs - pad)[:, None]).reshape(-1)  # (n*bs,)
    s_ctx = s_ctx.masked_fill(~valid, float("-inf"))
    scores, values = [s_ctx], [v.reshape(n * bs, h, d)]
    if k_new is not None and v_new is not None:
        kn = k_new.to(cd).repeat_interleave(g, dim=1)  # (Tq, H, D)
        s_new = torch.einsum("thd,shd->hts", q.to(cd), kn) * scale
        pos = torch.arange(t, device=q.device)
        ok = (pos[None, :] <= pos[:, None]) & (pos[None, :] >= new_start)  # causal, not padding
        scores.append(s_new.masked_fill(~ok, float("-inf")))
        values.append(v_new.to(cd).repeat_interleave(g, dim=1))
    p = torch.softmax(torch.cat(scores, dim=-1), dim=-1)  # (H, Tq, S)
    return torch.einsum("hts,shd->thd", p, torch.cat(values, dim=0)).to(q.dtype)


def paged_prefill_ref(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    cfg: RopeConfig,
    *,
    scale: float | None = None,
    new_start: torch.Tensor | None = None,
    plan: PagedPlan | None = None,
) -> torch.Tensor:
    """Reference prefill. ``q (B, Tq, H, D)``, ``k_new/v_new (B, Tq, H_kv, D)`` (rotated at the
    tokens' logical positions), pools ``(N, bs, H_kv, D)``, ``block_table (B, M)`` packed,
    ``new_start (B,)`` int: row b's first ``new_start[b]`` new tokens are left padding (never
    keys; their outputs are meaningless), default 0.

    out[b, t] = softmax_s(⟨R(−Δ_s) q_t, k_s⟩/√D over valid context slots s ∪ new keys in
    [new_start_b, t]) · v. Returns ``(B, Tq, H, D)`` in q's dtype.
    """
    _check_prefill(q, k_new, v_new, k_pool, v_pool, block_table, cfg, new_start)
    if plan is None:
        plan = plan_paged(
            block_table, block_size=k_pool.shape[1], n_pool_blocks=k_pool.shape[0], cfg=cfg
        )
    _check_plan(plan, k_pool, block_table, cfg)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    starts = [0] * q.shape[0] if new_start is None else new_start
    return torch.stack(
        [
            _attend_ref(
                q[b], k_pool, v_pool, block_table[b, :n], cfg, sc, k_new[b], v_new[b], starts[b]
            )
            for b, n in enumerate(plan.n_blocks_host)
        ]
    )


def paged_decode_ref(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    cfg: RopeConfig,
    *,
    scale: float | None = None,
    plan: PagedPlan | None = None,
) -> torch.Tensor:
    """Reference decode. ``q (B, H, D)`` one token per request (rotated at its logical position);
    every key it sees, its own included, is in the pool. Returns ``(B, H, D)``."""
    _check_decode(q, k_pool, v_pool, block_table, cfg)
    if plan is None:
        plan = plan_paged(
            block_table,
            block_size=k_pool.shape[1],
            n_pool_blocks=k_pool.shape[0],
            cfg=cfg,
            need_blocks=True,
        )
    _check_plan(plan, k_pool, block_table, cfg)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return torch.stack(
        [
            _attend_ref(q[b][None], k_pool, v_pool, block_table[b, :n], cfg, sc, None, None)[0]
            for b, n in enumerate(plan.n_blocks_host)
        ]
    )


def _check_prefill(q, k_new, v_new, k_pool, v_pool, block_table, cfg, new_start=None) -> None:
    if q.dim() != 4:
        raise ValueError(f"q must have shape (B, Tq, H, D); got {tuple(q.shape)}")
    _check_common(q, k_pool, v_pool, block_table, cfg)
    want = (q.shape[0], q.shape[1], k_pool.shape[2], q.shape[3])
    if tuple(k_new.shape) != want or tuple(v_new.shape) != want:
        raise ValueError(
            f"k_new and v_new must have shape (B, Tq, H_kv, D) = {want}; got {tuple(k_new.shape)}, {tuple(v_new.shape)}"
        )
    if not (k_new.dtype == v_new.dtype == q.dtype):
        raise TypeError(
            f"k_new and v_new must have q's dtype {q.dtype}; got {k_new.dtype}, {v_new.dtype}"
        )
    if new_start is not None and (
        not isinstance(new_start, torch.Tensor)
        or new_start.shape != (q.shape[0],)
        or new_start.dtype.is_floating_point
    ):
        raise ValueError(f"new_start must be an integer tensor of shape (B,) = ({q.shape[0]},)")


def _check_decode(q, k_pool, v_pool, block_table, cfg) -> None:
    if q.dim() != 3:
        raise ValueError(f"q must have shape (B, H, D); got {tuple(q.shape)}")
    _check_common(q, k_pool, v_pool, block_table, cfg)


# ----------------------------------------------------------------------------- Triton kernels

if triton is not None:

    @triton.jit
    def _online_update(sc, v, m_i, l_i, acc):
        """One online-softmax step: fold scores ``sc (M, N)`` and values ``v (N, D)`` in."""
        m_new = tl.maximum(m_i, tl.max(sc, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing valid yet
        p = tl.exp(sc - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee").to(acc.dtype)
        return m_new, l_i, acc

    @triton.jit
    def _context_pass(
        q1, q2, qp,  # (M, HALF_PAD), (M, HALF_PAD) in ACC; (M, PASS_PAD) in the input dtype
        m_i, l_i, acc,
        KP, VP, TABLE, COS, SIN,
        row_ptr,  # TABLE + b * st_b
        j, end,  # entries [j, end) of this row
        hk, skp_n, skp_s, skp_h, svp_n, svp_s, svp_h, HALF, D, scale,
        fi, d1, d2, dp, dv, mi, mp, mv,  # frequency index, the pair's dims, pass/value dims
        BS: tl.constexpr,
        PAGES: tl.constexpr,  # pool blocks gathered per KV tile
        HAS_PASS: tl.constexpr,
        ACC: tl.constexpr,
    ):  # fmt: skip
        """Attend rows ``q`` to the packed entries ``[j, end)`` of one table row.

        KV tiles hold up to ``PAGES`` blocks of *one* document (tiles never cross a change of
        Δ), so the query is rotated by R(−Δ) once per document, not per block: when Δ changes,
        from the original Q (no accumulated rounding). Rotating Q (M×r/2 per document) instead
        of K (N×r/2 per tile) keeps K going straight from memory into ``tl.dot``.
        """
        in_ty = qp.dtype
        N: tl.constexpr = PAGES * BS
        rn = tl.arange(0, N)
        page = rn // BS
        slot = rn % BS
        pp = tl.arange(0, PAGES)
        prev = tl.full([], -1, tl.int64)
        qr1 = q1
        qr2 = q2
        while j < end:
            f0 = (tl.load(row_ptr + j) >> 32) & 0xFFFF
            inside = (j + pp) < end
            fp = (tl.load(row_ptr + j + pp, mask=inside, other=0) >> 32) & 0xFFFF
            other = ((fp != f0) | ~inside).to(tl.int32)
            take = tl.sum((tl.cumsum(other, 0) == 0).to(tl.int32), 0)  # leading same-Δ blocks
            if f0 != prev:  # a new document: R(−Δ) Q, always from the original Q
                c = tl.load(COS + (f0 - 1) * HALF + fi, mask=mi, other=1.0).to(ACC)
                s = tl.load(SIN + (f0 - 1) * HALF + fi, mask=mi, other=0.0).to(ACC)
                qr1 = q1 * c[None, :] + q2 * s[None, :]
                qr2 = q2 * c[None, :] - q1 * s[None, :]
                prev = f0
            live = page < take
            e = tl.load(row_ptr + j + page, mask=live, other=0)
            blk = e & 0x7FFFFFFF  # bit 31 is always 0 (block index <= 2**31 - 1)
            pad = (e >> 48) & 0xFFFF
            valid = live & (slot < BS - pad)
            krow = KP + blk[:, None] * skp_n + slot[:, None] * skp_s + hk * skp_h
            k1 = tl.load(krow + d1[None, :], mask=live[:, None] & mi[None, :], other=0.0)
            k2 = tl.load(krow + d2[None, :], mask=live[:, None] & mi[None, :], other=0.0)
            sc = tl.dot(qr1.to(in_ty), tl.trans(k1), input_precision="ieee").to(ACC)
            sc += tl.dot(qr2.to(in_ty), tl.trans(k2), input_precision="ieee").to(ACC)
            if HAS_PASS:
                kp = tl.load(krow + dp[None, :], mask=live[:, None] & mp[None, :], other=0.0)
                sc += tl.dot(qp, tl.trans(kp), input_precision="ieee").to(ACC)
            sc = tl.where(valid[None, :], sc * scale, float("-inf"))
            vrow = VP + blk[:, None] * svp_n + slot[:, None] * svp_s + hk * svp_h
            v = tl.load(vrow + dv[None, :], mask=live[:, None] & mv[None, :], other=0.0)
            m_i, l_i, acc = _online_update(sc, v, m_i, l_i, acc)
            j += take
        return m_i, l_i, acc

    @triton.jit
    def _paged_prefill_kernel(
        Q,  # (B, Tq, H, D) queries, rotated at logical positions
        KN,  # (B, Tq, H_kv, D) the queries' own keys
        VN,  # (B, Tq, H_kv, D) the queries' own values
        KP,  # (N, BS, H_kv, D) key pool, rotated at local positions
        VP,  # (N, BS, H_kv, D) value pool
        TABLE,  # (B, M) int64 packed [pad:16 | offset+1:16 | block:32]
        NBLK,  # (B,) int32 used entries per row
        NSTART,  # (B,) int32 first new key per row (left padding before it)
        COS,  # (P, HALF) cos table indexed by offset
        SIN,  # (P, HALF) sin table
        OUT,  # (B, Tq, H, D)
        sq_b, sq_t, sq_h,
        skn_b, skn_t, skn_h,
        svn_b, svn_t, svn_h,
        skp_n, skp_s, skp_h,
        svp_n, svp_s, svp_h,
        st_b,
        so_b, so_t, so_h,
        T, H, GROUP, HALF, D, scale,
        BS: tl.constexpr,  # pool block size (power of two)
        PAGES: tl.constexpr,  # pool blocks per KV tile (PAGES * BS >= 16)
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        HALF_PAD: tl.constexpr,
        PASS_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        HAS_PASS: tl.constexpr,
        INTERLEAVED: tl.constexpr,
        ACC: tl.constexpr,  # tl.float32 or tl.float64
    ):  # fmt: skip
        pid_m = tl.program_id(0)
        pid_bh = tl.program_id(1)
        b = pid_bh // H
        h = pid_bh % H
        hk = h // GROUP
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        mm = rm < T
        i = tl.arange(0, HALF_PAD)
        mi = i < HALF
        if INTERLEAVED:
            d1 = 2 * i
            d2 = 2 * i + 1
        else:
            d1 = i
            d2 = i + HALF
        dp = 2 * HALF + tl.arange(0, PASS_PAD)
        mp = dp < D
        dv = tl.arange(0, D_PAD)
        mv = dv < D

        qrow = Q + b * sq_b + h * sq_h + rm[:, None] * sq_t
        q1 = tl.load(qrow + d1[None, :], mask=mm[:, None] & mi[None, :], other=0.0).to(ACC)
        q2 = tl.load(qrow + d2[None, :], mask=mm[:, None] & mi[None, :], other=0.0).to(ACC)
        qp = tl.load(qrow + dp[None, :], mask=mm[:, None] & mp[None, :], other=0.0)

        m_i = tl.full([BLOCK_M], float("-inf"), ACC)
        l_i = tl.zeros([BLOCK_M], ACC)
        acc = tl.zeros([BLOCK_M, D_PAD], ACC)

        # 1) the paged context: multi-block tiles, Q rotated by R(−Δ) once per document
        m_i, l_i, acc = _context_pass(
            q1, q2, qp, m_i, l_i, acc, KP, VP, TABLE, COS, SIN, TABLE + b * st_b,
            0, tl.load(NBLK + b), hk, skp_n, skp_s, skp_h, svp_n, svp_s, svp_h, HALF, D, scale,
            i, d1, d2, dp, dv, mi, mp, mv, BS=BS, PAGES=PAGES, HAS_PASS=HAS_PASS, ACC=ACC,
        )  # fmt: skip

        # 2) the queries' own keys, causal, no rotation (offset 0), left padding excluded
        in_ty = Q.dtype.element_ty
        q1n = q1.to(in_ty)
        q2n = q2.to(in_ty)
        hi = tl.minimum((pid_m + 1) * BLOCK_M, T)
        n0 = tl.load(NSTART + b)
        for start in range(0, hi, BLOCK_N):
            rn = start + tl.arange(0, BLOCK_N)
            mn = rn < T
            krow = KN + b * skn_b + hk * skn_h + rn[:, None] * skn_t
            k1 = tl.load(krow + d1[None, :], mask=mn[:, None] & mi[None, :], other=0.0)
            k2 = tl.load(krow + d2[None, :], mask=mn[:, None] & mi[None, :], other=0.0)
            sc = tl.dot(q1n, tl.trans(k1), input_precision="ieee").to(ACC)
            sc += tl.dot(q2n, tl.trans(k2), input_precision="ieee").to(ACC)
            if HAS_PASS:
                kp = tl.load(krow + dp[None, :], mask=mn[:, None] & mp[None, :], other=0.0)
                sc += tl.dot(qp, tl.trans(kp), input_precision="ieee").to(ACC)
            sc = sc * scale
            ok = (rn[None, :] <= rm[:, None]) & mn[None, :] & (rn[None, :] >= n0)
            sc = tl.where(ok, sc, float("-inf"))
            vrow = VN + b * svn_b + hk * svn_h + rn[:, None] * svn_t
            v = tl.load(vrow + dv[None, :], mask=mn[:, None] & mv[None, :], other=0.0)
            m_i, l_i, acc = _online_update(sc, v, m_i, l_i, acc)

        out = acc / l_i[:, None]
        orow = OUT + b * so_b + h * so_h + rm[:, None] * so_t
        tl.store(orow + dv[None, :], out.to(in_ty), mask=mm[:, None] & mv[None, :])

    @triton.jit
    def _paged_decode_split_kernel(
        Q,  # (B, H, D) one token per request, rotated at its logical position
        KP,  # (N, BS, H_kv, D) key pool
        VP,  # (N, BS, H_kv, D) value pool
        TABLE,  # (B, M) int64 packed entries
        NBLK,  # (B,) int32 used entries per row
        COS,  # (P, HALF) cos table indexed by offset
        SIN,  # (P, HALF)
        MOUT,  # (B, H, S) running max of each split (ACC dtype)
        LOUT,  # (B, H, S) softmax denominators
        AOUT,  # (B, H, S, D) unnormalized outputs
        sq_b, sq_h,
        skp_n, skp_s, skp_h,
        svp_n, svp_s, svp_h,
        st_b,
        H, GROUP, HALF, D, scale, CHUNK, SPLITS,
        BS: tl.constexpr,
        PAGES: tl.constexpr,
        G_PAD: tl.constexpr,  # the query group (H / H_kv heads) padded to a tl.dot tile
        HALF_PAD: tl.constexpr,
        PASS_PAD: tl.constexpr,
        D_PAD: tl.constexpr,
        HAS_PASS: tl.constexpr,
        INTERLEAVED: tl.constexpr,
        ACC: tl.constexpr,
    ):  # fmt: skip
        """FlashDecoding: program (request b, KV head hk, split sp) attends the GROUP query heads
        sharing hk (one tile, each K/V block read once for all of them) to entries
        [sp·CHUNK, (sp+1)·CHUNK) of the row; splits are merged by their log-sum-exp."""
        b = tl.program_id(0)
        hk = tl.program_id(1)
        sp = tl.program_id(2)
        g = tl.arange(0, G_PAD)
        mg = g < GROUP
        h = hk * GROUP + g
        i = tl.arange(0, HALF_PAD)
        mi = i < HALF
        if INTERLEAVED:
            d1 = 2 * i
            d2 = 2 * i + 1
        else:
            d1 = i
            d2 = i + HALF
        dp = 2 * HALF + tl.arange(0, PASS_PAD)
        mp = dp < D
        dv = tl.arange(0, D_PAD)
        mv = dv < D

        qrow = Q + b * sq_b + h[:, None] * sq_h
        q1 = tl.load(qrow + d1[None, :], mask=mg[:, None] & mi[None, :], other=0.0).to(ACC)
        q2 = tl.load(qrow + d2[None, :], mask=mg[:, None] & mi[None, :], other=0.0).to(ACC)
        qp = tl.load(qrow + dp[None, :], mask=mg[:, None] & mp[None, :], other=0.0)
        m_i = tl.full([G_PAD], float("-inf"), ACC)
        l_i = tl.zeros([G_PAD], ACC)
        acc = tl.zeros([G_PAD, D_PAD], ACC)
        n_blk = tl.load(NBLK + b)
        j0 = sp * CHUNK
        end = tl.minimum(n_blk, j0 + CHUNK)
        m_i, l_i, acc = _context_pass(
            q1, q2, qp, m_i, l_i, acc, KP, VP, TABLE, COS, SIN, TABLE + b * st_b,
            j0, end, hk, skp_n, skp_s, skp_h, svp_n, svp_s, svp_h, HALF, D, scale,
            i, d1, d2, dp, dv, mi, mp, mv, BS=BS, PAGES=PAGES, HAS_PASS=HAS_PASS, ACC=ACC,
        )  # fmt: skip
        o = (b * H + h) * SPLITS + sp  # (G_PAD,) flat (b, h, sp)
        tl.store(MOUT + o, m_i, mask=mg)
        tl.store(LOUT + o, l_i, mask=mg)
        tl.store(AOUT + o[:, None] * D + dv[None, :], acc, mask=mg[:, None] & mv[None, :])


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _pages(block_size: int, tile_n: int) -> int:
    """Pool blocks per KV tile: ``tile_n`` keys, at least one block and 16 rows (tl.dot)."""
    if tile_n < 1 or tile_n & (tile_n - 1):
        raise ValueError(f"tile_n must be a power of two; got {tile_n}")
    return max(1, max(tile_n, 16) // block_size)


def _compiled(x: torch.Tensor) -> bool:
    """A real GPU launch (not the CPU interpreter)."""
    return x.is_cuda and os.environ.get("TRITON_INTERPRET", "0") != "1"


_SM: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM:
        _SM[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM[idx]


_TUNED: dict[str, object] = {}


def _prefill_tuned():
    """The prefill kernel under ``triton.autotune`` (GPU only; built on first use)."""
    if "prefill" not in _TUNED:
        configs = [
            triton.Config({"BLOCK_M": bm}, num_warps=w, num_stages=st)
            for bm in (64, 128)
            for w in (4, 8)
            for st in (2, 3)
        ]
        _TUNED["prefill"] = triton.autotune(configs=configs, key=["T", "HALF", "D", "GROUP"])(
            _paged_prefill_kernel
        )
    return _TUNED["prefill"]


def _acc(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def paged_prefill(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    cfg: RopeConfig,
    *,
    scale: float | None = None,
    new_start: torch.Tensor | None = None,
    plan: PagedPlan | None = None,
    table: tuple[torch.Tensor, torch.Tensor] | None = None,
    prefer: str | None = None,
    block_m: int | None = None,
    block_n: int = 64,
    tile_n: int = 64,
) -> torch.Tensor:
    """Prefill attention over a packed block table with per-document query de-rotation.

    Same contract as :func:`paged_prefill_ref`. KV tiles gather ``tile_n // block_size`` pool
    blocks of one document (at least one block); Q is rotated by R(−Δ) once per document.
    ``block_m=None`` autotunes BLOCK_M (64/128), warps and stages on a GPU and uses 64 under
    the interpreter; ``block_n`` tiles the queries' own keys. ``plan = plan_paged(block_table, ...)`` carries
    the validated table, per-row block counts and the cos/sin cache; with it the call makes no
    device→host read. Without it the call plans itself (``table = rope_table(cfg, P)`` is then
    used as the cos/sin cache when given). Backend from
    :func:`icml26_kernels.backend.select_backend` (``prefer``: ``"auto"``/``"triton"``/``"torch"``).
    """
    _check_prefill(q, k_new, v_new, k_pool, v_pool, block_table, cfg, new_start)
    if plan is None:
        plan = plan_paged(
            block_table,
            block_size=k_pool.shape[1],
            n_pool_blocks=k_pool.shape[0],
            cfg=cfg,
            table=table,
            dtype=q.dtype,
        )
    _check_plan(plan, k_pool, block_table, cfg)
    choice = select_backend(q.device, prefer=prefer)
    if not choice.uses_triton:
        return paged_prefill_ref(
            q, k_new, v_new, k_pool, v_pool, block_table, cfg,
            scale=scale, new_start=new_start, plan=plan,
        )  # fmt: skip
    _check_triton(k_pool, {"q": q, "k_new": k_new, "v_new": v_new, "v_pool": v_pool})
    B, T, H, D = q.shape
    bs = k_pool.shape[1]
    if new_start is None:
        new_start = torch.zeros(B, dtype=torch.int32, device=q.device)
    out = torch.empty_like(q)
    n_pass = D - cfg.rot_dim
    args = (
        q, k_new, v_new, k_pool, v_pool, block_table, plan.n_blocks,
        new_start.to(torch.int32), plan.cos, plan.sin, out,
        q.stride(0), q.stride(1), q.stride(2),
        k_new.stride(0), k_new.stride(1), k_new.stride(2),
        v_new.stride(0), v_new.stride(1), v_new.stride(2),
        k_pool.stride(0), k_pool.stride(1), k_pool.stride(2),
        v_pool.stride(0), v_pool.stride(1), v_pool.stride(2),
        block_table.stride(0),
        out.stride(0), out.stride(1), out.stride(2),
        T, H, H // k_pool.shape[2], cfg.half, D,
        1.0 / math.sqrt(D) if scale is None else scale,
    )  # fmt: skip
    meta = dict(
        BS=bs, PAGES=_pages(bs, tile_n), HALF_PAD=max(_next_pow2(cfg.half), 16),
        PASS_PAD=max(_next_pow2(max(n_pass, 1)), 16), D_PAD=max(_next_pow2(D), 16),
        HAS_PASS=n_pass > 0, INTERLEAVED=cfg.interleaved, ACC=_acc(q.dtype),
    )  # fmt: skip
    if block_m is None and _compiled(q):  # GPU: autotuned BLOCK_M / warps / stages
        grid = lambda m: (triton.cdiv(T, m["BLOCK_M"]), B * H)
        _prefill_tuned()[grid](*args, BLOCK_N=block_n, **meta)
    else:
        bm = 64 if block_m is None else block_m
        _paged_prefill_kernel[(triton.cdiv(T, bm), B * H)](
            *args, BLOCK_M=bm, BLOCK_N=block_n, **meta
        )
    return out


def paged_decode(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    cfg: RopeConfig,
    *,
    scale: float | None = None,
    plan: PagedPlan | None = None,
    table: tuple[torch.Tensor, torch.Tensor] | None = None,
    prefer: str | None = None,
    num_splits: int | None = None,
    tile_n: int = 64,
) -> torch.Tensor:
    """Decode attention (one token per request) over a packed block table, FlashDecoding-style.

    Same contract as :func:`paged_decode_ref`; see :func:`paged_prefill` for ``plan``/``table``/
    ``prefer``/``tile_n``. One program per (request, KV head, KV split): the ``H / H_kv`` query
    heads of a KV head form one ``tl.dot`` tile (each K/V block is read once for the group),
    the row's blocks are cut into ``num_splits`` chunks (default: enough programs for twice the
    device's SMs, from the plan's host-side block counts) merged by their log-sum-exp.
    """
    _check_decode(q, k_pool, v_pool, block_table, cfg)
    if plan is None:
        plan = plan_paged(
            block_table,
            block_size=k_pool.shape[1],
            n_pool_blocks=k_pool.shape[0],
            cfg=cfg,
            table=table,
            dtype=q.dtype,
            need_blocks=True,
        )
    _check_plan(plan, k_pool, block_table, cfg)
    if min(plan.n_blocks_host, default=1) < 1:
        raise ValueError("every decode request needs at least one block (its own token's KV)")
    choice = select_backend(q.device, prefer=prefer)
    if not choice.uses_triton:
        return paged_decode_ref(q, k_pool, v_pool, block_table, cfg, scale=scale, plan=plan)
    _check_triton(k_pool, {"q": q, "v_pool": v_pool})
    B, H, D = q.shape
    h_kv, bs = k_pool.shape[2], k_pool.shape[1]
    group = H // h_kv
    n_pass = D - cfg.rot_dim
    pages = _pages(bs, tile_n)
    # KV splits: enough programs to fill the device, at least one tile per split (host ints)
    n_max = max(plan.n_blocks_host)
    if num_splits is None:
        target = 2 * _sm_count(q.device) if _compiled(q) else 4
        num_splits = max(1, min(-(-target // (B * h_kv)), -(-n_max // pages)))
    chunk = -(-n_max // num_splits)
    acc_dt = torch.float64 if q.dtype == torch.float64 else torch.float32
    m = torch.empty(B, H, num_splits, dtype=acc_dt, device=q.device)
    lse_l = torch.empty_like(m)
    part = torch.empty(B, H, num_splits, D, dtype=acc_dt, device=q.device)
    _paged_decode_split_kernel[(B, h_kv, num_splits)](
        q, k_pool, v_pool, block_table, plan.n_blocks, plan.cos, plan.sin, m, lse_l, part,
        q.stride(0), q.stride(1),
        k_pool.stride(0), k_pool.stride(1), k_pool.stride(2),
        v_pool.stride(0), v_pool.stride(1), v_pool.stride(2),
        block_table.stride(0),
        H, group, cfg.half, D,
        1.0 / math.sqrt(D) if scale is None else scale, chunk, num_splits,
        BS=bs, PAGES=pages, G_PAD=max(_next_pow2(group), 16),
        HALF_PAD=max(_next_pow2(cfg.half), 16), PASS_PAD=max(_next_pow2(max(n_pass, 1)), 16),
        D_PAD=max(_next_pow2(D), 16), HAS_PASS=n_pass > 0, INTERLEAVED=cfg.interleaved,
        ACC=_acc(q.dtype),
    )  # fmt: skip
    # log-sum-exp merge of the splits; an empty split has m = -inf, l = 0, part = 0
    w = torch.exp(m - m.amax(-1, keepdim=True))  # (B, H, S); split 0 is never empty
    out = (w[..., None] * part).sum(-2) / (w * lse_l).sum(-1)[..., None]
    return out.to(q.dtype)
