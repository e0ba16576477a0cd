"""Closed-form pairwise graph game: v(z) = Σ a_u z_u + Σ_{(u,v)∈E} w_uv z_u z_v.

φ_u = a_u + ½ Σ_{v ~ u} w_uv and SII_uv = w_uv (zero off the edges). The game is exactly
representable by a graph-aligned TN when χ ≥ rank of every edge cut: 2 on a star (each cut
isolates a leaf), 3 on a general tree (the cut matrix L ⊗ 1 + 1 ⊗ R + w z_u ⊗ z_v has rank 3).
"""

import numpy as np
import pytest
import shapiq
from icml26_tnshap import FitConfig, GraphTN, fit_surrogate, interactions, shapley_values


def pairwise_game(n, edges, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    w = {tuple(sorted(e)): rng.normal() for e in edges}

    def game(z):
        z = np.asarray(z, dtype=float)
        return 0.3 + z @ a + sum(wv * z[:, u] * z[:, v] for (u, v), wv in w.items())

    game.n_players = n
    phi = a + np.array([0.5 * sum(wv for e, wv in w.items() if u in e) for u in range(n)])
    return game, phi, w


CASES = {
    "star_chi2": (6, [(0, i) for i in range(1, 6)], 2),
    "path_chi3": (5, [(0, 1), (1, 2), (2, 3), (3, 4)], 3),
    "tree_chi3": (6, [(0, 1), (1, 2), (2, 3), (1, 4), (2, 5)], 3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tnshap_recovers_closed_form(case):
    n, edges, chi = CASES[case]
    game, phi_true, w = pairwise_game(n, edges, seed=1)
    ref = shapiq.ExactComputer(game, n)("SV", 1)  # the formula itself
    np.testing.assert_allclose([ref[(u,)] for u in range(n)], phi_true, atol=1e-12)
    tn = GraphTN((n, edges), bond_dim=chi, init_scale=0.5, seed=0)
    cfg = FitConfig(solver="lbfgs", weight_decay=0.0, lbfgs_iters=2000)
    fit = fit_surrogate(tn, game, budget=2**n, config=cfg)
    assert fit.train_mse < 1e-10
    np.testing.assert_allclose(shapley_values(tn), phi_true, atol=1e-6)
    sii = interactions(tn, None, index="SII").to_dict()  # every pair
    for pair, val in sii.items():
        np.testing.assert_allclose(val, w.get(pair, 0.0), atol=1e-6)


def test_tnshap_chi2_cannot_represent_a_path_game():
    """The rank bound is real: χ = 2 on a non-star tree leaves a clear residual."""
    n, edges, _ = CASES["tree_chi3"]
    game, _, _ = pairwise_game(n, edges, seed=1)
    tn = GraphTN((n, edges), bond_dim=2, init_scale=0.5, seed=0)
    fit = fit_surrogate(
        tn, game, budget=2**n, config=FitConfig(solver="lbfgs", weight_decay=0.0, lbfgs_iters=2000)
    )
    assert fit.train_mse > 1e-4


def test_tnshap_pairwise_prior_recovers_pairwise_game_on_a_ring(ring_graph):
    """FitConfig(prior="pairwise"): the bond-pairwise least-squares game, then the network on its
    residual. On a pairwise game of a loopy graph, 40 queries (> 1 + n + |E| = 17) recover
    φ_u = a_u + ½ Σ_v w_uv and SII_uv = w_uv (the network then fits a zero residual)."""
    import shapiq
    from icml26_tnshap import (
        FitConfig,
        GraphTN,
        fit_surrogate,
        interactions,
        shapley_values,
        to_interaction_values,
    )

    n, edges = ring_graph
    rng = np.random.default_rng(0)
    a, w = rng.normal(size=n), rng.normal(size=len(edges))

    def game(z):
        z = np.asarray(z, float)
        return 0.5 + z @ a + sum(wi * z[:, u] * z[:, v] for (u, v), wi in zip(edges, w))

    phi = a.copy()
    for (u, v), wi in zip(edges, w):
        phi[u] += wi / 2
        phi[v] += wi / 2
    tn = GraphTN((n, edges), 3)
    fit_surrogate(tn, game, budget=40, config=FitConfig(prior="pairwise", solver="lbfgs"))
    np.testing.assert_allclose(shapley_values(tn), phi, rtol=0, atol=1e-9)
    sii = interactions(tn, "edges").to_dict()
    for (u, v), wi in zip(edges, w):
        assert abs(sii[(min(u, v), max(u, v))] - wi) < 1e-9
    # every read-out of the prior + network agrees with enumeration of the surrogate game
    bumpy = lambda z: game(z) + 0.3 * np.sin(np.asarray(z, float).sum(1))
    tn = GraphTN((n, edges), 2)
    fit_surrogate(tn, bumpy, budget=30, config=FitConfig(prior="pairwise", epochs=50))
    assert bool(tn.prior_coef.any())
    for index, order in (("SV", 1), ("SII", 2), ("STII", 2), ("BII", 2), ("k-SII", 2), ("SII", 3)):
        ref = shapiq.ExactComputer(tn.value, n)(index, order)
        ours = to_interaction_values(tn, index, order)
        scale = max(abs(ref[s]) for s in ref.interaction_lookup)
        for s in ref.interaction_lookup:
            assert abs(ours[s] - ref[s]) < 1e-9 * scale, (index, s, ours[s], ref[s])
    z = np.zeros((2, n), bool)
    z[1] = True
    assert abs(shapley_values(tn).sum() - (bumpy(z[1:]) - bumpy(z[:1]))[0]) < 1e-10  # efficiency
    with pytest.raises(ValueError, match="config.prior must be None or 'pairwise'"):
        fit_surrogate(tn, game, budget=20, config=FitConfig(prior="cubic"))
