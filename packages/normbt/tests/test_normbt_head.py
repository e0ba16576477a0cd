"""The head's input is captured for decoder and encoder reward models (pre-hook, no hidden states)."""

from __future__ import annotations

import pytest
import torch
from icml26_normbt import capture_head_input, find_reward_head, pair_statistics, pooled_head_input


def _bert(vocab: int, seed: int = 0):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=1,
        pad_token_id=0,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForSequenceClassification(cfg).eval()


def _roberta(vocab: int, seed: int = 0):
    from transformers import RobertaConfig, RobertaForSequenceClassification

    torch.manual_seed(seed)
    cfg = RobertaConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=70,
        num_labels=1,
        pad_token_id=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return RobertaForSequenceClassification(cfg).eval()


def _ids(pad: int, left: bool = False, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 9, 3, 7]
    ids = torch.full((4, 9), pad)
    for i, n in enumerate(lengths):
        s = torch.randint(3, 40, (n,), generator=g)
        if left:
            ids[i, 9 - n :] = s
        else:
            ids[i, :n] = s
    return ids


def test_encoder_head_reads_the_pooler_output_not_the_last_token():
    model = _bert(50)
    ids = _ids(0)
    mask = (ids != 0).long()
    stats = pair_statistics(model, [{"input_ids": ids, "attention_mask": mask}])
    with torch.no_grad():
        out = model.bert(input_ids=ids, attention_mask=mask)
    pooler = out.pooler_output  # tanh(W h_[CLS]): what `classifier` reads
    torch.testing.assert_close(stats["h_chosen"], pooler[:2])
    torch.testing.assert_close(stats["h_rejected"], pooler[2:])
    torch.testing.assert_close(model.classifier(pooler)[:2, 0], stats["r_chosen"])
    # the last token's hidden state (what a decoder-style pooling would take) is another vector
    last = out.last_hidden_state[torch.arange(4), mask.sum(-1) - 1]
    assert not torch.allclose(last[:2], stats["h_chosen"], atol=1e-3)


def test_roberta_style_head_uses_out_proj_input():
    model = _roberta(50)
    assert find_reward_head(model) is model.classifier.out_proj
    ids = _ids(1)
    ids[ids == 0] = 5
    stats = pair_statistics(model, [{"input_ids": ids, "attention_mask": (ids != 1).long()}])
    torch.testing.assert_close(
        model.classifier.out_proj(stats["h_chosen"])[:, 0], stats["r_chosen"]
    )


@pytest.mark.parametrize("left", [False, True])
def test_decoder_capture_pools_like_hf_for_either_padding(tiny_llama, left):
    """score(pooled) must give back HF's pooled logits, with left and with right padding."""
    model = tiny_llama.eval()
    ids = _ids(0, left=left, seed=3)
    head = find_reward_head(model)
    assert head is model.score
    with torch.no_grad(), capture_head_input(head) as captured:
        logits = model(input_ids=ids, attention_mask=(ids != 0).long()).logits
    pooled = pooled_head_input(captured, ids, 0)  # (4, H)
    torch.testing.assert_close(model.score(pooled), logits)
    lengths = (ids != 0).sum(-1)
    last = torch.full((4,), 8) if left else lengths - 1
    torch.testing.assert_close(pooled, captured[0][torch.arange(4), last])


def test_missing_or_repeated_head_raises():
    with pytest.raises(ValueError, match="`name`"):
        find_reward_head(torch.nn.Sequential(torch.nn.Linear(3, 1)))
    with pytest.raises(ValueError, match="`name`"):
        find_reward_head(torch.nn.Sequential(torch.nn.Linear(3, 1)), "classifier")
    with pytest.raises(RuntimeError, match="ran 2 times"):
        pooled_head_input([torch.zeros(2, 3)] * 2, torch.zeros(2, 4, dtype=torch.long), 0)
    with pytest.raises(RuntimeError, match="shape"):
        pooled_head_input([torch.zeros(5, 3)], torch.zeros(2, 4, dtype=torch.long), 0)
