"""Shared fixtures; Triton kernels run on the CPU interpreter when there is no GPU.

TRITON_INTERPRET must be set before icml26_kernels.attention is imported (Triton reads it when
``@triton.jit`` decorates). Tests pass ``backend="torch"`` explicitly unless they test a kernel.
"""

import os
import sys
from pathlib import Path

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


sys.path.insert(0, str(Path(__file__).parent))

from lazyattention_testlib import ROPE_TYPES, tiny_llama  # noqa: E402


@pytest.fixture(scope="session")
def llama64():
    return tiny_llama()


@pytest.fixture(scope="session")
def make_llama():
    return tiny_llama


_MODELS: dict = {}


@pytest.fixture(scope="session")
def model_zoo():
    """(heads, kv_heads, rope type) -> fp64 tiny Llama, built once per session on demand."""

    def get(heads, kv_heads, rope="default", dtype=torch.float64):
        key = (heads, kv_heads, rope, dtype)
        if key not in _MODELS:
            _MODELS[key] = tiny_llama(
                heads=heads, kv_heads=kv_heads, rope_parameters=ROPE_TYPES[rope], dtype=dtype
            )
        return _MODELS[key]

    return get
