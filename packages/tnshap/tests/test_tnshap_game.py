"""MaskedGraphGame, exact enumeration, the GIN, the sampler and fit_surrogate's contract."""

import itertools
import warnings

import numpy as np
import pytest
import torch
from icml26_tnshap import (
    GIN,
    FitConfig,
    GraphTN,
    MaskedGraphGame,
    exact_shapley,
    fit_surrogate,
    shapley_values,
    size_uniform_sampler,
)

EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (3, 4), (4, 5)]


def edge_index(edges):
    e = np.array(edges).T
    return torch.as_tensor(np.concatenate([e, e[::-1]], axis=1))  # both directions (2, 2E)


def test_tnshap_masking_formula_and_counter():
    """With f = Σ_u Σ_f x_uf, v(z) = Σ_u Σ_f (x0 + z_u (x − x0))_uf exactly."""
    x = torch.randn(6, 3, dtype=torch.float64)
    base = torch.randn(3, dtype=torch.float64)

    def model(xb, ei, batch):
        return torch.zeros(int(batch.max()) + 1, dtype=xb.dtype).index_add_(0, batch, xb.sum(1))

    game = MaskedGraphGame(model, x, edge_index(EDGES), baseline=base, batch_size=4)
    z = np.random.default_rng(0).random((10, 6))
    want = (base + z[:, :, None] * (x.numpy() - base.numpy())).sum((1, 2))
    np.testing.assert_allclose(game(z), want, atol=1e-12)
    assert game.n_queries == 10
    game(np.ones((1, 6), bool))
    assert game.n_queries == 11
    game.reset_counter()
    assert game.n_queries == 0


def test_tnshap_batched_game_equals_per_graph_loop():
    torch.manual_seed(0)
    model = GIN(4, hidden=16, layers=2).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    ei = edge_index(EDGES)
    z = np.random.default_rng(1).random((7, 6)) < 0.5
    batched = MaskedGraphGame(model, x, ei, batch_size=3)(z)
    looped = MaskedGraphGame(lambda xx, e: model(xx, e), x, ei, batched=False)(z)
    np.testing.assert_allclose(batched, looped, atol=1e-12)


def test_tnshap_gin_is_permutation_invariant():
    torch.manual_seed(0)
    model = GIN(3, hidden=8, layers=3).double()
    x = torch.randn(6, 3, dtype=torch.float64)
    ei = edge_index(EDGES)
    perm = torch.randperm(6)
    inv = torch.argsort(perm)
    y = model(x, ei)
    y_perm = model(x[perm], inv[ei])
    torch.testing.assert_close(y, y_perm)


def test_tnshap_game_bad_input():
    x = torch.randn(6, 3)
    model = lambda xb, ei, b: xb.sum()
    with pytest.raises(ValueError, match=r"baseline must be a scalar, \(3,\) or \(6, 3\)"):
        MaskedGraphGame(model, x, edge_index(EDGES), baseline=torch.zeros(4))
    with pytest.raises(ValueError, match=r"edge_index must have shape \(2, E\)"):
        MaskedGraphGame(model, x, torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="outside"):
        MaskedGraphGame(model, x, torch.tensor([[0], [9]]))
    with pytest.raises(ValueError, match="batch_size"):
        MaskedGraphGame(model, x, edge_index(EDGES), batch_size=0)
    game = MaskedGraphGame(model, x, edge_index(EDGES))
    with pytest.raises(ValueError, match=r"coalitions must have shape \(B, n_players=6\)"):
        game(np.ones((2, 5)))
    with pytest.raises(ValueError, match="one value per graph"):
        game(np.ones((2, 6)))  # the model returns a scalar for the whole batch


def test_tnshap_exact_shapley_matches_shapiq_and_refuses_large_n():
    shapiq = pytest.importorskip("shapiq")
    rng = np.random.default_rng(0)
    table = rng.normal(size=2**6)

    def game(z):
        return table[(np.asarray(z, bool) * (1 << np.arange(6))).sum(1)]

    ref = shapiq.ExactComputer(game, 6)("SV", 1)
    np.testing.assert_allclose(exact_shapley(game, 6), [ref[(u,)] for u in range(6)], atol=1e-12)
    with pytest.raises(ValueError, match="infeasible"):
        exact_shapley(game, 30)
    with pytest.raises(ValueError, match="n_players must be given"):
        exact_shapley(game)


def test_tnshap_size_uniform_sampler():
    rng = np.random.default_rng(0)
    z = size_uniform_sampler(10, 400, rng)
    assert z.shape == (400, 10) and z.dtype == bool
    assert len({r.tobytes() for r in z}) == 400  # distinct coalitions
    counts = np.bincount(z.sum(1), minlength=11)
    assert counts[0] == 1 and counts[10] == 1  # only one coalition of each extreme size
    assert counts[1] == counts[9] == 10  # sizes 1 and n-1 exhausted (distinct coalitions)
    assert counts[2:9].min() > 20  # the other sizes are drawn ~uniformly (≈ 400/11 each)
    full = size_uniform_sampler(4, 50, rng)
    assert full.shape == (16, 4)  # m ≥ 2^n: every coalition once


def test_tnshap_fit_bad_input_and_warning():
    n = 6
    game = lambda z: np.asarray(z, float).sum(1)
    game.n_players = n
    with pytest.raises(ValueError, match="bond_dim must be an integer >= 1"):
        GraphTN((n, EDGES), bond_dim=0)
    with pytest.raises(ValueError, match="structure='graph' needs a connected graph"):
        GraphTN((n, [(0, 1), (2, 3)]), bond_dim=2)
    with pytest.raises(ValueError, match="require='tree' needs a connected graph"):
        GraphTN((n, [(0, 1), (2, 3)]), bond_dim=2, structure="tree")
    with pytest.raises(ValueError, match="require='tree' needs n_nodes - 1"):
        GraphTN((n, EDGES), bond_dim=2, structure="tree")
    with pytest.raises(ValueError, match="structure must be one of"):
        GraphTN((n, EDGES), structure="mesh")
    chain = GraphTN((n, [(0, 1), (2, 3)]), bond_dim=2, structure="chain")  # allowed
    assert chain.topology.is_chain
    tn = GraphTN((n, EDGES), bond_dim=2)
    with pytest.raises(ValueError, match="budget must be an integer >= 2"):
        fit_surrogate(tn, game, budget=1)
    with pytest.raises(ValueError, match="game has 7 players"):
        bad = lambda z: np.zeros(len(z))
        bad.n_players = 7
        fit_surrogate(tn, bad, budget=10)
    with pytest.raises(ValueError, match="config.solver"):
        fit_surrogate(tn, game, budget=10, config=FitConfig(solver="sgd"))
    with pytest.raises(ValueError, match="sampler must be"):
        fit_surrogate(tn, game, budget=10, sampler="kernel")
    with pytest.raises(ValueError, match=r"z must have shape \(B, 6\)"):
        tn(torch.zeros(2, 5))
    big = GraphTN((12, [(i, i + 1) for i in range(11)]), bond_dim=4)
    g12 = lambda z: np.asarray(z, float).sum(1)
    with pytest.warns(UserWarning, match="under-determined"):
        fit_surrogate(big, g12, budget=20, config=FitConfig(epochs=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a budget above the free parameters: no warning
        fit_surrogate(GraphTN((n, EDGES), bond_dim=2), game, budget=60, config=FitConfig(epochs=2))


def test_tnshap_fit_is_deterministic():
    n = 6
    w = np.random.default_rng(3).normal(size=n)
    game = lambda z: np.tanh(np.asarray(z, float) @ w) + 0.1
    game.n_players = n
    out = []
    for _ in range(2):
        tn = GraphTN((n, EDGES), bond_dim=2, seed=1)
        fit = fit_surrogate(tn, game, budget=40, config=FitConfig(epochs=15, seed=2))
        out.append(shapley_values(tn))
    np.testing.assert_array_equal(out[0], out[1])
    assert fit.n_queries == 40 and fit.n_train + fit.n_val == 40


def test_tnshap_fit_recipe_extremes_standardization_split_early_stopping():
    """The recipe: ∅ and N always queried, targets standardized, 1/6 held out, best epoch kept."""
    n = 6
    w = np.random.default_rng(4).normal(size=n)
    queried = []

    def game(z):
        z = np.asarray(z, float)
        queried.append(z.copy())
        return 5.0 + 3.0 * np.tanh(z @ w)

    game.n_players = n

    def size3(n_, m, rng):  # a sampler that never proposes ∅ or N
        rows = [r for r in itertools.product([0, 1], repeat=n_) if sum(r) == 3]
        return np.asarray(rows, bool)[rng.permutation(len(rows))[:m]]

    tn = GraphTN((n, EDGES), bond_dim=2, seed=0)
    cfg = FitConfig(epochs=500, early_stopping=3, seed=1)
    with pytest.warns(UserWarning, match="under-determined"):  # 20 queries < ~28 parameters
        fit = fit_surrogate(tn, game, budget=20, sampler=size3, config=cfg)
    z = np.concatenate(queried)
    assert len(z) == 20 == fit.n_queries  # the extremes replace sampled rows: budget kept
    assert {0, n} <= set(z.sum(1).astype(int))  # ∅ and N queried although never sampled
    assert fit.n_val == round(20 / 6) and fit.n_train + fit.n_val == 20
    assert 1 <= fit.epochs < cfg.epochs and len(fit.history) == fit.epochs  # stopped early
    sd = float(tn.scale)
    np.testing.assert_allclose(fit.val_mse, min(fit.history) * sd**2, rtol=1e-10)  # best kept

    queried.clear()
    tn = GraphTN((n, EDGES), bond_dim=2, seed=0)
    fit_surrogate(tn, game, budget=30, config=FitConfig(epochs=2, val_fraction=0.0))
    y = 5.0 + 3.0 * np.tanh(np.concatenate(queried) @ w)
    np.testing.assert_allclose([float(tn.shift), float(tn.scale)], [y.mean(), y.std()])


def test_tnshap_fit_on_gin_game_tracks_exact_values():
    """End to end on a random GIN: a χ = 4 surrogate from 200 queries is close to exact φ."""
    torch.manual_seed(0)
    model = GIN(4, hidden=16, layers=2).double()
    x = torch.randn(8, 4, dtype=torch.float64)
    edges = [*EDGES, (5, 6), (6, 7)]
    game = MaskedGraphGame(model, x, edge_index(edges))
    exact = exact_shapley(game)
    game.reset_counter()
    tn = GraphTN(game, bond_dim=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = fit_surrogate(tn, game, budget=200)
    assert game.n_queries == 200 == fit.n_queries
    phi = shapley_values(tn)
    cos = phi @ exact / np.linalg.norm(phi) / np.linalg.norm(exact)
    assert cos > 0.98, cos
