"""Shared fixtures: a tiny random-init Llama causal LM and a char tokenizer built offline."""

from __future__ import annotations

import pytest

CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?'-+=()"


def make_char_tokenizer():
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))  # no merges: chars
    core.decoder = decoders.Fuse()  # decode "91", not "9 1"
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def make_tiny_causal_lm(vocab_size: int, seed: int = 0, hidden: int = 32, layers: int = 2):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    return LlamaForCausalLM(cfg).float()


@pytest.fixture()
def char_tokenizer():
    return make_char_tokenizer()


@pytest.fixture()
def tiny_lm(char_tokenizer):
    return make_tiny_causal_lm(len(char_tokenizer))
