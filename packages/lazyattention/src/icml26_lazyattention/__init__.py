"""LazyAttention (ICML 2026): position-agnostic, zero-copy document KV reuse with deferred RoPE.

Documents are prefilled once at local positions and stored once in a block pool; a request
over any ordered list of cached documents reads them in place, the attention kernel
(:mod:`icml26_kernels.attention`) de-rotating the query per block by the document's offset.
"""

from .cache import (
    BlockPool,
    CacheEntry,
    DocumentKVCache,
    PoolExhaustedError,
    document_key,
    document_seq_key,
)
from .hf import (
    ATTN_IMPLEMENTATION,
    Generation,
    LazyBatch,
    LazyDocumentCache,
    LazyRAGPipeline,
    register,
    rope_config_from_hf,
)
from .layout import DocumentLayout, OffsetOverflowError, blocks_for
from .lazy import (
    POLICIES,
    RequestPlan,
    block_diagonal_mask,
    materialize_rerotated,
    plan_documents,
    release_plan,
    rerotate_inplace,
)

__version__ = "0.1.0"

__all__ = [
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
