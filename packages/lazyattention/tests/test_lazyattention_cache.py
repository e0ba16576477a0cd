import pytest
import torch
from icml26_lazyattention import (
    BlockPool,
    DocumentKVCache,
    PoolExhaustedError,
    document_key,
    document_seq_key,
)


def make_cache(n_blocks=8, bs=4):
    pool = BlockPool(n_layers=2, n_blocks=n_blocks, block_size=bs, n_kv_heads=1, head_dim=2)
    return DocumentKVCache(pool)


def test_lazyattention_cache_no_alias_32_vs_two_16():
    a, b = list(range(16)), list(range(100, 116))
    assert document_key(a + b, 16) != document_key(a, 16)
    assert document_key(a + b, 16) != document_key(b, 16)
    # the block chain of [a|b] and of "a then b" would agree without the length term:
    assert document_seq_key([document_key(a + b, 16)]) != document_seq_key(
        [document_key(a, 16), document_key(b, 16)]
    )
    # position independence: the key depends on content only, and order matters for sequences
    assert document_key(a, 16) == document_key(list(a), 16)
    ka, kb = document_key(a, 16), document_key(b, 16)
    assert document_seq_key([ka, kb]) != document_seq_key([kb, ka])
    # same tokens split into different block sizes are different KV layouts
    assert document_key(a, 16) != document_key(a, 8)
    cache = make_cache(n_blocks=16, bs=16)
    fills = []
    e1, hit1 = cache.acquire(document_key(a + b, 16), 32, fills.append)
    e2, hit2 = cache.acquire(document_key(a, 16), 16, fills.append)
    e3, hit3 = cache.acquire(document_key(b, 16), 16, fills.append)
    assert (hit1, hit2, hit3) == (False, False, False) and len(fills) == 3
    assert set(e1.blocks).isdisjoint(e2.blocks + e3.blocks)


def test_lazyattention_cache_hits_refcount_lru():
    cache = make_cache(n_blocks=4, bs=4)
    fills = []
    ea, hit = cache.acquire("a", 8, fills.append)  # 2 blocks
    assert not hit and cache.misses == 1
    eb, _ = cache.acquire("b", 4, fills.append)  # 1 block
    ea2, hit = cache.acquire("a", 8, fills.append)
    assert hit and ea2 is ea and ea.refcount == 2 and cache.hits == 1
    assert cache.hit_ratio == pytest.approx(1 / 3)
    # everything pinned: a 2-block allocation cannot evict
    with pytest.raises(PoolExhaustedError, match="pinned"):
        cache.acquire("c", 8, fills.append)
    # finding 5: with nothing cached the message no longer blames pinned documents
    empty = make_cache(n_blocks=2)
    empty.allocate(2)
    with pytest.raises(PoolExhaustedError, match="nothing is cached"):
        empty.allocate(1)
    cache.release(ea)
    cache.release(ea)
    cache.release(eb)
    # a was used after b, so b is least recently used and goes first; then a
    cache.acquire("d", 4, fills.append)  # 1 free block, no eviction
    assert "a" in cache and "b" in cache and cache.evictions == 0
    cache.acquire("e", 4, fills.append)
    assert "b" not in cache and "a" in cache and cache.evictions == 1
    with pytest.raises(ValueError, match="not pinned"):
        cache.release(eb)
    with pytest.raises(ValueError, match="cached with 8 tokens"):
        cache.acquire("a", 5, fills.append)


def test_lazyattention_cache_failed_fill_frees_blocks():
    cache = make_cache(n_blocks=4)

    def boom(blocks):
        raise RuntimeError("prefill failed")

    with pytest.raises(RuntimeError):
        cache.acquire("x", 8, boom)
    assert "x" not in cache and cache.pool.n_free == 4


def test_lazyattention_pool_write_and_bytes():
    pool = BlockPool(
        n_layers=2, n_blocks=4, block_size=4, n_kv_heads=1, head_dim=2, dtype=torch.float64
    )
    k = torch.arange(12.0, dtype=torch.float64).reshape(6, 1, 2)
    pool.write(1, [3, 0], 1, k, -k, kind="document")
    flat = pool.k[1, [3, 0]].reshape(8, 1, 2)
    assert torch.equal(flat[1:7], k) and flat[0].eq(0).all() and pool.k[0].eq(0).all()
    assert torch.equal(pool.v[1, [3, 0]].reshape(8, 1, 2)[1:7], -k)
    assert pool.bytes_written == {"document": 6 * 2 * 2 * 8, "copy": 0, "private": 0, "rotate": 0}
    with pytest.raises(ValueError, match="do not fit"):
        pool.write(0, [1], 2, k, k, kind="copy")
    with pytest.raises(ValueError, match="kind"):
        pool.write(0, [1], 0, k[:1], k[:1], kind="other")
    with pytest.raises(ValueError, match="n_blocks"):
        BlockPool(n_layers=1, n_blocks=0, block_size=4, n_kv_heads=1, head_dim=2)


def test_lazyattention_pool_scatter_matches_write():
    """The per-layer write (flat slot indices, no host reads) equals the slot-by-slot write."""
    a = BlockPool(n_layers=2, n_blocks=4, block_size=4, n_kv_heads=2, head_dim=3)
    b = BlockPool(n_layers=2, n_blocks=4, block_size=4, n_kv_heads=2, head_dim=3)
    k = torch.randn(6, 2, 3)
    a.write(1, [3, 0], 1, k, -k, kind="private")
    dest = torch.tensor([3 * 4 + 1, 3 * 4 + 2, 3 * 4 + 3, 0, 1, 2])
    b.scatter(1, dest, k, -k, kind="private")
    assert torch.equal(a.k, b.k) and torch.equal(a.v, b.v)
    assert a.bytes_written == b.bytes_written
    with pytest.raises(ValueError, match="block_size must be <= 65536"):
        BlockPool(n_layers=1, n_blocks=1, block_size=65537, n_kv_heads=1, head_dim=2)
