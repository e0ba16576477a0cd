"""transformers integration: greedy decoding equals HF generate under the same block-diagonal
mask, RoPE read from configs equals HF's rotary embedding, Triton kernels in the pipeline."""

import inspect

import pytest
import torch
from icml26_kernels.attention import apply_rope_ref
from icml26_lazyattention import LazyRAGPipeline, block_diagonal_mask, rope_config_from_hf


def random_docs(seed, lengths, q_len, vocab=64):
    g = torch.Generator().manual_seed(seed)
    docs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]
    return docs, torch.randint(0, vocab, (q_len,), generator=g).tolist()


def hf_generate_block_diagonal(model, docs, q, max_new_tokens):
    """HF's own forward + generate: prefill [docs][query[:-1]] with an additive 4-D block-diagonal
    mask at contiguous positions into a DynamicCache, then ``model.generate`` continues (the last
    query token and every generated token see everything before them, i.e. plain causal)."""
    from transformers import DynamicCache

    full = [t for d in docs for t in d] + q
    t = len(full)
    ids = torch.tensor([full])
    allowed = block_diagonal_mask([len(d) for d in docs], len(q))[: t - 1, : t - 1]
    mask = torch.zeros(1, 1, t - 1, t - 1, dtype=model.dtype).masked_fill(
        ~allowed, torch.finfo(model.dtype).min
    )
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:  # transformers 4.x
        cache = DynamicCache()
    name = (
        "cache"
        if "cache" in inspect.signature(model.model.forward).parameters
        else "past_key_values"
    )
    with torch.no_grad():
        model(
            input_ids=ids[:, :-1],
            attention_mask=mask,
            position_ids=torch.arange(t - 1)[None],
            use_cache=True,
            **{name: cache},
        )
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones(1, t, dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=0,
            **{name: cache},
        )
        full_mask = block_diagonal_mask([len(d) for d in docs], len(q))
        add = torch.zeros(1, 1, t, t, dtype=model.dtype).masked_fill(
            ~full_mask, torch.finfo(model.dtype).min
        )
        logits = model(
            input_ids=ids, attention_mask=add, position_ids=torch.arange(t)[None]
        ).logits[0, -len(q) :]
    return out[0, t:].tolist(), logits


@pytest.mark.parametrize("policy", ["lazy", "reencode"])
@pytest.mark.parametrize(
    "rope",
    [
        None,
        {
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    ],
)
def test_lazyattention_greedy_equals_hf_generate(make_llama, policy, rope):
    model = make_llama(heads=4, kv_heads=2, rope_parameters=rope)
    docs, q = random_docs(11, [9, 14, 6, 11], 4)
    want, hf_logits = hf_generate_block_diagonal(model, docs, q, 10)
    pipe = LazyRAGPipeline(model, block_size=4, n_blocks=64, policy=policy, backend="torch")
    pipe.add_documents(docs[::-1])  # cached in another order first: position-independent
    out = pipe.generate(q, docs, max_new_tokens=10)
    assert out.doc_hits == len(docs)
    assert out.tokens == want
    # HF forms RoPE angles in fp32; ours in fp64, hence 1e-4 rather than 1e-10 here
    torch.testing.assert_close(out.query_logits, hf_logits, rtol=0, atol=1e-4)


def test_lazyattention_rope_config_matches_hf_rotary(make_llama):
    for rope in (
        None,
        {
            "rope_type": "llama3",
            "rope_theta": 500.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    ):
        model = make_llama(rope_parameters=rope)
        cfg = rope_config_from_hf(model.config)
        pos = torch.arange(0, 300, 7)[None]
        x = torch.randn(1, pos.shape[1], 1, cfg.head_dim, dtype=torch.float64)
        cos, sin = model.model.rotary_emb(x, pos)  # (1, T, D), neox layout
        half = cfg.head_dim // 2
        hf = x * cos[:, :, None] + torch.cat([-x[..., half:], x[..., :half]], -1) * sin[:, :, None]
        torch.testing.assert_close(apply_rope_ref(x, pos, cfg), hf, rtol=0, atol=1e-4)
    assert rope_config_from_hf(model.config).llama3 is not None


def test_lazyattention_hf_unsupported_inputs(make_llama):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32))
    with pytest.raises(ValueError, match="model_type"):
        LazyRAGPipeline(gpt2)
    with pytest.raises(TypeError, match="PreTrainedModel"):
        LazyRAGPipeline(torch.nn.Linear(2, 2))
    model = make_llama(
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    )
    with pytest.raises(ValueError, match="rope_type"):
        LazyRAGPipeline(model)


def test_lazyattention_pipeline_triton_kernels_match_torch(make_llama):
    """The whole pipeline through the Triton kernels (CPU interpreter here) equals the torch path."""
    model = make_llama(heads=2, kv_heads=1, layers=1, dtype=torch.float32)
    docs, q = random_docs(12, [5, 7], 3)
    want = LazyRAGPipeline(model, block_size=4, n_blocks=32, backend="torch").generate(
        q, docs, max_new_tokens=3
    )
    pipe = LazyRAGPipeline(model, block_size=4, n_blocks=32, backend="triton")
    got = pipe.generate(q, docs[::-1], max_new_tokens=1)  # warm the cache in another order
    got = pipe.generate(q, docs, max_new_tokens=3)
    assert got.doc_hits == 2 and got.tokens == want.tokens
    torch.testing.assert_close(got.query_logits, want.query_logits, rtol=0, atol=1e-5)


def test_lazyattention_pipeline_non_pow2_block_rejected_by_kernels(make_llama):
    model = make_llama(heads=2, kv_heads=1, layers=1, dtype=torch.float32)
    docs, q = random_docs(13, [5, 7], 3)
    pipe = LazyRAGPipeline(model, block_size=3, n_blocks=32, backend="triton")
    with pytest.raises(ValueError, match="power-of-two block_size"):
        pipe.generate(q, docs, max_new_tokens=1)


class ByteTokenizer:
    """Bytes as token ids (vocab 256 > the model's 64 for non-ASCII, so keep strings ASCII < 64)."""

    def encode(self, text, add_special_tokens=False):
        return [b % 64 for b in text.encode()]

    def decode(self, ids):
        return " ".join(map(str, ids))


def test_lazyattention_string_inputs_and_empty_after_tokenization(llama64):
    pipe = LazyRAGPipeline(llama64, ByteTokenizer(), block_size=4, n_blocks=32, backend="torch")
    out = pipe.generate("what?", ["first doc", "second"], max_new_tokens=2)
    ids = LazyRAGPipeline(llama64, block_size=4, n_blocks=32, backend="torch").generate(
        ByteTokenizer().encode("what?"),
        [ByteTokenizer().encode("first doc"), ByteTokenizer().encode("second")],
        max_new_tokens=2,
    )
    assert out.tokens == ids.tokens and out.text == ByteTokenizer().decode(out.tokens)
    # a string that tokenizes to nothing is refused up front, not deep inside the forward
    with pytest.raises(ValueError, match="query must contain at least one token"):
        pipe.generate("", ["first doc"])
    with pytest.raises(ValueError, match=r"documents\[1\] must contain at least one token"):
        pipe.generate("what?", ["first doc", ""])


def test_lazyattention_sampling_is_seeded(llama64):
    docs, q = random_docs(14, [5, 7], 3)
    pipe = LazyRAGPipeline(llama64, block_size=4, n_blocks=32, backend="torch")
    a = pipe.generate(
        q,
        docs,
        max_new_tokens=6,
        do_sample=True,
        top_k=5,
        generator=torch.Generator().manual_seed(0),
    )
    b = pipe.generate(
        q,
        docs,
        max_new_tokens=6,
        do_sample=True,
        top_k=5,
        generator=torch.Generator().manual_seed(0),
    )
    assert a.tokens == b.tokens
    top5 = set(torch.topk(a.query_logits[-1], 5).indices.tolist())
    assert a.tokens[0] in top5
    with pytest.raises(ValueError, match="temperature"):
        pipe.generate(q, docs, do_sample=True, temperature=0.0)


@pytest.mark.parametrize("family", ["mistral", "qwen2"])
def test_lazyattention_other_llama_family_models(family):
    """Mistral (no sliding window) and Qwen2 (q/k/v biases) through the same pipeline equal HF's
    forward under the block-diagonal mask."""
    import transformers

    cls_cfg, cls_model = {
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    }[family]
    cfg = cls_cfg(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.3,
        sliding_window=None,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = cls_model(cfg).double().eval()
    if family == "qwen2":  # make the q/k/v biases non-zero so they are exercised
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.q_proj.bias.normal_(0, 0.3)
                layer.self_attn.k_proj.bias.normal_(0, 0.3)
    docs, q = random_docs(15, [6, 9, 4], 3)
    want, hf_logits = hf_generate_block_diagonal(model, docs, q, 5)
    pipe = LazyRAGPipeline(model, block_size=4, n_blocks=64, backend="torch")
    out = pipe.generate(q, docs, max_new_tokens=5)
    torch.testing.assert_close(out.query_logits, hf_logits, rtol=0, atol=1e-4)
    assert out.tokens == want


def test_lazyattention_sliding_window_rejected():
    import transformers

    cfg = transformers.MistralConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, sliding_window=64,
    )  # fmt: skip
    with pytest.raises(ValueError, match="sliding-window"):
        LazyRAGPipeline(transformers.MistralForCausalLM(cfg))
