import numpy as np
import pytest
import torch
from icml26_kge_mos import (
    SCORERS,
    KGEModel,
    QueryIndex,
    evaluate,
    filtered_ranks,
    load_tsv,
    synthetic_graph,
    train_kge,
)


def _randomise(model, std=0.7):
    for p in model.parameters():
        torch.nn.init.normal_(p, std=std)
    return model.double()


@pytest.mark.parametrize("scorer", SCORERS)
@pytest.mark.parametrize("k", [1, 3])
def test_every_head_gives_normalised_log_probs(scorer, k):
    torch.manual_seed(0)
    model = _randomise(KGEModel(9, 2, 4, scorer=scorer, n_components=k))
    s, r = torch.tensor([0, 3, 8]), torch.tensor([0, 1, 3])  # r = 3 is a reciprocal relation
    logp = model(s, r)
    assert logp.shape == (3, 9)
    torch.testing.assert_close(torch.logsumexp(logp, -1), torch.zeros(3, dtype=torch.float64))


def test_heads_match_their_closed_forms():
    torch.manual_seed(0)
    s, r = torch.tensor([1, 2]), torch.tensor([0, 1])
    dm = _randomise(KGEModel(5, 2, 4, scorer="distmult"))
    ref = torch.einsum("bd,bd,nd->bn", dm.entity[s], dm.relation[r], dm.entity)
    torch.testing.assert_close(dm(s, r), torch.log_softmax(ref, -1))

    cx = _randomise(KGEModel(5, 2, 4, scorer="complex"))
    to_c = lambda x: torch.complex(x[..., :2], x[..., 2:])
    ref = torch.einsum(
        "bd,bd,nd->bn", to_c(cx.entity[s]), to_c(cx.relation[r]), to_c(cx.entity).conj()
    ).real
    torch.testing.assert_close(cx(s, r), torch.log_softmax(ref, -1))

    rs = _randomise(KGEModel(5, 2, 3, scorer="rescal"))
    ref = torch.stack([rs.entity[s[b]] @ rs.relation[r[b]] @ rs.entity.T for b in range(2)])
    torch.testing.assert_close(rs(s, r), torch.log_softmax(ref, -1))

    tk = _randomise(KGEModel(5, 2, 3, scorer="tucker", relation_dim=2))
    ref = torch.stack(
        [
            torch.einsum("i,j,ijk,nk->n", tk.entity[s[b]], tk.relation[r[b]], tk.core, tk.entity)
            for b in range(2)
        ]
    )
    torch.testing.assert_close(tk(s, r), torch.log_softmax(ref, -1))

    ro = _randomise(KGEModel(5, 2, 4, scorer="rotate"))
    rot = to_c(ro.entity[s]) * torch.exp(1j * ro.relation[r])
    ref = -(rot[:, None, :] - to_c(ro.entity)[None]).abs().sum(-1)
    torch.testing.assert_close(ro(s, r), torch.log_softmax(ref, -1))


def test_head_prediction_is_the_reciprocal_query():
    model = _randomise(KGEModel(6, 2, 4, scorer="complex", n_components=2))
    r, o = torch.tensor([0, 1]), torch.tensor([4, 5])
    torch.testing.assert_close(model.head_log_probs(r, o), model(o, r + 2))
    with pytest.raises(ValueError, match="relation ids"):
        model.tail_log_probs(torch.tensor([0]), torch.tensor([2]))


def test_sliced_chunk_size_does_not_change_the_model():
    model = _randomise(KGEModel(13, 2, 4, scorer="distmult", n_components=3))
    s, r = torch.tensor([0, 5, 7]), torch.tensor([0, 1, 2])
    torch.testing.assert_close(model(s, r, chunk_size=4), model(s, r))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(scorer="transe"), "scorer"),
        (dict(scorer="complex", dim=3), "even"),
        (dict(dim=0), "dim"),
        (dict(n_components=0), "n_components"),
    ],
)
def test_bad_model_arguments(kwargs, match):
    base = dict(n_entities=5, n_relations=2, dim=4)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        KGEModel(**base)


def test_entity_id_out_of_range():
    model = KGEModel(5, 2, 4)
    with pytest.raises(ValueError, match="entity ids"):
        model(torch.tensor([5]), torch.tensor([0]))


def test_query_index_groups_and_adds_reciprocals():
    t = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 2], [3, 1, 0]])
    idx = QueryIndex.from_triples(t, 4, 2, reciprocal=True)
    got = {
        tuple(p): set(idx.answers[idx.offsets[i] : idx.offsets[i + 1]].tolist())
        for i, p in enumerate(idx.pairs)
    }
    assert got == {(0, 0): {1, 2}, (3, 1): {0}, (1, 2): {0}, (2, 2): {0}, (0, 3): {3}}
    assert idx.dense(np.array([0])).sum() == 2
    assert idx.lookup(np.array([[0, 0], [1, 1]])).tolist()[1] == -1
    with pytest.raises(ValueError, match="relation ids"):
        QueryIndex.from_triples(t, 4, 1)


def _brute_force_filtered_ranks(logp_fn, test, known, n_entities, n_relations):
    ranks, nlls = [], []
    for s, r, o in test:
        for q, rr, ans in ((s, r, o), (o, r + n_relations, s)):
            scores = logp_fn(q, rr)
            other_true = {
                (b if rr < n_relations else a)
                for a, rel, b in known
                if rel == rr % n_relations and (a if rr < n_relations else b) == q
            } - {ans}
            better = sum(
                1
                for e in range(n_entities)
                if e not in other_true and e != ans and scores[e] > scores[ans]
            )
            tied = sum(
                1
                for e in range(n_entities)
                if e not in other_true and e != ans and scores[e] == scores[ans]
            )
            ranks.append(1 + better + tied / 2)
            nlls.append(-scores[ans])
    return np.array(ranks), np.array(nlls)


def test_filtered_mrr_equals_brute_force():
    trip = synthetic_graph(8, 3, n_queries=10, n_relations=2, seed=0)
    test, known = trip[:6], trip
    torch.manual_seed(4)
    model = _randomise(KGEModel(8, 2, 2, scorer="distmult", n_components=2), std=1.0)
    metrics = evaluate(model, test, known)
    with torch.no_grad():
        fn = lambda q, r: model(torch.tensor([q]), torch.tensor([r]))[0].tolist()
        ranks, nlls = _brute_force_filtered_ranks(fn, test, known, 8, 2)
    assert metrics["mrr"] == pytest.approx(np.mean(1.0 / ranks), abs=1e-12)
    for k in (1, 3, 10):
        assert metrics[f"hits@{k}"] == pytest.approx(np.mean(ranks <= k), abs=1e-12)
    assert metrics["nll"] == pytest.approx(np.mean(nlls), rel=1e-6)
    assert 0 < metrics["hits@1"] < metrics["hits@3"] < 1  # the tiny graph is not degenerate
    # ties: every score equal -> realistic rank is the middle of the unfiltered candidates
    ranks = filtered_ranks(
        torch.zeros(1, 5), torch.tensor([2]), torch.tensor([[True, False, False, False, False]])
    )
    assert ranks.item() == 1 + 3 / 2


def test_1n_loss_is_label_smoothed_cross_entropy_over_reciprocal_queries():
    # the first epoch's loss (one full batch, before any step) against torch's own
    # label-smoothed cross-entropy on the L1-normalised multi-hot rows (PyKEEN's LCWA loss)
    trip = synthetic_graph(9, 3, n_queries=6, n_relations=2, seed=2)
    model = _randomise(KGEModel(9, 2, 4, scorer="complex", n_components=2))
    labels = QueryIndex.from_triples(trip, 9, 2, reciprocal=True)
    pairs = torch.from_numpy(labels.pairs)
    y = labels.dense(np.arange(len(labels))).double()
    with torch.no_grad():
        logp = model(pairs[:, 0], pairs[:, 1])
    for eps in (0.0, 0.3):
        expected = torch.nn.functional.cross_entropy(
            logp, y / y.sum(-1, keepdim=True), label_smoothing=eps
        )
        hist = train_kge(
            model,
            trip,
            epochs=1,
            batch_size=len(labels),
            lr=0.0,
            label_smoothing=eps,
            progress=False,
        )
        assert hist[0] == pytest.approx(float(expected), rel=1e-6)


def test_training_fits_a_small_graph():
    trip = synthetic_graph(12, 2, n_queries=12, seed=0)
    torch.manual_seed(0)
    model = KGEModel(12, 1, 8, scorer="distmult", n_components=2)
    before = evaluate(model, trip)
    hist = train_kge(
        model, trip, epochs=150, batch_size=32, lr=0.05, label_smoothing=0.1, progress=False
    )
    after = evaluate(model, trip)
    assert hist[-1] < hist[0]
    assert after["nll"] < before["nll"] and after["mrr"] > 0.9 > before["mrr"]
    with pytest.raises(ValueError, match="label_smoothing"):
        train_kge(model, trip, epochs=1, label_smoothing=1.0)


def test_tsv_loader(tmp_path):
    (tmp_path / "train.tsv").write_text("a\tlikes\tb\nb\tlikes\tc\n")
    (tmp_path / "test.tsv").write_text("a\thates\tc\n")
    data = load_tsv(tmp_path / "train.tsv", test=tmp_path / "test.tsv")
    assert data.n_entities == 3 and data.n_relations == 2
    assert data.train.tolist() == [[0, 1, 1], [1, 1, 2]] and data.test.tolist() == [[0, 0, 2]]
    (tmp_path / "bad.tsv").write_text("a\tb\n")
    with pytest.raises(ValueError, match="3 tab-separated"):
        load_tsv(tmp_path / "bad.tsv")


def test_synthetic_graph_controls_size_and_degree():
    trip = synthetic_graph(20, 4, n_queries=30, n_relations=2, seed=3)
    assert trip.shape == (120, 3) and trip[:, [0, 2]].max() < 20
    _, counts = np.unique(trip[:, :2], axis=0, return_counts=True)
    assert len(counts) == 30 and set(counts.tolist()) == {4}
    with pytest.raises(ValueError, match="out_degree"):
        synthetic_graph(5, 5)


def test_bad_training_and_evaluation_inputs_name_the_argument():
    model = KGEModel(np.int64(6), np.int64(2), 4, n_components=np.int64(2))  # NumPy ints work
    assert (model.n_entities, model.n_relations) == (6, 2)
    empty = np.zeros((0, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="triples is empty"):
        train_kge(model, empty, epochs=1)
    with pytest.raises(ValueError, match="triples is empty"):
        evaluate(model, empty)
    with pytest.raises(ValueError, match="n_components"):
        KGEModel(6, 2, 4, n_components=True)
    with pytest.raises(ValueError, match="init_std"):
        KGEModel(6, 2, 4, init_std=float("nan"))
    with torch.no_grad():
        model.entity[2, 1] = float("nan")
    with pytest.raises(ValueError, match="holds NaN"):
        model(torch.tensor([2]), torch.tensor([0]))
