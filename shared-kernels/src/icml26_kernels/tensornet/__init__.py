"""icml26_kernels.tensornet: graph-shaped tensor networks and their batched contraction.

One core per graph node, one bond per edge, a physical index per node:

- :class:`GraphTopology` -- the wiring (trees, chains, graphs with loops; spanning trees).
- :func:`contract` -- batched contraction over many physical-vector assignments at once, with a
  cached opt_einsum path, batch chunking and bond slicing; numpy or torch (autograd).
- :func:`probe` -- the same with vectors substituted at chosen nodes (derivatives of a
  multilinear network); :func:`environment` -- one core left out (least-squares design rows).
- :func:`contract_reference` / :func:`dense_tensor_reference` -- the dense numpy reference.

Needs the ``[tensornet]`` extra (opt_einsum); torch only when torch tensors are passed.
"""

from .contract import (
    ContractionPlan,
    contract,
    contract_reference,
    contraction_plan,
    dense_tensor_reference,
    environment,
    init_cores,
    multilinear_vectors,
    probe,
)
from .topology import GraphTopology, normalize_edges

__all__ = [
    "ContractionPlan",
    "GraphTopology",
    "contract",
    "contract_reference",
    "contraction_plan",
    "dense_tensor_reference",
    "environment",
    "init_cores",
    "multilinear_vectors",
    "normalize_edges",
    "probe",
]
