"""Axioms and exactness of the read-out on random surrogates vs shapiq.ExactComputer."""

import itertools

import numpy as np
import pytest
import shapiq
import torch
from icml26_kernels.tensornet import dense_tensor_reference
from icml26_tnshap import GraphTN, interactions, moebius, shapley_values


def random_tn(n, edges, chi=3, seed=0, anchors=(0.3, -0.8)):
    """A random network with μ, σ and both anchor terms non-zero, marked fitted."""
    tn = GraphTN((n, edges), bond_dim=chi, init_scale=2.0, seed=seed)
    with torch.no_grad():
        tn.shift.fill_(0.7)
        tn.scale.fill_(1.9)
        tn.anchors.copy_(torch.tensor(anchors, dtype=torch.float64))
        tn.fitted.fill_(True)
    return tn


def exact(tn, index, order):
    return shapiq.ExactComputer(tn.value, tn.n_players)(index, order)


def test_tnshap_efficiency(ring_graph):
    tn = random_tn(*ring_graph)
    n = tn.n_players
    v0, v1 = tn.value(np.zeros((1, n)))[0], tn.value(np.ones((1, n)))[0]
    assert abs(shapley_values(tn).sum() - (v1 - v0)) < 1e-10 * max(1.0, abs(v1 - v0))


def test_tnshap_symmetry_and_dummy():
    n, edges = 5, [(0, 1), (0, 2), (0, 3), (0, 4)]
    tn = random_tn(n, edges, chi=2, seed=3, anchors=(0.0, 0.0))
    with torch.no_grad():
        tn.cores[2].copy_(tn.cores[1])  # leaves 1 and 2 play the same role: symmetric
        c0 = tn.cores[0]  # (phys, bond to 1, bond to 2, bond to 3, bond to 4)
        c0.copy_((c0 + c0.transpose(1, 2)) / 2)
        tn.cores[4][1].copy_(tn.cores[4][0])  # A[0] = A[1]: ν̂ does not depend on z_4 (dummy)
    phi = shapley_values(tn)
    assert abs(phi[1] - phi[2]) < 1e-12
    assert abs(phi[4]) < 1e-12 and abs(phi[1]) > 1e-3
    sii = interactions(tn, None).to_dict()
    assert all(abs(v) < 1e-12 for s, v in sii.items() if 4 in s)
    assert abs(sii[(0, 1)] - sii[(0, 2)]) < 1e-12


def test_tnshap_shapley_equals_exact_computer_and_quadrature_is_tight(ring_graph):
    tn = random_tn(*ring_graph, seed=1)
    ref = exact(tn, "SV", 1)
    want = np.array([ref[(u,)] for u in range(tn.n_players)])
    np.testing.assert_allclose(shapley_values(tn), want, rtol=1e-9, atol=1e-12)  # ⌈8/2⌉ = 4 nodes
    # one node too few leaves a visible error: the test above can fail
    assert np.abs(shapley_values(tn, n_points=3) - want).max() > 1e-6 * np.abs(want).max()


def test_tnshap_contraction_is_multilinear_extension_n12():
    n = 12
    edges = [(i, i + 1) for i in range(n - 1)] + [(0, 5), (6, 11)]
    tn = random_tn(n, edges, chi=2, seed=2, anchors=(0.0, 0.0))
    t = dense_tensor_reference(tn.topology, [c.detach() for c in tn.cores])  # (2,)*12
    z = np.random.default_rng(0).random((3, n))
    want = np.zeros(3)
    for bits in itertools.product([0, 1], repeat=n):
        want += t[bits] * np.prod(np.where(np.array(bits) == 1, z, 1 - z), axis=1)
    np.testing.assert_allclose(tn.value(z), 0.7 + 1.9 * want, rtol=1e-10)


def test_tnshap_anchor_terms_only_move_the_extremes(ring_graph):
    """α Π(1 − z) + β Π z changes ν̂ on ∅ and N only (binary coalitions)."""
    a = random_tn(*ring_graph, seed=6, anchors=(0.0, 0.0))
    b = random_tn(*ring_graph, seed=6, anchors=(0.5, -1.5))
    n = a.n_players
    z = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    diff = b.value(z) - a.value(z)
    np.testing.assert_allclose(diff[1:-1], 0.0, atol=1e-12)
    np.testing.assert_allclose([diff[0], diff[-1]], [1.9 * 0.5, 1.9 * -1.5], rtol=1e-12)


@pytest.mark.parametrize(
    ("index", "order"), [("SII", 2), ("SII", 3), ("STII", 2), ("STII", 3), ("BII", 2), ("BII", 3)]
)
def test_tnshap_interactions_match_exact_computer(ring_graph, index, order):
    tn = random_tn(*ring_graph, seed=4)
    got = interactions(tn, None, index=index, order=order).to_dict()
    ref = exact(tn, index, order)
    assert set(got) == {s for s in ref.interaction_lookup if len(s) == order}
    scale = max(abs(v) for v in got.values())
    for s, v in got.items():
        assert abs(v - ref[s]) < 1e-9 * scale, (s, v, ref[s])


def test_tnshap_order1_sii_is_shapley_and_moebius(ring_graph):
    tn = random_tn(*ring_graph, seed=5)
    sii1 = interactions(tn, None, index="SII", order=1).values
    np.testing.assert_allclose(sii1, shapley_values(tn), rtol=1e-12)
    ref = exact(tn, "Moebius", tn.n_players)
    sets = [(), (3,), (1, 2), (0, 4, 7), tuple(range(8))]
    np.testing.assert_allclose(moebius(tn, sets), [ref[s] for s in sets], rtol=1e-9, atol=1e-12)


def test_tnshap_interaction_errors(ring_graph):
    tn = random_tn(*ring_graph)
    with pytest.raises(ValueError, match="index must be one of"):
        interactions(tn, index="FSII")
    with pytest.raises(ValueError, match="order must be an integer"):
        interactions(tn, order=0)
    with pytest.raises(ValueError, match="2 distinct nodes"):
        interactions(tn, [(0, 0)])
    with pytest.raises(ValueError, match="outside"):
        interactions(tn, [(0, 99)])
    with pytest.raises(ValueError, match="needs order=2"):
        interactions(tn, None, order=3).matrix(tn.n_players)
    edges = interactions(tn, "edges")
    assert edges.sets == tuple(tn.graph_edges)
    mat = edges.matrix(tn.n_players)
    assert mat[0, 1] == mat[1, 0] == edges.values[0]


def test_tnshap_unfitted_surrogate_refuses_readout(ring_graph):
    tn = GraphTN(ring_graph, bond_dim=2)
    for read in (shapley_values, interactions, lambda t: moebius(t, [(0,)])):
        with pytest.raises(RuntimeError, match="has not been fitted"):
            read(tn)
    state = random_tn(*ring_graph, chi=2).state_dict()
    tn.load_state_dict(state)  # the fitted flag travels with the state dict
    assert shapley_values(tn).shape == (8,)
