"""Attention with deferred (in-kernel) RoPE over KV stored once and reused at any position.

- RoPE (:mod:`.rope`): :class:`RopeConfig` (neox / interleaved, partial ``rotary_dim``,
  llama3 scaling), tables, :func:`apply_rope` (Triton) beside :func:`apply_rope_ref`.
- Packed block tables (:mod:`.block_table`): ``[pad:16 | offset+1:16 | block:32]`` per block.
- Paged attention (:mod:`.paged`): :func:`paged_prefill` / :func:`paged_decode` (Triton) beside
  :func:`paged_prefill_ref` / :func:`paged_decode_ref`; the query is de-rotated per KV block by
  the block's offset instead of re-rotating (copying) the cached keys. :func:`plan_paged`
  validates a table once per step (:class:`PagedPlan`), so the per-layer calls read nothing
  back from the device.

Needs the ``torch`` extra (``triton`` for the kernels); dispatch via :mod:`icml26_kernels.backend`.
"""

try:  # first, so that a missing torch is reported with the extra to install
    import torch  # noqa: F401
except ImportError as _exc:
    from ..backend import missing_torch

    raise missing_torch("icml26_kernels.attention", _exc) from _exc


from .block_table import (
    BLOCK_INDEX_MAX,
    OFFSET_MAX,
    PAD_MAX,
    BlockTableOverflowError,
    pack_block_table,
    unpack_block_table,
)
from .paged import (
    PagedPlan,
    paged_decode,
    paged_decode_ref,
    paged_prefill,
    paged_prefill_ref,
    plan_paged,
)
from .rope import (
    Llama3Scaling,
    RopeConfig,
    apply_rope,
    apply_rope_ref,
    rope_cos_sin,
    rope_inv_freq,
    rope_table,
    rotate_pairs,
)

__all__ = [
    "BLOCK_INDEX_MAX",
    "OFFSET_MAX",
    "PAD_MAX",
    "BlockTableOverflowError",
    "Llama3Scaling",
    "PagedPlan",
    "RopeConfig",
    "apply_rope",
    "apply_rope_ref",
    "pack_block_table",
    "paged_decode",
    "paged_decode_ref",
    "paged_prefill",
    "paged_prefill_ref",
    "plan_paged",
    "rope_cos_sin",
    "rope_inv_freq",
    "rope_table",
    "rotate_pairs",
    "unpack_block_table",
]
