"""shapiq (ExactComputer side by side, Approximator) and PyTorch Geometric adapters."""

import warnings

import numpy as np
import pytest
import torch
from icml26_tnshap import (
    GIN,
    FitConfig,
    GraphTN,
    MaskedGraphGame,
    interactions,
    shapley_values,
)

RING = (8, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (2, 6), (6, 7)])
RING_EDGES = tuple(sorted(tuple(sorted(e)) for e in RING[1]))


def random_tn(seed=0):
    tn = GraphTN(RING, bond_dim=3, init_scale=2.0, seed=seed)
    with torch.no_grad():
        tn.shift.fill_(-0.4)
        tn.scale.fill_(1.3)
    return tn


@pytest.mark.parametrize(
    ("index", "order"), [("SV", 1), ("SII", 2), ("STII", 2), ("BII", 2), ("SII", 3), ("STII", 3)]
)
def test_tnshap_shapiq_exact_computer_agrees_on_surrogate(index, order):
    shapiq = pytest.importorskip("shapiq")
    from icml26_tnshap import to_interaction_values

    tn = random_tn(seed=order)
    ref = shapiq.ExactComputer(tn.value, tn.n_players)(index, order)
    ours = to_interaction_values(tn, index, order)
    assert isinstance(ours, shapiq.InteractionValues)
    assert set(ours.interaction_lookup) == set(ref.interaction_lookup)
    for s in ref.interaction_lookup:
        assert abs(ours[s] - ref[s]) < 1e-8, (s, ours[s], ref[s])
    assert abs(ours.baseline_value - ref.baseline_value) < 1e-10


def test_tnshap_shapiq_approximator_on_pairwise_game():
    shapiq = pytest.importorskip("shapiq")
    from icml26_tnshap import TNSHAPApproximator

    n, edges = 5, [(0, 1), (1, 2), (2, 3), (3, 4)]
    rng = np.random.default_rng(0)
    a, w = rng.normal(size=n), rng.normal(size=len(edges))

    def game(z):
        z = np.asarray(z, float)
        return z @ a + sum(wi * z[:, u] * z[:, v] for (u, v), wi in zip(edges, w))

    cfg = FitConfig(solver="lbfgs", weight_decay=0.0, val_fraction=0.0)
    approx = TNSHAPApproximator(
        n, edges, max_order=2, index="SII", bond_dim=3, config=cfg, random_state=0
    )
    iv = approx(budget=2**n, game=game)
    ref = shapiq.ExactComputer(game, n)("SII", 2)
    assert isinstance(iv, shapiq.InteractionValues) and iv.estimation_budget == 2**n
    for s in ref.interaction_lookup:
        assert abs(iv[s] - ref[s]) < 1e-6
    with pytest.raises(ValueError, match="index must be one of"):
        TNSHAPApproximator(n, edges, index="FSII")
    sv = TNSHAPApproximator(n, edges, index="SV", bond_dim=3, config=cfg)(2**n, game)
    assert sv.max_order == 1


def test_tnshap_pyg_adapter_roundtrip():
    pytest.importorskip("torch_geometric")
    from icml26_tnshap import data_from_attributions, explain_data, game_from_data
    from torch_geometric.data import Data

    torch.manual_seed(0)
    n, edges = RING
    e = torch.tensor(edges).T
    data = Data(x=torch.randn(n, 4, dtype=torch.float64), edge_index=torch.cat([e, e.flip(0)], 1))
    model = GIN(4, hidden=8, layers=2).double()
    game = game_from_data(model, data)
    ref = MaskedGraphGame(model, data.x, data.edge_index)
    z = np.random.default_rng(0).random((5, n)) < 0.5
    np.testing.assert_allclose(game(z), ref(z), atol=1e-12)
    assert game.edges == RING_EDGES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        phi, edge_vals, fit = explain_data(
            model, data, budget=64, bond_dim=2, config=FitConfig(epochs=5)
        )
    assert phi.shape == (n,) and set(edge_vals) == set(game.edges) and fit.n_queries == 64
    out = data_from_attributions(data, phi, edge_vals)
    assert torch.allclose(out.node_shap, torch.as_tensor(phi))
    col = 3  # edge_index column 3 is edge (3, 4)
    assert out.edge_sii[col].item() == edge_vals[(3, 4)]
    with pytest.raises(TypeError, match="torch_geometric.data.Data"):
        game_from_data(model, {"x": data.x})
    with pytest.raises(ValueError, match=r"phi must have shape \(8,\)"):
        data_from_attributions(data, phi[:3])


def test_tnshap_graphtn_accepts_game_data_and_edge_index():
    n, edges = RING
    e = torch.tensor(edges).T
    ei = torch.cat([e, e.flip(0)], 1)
    game = MaskedGraphGame(lambda x, ei, b: x.sum(), torch.zeros(n, 2), ei)
    a = GraphTN(game, bond_dim=2).topology
    b = GraphTN(ei, bond_dim=2).topology
    assert a == b and a.edges == RING_EDGES
    tn = GraphTN(RING, bond_dim=2)
    assert interactions(tn, "edges").sets == a.edges
    assert shapley_values(tn).shape == (n,)
