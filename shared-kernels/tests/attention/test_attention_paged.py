"""Paged attention with per-block query de-rotation: reference == dense brute force,
Triton prefill/decode == reference, block-table packing, and clear errors."""

import math

import pytest
import torch
from icml26_kernels.attention import (
    OFFSET_MAX,
    BlockTableOverflowError,
    Llama3Scaling,
    PagedPlan,
    RopeConfig,
    apply_rope_ref,
    pack_block_table,
    paged_decode,
    paged_decode_ref,
    paged_prefill,
    paged_prefill_ref,
    plan_paged,
    rope_table,
    unpack_block_table,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
CFGS = {
    "neox": RopeConfig(head_dim=8),
    "interleaved-llama3": RopeConfig(
        head_dim=8, interleaved=True, llama3=Llama3Scaling(original_max_position_embeddings=32)
    ),
    "partial": RopeConfig(head_dim=12, rotary_dim=4),
}


def make_case(
    seed, cfg, *, bs=4, h=4, h_kv=2, tq=5, doc_lens=((5, 3, 9), (4,)), dtype=torch.float64
):
    """Documents prefilled at local positions 0..L-1, packed into a shuffled pool; returns inputs
    for the kernels plus the dense (materialized) view needed by the brute-force check."""
    g = torch.Generator().manual_seed(seed)
    d = cfg.head_dim
    n_pool = sum(-(-L // bs) for lens in doc_lens for L in lens) + 3
    k_pool = torch.randn(n_pool, bs, h_kv, d, dtype=dtype, generator=g)
    v_pool = torch.randn(n_pool, bs, h_kv, d, dtype=dtype, generator=g)
    free = torch.randperm(n_pool, generator=g).tolist()
    rows, dense = [], []
    for lens in doc_lens:
        ids, offs, pads, keys, vals, start = [], [], [], [], [], 0
        for L in lens:
            nb = -(-L // bs)
            blocks = [free.pop() for _ in range(nb)]
            # the document's keys are rotated at local positions 0..L-1 (as a prefill would)
            raw = torch.randn(L, h_kv, d, dtype=dtype, generator=g)
            k_loc = apply_rope_ref(raw[None], torch.arange(L)[None], cfg)[0]
            flat_k = torch.zeros(nb * bs, h_kv, d, dtype=dtype)
            flat_k[:L] = k_loc
            k_pool[blocks] = flat_k.reshape(nb, bs, h_kv, d)
            ids += blocks
            offs += [start] * nb
            pads += [0] * (nb - 1) + [nb * bs - L]
            # materialized view: the same keys re-rotated to their logical positions start..start+L-1
            keys.append(apply_rope_ref(raw[None], torch.arange(start, start + L)[None], cfg)[0])
            vals.append(v_pool[blocks].reshape(nb * bs, h_kv, d)[:L])
            start += L
        rows.append((ids, offs, pads))
        dense.append((torch.cat(keys), torch.cat(vals), start))
    m = max(len(r[0]) for r in rows)
    table = torch.zeros(len(rows), m, dtype=torch.int64)
    for b, (ids, offs, pads) in enumerate(rows):
        table[b, : len(ids)] = pack_block_table(ids, offs, pads, block_size=bs)
    B = len(doc_lens)
    raw_q = torch.randn(B, tq, h, d, dtype=dtype, generator=g)
    raw_k = torch.randn(B, tq, h_kv, d, dtype=dtype, generator=g)
    v_new = torch.randn(B, tq, h_kv, d, dtype=dtype, generator=g)
    pos = torch.stack(
        [torch.arange(dn[2], dn[2] + tq) for dn in dense]
    )  # query after the documents
    q = apply_rope_ref(raw_q, pos, cfg)
    k_new = apply_rope_ref(raw_k, pos, cfg)
    return dict(
        q=q, k_new=k_new, v_new=v_new, k_pool=k_pool, v_pool=v_pool, table=table, dense=dense
    )


def dense_attention(c, cfg):
    """Brute force: materialized re-rotated document keys + the query's own keys, causal mask."""
    outs = []
    for b, (kd, vd, n_ctx) in enumerate(c["dense"]):
        q, kn, vn = c["q"][b], c["k_new"][b], c["v_new"][b]
        k = torch.cat([kd, kn])
        v = torch.cat([vd, vn])
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(q.shape[-1])
        t = q.shape[0]
        allowed = torch.arange(n_ctx + t)[None, :] <= (n_ctx + torch.arange(t))[:, None]
        s = s.masked_fill(~allowed, float("-inf"))
        outs.append(torch.einsum("hts,shd->thd", s.softmax(-1), v))
    return torch.stack(outs)


def to_dev(c):
    return {k: (v.to(DEV) if isinstance(v, torch.Tensor) else v) for k, v in c.items()}


@pytest.mark.parametrize("name", list(CFGS))
def test_attention_prefill_reference_equals_materialized_dense(name):
    cfg = CFGS[name]
    c = make_case(0, cfg)
    got = paged_prefill_ref(
        c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg
    )
    torch.testing.assert_close(got, dense_attention(c, cfg), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", list(CFGS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_attention_prefill_triton_matches_reference(name, dtype):
    cfg = CFGS[name]
    c = to_dev(make_case(1, cfg, bs=8, tq=7, doc_lens=((9, 3), (2, 11, 6)), dtype=dtype))
    args = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    got = paged_prefill(*args, prefer="triton", block_m=16, block_n=16)
    want = paged_prefill_ref(*args)
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=0, atol=tol)


def test_attention_prefill_triton_multiple_query_tiles():
    cfg = CFGS["neox"]
    c = to_dev(make_case(2, cfg, bs=4, h=2, h_kv=1, tq=21, doc_lens=((6, 5),)))
    args = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    got = paged_prefill(
        *args, prefer="triton", block_m=16, block_n=16
    )  # 2 query tiles, 2 key tiles
    torch.testing.assert_close(got, dense_attention(c, cfg), rtol=0, atol=1e-10)


def decode_case(c, cfg, bs):
    """Append the first query token's own key to a private block (offset 0) for decode."""
    k_pool, v_pool, table = c["k_pool"].clone(), c["v_pool"].clone(), c["table"].clone()
    B = table.shape[0]
    extra = torch.zeros(B, bs, *k_pool.shape[2:], dtype=k_pool.dtype, device=k_pool.device)
    k_pool = torch.cat([k_pool, extra])
    v_pool = torch.cat([v_pool, extra.clone()])
    table = torch.cat([table, torch.zeros(B, 1, dtype=torch.int64, device=table.device)], 1)
    for b in range(B):
        blk = c["k_pool"].shape[0] + b
        k_pool[blk, 0] = c["k_new"][b, 0]
        v_pool[blk, 0] = c["v_new"][b, 0]
        n = int((((table[b] >> 32) & 0xFFFF) > 0).sum())
        table[b, n] = pack_block_table([blk], [0], [bs - 1], block_size=bs)[0]
    return c["q"][:, 0].contiguous(), k_pool, v_pool, table


@pytest.mark.parametrize("name", list(CFGS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_attention_decode_triton_matches_reference_and_prefill(name, dtype):
    cfg = CFGS[name]
    bs = 4
    c = to_dev(make_case(3, cfg, bs=bs, h=4, h_kv=1, tq=1, dtype=dtype))
    q, k_pool, v_pool, table = decode_case(c, cfg, bs)
    got = paged_decode(q, k_pool, v_pool, table, cfg, prefer="triton")
    want = paged_decode_ref(q, k_pool, v_pool, table, cfg)
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=0, atol=tol)
    # decode over (documents + own key in the pool) == prefill with the own key passed as new
    pre = paged_prefill_ref(
        c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg
    )
    torch.testing.assert_close(want, pre[:, 0], rtol=0, atol=tol)


@pytest.mark.parametrize("seed", range(8))
def test_attention_triton_kernels_equal_brute_force_on_random_layouts(seed):
    """Random layouts (ragged block tables, 1-3 documents per request of 1-13 tokens, 1-9 query
    tokens) over every block size 1-8, GQA group and RoPE variant: the Triton prefill equals the
    materialized dense brute force and the Triton decode equals the reference, fp64 at 1e-10."""
    g = torch.Generator().manual_seed(1000 + seed)
    cfg = CFGS[list(CFGS)[seed % 3]]
    bs = (1, 2, 4, 8)[seed % 4]
    h, h_kv = ((4, 2), (4, 1), (2, 2), (3, 1))[(seed // 2) % 4]

    def draw(lo, hi):  # uniform integer in [lo, hi]
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    tq = draw(1, 9)
    # batch 2-3: a kernel that reads row 0 of the block table for every request fails here
    doc_lens = tuple(tuple(draw(1, 13) for _ in range(draw(1, 3))) for _ in range(draw(2, 3)))
    c = to_dev(make_case(seed, cfg, bs=bs, h=h, h_kv=h_kv, tq=tq, doc_lens=doc_lens))
    args = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    # KV tiles of 16/32/64 keys (several pool blocks, cut at document boundaries); decode split
    # over 1-3 chunks of the table (more splits than blocks leaves some empty)
    tile_n = (16, 32, 64)[seed % 3]
    got = paged_prefill(*args, prefer="triton", block_m=16, block_n=16, tile_n=tile_n)
    torch.testing.assert_close(got, dense_attention(c, cfg), rtol=0, atol=1e-10)
    q, k_pool, v_pool, table = decode_case(c, cfg, bs)
    got = paged_decode(
        q, k_pool, v_pool, table, cfg, prefer="triton", tile_n=tile_n, num_splits=1 + seed % 3
    )
    want = paged_decode_ref(q, k_pool, v_pool, table, cfg)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    torch.testing.assert_close(got, dense_attention(c, cfg)[:, 0], rtol=0, atol=1e-10)


def test_attention_decode_fp32_error_does_not_grow_with_offsets():
    """Q is re-rotated from the original per document: fp32 error vs fp64 stays flat at
    offsets up to OFFSET_MAX (an fp32 angle p·θ would be off by ~p·6e-8 rad there)."""
    cfg = RopeConfig(head_dim=8)
    g = torch.Generator().manual_seed(4)
    n_docs, bs = 12, 4
    k64 = torch.randn(n_docs, bs, 1, 8, dtype=torch.float64, generator=g)
    v64 = torch.randn(n_docs, bs, 1, 8, dtype=torch.float64, generator=g)
    q64 = torch.randn(1, 2, 8, dtype=torch.float64, generator=g)
    offs = torch.linspace(0, OFFSET_MAX, n_docs).long()
    table = pack_block_table(torch.arange(n_docs), offs, torch.zeros(n_docs, dtype=torch.long))[
        None
    ]
    want = paged_decode_ref(q64, k64, v64, table, cfg)
    got = paged_decode(
        q64.float().to(DEV),
        k64.float().to(DEV),
        v64.float().to(DEV),
        table.to(DEV),
        cfg,
        prefer="triton",
    )
    torch.testing.assert_close(got.double().cpu(), want, rtol=0, atol=2e-6)


def test_attention_block_table_roundtrip_and_overflow():
    ids = torch.tensor([0, 7, 2**31 - 1])
    offs = torch.tensor([0, 123, OFFSET_MAX])
    pads = torch.tensor([0, 3, 15])
    t = pack_block_table(ids, offs, pads, block_size=16)
    i2, o2, p2, used = unpack_block_table(t)
    assert (
        torch.equal(i2, ids)
        and torch.equal(o2, offs)
        and torch.equal(p2, pads)
        and bool(used.all())
    )
    with pytest.raises(BlockTableOverflowError, match="offsets"):
        pack_block_table([0], [OFFSET_MAX + 1], [0])
    with pytest.raises(BlockTableOverflowError, match="block_ids"):
        pack_block_table([2**31], [0], [0])
    with pytest.raises(BlockTableOverflowError, match="pads"):
        pack_block_table([0], [0], [16], block_size=16)
    with pytest.raises(ValueError, match="same shape"):
        pack_block_table([0, 1], [0], [0])


def test_attention_bad_inputs_raise_clear_errors():
    cfg = CFGS["neox"]
    c = make_case(5, cfg, bs=4, doc_lens=((5, 3),))
    base = dict(
        q=c["q"],
        k_new=c["k_new"],
        v_new=c["v_new"],
        k_pool=c["k_pool"],
        v_pool=c["v_pool"],
        block_table=c["table"],
        cfg=cfg,
    )
    with pytest.raises(TypeError, match="share a dtype"):
        paged_prefill_ref(**{**base, "q": c["q"].float()})
    with pytest.raises(TypeError, match="k_new and v_new"):
        paged_prefill_ref(**{**base, "k_new": c["k_new"].float()})
    with pytest.raises(ValueError, match="multiple of KV heads"):
        paged_prefill_ref(**{**base, "q": c["q"][:, :, :3].contiguous()})
    with pytest.raises(ValueError, match="left-packed"):
        t = c["table"].clone()
        paged_prefill_ref(**{**base, "block_table": torch.cat([torch.zeros_like(t), t], 1)})
    with pytest.raises(ValueError, match="n_pool_blocks"):
        bad = pack_block_table([c["k_pool"].shape[0]], [0], [0])[None]
        paged_prefill_ref(**{**base, "block_table": bad})
    with pytest.raises(TypeError, match="int64"):
        paged_prefill_ref(**{**base, "block_table": c["table"].int()})
    # the Triton kernels need a power-of-two block size
    c6 = make_case(6, cfg, bs=6, doc_lens=((5,),))
    with pytest.raises(ValueError, match="power-of-two block_size"):
        paged_prefill(
            c6["q"],
            c6["k_new"],
            c6["v_new"],
            c6["k_pool"],
            c6["v_pool"],
            c6["table"],
            cfg,
            prefer="triton",
        )
    with pytest.raises(ValueError, match="table must cover"):
        paged_prefill(**base, table=rope_table(cfg, 1), prefer="triton")
    with pytest.raises(ValueError, match="at least one block"):
        paged_decode_ref(
            c["q"][:, 0], c["k_pool"], c["v_pool"], torch.zeros(1, 1, dtype=torch.int64), cfg
        )


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_kernels_real_shapes_gpu(dtype):
    """Llama-8B-like heads (H=32, H_kv=8, D=128), 16-token blocks, ~2k context, compiled Triton."""
    cfg = RopeConfig(head_dim=128, base=500000.0, llama3=Llama3Scaling())
    lens = ((300, 517, 129, 640, 411),)
    c = make_case(7, cfg, bs=16, h=32, h_kv=8, tq=96, doc_lens=lens, dtype=torch.float32)
    c64 = {
        k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        for k, v in c.items()
    }
    want = paged_prefill_ref(
        c64["q"], c64["k_new"], c64["v_new"], c64["k_pool"], c64["v_pool"], c64["table"], cfg
    )
    cd = {
        k: (v.to("cuda", dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        for k, v in c.items()
    }
    got = paged_prefill(
        cd["q"],
        cd["k_new"],
        cd["v_new"],
        cd["k_pool"],
        cd["v_pool"],
        c["table"].cuda(),
        cfg,
        prefer="triton",
        block_m=64,
        block_n=64,
    )
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(got.double().cpu(), want, rtol=0, atol=tol)
    # block_m=None: the autotuner's own pick (what bench_kernels and gpu_check time)
    tuned = paged_prefill(
        cd["q"], cd["k_new"], cd["v_new"], cd["k_pool"], cd["v_pool"], c["table"].cuda(), cfg,
        prefer="triton",
    )  # fmt: skip
    torch.testing.assert_close(tuned.double().cpu(), want, rtol=0, atol=tol)
    q, k_pool, v_pool, table = decode_case(c64, cfg, 16)
    want_d = paged_decode_ref(q, k_pool, v_pool, table, cfg)
    got_d = paged_decode(
        q.to("cuda", dtype),
        k_pool.to("cuda", dtype),
        v_pool.to("cuda", dtype),
        table.cuda(),
        cfg,
        prefer="triton",
    )
    torch.testing.assert_close(got_d.double().cpu(), want_d, rtol=0, atol=tol)


# ----------------------------------------------------------------------------- issue 28


def test_attention_all_padding_block_is_refused_not_nan():
    """A used entry whose pad equals the block size (nothing valid) gave NaN from the Triton
    decode and a finite value from the reference; the plan now refuses it for both."""
    cfg = CFGS["neox"]
    c = to_dev(make_case(8, cfg, bs=4, h=2, h_kv=1, tq=1, doc_lens=((5,), (3,))))
    q, k_pool, v_pool, table = decode_case(c, cfg, 4)
    bad = table.clone()
    bad[1, 0] = pack_block_table([0], [0], [4])[0]  # pad 4 == block_size: all padding
    for fn in (
        lambda: paged_decode(q, k_pool, v_pool, bad, cfg, prefer="triton"),
        lambda: paged_decode_ref(q, k_pool, v_pool, bad, cfg),
        lambda: paged_prefill_ref(c["q"], c["k_new"], c["v_new"], k_pool, v_pool, bad, cfg),
    ):
        with pytest.raises(ValueError, match="all padding"):
            fn()


def test_attention_pad_field_never_wraps_for_huge_blocks():
    """block_size > 65536 allowed pads that wrapped the 16-bit field silently."""
    t = pack_block_table([0], [0], [65535], block_size=70_000)
    assert int(unpack_block_table(t)[2][0]) == 65535
    with pytest.raises(BlockTableOverflowError, match="pads"):
        pack_block_table([0], [0], [65536], block_size=70_000)


def test_attention_left_padded_prefill_equals_unpadded():
    """``new_start``: row b's first tokens are left padding. Each real query's output equals the
    same request prefilled without the padding (reference and Triton), batch 2 with different
    pad counts, so a kernel reading row 0's start for every row fails."""
    cfg = CFGS["interleaved-llama3"]
    c = to_dev(make_case(9, cfg, bs=4, h=4, h_kv=2, tq=6, doc_lens=((5, 3), (7,))))
    starts = torch.tensor([2, 0], device=DEV)
    pad_q = c["q"].clone()
    pad_k = c["k_new"].clone()
    pad_q[0, :2] = 100.0  # garbage in the pad slots: must not leak into real rows
    pad_k[0, :2] = 100.0
    args = (pad_q, pad_k, c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    want = dense_attention(c, cfg)
    # row 1 is unpadded; row 0 without its first two tokens is a 4-token prefill at positions + 2
    c0 = dict(c)
    c0.update(
        q=c["q"][:1, 2:], k_new=c["k_new"][:1, 2:], v_new=c["v_new"][:1, 2:], dense=c["dense"][:1]
    )
    want0 = dense_attention(c0, cfg)
    for got in (
        paged_prefill_ref(*args, new_start=starts),
        paged_prefill(*args, new_start=starts, prefer="triton"),
    ):
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=1e-10)
        torch.testing.assert_close(got[0, 2:], want0[0], rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="new_start"):
        paged_prefill_ref(*args, new_start=torch.zeros(3, dtype=torch.long))


class SyncCounter:
    """Counts device→host reads: every ``Tensor.item/tolist/__bool__/__int__/__float__/__index__``
    and ``torch.equal`` call (each is a stream sync on a GPU and breaks CUDA-graph capture)."""

    NAMES = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")

    def __init__(self, monkeypatch):
        self.n = 0
        for name in self.NAMES:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(getattr(torch.Tensor, name)))
        monkeypatch.setattr(torch, "equal", self._wrap(torch.equal))

    def _wrap(self, fn):
        def counted(*a, **k):
            self.n += 1
            return fn(*a, **k)

        return counted


def test_attention_planned_calls_make_no_host_reads(monkeypatch):
    """plan/run split: plan_paged reads the table once (host reads allowed there); a call with
    ``plan=`` (torch path, and the Triton wrapper up to the launch) reads nothing back."""
    import icml26_kernels.attention.paged as paged_mod

    cfg = CFGS["neox"]
    c = make_case(10, cfg, bs=4, h=4, h_kv=2, tq=3, doc_lens=((5, 3), (7,)))
    q, k_pool, v_pool, table = decode_case(c, cfg, 4)
    dplan = plan_paged(table, block_size=4, n_pool_blocks=k_pool.shape[0], cfg=cfg)
    pplan = plan_paged(c["table"], block_size=4, n_pool_blocks=c["k_pool"].shape[0], cfg=cfg)
    assert isinstance(dplan, PagedPlan) and dplan.n_blocks_host == (4, 3)
    assert dplan.max_offset == 5
    want_d = paged_decode_ref(q, k_pool, v_pool, table, cfg)
    pargs = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    want_p = paged_prefill_ref(*pargs)

    class NoLaunch:  # the interpreter itself reads tensors back; count only our wrapper
        def __getitem__(self, grid):
            return lambda *a, **k: None

    counter = SyncCounter(monkeypatch)
    got_d = paged_decode(q, k_pool, v_pool, table, cfg, plan=dplan, prefer="torch")
    got_p = paged_prefill(*pargs, plan=pplan, prefer="torch")
    monkeypatch.setattr(paged_mod, "_paged_decode_split_kernel", NoLaunch())
    monkeypatch.setattr(paged_mod, "_paged_prefill_kernel", NoLaunch())
    paged_decode(q, k_pool, v_pool, table, cfg, plan=dplan, prefer="triton")
    paged_prefill(*pargs, plan=pplan, prefer="triton")
    assert counter.n == 0
    # the counter is live: an unplanned call reads the table back
    paged_decode(q, k_pool, v_pool, table, cfg, prefer="torch")
    assert counter.n > 0
    monkeypatch.undo()
    torch.testing.assert_close(got_d, want_d, rtol=0, atol=0)
    torch.testing.assert_close(got_p, want_p, rtol=0, atol=0)


def test_attention_plan_must_match_the_call():
    cfg = CFGS["neox"]
    c = make_case(11, cfg, bs=4, doc_lens=((5, 3), (2,)))
    args = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    plan = plan_paged(c["table"], block_size=4, n_pool_blocks=c["k_pool"].shape[0], cfg=cfg)
    with pytest.raises(ValueError, match="another block_table"):
        paged_prefill(*args[:5], c["table"].clone(), cfg, plan=plan, prefer="torch")
    with pytest.raises(ValueError, match="another RopeConfig"):
        paged_prefill(*args[:6], CFGS["partial"].__class__(head_dim=8, base=5.0), plan=plan)
    small = plan_paged(c["table"], block_size=4, n_pool_blocks=c["k_pool"].shape[0] + 1, cfg=cfg)
    with pytest.raises(ValueError, match="validated for a pool"):
        paged_prefill(*args, plan=small, prefer="torch")
    with pytest.raises(TypeError, match="PagedPlan"):
        paged_prefill(*args, plan="plan", prefer="torch")
    with pytest.raises(ValueError, match="table must cover"):
        plan_paged(c["table"], block_size=4, n_pool_blocks=99, cfg=cfg, table=rope_table(cfg, 2))
    empty = torch.zeros(2, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match="at least one block"):
        paged_decode(c["q"][:, 0], c["k_pool"], c["v_pool"], empty, cfg, prefer="torch")


@pytest.mark.parametrize("num_splits", [1, 2, 3, 9])
def test_attention_decode_splits_and_group_packing(num_splits):
    """FlashDecoding: one program per (request, KV head, split), the query group (4 heads per KV
    head) packed in one tile; any number of splits (9 > blocks: empty splits) merges to the
    reference by log-sum-exp, batch 3 with ragged tables, 4-key tiles of one block each."""
    cfg = CFGS["partial"]
    c = to_dev(make_case(12, cfg, bs=4, h=8, h_kv=2, tq=1, doc_lens=((5, 3, 9), (4,), (2, 7))))
    q, k_pool, v_pool, table = decode_case(c, cfg, 4)
    want = paged_decode_ref(q, k_pool, v_pool, table, cfg)
    for tile_n in (4, 16):
        got = paged_decode(
            q, k_pool, v_pool, table, cfg, prefer="triton", num_splits=num_splits, tile_n=tile_n
        )
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    torch.testing.assert_close(want, dense_attention(c, cfg)[:, 0], rtol=0, atol=1e-10)


# bf16 runs under the interpreter through the conftest patch (the interpreter's own bf16 tl.dot
# multiplies bit patterns, off by ~1e9, and its fp32 -> bf16 cast truncates)
@pytest.mark.parametrize(
    "dtype",
    [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="fp16")],
)
def test_attention_half_precision_inputs_accumulate_in_fp32(dtype, request):
    """bf16/fp16 inputs, fp32 accumulation: within the input precision of the fp64 reference
    (relative to the output scale), prefill and decode."""
    if dtype == torch.bfloat16:
        request.getfixturevalue("bf16_interpreter")
    cfg = CFGS["neox"]
    c64 = make_case(13, cfg, bs=4, h=4, h_kv=2, tq=5, doc_lens=((5, 3, 9), (4, 6)))
    c = {
        k: (v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v)
        for k, v in c64.items()
    }
    c = to_dev(c)
    args = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    got = paged_prefill(*args, prefer="triton", block_m=16)
    assert got.dtype == dtype
    want = dense_attention(c64, cfg)
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    torch.testing.assert_close(got.double().cpu(), want, rtol=tol, atol=tol)
    q, k_pool, v_pool, table = decode_case(c64, cfg, 4)
    got = paged_decode(
        q.to(DEV, dtype), k_pool.to(DEV, dtype), v_pool.to(DEV, dtype), table.to(DEV), cfg,
        prefer="triton", num_splits=2,
    )  # fmt: skip
    torch.testing.assert_close(got.double().cpu(), want[:, 0], rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- issue 65

from icml26_kernels.attention import paged as _paged  # noqa: E402

_PREFILL_CONFIGS = [(bm, w, st) for bm in (64, 128) for w in (4, 8) for st in (2, 3)]


@pytest.fixture
def forced_prefill_config(monkeypatch):
    """Run ``paged_prefill(block_m=None)`` down its GPU branch (the autotuned kernel) with the
    autotuner holding one configuration; under the interpreter warps and stages are accepted
    and ignored (numpy runs whole tiles), BLOCK_M and the grid are what is checked."""
    import triton

    tuned = _paged._prefill_tuned()
    saved, cache = tuned.configs, dict(tuned.cache)
    monkeypatch.setattr(_paged, "_compiled", lambda x: True)
    # the fixed-BLOCK_M branch must not be the one that runs
    monkeypatch.setattr(_paged, "_paged_prefill_kernel", None)

    def force(bm, warps, stages):
        tuned.configs = [triton.Config({"BLOCK_M": bm}, num_warps=warps, num_stages=stages)]
        tuned.cache.clear()

    yield force
    tuned.configs = saved
    tuned.cache.clear()
    tuned.cache.update(cache)


def _autotuned_config_params():
    out = []
    for bm, w, st in _PREFILL_CONFIGS:
        marks = () if (w, st) == (4, 2) or (bm, w, st) == (128, 8, 3) else (pytest.mark.tiles,)
        out.append(pytest.param(bm, w, st, id=f"M{bm}-w{w}-s{st}", marks=marks))
    return out


@pytest.mark.parametrize(("block_m", "warps", "stages"), _autotuned_config_params())
def test_attention_prefill_autotuned_configs_forced_one_at_a_time(
    block_m, warps, stages, forced_prefill_config
):
    """Each configuration of the prefill autotuner (BLOCK_M 64/128 x 4/8 warps x 2/3 stages),
    forced, through the ``block_m=None`` path bench_kernels times: T = 150 > 128 gives two query
    tiles at BLOCK_M = 128 and three at 64, one of them ragged; fp32, against the brute force."""
    forced_prefill_config(block_m, warps, stages)
    cfg = CFGS["interleaved-llama3"]
    c = make_case(
        20, cfg, bs=16, h=2, h_kv=1, tq=150, doc_lens=((40, 17), (9,)), dtype=torch.float32
    )
    d = to_dev(c)
    args = (d["q"], d["k_new"], d["v_new"], d["k_pool"], d["v_pool"], d["table"], cfg)
    got = paged_prefill(*args, prefer="triton").cpu()
    want = dense_attention(
        {k: (v.double() if torch.is_tensor(v) else v) for k, v in c.items()}
        | {
            "dense": [tuple(t.double() if torch.is_tensor(t) else t for t in d) for d in c["dense"]]
        },
        cfg,
    )
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-5)


@pytest.mark.parametrize(
    ("head_dim", "rotary_dim", "dtype"),
    [
        pytest.param(64, None, torch.float32, id="D64"),
        pytest.param(128, None, torch.float32, id="D128"),
        pytest.param(128, 64, torch.float32, id="D128-partial"),
        pytest.param(128, None, torch.bfloat16, id="D128-bf16"),
        pytest.param(96, None, torch.float32, id="D96-padded", marks=pytest.mark.tiles),
    ],
)
def test_attention_real_head_dims_prefill_and_decode(head_dim, rotary_dim, dtype, request):
    """Head dims 64 and 128 (the real ones: HALF_PAD 32/64, D_PAD = D), a partial rotary half,
    and 96 (padded to 128), with 64-query tiles and 64-key tiles, prefill and decode."""
    if dtype == torch.bfloat16:
        request.getfixturevalue("bf16_interpreter")
    cfg = RopeConfig(
        head_dim=head_dim, rotary_dim=rotary_dim, base=500000.0, llama3=Llama3Scaling()
    )
    c64 = make_case(21, cfg, bs=16, h=4, h_kv=2, tq=20, doc_lens=((30, 19), (41,)))
    c = to_dev({k: (v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v)
                for k, v in c64.items()})  # fmt: skip
    args = (c["q"], c["k_new"], c["v_new"], c["k_pool"], c["v_pool"], c["table"], cfg)
    got = paged_prefill(*args, prefer="triton", block_m=64, block_n=64)
    want = dense_attention(c64, cfg)
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-5
    torch.testing.assert_close(got.double().cpu(), want, rtol=tol, atol=tol)
    q, k_pool, v_pool, table = decode_case(c64, cfg, 16)
    got_d = paged_decode(
        q.to(DEV, dtype), k_pool.to(DEV, dtype), v_pool.to(DEV, dtype), table.to(DEV), cfg,
        prefer="triton", num_splits=2,
    )  # fmt: skip
    torch.testing.assert_close(got_d.double().cpu(), want[:, 0], rtol=tol, atol=tol)
