"""icml26-kernels: kernels shared by the icml26 packages.

Subpackages import their heavy dependencies themselves, so ``import icml26_kernels`` needs
numpy only:

- :mod:`icml26_kernels.backend` -- which implementation a call runs (Triton on CUDA, Triton
  under ``TRITON_INTERPRET=1`` on the CPU, or the torch reference), decided in one place.
- :mod:`icml26_kernels.attention` -- RoPE and paged attention with deferred positional encoding.
- :mod:`icml26_kernels.moe` -- top-k routing, token permutation, grouped expert MLP, balancing.
- :mod:`icml26_kernels.tensornet` -- graph-shaped tensor networks and their contraction.
"""

from .backend import Backend, BackendChoice, available_backends, select_backend

__version__ = "0.1.0"

__all__ = ["Backend", "BackendChoice", "__version__", "available_backends", "select_backend"]
