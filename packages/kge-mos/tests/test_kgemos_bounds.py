import itertools
import math

import numpy as np
import pytest
import torch
from icml26_kge_mos import (
    FreeQueryModel,
    KGEModel,
    QueryIndex,
    diagnostics,
    exact_set_accuracy,
    fit_1n,
    logprob_rank,
    max_out_degree,
    necessary_dim,
    numerical_rank,
    ranking_cells_upper_bound,
    sample_rankings,
    sign_construction,
    sign_pattern_upper_bound,
    sign_sufficient_dim,
    synthetic_graph,
)


def test_max_out_degree_by_hand():
    t = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 2], [1, 0, 2], [3, 1, 2], [4, 1, 2], [5, 1, 2]])
    assert max_out_degree(t) == 2  # (0, 0) -> {1, 2}; the duplicate (0, 0, 2) counts once
    assert max_out_degree(t, reciprocal=True) == 3  # (2, 1⁻¹) -> {3, 4, 5}
    assert sign_sufficient_dim(2) == 5


def test_ranking_bound_exact_on_paper_toy():
    # d = 1, |E| = 3: exactly 2 rankings are reachable (h > 0 and h < 0), never the other 4
    assert ranking_cells_upper_bound(3, 1) == 2
    ent = torch.tensor([[0.3], [-1.2], [2.0]])
    assert len(sample_rankings(ent, 5000)) == 2


@pytest.mark.parametrize("n", [3, 4, 5])
def test_ranking_bound_exact_in_the_plane(n):
    # d = 2 and generic entities: the m = C(n,2) lines through the origin cut 2m cells
    gen = torch.Generator().manual_seed(n)
    ent = torch.randn(n, 2, generator=gen, dtype=torch.float64)
    bound = ranking_cells_upper_bound(n, 2)
    assert bound == min(math.factorial(n), n * (n - 1))
    assert len(sample_rankings(ent, 200_000)) == bound


def test_ranking_bound_is_an_upper_bound_and_all_orders_at_high_dim():
    gen = torch.Generator().manual_seed(0)
    ent = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    assert len(sample_rankings(ent, 100_000)) <= ranking_cells_upper_bound(5, 3)
    ent4 = torch.randn(4, 3, generator=gen, dtype=torch.float64)  # d = |E| - 1: all 4! orders
    assert ranking_cells_upper_bound(4, 3) == 24
    assert len(sample_rankings(ent4, 200_000)) == 24


def test_sign_pattern_bound_matches_brute_force_in_the_plane():
    # all answer sets {o : e_o·h > τ} of 5 generic points in R²: Cover's count 2Σ_{i≤2}C(4,i)
    gen = torch.Generator().manual_seed(3)
    ent = torch.randn(5, 2, generator=gen, dtype=torch.float64)
    h = torch.randn(100_000, 3, generator=gen, dtype=torch.float64)  # (h, -τ)
    signs = (h[:, :2] @ ent.T + h[:, 2:]) > 0
    assert len({tuple(r) for r in signs.tolist()}) == sign_pattern_upper_bound(5, 2) == 22


@pytest.mark.parametrize(("n", "c", "q"), [(12, 1, 30), (20, 3, 40), (30, 5, 60)])
def test_sign_construction_reconstructs_every_pattern(n, c, q):
    trip = synthetic_graph(n, c, n_queries=q, n_relations=3, seed=c)
    idx = QueryIndex.from_triples(trip, n, 3, reciprocal=False)
    y = idx.dense(np.arange(len(idx))).numpy().astype(bool)
    h, ent = sign_construction(y)
    assert h.shape[1] == ent.shape[1] == sign_sufficient_dim(max_out_degree(trip)) == 2 * c + 1
    assert np.array_equal((h @ ent.T) > 0, y)
    assert np.all(np.abs(h @ ent.T) > 0)


def test_necessary_dim_grows_with_answer_sets():
    assert necessary_dim(4, 12) == 2 and necessary_dim(4, 15) == 3
    assert necessary_dim(10, 120) > 2
    dims = [necessary_dim(30, math.comb(30, c)) for c in (1, 2, 3, 4)]
    assert dims == sorted(dims) and dims[-1] > dims[0]
    with pytest.raises(ValueError, match="n_answer_sets"):
        necessary_dim(3, 9)


def _all_subsets_graph(n=4):
    sets = [s for k in range(1, n) for s in itertools.combinations(range(n), k)]
    trip = np.array([(q, 0, o) for q, s in enumerate(sets) for o in s])
    labels = QueryIndex.from_triples(trip, max(n, len(sets)), 1, reciprocal=False)
    labels.n_entities = n
    return sets, labels


def test_graph_no_d2_linear_layer_fits_is_fit_by_mos():
    # 14 queries = every non-empty proper subset of 4 entities. A d = 2 linear layer with the
    # best per-query threshold realises at most 14 sets including ∅ and the full set, so at
    # most 12 of these 14 (counting bound) — MoS with d = 2 fits all of them.
    sets, labels = _all_subsets_graph(4)
    q = len(sets)
    assert sign_pattern_upper_bound(4, 2) - 2 < q
    y = labels.dense(np.arange(q))
    optimum = sum(math.log(len(s)) for s in sets) / q  # uniform mass on the answers

    def fit(k, seed):
        torch.manual_seed(seed)
        model = FreeQueryModel(q, 4, 2, n_components=k)
        hist = fit_1n(
            model,
            model.parameters(),
            labels,
            epochs=500,
            batch_size=q,
            lr=0.05,
            seed=seed,
            progress=False,
        )
        with torch.no_grad():
            return model, exact_set_accuracy(model(torch.arange(q)), y), hist[-1]

    _, acc_lin, loss_lin = fit(1, 0)
    assert acc_lin <= 12 / 14 and loss_lin > optimum + 0.05
    # the fit is non-convex: a few restarts (the claim is that a d = 2 MoS fit exists)
    for seed in range(4):
        model, acc_mos, loss_mos = fit(4, seed)
        if acc_mos == 1.0:
            break
    # the same margin that separates the linear layer (> optimum + 0.05): the final loss of
    # a non-convex fit moves with the CPU's rounding (0.631 here, 0.641 with ATen's generic
    # kernels), the exact fit (accuracy 1) does not
    assert acc_mos == 1.0 and loss_mos < optimum + 0.05
    # the trained MoS log-probability matrix exceeds the linear cap d + 1 = 3
    with torch.no_grad():
        assert numerical_rank(model(torch.arange(q)), 1e-4) == 4


def test_linear_logprob_rank_is_at_most_d_plus_one():
    torch.manual_seed(0)
    model = KGEModel(30, 4, 3, scorer="distmult")
    for p in model.parameters():
        torch.nn.init.normal_(p, std=1.0)
    pairs = np.array([(s, r) for s in range(30) for r in range(8)])
    assert logprob_rank(model, pairs) == 4
    mos = KGEModel(30, 4, 3, scorer="distmult", n_components=4)
    for p in mos.parameters():
        torch.nn.init.normal_(p, std=1.0)
    assert logprob_rank(mos, pairs) > 4


def test_diagnostics_report():
    trip = synthetic_graph(16, 3, n_queries=16, seed=1)
    model = KGEModel(16, 1, 4, scorer="distmult", reciprocal=False)
    d = diagnostics(model, trip, 16)
    assert d["max_out_degree"] == 3 and d["sign_sufficient_dim"] == 7
    sets = {tuple(sorted(trip[trip[:, 0] == q, 2])) for q in np.unique(trip[:, 0])}
    assert d["n_answer_sets"] == len(sets) and d["linear_rank_cap"] == 5
    assert d["logprob_rank"] <= 5


def test_exact_set_accuracy_by_hand():
    s = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
    y = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert exact_set_accuracy(s, y) == 0.5


def test_bad_arguments():
    with pytest.raises(ValueError, match="dim"):
        ranking_cells_upper_bound(3, 0)
    with pytest.raises(ValueError, match="labels"):
        sign_construction(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="triples"):
        max_out_degree(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="max_degree"):
        sign_sufficient_dim(-1)


@pytest.mark.parametrize("dim", [2, 3])
def test_mos_fits_at_least_as_well_as_linear_with_free_queries(dim):
    # 30 entities, every query has 3 random answers (sign pattern sufficient at 2c+1 = 7):
    # at d <= 3 the linear layer sits above the NLL floor log 3. The
    # default MoS (residual heads starting at the linear layer) must fit at least as well,
    # same seed, same optimiser, same epochs; the paper's random-init tanh heads need not.
    n, c = 30, 3
    labels = QueryIndex.from_triples(
        synthetic_graph(n, c, n_queries=n, seed=1), n, 1, reciprocal=False
    )
    q = len(labels)
    y = labels.dense(np.arange(q))
    floor = math.log(c)

    def nll(k):
        torch.manual_seed(0)
        model = FreeQueryModel(q, n, dim, n_components=k)
        fit_1n(
            model,
            model.parameters(),
            labels,
            epochs=300,
            batch_size=q,
            lr=0.05,
            seed=0,
            progress=False,
        )
        with torch.no_grad():
            return float(-(model(torch.arange(q)) * y).sum() / y.sum())

    lin, mos = nll(1), nll(4)
    assert lin > floor + 0.05  # headroom: the bottleneck bites
    assert mos <= lin * (1 + 1e-3)
