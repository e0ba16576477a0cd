import numpy as np
import pytest
import torch

# Tests run on a shared 2-core machine: one intra-op thread avoids oversubscription stalls.
torch.set_num_threads(1)


@pytest.fixture
def ring_graph():
    """A benzene-like ring with a two-atom tail: n = 8, a loop (not a tree)."""
    return 8, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (2, 6), (6, 7)]


def both_directions(edges):
    e = np.array(edges).T
    return torch.as_tensor(np.concatenate([e, e[::-1]], axis=1))  # (2, 2E)


class SumMP(torch.nn.Module):
    """A 2-layer sum-aggregation message-passing net with sum readout (plain torch), so the
    masked game has real interactions along edges: ``model(x, edge_index, batch) -> (B,)``."""

    def __init__(self, f: int, hidden: int = 8, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = torch.nn.Parameter(torch.randn(f, hidden, generator=g, dtype=torch.float64))
        self.w2 = torch.nn.Parameter(torch.randn(hidden, hidden, generator=g, dtype=torch.float64))
        self.out = torch.nn.Parameter(torch.randn(hidden, generator=g, dtype=torch.float64) / 4)

    def forward(self, x, edge_index, batch=None):
        src, dst = edge_index
        h = x
        for w in (self.w1, self.w2):
            agg = h + torch.zeros_like(h).index_add_(0, dst, h[src])
            h = torch.tanh(agg @ w)
        if batch is None:
            batch = torch.zeros(h.shape[0], dtype=torch.long)
        b = int(batch.max()) + 1
        return torch.zeros(b, h.shape[1], dtype=h.dtype).index_add_(0, batch, h) @ self.out


@pytest.fixture
def mp_model():
    """Factory for :class:`SumMP`."""
    return SumMP


@pytest.fixture
def undirected():
    """``edges -> (2, 2E)`` edge_index with both directions."""
    return both_directions
