import numpy as np
import pytest
import torch
from icml26_dra import (
    RandomProjector,
    causal_lm_response_loss,
    extract_hidden_states,
    per_sample_grads,
    select_parameters,
    tokenize_pairs,
)

PROMPTS = ["Add 2 and 3.", "Name a fruit.", "Spell cat backwards please."]
RESPONSES = ["The answer is 5.", "Apple.", "tac"]


def test_tokenize_pairs_masks(char_tokenizer):
    b = tokenize_pairs(char_tokenizer, PROMPTS, RESPONSES)
    for i, (p, r) in enumerate(zip(PROMPTS, RESPONSES)):
        n = len(p) + len(r) + 1  # chars + eos
        assert int(b["attention_mask"][i].sum()) == n
        assert int(b["response_mask"][i].sum()) == len(r) + 1
        assert int(b["response_mask"][i, : len(p)].sum()) == 0
        assert int(b["input_ids"][i, n - 1]) == char_tokenizer.eos_token_id


def test_hidden_states_are_padding_invariant_and_pool_response_tokens(char_tokenizer, tiny_gpt2):
    b = tokenize_pairs(char_tokenizer, PROMPTS, RESPONSES)
    h = extract_hidden_states(tiny_gpt2, b, batch_size=3)  # (3, 32), padded batch
    for i in range(3):
        n = int(b["attention_mask"][i].sum())
        ids = b["input_ids"][i : i + 1, :n]
        with torch.no_grad():
            hs = tiny_gpt2(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]  # (n, D)
        r = b["response_mask"][i, :n].bool()
        np.testing.assert_allclose(h[i], hs[r].mean(0).numpy(), rtol=1e-4, atol=1e-5)
        last = extract_hidden_states(tiny_gpt2, b, pool="last", response_only=False, layer=1)
        with torch.no_grad():
            h1 = tiny_gpt2(input_ids=ids, output_hidden_states=True).hidden_states[1][0, n - 1]
        np.testing.assert_allclose(last[i], h1.numpy(), rtol=1e-4, atol=1e-5)


def test_per_sample_grads_match_torch_func_vmap_grad(char_tokenizer, tiny_gpt2):
    from torch.func import functional_call, grad, vmap

    texts = ["abc def", "ghi jkl", "mno pqr", "stu vwx"]  # equal lengths: no padding for vmap
    b = tokenize_pairs(char_tokenizer, None, texts)
    ours = per_sample_grads(tiny_gpt2, b, chunk_size=3)  # (4, P)
    params = {n: p.detach() for n, p in tiny_gpt2.named_parameters()}

    def loss(p, ids):  # plain LM loss on one unpadded sequence, written independently
        emb = torch.nn.functional.embedding(ids[None], p["transformer.wte.weight"])  # (1, T, D)
        logits = functional_call(tiny_gpt2, p, (), {"inputs_embeds": emb}).logits[0]  # (T, V)
        return torch.nn.functional.cross_entropy(logits[:-1], ids[1:])

    ref = vmap(grad(loss), in_dims=(None, 0))(params, b["input_ids"])
    ref = torch.cat([ref[n].reshape(4, -1) for n, _ in tiny_gpt2.named_parameters()], dim=1)
    np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-4, atol=1e-6)


def test_response_loss_averages_response_tokens_only(char_tokenizer, tiny_gpt2):
    b = tokenize_pairs(char_tokenizer, ["xyz", "qqqqqq"], ["same answer", "same answer"])
    full = {k: v[:1] for k, v in b.items()}
    no_mask = {"input_ids": full["input_ids"], "attention_mask": full["attention_mask"]}
    l_resp = causal_lm_response_loss(tiny_gpt2, full)
    l_all = causal_lm_response_loss(tiny_gpt2, no_mask)
    n = int(full["attention_mask"].sum())
    with torch.no_grad():
        logits = tiny_gpt2(input_ids=full["input_ids"][:, :n]).logits[0]
    nll = torch.nn.functional.cross_entropy(
        logits[:-1], full["input_ids"][0, 1:n], reduction="none"
    )
    r = full["response_mask"][0, 1:n].bool()
    assert float(l_resp) == pytest.approx(float(nll[r].mean()), rel=1e-5)
    assert float(l_all) == pytest.approx(float(nll.mean()), rel=1e-5)


@pytest.mark.parametrize("kind", ["rademacher", "sjlt"])
def test_projection_preserves_inner_products_within_jl_bound(kind):
    torch.manual_seed(0)
    p, k, n = 3000, 1024, 40
    x = torch.randn(n, p) + 0.5  # a shared positive mean: hash collisions without signs bias
    proj = RandomProjector(p, k, kind=kind, seed=3, block=700)  # several blocks
    y = proj(x)
    g_true, g_proj = x @ x.T, y @ y.T
    norms = torch.sqrt(torch.diag(g_true))
    rel = (g_proj - g_true) / torch.outer(norms, norms)  # error relative to ||x|| ||y||
    eps = 5.0 / np.sqrt(k)  # JL: |<Px,Py> - <x,y>| <= eps ||x|| ||y|| w.h.p. (std ~ 1/sqrt(k))
    assert float(rel.abs().max()) < eps
    assert float(rel.abs().mean()) < 1.5 / np.sqrt(k)  # typical error ~ 1/sqrt(k), not biased
    torch.testing.assert_close(proj(x), y)  # same seed -> same matrix
    assert not torch.allclose(RandomProjector(p, k, kind=kind, seed=4, block=700)(x), y)


def test_projected_grads_are_the_projection_of_full_grads_and_stream_to_disk(
    char_tokenizer, tiny_gpt2, tmp_path
):
    b = tokenize_pairs(char_tokenizer, PROMPTS, RESPONSES)
    names = [n for n, _ in tiny_gpt2.named_parameters() if n.startswith("transformer.h.1.")]
    full = per_sample_grads(tiny_gpt2, b, params=names)
    p = full.shape[1]
    assert p == sum(q.numel() for n, q in tiny_gpt2.named_parameters() if n in names)
    proj = RandomProjector(p, 64, kind="sjlt", seed=0)
    path = tmp_path / "g.npy"
    got = per_sample_grads(tiny_gpt2, b, params=names, projector=proj, chunk_size=2, out=path)
    np.testing.assert_allclose(got, proj(torch.from_numpy(full)).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.load(path, mmap_mode="r"), got)
    pre = torch.rand(p) + 0.5  # e.g. LESS's Adam preconditioner, applied before projecting
    got_pre = per_sample_grads(tiny_gpt2, b, params=names, projector=proj, precondition=pre)
    want = proj(torch.from_numpy(full) * pre).numpy()
    np.testing.assert_allclose(got_pre, want, rtol=1e-5, atol=1e-7)


def test_select_parameters_lora_and_errors():
    class WithLora(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.base = torch.nn.Linear(3, 3)
            self.lora_A = torch.nn.Linear(3, 1, bias=False)
            self.lora_B = torch.nn.Linear(1, 3, bias=False)

    m = WithLora()
    assert [n for n, _ in select_parameters(m, "lora")] == ["lora_A.weight", "lora_B.weight"]
    with pytest.raises(ValueError, match="not among"):
        select_parameters(m, ["nope"])
    with pytest.raises(ValueError, match="selects no trainable"):
        select_parameters(torch.nn.Linear(2, 2), "lora")


def test_representation_bad_input(char_tokenizer, tiny_gpt2):
    b = tokenize_pairs(char_tokenizer, PROMPTS, RESPONSES)
    with pytest.raises(ValueError, match="projector.dim_in"):
        per_sample_grads(tiny_gpt2, b, projector=RandomProjector(10, 4))
    with pytest.raises(ValueError, match="pool must be"):
        extract_hidden_states(tiny_gpt2, b, pool="max")
    with pytest.raises(ValueError, match="x must be"):
        RandomProjector(10, 4)(torch.zeros(2, 9))
