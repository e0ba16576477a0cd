import pytest
import torch

# Tests run on a shared 2-core machine: one intra-op thread avoids oversubscription stalls.
torch.set_num_threads(1)


@pytest.fixture
def ring_graph():
    """A benzene-like ring with a two-atom tail: n = 8, a loop (not a tree)."""
    return 8, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (2, 6), (6, 7)]
