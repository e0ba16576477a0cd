"""Run the attention Triton kernels through Triton's CPU interpreter when there is no GPU.

Triton decides at decoration time whether ``@triton.jit`` builds an interpreted function, so the
variable must be set before :mod:`icml26_kernels.attention` is imported (conftest runs first).
"""

import os

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
