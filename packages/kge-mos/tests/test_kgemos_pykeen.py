"""PyKEEN integration (extra [pykeen]): MoSKGE is a registered ERModel; side-by-side equality
with PyKEEN's DistMult / ComplEx; a trained pipeline checked against a brute-force evaluator."""

import gc

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from icml26_kge_mos import KGEModel, load_pykeen_dataset, synthetic_graph  # noqa: E402
from icml26_kge_mos.pykeen_model import MoSKGE  # noqa: E402
from pykeen.models import ComplEx, DistMult, ERModel, model_resolver  # noqa: E402
from pykeen.pipeline import pipeline  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402


def _factory(n=10, c=2, inverse=True, seed=0):
    trip = synthetic_graph(n, c, n_queries=n, n_relations=2, seed=seed)
    return TriplesFactory(
        mapped_triples=torch.from_numpy(trip),
        entity_to_id={f"e{i}": i for i in range(n)},
        relation_to_id={"r0": 0, "r1": 1},
        create_inverse_triples=inverse,
    )


def _copy_representations(src, dst):
    with torch.no_grad():
        for a, b in (
            (src.entity_representations[0], dst.entity_representations[0]),
            (src.relation_representations[0], dst.relation_representations[0]),
        ):
            b._embeddings.weight.copy_(a._embeddings.weight)


def test_registered_real_ermodel():
    assert issubclass(MoSKGE, ERModel)
    assert model_resolver.lookup("moskge") is MoSKGE
    model = MoSKGE(triples_factory=_factory(), embedding_dim=4)
    assert type(model.interaction).__name__ == "DistMultInteraction"
    assert len(model.entity_representations) == 1


@pytest.mark.parametrize(("base", "peer_cls"), [("distmult", DistMult), ("complex", ComplEx)])
@pytest.mark.parametrize("k", [1, 4])
def test_starts_as_pykeen_model_with_softmax(base, peer_cls, k):
    # K = 1: PyKEEN's scores. K = 4 at initialisation: the MoS heads start at the linear
    # layer, so log p(t | h, r) is log_softmax over tails of PyKEEN's own DistMult / ComplEx
    # scores. score_h (tail model) scores head h' by that same log p(t | h', r); the
    # head-mixture variant is log_softmax over heads (its ComplEx query needs conj(r)).
    tf = _factory(inverse=False)
    peer = peer_cls(triples_factory=tf, embedding_dim=6, random_seed=0, regularizer=None)
    hrt = torch.tensor([[0, 0, 3], [3, 1, 2], [7, 0, 9]])
    n = tf.num_entities
    for head_scoring in ("tail_model", "head_mixture"):
        ours = MoSKGE(
            triples_factory=tf,
            embedding_dim=6,
            n_components=k,
            base=base,
            head_scoring=head_scoring,
            random_seed=1,
        )
        _copy_representations(peer, ours)
        with torch.no_grad():
            got_t, want_t = ours.score_t(hrt[:, :2]), peer.score_t(hrt[:, :2])
            got_h, want_h = ours.score_h(hrt[:, 1:]), peer.score_h(hrt[:, 1:])
            if k > 1:
                want_t = torch.log_softmax(want_t, -1)
                if head_scoring == "head_mixture":
                    want_h = torch.log_softmax(want_h, -1)
                else:  # (h', r) for every head h' -> log_softmax over tails -> column t
                    hr = torch.stack([torch.arange(n).repeat(3), hrt[:, 1].repeat_interleave(n)], 1)
                    rows = torch.log_softmax(peer.score_t(hr), -1)  # (3·N, N)
                    want_h = rows.gather(1, hrt[:, 2].repeat_interleave(n)[:, None]).view(3, n)
            torch.testing.assert_close(got_t, want_t, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got_h, want_h, rtol=1e-5, atol=1e-6)


def test_k1_kge_model_matches_pykeen_distmult():
    tf = _factory(inverse=False)
    peer = DistMult(triples_factory=tf, embedding_dim=6, random_seed=0)
    ours = KGEModel(tf.num_entities, tf.num_relations, 6, scorer="distmult", reciprocal=False)
    with torch.no_grad():
        ours.entity.copy_(peer.entity_representations[0]())
        ours.relation.copy_(peer.relation_representations[0]())
        hr = torch.tensor([[0, 0], [3, 1], [7, 0]])
        expected = torch.log_softmax(peer.score_t(hr), -1)
        torch.testing.assert_close(ours(hr[:, 0], hr[:, 1]), expected)


def test_score_variants_are_consistent():
    model = MoSKGE(triples_factory=_factory(inverse=False), embedding_dim=4, n_components=3)
    with torch.no_grad():  # move away from the linear start
        model.output.heads.weight.normal_()
    hrt = torch.tensor([[0, 1, 3], [2, 0, 5]])
    with torch.no_grad():
        full = model.score_t(hrt[:, :2])
        torch.testing.assert_close(torch.logsumexp(full, -1), torch.zeros(2))
        torch.testing.assert_close(model.score_hrt(hrt), full.gather(1, hrt[:, 2:]))
        torch.testing.assert_close(
            model.score_t(hrt[:, :2], tails=torch.tensor([3, 4])), full[:, [3, 4]]
        )
        by_relation = model.score_r(hrt[:, [0, 2]])  # (B, R): log p(t | h, r) for each r
        other = model.score_t(torch.tensor([[0, 0], [2, 1]]))
        torch.testing.assert_close(by_relation[:, 1], torch.stack([full[0, 3], other[1, 5]]))
        torch.testing.assert_close(by_relation[:, 0], torch.stack([other[0, 3], full[1, 5]]))
        torch.testing.assert_close(model.score_t(hrt[:, :2], slice_size=3), full)
    model.train()
    assert model.score_hrt(hrt).requires_grad  # training mode works (sLCWA-compatible)


def test_wrong_loss_and_bad_arguments_are_refused():
    tf = _factory()
    with pytest.warns(UserWarning, match="loss='crossentropy'"):
        MoSKGE(triples_factory=tf, loss="marginranking")
    for kwargs, match in (
        (dict(n_components=0), "n_components"),
        (dict(embedding_dim=True), "embedding_dim"),
        (dict(base="transe"), "base"),
        (dict(activation="relu"), "activation"),
        (dict(mos_init="zeros"), "mos_init"),
    ):
        with pytest.raises(ValueError, match=match):
            MoSKGE(triples_factory=tf, **kwargs)


def test_pipeline_by_name_fits_and_ranks_like_brute_force():
    # pipeline(model="moskge") with PyKEEN's LCWA loop and rank-based evaluator; the tiny graph
    # is memorised (train MRR near 1 is impossible for a random or untrained model: 1/10-ish),
    # and PyKEEN's filtered tail MRR equals a brute-force recomputation from score_t.
    tf = _factory(n=10, c=2, inverse=True)
    # PyKEEN runs gc.collect() every epoch: cheap once the long-lived objects (torch._dynamo,
    # which the first optimiser imports) are frozen out of the collector's reach
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    gc.freeze()
    result = pipeline(
        training=tf,
        testing=tf,
        model="moskge",
        model_kwargs=dict(embedding_dim=6, n_components=3),
        training_loop="lcwa",
        loss="crossentropy",  # PyKEEN's pipeline ignores a model's loss_default
        optimizer="adam",
        optimizer_kwargs=dict(lr=0.1),
        epochs=40,
        random_seed=0,
        device="cpu",
        training_kwargs=dict(batch_size=64, use_tqdm=False),
        evaluation_kwargs=dict(use_tqdm=False),
    )
    gc.unfreeze()
    model = result.model.eval()
    assert isinstance(model, MoSKGE) and result.losses[-1] < result.losses[0]
    mrr = result.metric_results.get_metric("tail.realistic.inverse_harmonic_mean_rank")
    trip = tf.mapped_triples.numpy()
    with torch.no_grad():
        scores = model.predict_t(torch.from_numpy(trip[:, :2])).numpy()  # maps r -> 2r
    rr = []
    for (s, r, o), row in zip(trip, scores):
        others = [e for e in range(10) if e != o and not ((trip == (s, r, e)).all(1)).any()]
        better = sum(row[e] > row[o] for e in others)
        tied = sum(row[e] == row[o] for e in others)
        rr.append(1.0 / (1 + better + tied / 2))
    assert mrr == pytest.approx(np.mean(rr), rel=1e-6)
    assert mrr > 0.9


def test_bundled_datasets_load():
    for name, n_ent, n_rel, n_train in (
        ("nations", 14, 55, 1592),
        ("umls", 135, 46, 5216),
        ("kinships", 104, 25, 8544),
    ):
        data = load_pykeen_dataset(name)
        assert (data.n_entities, data.n_relations, len(data.train)) == (n_ent, n_rel, n_train)
    with pytest.raises(ValueError, match="name"):
        load_pykeen_dataset("fb15k")
