"""Shared fixtures; Triton kernels run on the CPU interpreter when there is no GPU.

TRITON_INTERPRET must be set before icml26_kernels.attention is imported (Triton reads it when
``@triton.jit`` decorates). Tests pass ``backend="torch"`` explicitly unless they test a kernel.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
torch.set_num_threads(1)  # tiny tensors: threading overhead dominates on a shared 2-core CPU


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def tiny_llama(
    *, dtype=torch.float64, seed=0, heads=4, kv_heads=2, layers=2, rope_parameters=None, vocab=64
):
    """A random-init Llama from a config (no hub); weights large enough that positions matter."""
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
        attn_implementation="eager",
        **kw,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(dtype).eval()


@pytest.fixture(scope="session")
def llama64():
    return tiny_llama()


@pytest.fixture(scope="session")
def make_llama():
    return tiny_llama


@pytest.fixture(scope="session")
def gqa_models():
    return {(h, kv): tiny_llama(heads=h, kv_heads=kv) for h, kv in [(4, 2), (4, 1), (2, 2)]}


@pytest.fixture(scope="session")
def gqa_models_fp32():
    return {
        (h, kv): tiny_llama(dtype=torch.float32, heads=h, kv_heads=kv)
        for h, kv in [(4, 2), (4, 1), (2, 2)]
    }
