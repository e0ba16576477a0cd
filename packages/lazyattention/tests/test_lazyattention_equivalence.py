"""Lazy attention == materialized re-rotated KV == full recompute with the block-diagonal mask,
at the model level (tiny random Llama), over random documents, block sizes, GQA and RoPE variants."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from icml26_kernels.attention import Llama3Scaling, RopeConfig
from icml26_lazyattention import POLICIES, LazyRAGPipeline, PoolExhaustedError, RequestPlan

ROPES = {
    "config": None,  # read from the HF config (neox, default)
    "interleaved": RopeConfig(head_dim=8, interleaved=True),
    "partial": RopeConfig(head_dim=8, rotary_dim=4, base=100.0),
    "llama3": RopeConfig(
        head_dim=8, llama3=Llama3Scaling(factor=4.0, original_max_position_embeddings=16)
    ),
}
HEADS = [(4, 2), (4, 1), (2, 2)]


def random_docs(seed, lengths, q_len, vocab=64):
    g = torch.Generator().manual_seed(seed)
    docs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]
    return docs, torch.randint(0, vocab, (q_len,), generator=g).tolist()


def check_policies_equal_dense(model, lengths, q_len, bs, rope, seed, atol=1e-10):
    docs, q = random_docs(seed, lengths, q_len)
    ref = None
    for policy in POLICIES:
        pipe = LazyRAGPipeline(
            model, block_size=bs, n_blocks=256, policy=policy, backend="torch", rope=ROPES[rope]
        )
        if ref is None:
            ref = pipe.dense_block_diagonal_logits(q, docs)
        out = pipe.generate(q, docs, max_new_tokens=1)
        torch.testing.assert_close(out.query_logits, ref, rtol=0, atol=atol)
        # a second request over the same documents in reverse order (cache hits for lazy/reencode)
        out_rev = pipe.generate(q, docs[::-1], max_new_tokens=1)
        torch.testing.assert_close(
            out_rev.query_logits,
            pipe.dense_block_diagonal_logits(q, docs[::-1]),
            rtol=0,
            atol=atol,
        )


CASES = dict(
    lengths=st.lists(st.integers(1, 13), min_size=1, max_size=4),
    q_len=st.integers(1, 5),
    bs=st.sampled_from([1, 2, 4, 8, 3]),
    heads=st.sampled_from(HEADS),
    rope=st.sampled_from(list(ROPES)),
    seed=st.integers(0, 10_000),
)


@settings(max_examples=12, deadline=None)
@given(**CASES)
def test_lazyattention_policies_equal_dense_fp64(gqa_models, lengths, q_len, bs, heads, rope, seed):
    check_policies_equal_dense(gqa_models[heads], lengths, q_len, bs, rope, seed)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(**CASES)
def test_lazyattention_policies_equal_dense_fp64_many(
    gqa_models, lengths, q_len, bs, heads, rope, seed
):
    check_policies_equal_dense(gqa_models[heads], lengths, q_len, bs, rope, seed)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(**CASES)
def test_lazyattention_policies_equal_dense_fp32_property(
    gqa_models_fp32, lengths, q_len, bs, heads, rope, seed
):
    """The same identities in fp32 over random lengths, block sizes, GQA and every RoPE variant.

    End-to-end logits (|logit| up to ~6, two layers, lm_head) differ by round-off only: worst
    1.4e-5 over 40 random cases on torch 2.15 (6.9e-6 on 2.14), so the bound is 5e-5, about
    10 fp32 ulps of the largest logit; zeroed offsets move logits by >1e-3
    (``test_lazyattention_offsets_matter``). The per-kernel fp32 ≤1e-5 checks are in
    ``shared-kernels/tests/attention``. Derandomized so CI draws the same cases every run.
    """
    check_policies_equal_dense(gqa_models_fp32[heads], lengths, q_len, bs, rope, seed, atol=5e-5)


def test_lazyattention_policies_equal_dense_fp32(make_llama):
    model = make_llama(dtype=torch.float32)
    docs, q = random_docs(3, [7, 12, 5, 9], 4)
    ref = LazyRAGPipeline(model, policy="lazy", backend="torch").dense_block_diagonal_logits(
        q, docs
    )
    for policy in POLICIES:
        pipe = LazyRAGPipeline(model, block_size=4, n_blocks=64, policy=policy, backend="torch")
        torch.testing.assert_close(
            pipe.generate(q, docs, max_new_tokens=1).query_logits, ref, rtol=0, atol=1e-5
        )


def test_lazyattention_offsets_matter(llama64, monkeypatch):
    """Sanity: the equivalences above are not vacuous; ignoring Δ (or the block-diagonal mask)
    changes the logits by far more than the tolerance."""
    docs, q = random_docs(4, [9, 6, 11], 3)
    pipe = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy="lazy", backend="torch")
    ref = pipe.dense_block_diagonal_logits(q, docs)
    concatenated = [t for d in docs for t in d]
    assert (pipe.dense_block_diagonal_logits(q, [concatenated]) - ref).abs().max() > 1e-2
    real = RequestPlan.table
    # a table whose document offsets are all zero (keys left at their local positions)
    monkeypatch.setattr(
        RequestPlan,
        "table",
        lambda self, *a, **k: (real(self, *a, **k) & ~(0xFFFF << 32)) | (1 << 32),
    )
    wrong = pipe.generate(q, docs, max_new_tokens=1).query_logits
    assert (wrong - ref).abs().max() > 1e-3


def test_lazyattention_reorder_copies_no_kv(llama64):
    docs, q = random_docs(5, [9, 6, 11, 4], 3)
    pipe = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy="lazy", backend="torch")
    pipe.generate(q, docs, max_new_tokens=2)
    ptrs = (pipe.pool.k.data_ptr(), pipe.pool.v.data_ptr())
    before = dict(pipe.pool.bytes_written)
    snapshot = {k: v.clone() for k, v in (("k", pipe.pool.k), ("v", pipe.pool.v))}
    for perm in ([3, 2, 1, 0], [1, 3, 0, 2], [2, 0]):
        out = pipe.generate(q, [docs[i] for i in perm], max_new_tokens=2)
        assert out.doc_hits == len(perm) and out.doc_misses == 0
    assert (pipe.pool.k.data_ptr(), pipe.pool.v.data_ptr()) == ptrs
    assert pipe.pool.bytes_written["document"] == before["document"]
    assert pipe.pool.bytes_written["copy"] == 0
    # the documents' blocks themselves were not touched
    doc_blocks = [b for e in pipe.cache._entries.values() for b in e.blocks]
    assert torch.equal(pipe.pool.k[:, doc_blocks], snapshot["k"][:, doc_blocks])
    # the re-encoding baseline copies every reused document on every request
    re = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy="reencode", backend="torch")
    re.generate(q, docs, max_new_tokens=1)
    c0 = re.pool.bytes_written["copy"]
    re.generate(q, docs[::-1], max_new_tokens=1)
    assert re.pool.bytes_written["copy"] == 2 * c0 > 0
    # prefix caching reuses only an identical prefix
    pre = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy="prefix", backend="torch")
    pre.generate(q, docs, max_new_tokens=1)
    assert pre.generate(q, docs[:2] + docs[:1:-1], max_new_tokens=1).doc_hits == 2
    assert pre.generate(q, docs[::-1], max_new_tokens=1).doc_hits == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_lazyattention_decode_equals_dense_rerun(llama64, policy):
    """Every decode step (paged decode kernel over cached documents + private blocks) equals a
    dense block-diagonal forward over the prompt extended with the tokens so far, ≤1e-10 fp64."""
    docs, q = random_docs(6, [7, 10, 5], 3)
    pipe = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy=policy, backend="torch")
    if policy in ("lazy", "reencode"):
        pipe.add_documents(docs[1:])  # some documents cached beforehand, one prefilled on demand
    out = pipe.generate(q, docs, max_new_tokens=6)
    assert out.step_logits.shape == (6, llama64.config.vocab_size)
    assert len(set(out.tokens)) > 1  # the model does not just repeat one token
    for i in range(6):
        dense = pipe.dense_block_diagonal_logits(q + out.tokens[:i], docs)[-1]
        torch.testing.assert_close(out.step_logits[i], dense, rtol=0, atol=1e-10)
        assert int(dense.argmax()) == out.tokens[i]


def test_lazyattention_pool_budget_and_errors(llama64):
    docs, q = random_docs(7, [9, 6], 3)
    pipe = LazyRAGPipeline(llama64, block_size=4, n_blocks=64, policy="lazy", backend="torch")
    with pytest.raises(ValueError, match="non-empty list"):
        pipe.generate(q, [])
    with pytest.raises(ValueError, match="at least one token"):
        pipe.generate(q, [docs[0], []])
    with pytest.raises(ValueError, match="outside"):
        pipe.generate(q, [[999]])
    with pytest.raises(TypeError, match="no tokenizer"):
        pipe.generate("hello", docs)
    with pytest.raises(ValueError, match="policy"):
        LazyRAGPipeline(llama64, policy="magic")
    with pytest.raises(TypeError, match="unexpected keyword"):
        pipe.generate(q, docs, num_beams=2)
    tiny = LazyRAGPipeline(llama64, block_size=4, n_blocks=3, policy="lazy", backend="torch")
    with pytest.raises(PoolExhaustedError):
        tiny.generate(q, docs)
    cached = sum(len(e.blocks) for e in tiny.cache._entries.values())
    assert tiny.pool.n_free + cached == 3 and all(
        e.refcount == 0 for e in tiny.cache._entries.values()
    )
