"""GraphTopology: edge normalization, structure checks and clear errors."""

import numpy as np
import pytest
from icml26_kernels.tensornet import GraphTopology, normalize_edges


def test_tensornet_edge_index_both_directions_is_one_bond():
    edge_index = np.array([[0, 1, 1, 2, 2, 2], [1, 0, 2, 1, 2, 0]])  # with a self-loop (2, 2)
    assert normalize_edges(3, edge_index) == ((0, 1), (0, 2), (1, 2))
    assert normalize_edges(3, [(1, 0), (2, 1)]) == ((0, 1), (1, 2))
    # (2, 2) is ambiguous: pairs by default, edge_index=True reads columns
    assert normalize_edges(4, np.array([[0, 1], [2, 3]])) == ((0, 1), (2, 3))
    assert normalize_edges(4, np.array([[0, 1], [2, 3]]), edge_index=True) == ((0, 2), (1, 3))


def test_tensornet_core_shapes_follow_incident_edges():
    topo = GraphTopology.from_edges(4, [(0, 1), (0, 2), (0, 3)], [2, 3, 4])
    assert topo.core_shape(0) == (2, 2, 3, 4)
    assert topo.core_shapes[1:] == ((2, 2), (2, 3), (2, 4))
    assert topo.neighbors[0] == (1, 2, 3)
    assert topo.n_params == 2 * 24 + 2 * (2 + 3 + 4)
    assert topo.is_tree and not topo.is_chain


def test_tensornet_structure_predicates():
    ring = GraphTopology.from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0)])
    assert ring.is_connected and not ring.is_tree
    chain = GraphTopology.chain(5, 2, order=[4, 2, 0, 1, 3])
    assert chain.is_chain and chain.edges == ((0, 1), (0, 2), (1, 3), (2, 4))
    tree = GraphTopology.spanning_tree(4, ring.edges, 3)
    assert tree.is_tree and set(tree.edges) <= set(ring.edges) and set(tree.bond_dims) == {3}


def test_tensornet_bad_input_messages():
    with pytest.raises(ValueError, match="require='tree' needs a connected graph"):
        GraphTopology.from_edges(4, [(0, 1), (2, 3)], require="tree")
    with pytest.raises(ValueError, match="require='tree' needs n_nodes - 1"):
        GraphTopology.from_edges(3, [(0, 1), (1, 2), (2, 0)], require="tree")
    with pytest.raises(ValueError, match="require='chain'"):
        GraphTopology.from_edges(4, [(0, 1), (0, 2), (0, 3)], require="chain")
    with pytest.raises(ValueError, match="spanning tree needs a connected graph"):
        GraphTopology.spanning_tree(4, [(0, 1), (2, 3)])
    with pytest.raises(ValueError, match="bond_dim must be >= 1"):
        GraphTopology.from_edges(3, [(0, 1)], 0)
    with pytest.raises(ValueError, match="one int per edge"):
        GraphTopology.from_edges(3, [(0, 1), (1, 2)], [2])
    with pytest.raises(ValueError, match="outside"):
        GraphTopology.from_edges(3, [(0, 5)])
    with pytest.raises(ValueError, match="n_nodes must be a positive integer"):
        GraphTopology.from_edges(0, [])
    with pytest.raises(ValueError, match="require must be one of"):
        GraphTopology.from_edges(2, [(0, 1)], require="forest")
    with pytest.raises(ValueError, match="permutation"):
        GraphTopology.chain(3, order=[0, 0, 1])
