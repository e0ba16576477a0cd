"""Shared fixtures: a tiny random-init Llama reward model and a char tokenizer built offline."""

from __future__ import annotations

import math

import pytest
import torch

CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'-+=()"


def make_char_tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))  # no merges: chars
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def make_tiny_llama(vocab_size: int, seed: int = 0, hidden: int = 32, layers: int = 2):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        num_labels=1,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    return LlamaForSequenceClassification(cfg).float()


@pytest.fixture()
def char_tokenizer():
    return make_char_tokenizer()


@pytest.fixture()
def tiny_llama(char_tokenizer):
    return make_tiny_llama(len(char_tokenizer))


def fp_tolerance(ref: torch.Tensor, n: int) -> dict[str, float]:
    """assert_close tolerances for two different kernels computing `ref`: rtol = 8·eps,
    atol = 8·eps·max|ref|·sqrt(n), eps of ref's dtype, n the reduction length (another CPU's
    SIMD width changes the summation order; the rounding error grows like sqrt(n))."""
    eps = torch.finfo(ref.dtype).eps
    return {"rtol": 8 * eps, "atol": 8 * eps * float(ref.abs().max()) * math.sqrt(n)}


@pytest.fixture()
def fp_tol():
    return fp_tolerance
