import icml26_lazyattention

EXPECTED_ALL = [
    "ATTN_IMPLEMENTATION",
    "POLICIES",
    "BlockPool",
    "CacheEntry",
    "DocumentKVCache",
    "DocumentLayout",
    "Generation",
    "LazyBatch",
    "LazyDocumentCache",
    "LazyRAGPipeline",
    "OffsetOverflowError",
    "PoolExhaustedError",
    "RequestPlan",
    "__version__",
    "block_diagonal_mask",
    "blocks_for",
    "document_key",
    "document_seq_key",
    "materialize_rerotated",
    "plan_documents",
    "register",
    "release_plan",
    "rerotate_inplace",
    "rope_config_from_hf",
]


def test_imports_all_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_lazyattention.__all__)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_lazyattention, name)


def test_imports_cache_is_a_transformers_cache():
    from transformers import Cache

    assert issubclass(icml26_lazyattention.LazyDocumentCache, Cache)
