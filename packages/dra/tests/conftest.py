"""Shared fixtures: a char tokenizer built offline and a tiny random-init GPT-2 (no hub)."""

from __future__ import annotations

import numpy as np
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


def make_tiny_gpt2(vocab_size: int, seed: int = 0, hidden: int = 32, layers: int = 2):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=vocab_size,
        n_positions=128,
        n_embd=hidden,
        n_layer=layers,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    return GPT2LMHeadModel(cfg).float().eval()


@pytest.fixture(scope="session")
def char_tokenizer():
    return make_char_tokenizer()


@pytest.fixture(scope="session")
def tiny_gpt2(char_tokenizer):
    return make_tiny_gpt2(len(char_tokenizer))


def planted_toy(seed=0, n=4000, d=256, frac=0.02, m=10, signal=2.0, n_style=32, n_sig=8):
    """Large shared mean, high-variance style dims, a weak unsafe shift in n_sig dims."""
    rng = np.random.default_rng(seed)
    n_pos = int(n * frac)
    mu = rng.normal(0.0, 5.0, d)  # the component every sample shares (neutral tokens)
    scale = np.ones(d)
    style = rng.choice(d, n_style, replace=False)
    scale[style] = 8.0  # high-variance style directions
    sig = rng.choice(np.setdiff1d(np.arange(d), style), n_sig, replace=False)

    def draw(k, unsafe):
        x = mu + rng.normal(0.0, 1.0, (k, d)) * scale
        if unsafe:
            x[:, sig] += signal
        return x

    labels = np.r_[np.ones(n_pos), np.zeros(n - n_pos)]
    train = np.vstack([draw(n_pos, True), draw(n - n_pos, False)])
    return train, draw(m, True), labels, np.sort(sig)


@pytest.fixture(scope="session")
def toy():
    """The planted-signal toy generator (conftest is not importable under importlib mode)."""
    return planted_toy
