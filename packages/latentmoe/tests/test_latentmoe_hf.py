import icml26_latentmoe as L
import pytest
import torch

transformers = pytest.importorskip("transformers")


def _tiny_llama():
    cfg = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


@pytest.mark.parametrize("kind", ["latent", "moe"])
def test_replace_mlp_swaps_every_block_and_trains(kind):
    model = _tiny_llama()
    ids = torch.randint(0, 64, (2, 12))
    before = model(ids).logits.detach()
    cfg = (
        dict(num_heads=4, head_dim=8, num_experts=4, top_k=2, expert_size=16, backend="torch")
        if kind == "latent"
        else dict(num_experts=4, top_k=2, expert_size=16, backend="torch")
    )
    names = L.replace_mlp(model, kind, **cfg)
    assert names == ["model.layers.0.mlp", "model.layers.1.mlp"]
    cls = L.MultiHeadLatentMoE if kind == "latent" else L.MoE
    assert all(isinstance(layer.mlp, cls) for layer in model.model.layers)
    assert model.model.layers[0].mlp.d_model == 32
    out = model(ids, labels=ids)
    assert not torch.allclose(out.logits, before)
    out.loss.backward()
    assert model.model.layers[0].mlp.w1.grad.abs().sum() > 0
    assert L.AuxFreeBalancer(1e-3).step(model) >= 1.0


def test_replace_mlp_bad_input():
    with pytest.raises(ValueError, match="kind must be"):
        L.replace_mlp(_tiny_llama(), "dense")
    with pytest.raises(ValueError, match="no Llama-style MLP"):
        L.replace_mlp(torch.nn.Linear(3, 3), "moe", num_experts=2, top_k=1, expert_size=4)
