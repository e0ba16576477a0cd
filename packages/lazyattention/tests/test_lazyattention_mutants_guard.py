"""The in-place baseline never re-rotates a K that another running request reads (issue 67,
finding 2).

``policy="inplace"`` rotates a cached document's K where it lies only when no other request
holds it (refcount 1); otherwise it copies, as ``reencode`` does. Here two requests are pinned
at once and share a document at different offsets: each one's logits must equal that request
alone (and the dense block-diagonal reference). Re-rotating the shared K in place for the
second request would move it under the first one.
"""

import torch
from icml26_lazyattention import LazyRAGPipeline
from lazyattention_testlib import random_docs

TOL = {"rtol": 1e-12, "atol": 1e-12}


def _query_logits(pipe, batch):
    """The query positions' logits of a one-row batch (what ``pipe.logits`` computes)."""
    past = batch.cache.seq_length
    mask = batch.inputs["attention_mask"]
    name = next(k for k in batch.inputs if k not in ("input_ids", "attention_mask"))
    with torch.no_grad():
        out = pipe.model(
            input_ids=batch.inputs["input_ids"][:, past:],
            attention_mask=mask,
            position_ids=mask.cumsum(-1)[:, past:] - 1,
            **{name: batch.cache},
        )
    return out.logits[0]


def test_inplace_two_pinned_requests_sharing_a_document_at_different_offsets(llama64):
    docs, q1 = random_docs(31, [9, 7, 6], 3)
    _, q2 = random_docs(32, [1], 4)
    shared = docs[0]
    first = [shared, docs[1]]  # shared document at offset 0
    second = [docs[2], shared]  # the same document at offset 6 (after docs[2])
    pipe = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy="inplace", backend="torch")
    alone1 = pipe.logits(q1, first)
    alone2 = pipe.logits(q2, second)
    torch.testing.assert_close(alone1, pipe.dense_block_diagonal_logits(q1, first), **TOL)
    torch.testing.assert_close(alone2, pipe.dense_block_diagonal_logits(q2, second), **TOL)
    copies = pipe.pool.bytes_written["copy"]
    with pipe.request([q1], [first]) as b1, pipe.request([q2], [second]) as b2:
        # both pinned: the second request reads the shared document at another offset while the
        # first one holds it, so it must get a private, re-rotated copy
        assert pipe.pool.bytes_written["copy"] > copies
        with pipe.attention():
            got2 = _query_logits(pipe, b2)
            got1 = _query_logits(pipe, b1)  # after the second request's planning and forward
    torch.testing.assert_close(got1, alone1, **TOL)
    torch.testing.assert_close(got2, alone2, **TOL)
    # the same the other way round: the second order pinned first
    with pipe.request([q2], [second]) as b2, pipe.request([q1], [first]) as b1:
        with pipe.attention():
            torch.testing.assert_close(_query_logits(pipe, b2), alone2, **TOL)
            torch.testing.assert_close(_query_logits(pipe, b1), alone1, **TOL)
