"""Test-session setup: faster XLA compilation (the suite is compile-bound on 2 CPU cores).

Must run before jax is imported; a user-set XLA_FLAGS is respected.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
