"""Run the MoE Triton kernels on Triton's CPU interpreter when there is no GPU.

``TRITON_INTERPRET`` is read when ``@triton.jit`` decorates a kernel, so it is set here, before
any test module imports :mod:`icml26_kernels.moe`.
"""

import os

import pytest

try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # the torch extra is missing: the tests below skip themselves
    _HAS_CUDA = False

if not _HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def device() -> str:
    return "cuda" if _HAS_CUDA else "cpu"
