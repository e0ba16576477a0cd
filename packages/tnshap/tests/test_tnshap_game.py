"""MaskedGraphGame (a shapiq.Game), the fit recipe, its guards and efficiency after a fit."""

import itertools
import warnings

import numpy as np
import pytest
import shapiq
import torch
from icml26_tnshap import FitConfig, GraphTN, MaskedGraphGame, fit_surrogate, shapley_values

EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (3, 4), (4, 5)]


def sum_model(xb, ei, batch):
    return torch.zeros(int(batch.max()) + 1, dtype=xb.dtype).index_add_(0, batch, xb.sum(1))


def test_tnshap_masking_formula_and_counter(undirected):
    """With f = Σ_u Σ_f x_uf, v(z) = Σ_u Σ_f (x0 + z_u (x − x0))_uf exactly."""
    x = torch.randn(6, 3, dtype=torch.float64)
    base = torch.randn(3, dtype=torch.float64)
    game = MaskedGraphGame(sum_model, x, undirected(EDGES), baseline=base, batch_size=4)
    assert isinstance(game, shapiq.Game)
    z = np.random.default_rng(0).random((10, 6))
    want = (base.numpy() + z[:, :, None] * (x.numpy() - base.numpy())).sum((1, 2))
    np.testing.assert_allclose(game.evaluate(z), want, rtol=1e-12)  # fractional z interpolates
    assert game.n_queries == 10
    zb = z > 0.5
    np.testing.assert_allclose(game(zb), game.evaluate(zb.astype(float)), rtol=1e-12)
    assert game([(0, 2)])[0] == pytest.approx(game(np.array([[1, 0, 1, 0, 0, 0]], bool))[0])
    game.reset_counter()
    assert game.n_queries == 0
    norm = MaskedGraphGame(sum_model, x, undirected(EDGES), baseline=base, normalize=True)
    assert norm(np.zeros((1, 6), bool))[0] == pytest.approx(0.0, abs=1e-12)  # shapiq convention


def test_tnshap_batched_game_equals_per_graph_loop(mp_model, undirected):
    model = mp_model(4)
    x = torch.randn(6, 4, dtype=torch.float64)
    ei = undirected(EDGES)
    z = np.random.default_rng(1).random((7, 6)) < 0.5
    batched = MaskedGraphGame(model, x, ei, batch_size=3)(z)
    looped = MaskedGraphGame(lambda xx, e: model(xx, e), x, ei, batched=False)(z)
    np.testing.assert_allclose(batched, looped, rtol=1e-12)


def test_tnshap_game_bad_input(undirected):
    x = torch.randn(6, 3)
    model = lambda xb, ei, b: xb.sum()
    with pytest.raises(ValueError, match=r"baseline must be a scalar, \(3,\) or \(6, 3\)"):
        MaskedGraphGame(model, x, undirected(EDGES), baseline=torch.zeros(4))
    with pytest.raises(ValueError, match=r"edge_index must have shape \(2, E\)"):
        MaskedGraphGame(model, x, torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="outside"):
        MaskedGraphGame(model, x, torch.tensor([[0], [9]]))
    with pytest.raises(ValueError, match="batch_size"):
        MaskedGraphGame(model, x, undirected(EDGES), batch_size=0)
    x_nan = x.clone()
    x_nan[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"x has non-finite .* nodes \[2\]"):  # before any query
        MaskedGraphGame(model, x_nan, undirected(EDGES))
    with pytest.raises(ValueError, match="baseline has non-finite"):
        MaskedGraphGame(model, x, undirected(EDGES), baseline=float("inf"))
    game = MaskedGraphGame(model, x, undirected(EDGES))
    with pytest.raises(ValueError, match=r"coalitions must have shape \(B, n_players=6\)"):
        game.evaluate(np.ones((2, 5)))
    with pytest.raises(ValueError, match="one value per graph"):
        game(np.ones((2, 6), bool))  # the model returns a scalar for the whole batch


def test_tnshap_exact_computer_runs_on_the_game(mp_model, undirected):
    """The game is a shapiq.Game: ExactComputer enumerates it; efficiency of the exact values."""
    game = MaskedGraphGame(mp_model(3), torch.randn(6, 3, dtype=torch.float64), undirected(EDGES))
    sv = shapiq.ExactComputer(game, 6)("SV", 1)
    phi = np.array([sv[(u,)] for u in range(6)])
    v = game(np.stack([np.zeros(6, bool), np.ones(6, bool)]))
    assert phi.sum() == pytest.approx(v[1] - v[0], rel=1e-10)


def test_tnshap_fit_bad_input_and_warnings(ring_graph):
    n = 6
    game = lambda z: np.asarray(z, float).sum(1)
    game.n_players = n
    with pytest.raises(ValueError, match="bond_dim must be an integer >= 1"):
        GraphTN((n, EDGES), bond_dim=0)
    with pytest.raises(ValueError, match="structure='graph' needs a connected graph"):
        GraphTN((n, [(0, 1), (2, 3)]), bond_dim=2)
    with pytest.raises(ValueError, match="require='tree' needs n_nodes - 1"):
        GraphTN((n, EDGES), bond_dim=2, structure="tree")
    with pytest.raises(ValueError, match="structure must be one of"):
        GraphTN((n, EDGES), structure="mesh")
    assert GraphTN((n, [(0, 1), (2, 3)]), bond_dim=2, structure="chain").topology.is_chain
    with pytest.warns(UserWarning, match=r"self-loops on nodes \[3\] carry no bond"):
        GraphTN((n, [*EDGES, (3, 3)]), bond_dim=2)
    tn = GraphTN((n, EDGES), bond_dim=2)
    with pytest.raises(ValueError, match="budget must be an integer >= 2"):
        fit_surrogate(tn, game, budget=1)
    bad = lambda z: np.zeros(len(z))
    bad.n_players = 7
    with pytest.raises(ValueError, match="game has 7 players"):
        fit_surrogate(tn, bad, budget=10)
    for field, value, msg in [
        ("solver", "sgd", "config.solver"),
        ("val_queries", -1, "config.val_queries"),
        ("batch_size", 0, "config.batch_size"),
        ("epochs", 0, "config.epochs"),
        ("lr", float("nan"), "config.lr"),
        ("extreme_weight", 0.0, "config.extreme_weight"),
    ]:
        with pytest.raises(ValueError, match=msg):
            fit_surrogate(tn, game, budget=10, config=FitConfig(**{field: value}))
    with pytest.raises(ValueError, match="sampler must be None"):
        fit_surrogate(tn, game, budget=10, sampler="kernel")
    nan_game = lambda z: np.where(np.asarray(z).sum(1) == 3, np.nan, 1.0)
    with pytest.raises(ValueError, match="non-finite values"):
        fit_surrogate(tn, nan_game, budget=30)
    assert not bool(tn.fitted)  # a failed fit leaves the surrogate unusable, not half-fitted
    with pytest.raises(ValueError, match=r"z must have shape \(B, 6\)"):
        tn(torch.zeros(2, 5))
    big = GraphTN((12, [(i, i + 1) for i in range(11)]), bond_dim=4)
    with pytest.warns(UserWarning, match="under-determined"):
        fit_surrogate(
            big, lambda z: np.asarray(z, float).sum(1), budget=20, config=FitConfig(epochs=2)
        )
    with pytest.warns(UserWarning, match=r"budget=100 exceeds the 2\^n = 64"):
        fit = fit_surrogate(tn, game, budget=100, config=FitConfig(epochs=2))
    assert fit.n_queries == 64 and fit.n_train == 64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a budget above the free parameters: no warning
        fit_surrogate(GraphTN((n, EDGES), bond_dim=2), game, budget=60, config=FitConfig(epochs=2))


def test_tnshap_fit_is_deterministic_and_seed_none_is_fresh():
    n = 6
    w = np.random.default_rng(3).normal(size=n)
    game = lambda z: np.tanh(np.asarray(z, float) @ w) + 0.1
    game.n_players = n

    def run(seed):
        tn = GraphTN((n, EDGES), bond_dim=2, seed=1)
        fit = fit_surrogate(tn, game, budget=40, config=FitConfig(epochs=15, seed=seed))
        return shapley_values(tn), fit

    (a, fit), (b, _) = run(2), run(2)
    np.testing.assert_array_equal(a, b)
    assert fit.n_queries == 40 == fit.n_train and fit.n_val == 0
    c, d = run(None), run(None)
    assert not np.array_equal(c[0], d[0])  # None = fresh randomness, not seed 0


def test_tnshap_validation_queries_are_extra_and_early_stopping_keeps_best():
    """The released recipe: validation on *extra* queries, the best epoch kept."""
    n = 6
    w = np.random.default_rng(4).normal(size=n)
    queried = []

    def game(z):
        z = np.asarray(z, float)
        queried.append(z.copy())
        return 5.0 + 3.0 * np.tanh(z @ w)

    game.n_players = n
    tn = GraphTN((n, EDGES), bond_dim=2, seed=0)
    cfg = FitConfig.paper(epochs=500, early_stopping=3, val_queries=12, seed=1)
    fit = fit_surrogate(tn, game, budget=40, config=cfg)
    z = np.concatenate(queried)
    assert fit.n_train == 40 and fit.n_val == 12 and fit.n_queries == len(z) == 52
    assert 1 <= fit.epochs < cfg.epochs and len(fit.history) == fit.epochs  # stopped early
    sd = float(tn.scale)
    np.testing.assert_allclose(fit.val_mse, min(fit.history) * sd**2, rtol=1e-10)  # best kept
    y = 5.0 + 3.0 * np.tanh(z[:40] @ w)  # μ, σ from the training queries only
    np.testing.assert_allclose([float(tn.shift), float(tn.scale)], [y.mean(), y.std()])


def test_tnshap_sampler_keeps_empty_and_full_and_honours_coalition_sampler():
    from shapiq.approximator.sampling import CoalitionSampler

    n = 8
    seen = []
    game = lambda z: (seen.append(np.asarray(z, bool)), np.asarray(z, float).sum(1) ** 2)[1]
    game.n_players = n
    edges = [(i, i + 1) for i in range(n - 1)]

    def size3(n_, m, rng):  # a custom sampler that never proposes ∅ or N
        rows = [r for r in itertools.product([0, 1], repeat=n_) if sum(r) == 3]
        return np.asarray(rows, bool)[rng.permutation(len(rows))[:m]]

    fit_surrogate(
        GraphTN((n, edges), 2), game, budget=20, sampler=size3, config=FitConfig(epochs=2)
    )
    sizes = seen[-1].sum(1)
    assert len(sizes) == 20 and {0, n} <= set(sizes)  # replaced two rows: the budget is kept
    weights = np.zeros(n + 1)
    weights[[0, 2, 6, n]] = 1.0  # only sizes 2 and 6 (besides ∅, N)
    smp = CoalitionSampler(n, weights, pairing_trick=True, random_state=0)
    fit_surrogate(GraphTN((n, edges), 2), game, budget=30, sampler=smp, config=FitConfig(epochs=2))
    z = seen[-1]
    assert set(z.sum(1)) == {0, 2, 6, n}
    rows = {r.tobytes() for r in z}
    assert all((~r).tobytes() in rows for r in z)  # pairing trick: complements present


def test_tnshap_efficiency_after_adam_fit(mp_model, undirected):
    """Σφ = v(N) − v(∅) of the *game* after a short Adam fit, because the anchor terms pin ν̂
    at ∅ and N; without them (pin_extremes=False) the same fit misses it."""
    game = MaskedGraphGame(
        mp_model(4), torch.randn(8, 4, dtype=torch.float64), undirected([*EDGES, (5, 6), (6, 7)])
    )
    v = game(np.stack([np.zeros(8, bool), np.ones(8, bool)]))
    gaps = {}
    for pin in (True, False):
        tn = GraphTN(game, bond_dim=2, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fit_surrogate(
                tn, game, budget=40, config=FitConfig(solver="adam", epochs=30, pin_extremes=pin)
            )
        gaps[pin] = abs(shapley_values(tn).sum() - (v[1] - v[0])) / abs(v[1] - v[0])
    assert gaps[True] < 1e-10, gaps
    assert gaps[False] > 1e-3, gaps


def test_tnshap_fit_on_gnn_game_tracks_exact_values(mp_model, undirected):
    """End to end on a message-passing net: a χ = 3 surrogate from 100 queries (of 256)."""
    game = MaskedGraphGame(
        mp_model(4, seed=1),
        torch.randn(8, 4, dtype=torch.float64),
        undirected([*EDGES, (5, 6), (6, 7)]),
    )
    sv = shapiq.ExactComputer(game, 8)("SV", 1)
    exact = np.array([sv[(u,)] for u in range(8)])
    game.reset_counter()
    tn = GraphTN(game, bond_dim=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = fit_surrogate(tn, game, budget=100)
    assert game.n_queries == 100 == fit.n_queries
    phi = shapley_values(tn)
    cos = phi @ exact / np.linalg.norm(phi) / np.linalg.norm(exact)
    assert cos > 0.99, cos
