"""Model builders and reference helpers shared by the tests (imported by name: conftest puts
this folder on sys.path, the suite runs with --import-mode=importlib)."""

import torch


def fp64_rope(model):
    """Make the model's own rotary embedding form its angles in float64 (HF forms p·θ in fp32,
    an error of ~p·6e-8 rad that would hide everything below 1e-6). Same ``inv_freq`` buffer and
    ``attention_scaling``; only the angle's precision changes."""
    rot = model.model.rotary_emb

    def forward(x, position_ids):
        freqs = position_ids[..., None].double() * rot.inv_freq.double().to(x.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        scale = rot.attention_scaling
        return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)

    rot.forward = forward
    return model


def tiny_llama(
    *,
    dtype=torch.float64,
    seed=0,
    heads=4,
    kv_heads=2,
    layers=2,
    rope_parameters=None,
    vocab=64,
    attn="sdpa",
):
    """A random-init Llama from a config (no hub); weights large enough that positions matter.
    fp64 models run sdpa (fp64 softmax; eager softmaxes in fp32) with fp64 RoPE angles, so HF's
    own forward is a 1e-12 reference."""
    from transformers import LlamaConfig, LlamaForCausalLM

    kw = {}
    if rope_parameters is not None:
        kw["rope_parameters"] = rope_parameters
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=8 * heads,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,
        initializer_range=0.3,
        attn_implementation=attn,
        **kw,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(dtype).eval()
    return fp64_rope(model) if dtype == torch.float64 else model


def tiny_qwen2(*, seed=0, layers=2):
    """A random-init Qwen2 (q/k/v biases made non-zero so they are exercised), fp64, sdpa."""
    import transformers

    cfg = transformers.Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        initializer_range=0.3, sliding_window=None, attn_implementation="sdpa",
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.Qwen2ForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.bias.normal_(0, 0.3)
            layer.self_attn.k_proj.bias.normal_(0, 0.3)
    return fp64_rope(model)


def random_docs(seed, lengths, q_len, vocab=64):
    g = torch.Generator().manual_seed(seed)
    docs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]
    return docs, torch.randint(0, vocab, (q_len,), generator=g).tolist()


ROPE_TYPES = {
    "default": None,
    "llama3": {
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
    },
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    "yarn": {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 32,
    },
}  # fmt: skip
