"""Run the icml26_kernels Triton kernels on the CPU interpreter when there is no GPU.

``TRITON_INTERPRET`` is read when ``@triton.jit`` decorates a kernel, so it is set here,
before the tests import :mod:`icml26_latentmoe` (which imports the kernels). Tests that are not
about the kernels pass ``backend="torch"`` explicitly.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
