"""PyKEEN integration (extra [pykeen]): side-by-side equality and an LCWA pipeline run."""

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from icml26_kge_mos import KGEModel, MoSOutput, load_pykeen_dataset, synthetic_graph  # noqa: E402
from icml26_kge_mos.pykeen_model import SLCWA_ERROR, MoSKGE  # noqa: E402
from pykeen.models import DistMult  # noqa: E402
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


def test_k1_matches_pykeen_distmult_with_softmax():
    tf = _factory(inverse=False)
    peer = DistMult(triples_factory=tf, embedding_dim=6, random_seed=0)
    ent = peer.entity_representations[0]().detach()  # (N, d)
    rel = peer.relation_representations[0]().detach()  # (R, d)
    ours = KGEModel(tf.num_entities, tf.num_relations, 6, scorer="distmult", reciprocal=False)
    with torch.no_grad():
        ours.entity.copy_(ent)
        ours.relation.copy_(rel)
    hr = torch.tensor([[0, 0], [3, 1], [7, 0]])
    with torch.no_grad():
        expected = torch.log_softmax(peer.score_t(hr), -1)
        torch.testing.assert_close(ours(hr[:, 0], hr[:, 1]), expected)
        # MoSOutput with K = 1, identity head reproduces the same layer
        mos = MoSOutput(6, 1, activation="identity").set_identity_()
        torch.testing.assert_close(mos(ours.query(hr[:, 0], hr[:, 1]), ours.entity), expected)


def test_lcwa_pipeline_and_evaluator_run_with_mos():
    tf = _factory(n=10, c=2, inverse=True)
    training, testing = tf.split([0.8, 0.2], random_state=0)
    result = pipeline(
        training=training,
        testing=testing,
        model=MoSKGE,
        model_kwargs=dict(embedding_dim=4, scorer="complex", n_components=3),
        training_loop="lcwa",
        loss="crossentropy",
        epochs=3,
        random_seed=0,
        device="cpu",
        training_kwargs=dict(batch_size=16, use_tqdm=False, label_smoothing=0.1),
        evaluation_kwargs=dict(use_tqdm=False),
    )
    model = result.model
    hr = torch.tensor([[0, 0], [1, 1]])  # predict_t maps r to the stored id 2r
    with torch.no_grad():
        scores = model.predict_t(hr)
    torch.testing.assert_close(torch.logsumexp(scores, -1), torch.zeros(2))
    mrr = result.metric_results.get_metric("both.realistic.inverse_harmonic_mean_rank")
    assert 0.0 < mrr <= 1.0 and np.isfinite(result.losses).all() and len(result.losses) == 3


def test_score_variants_are_consistent():
    tf = _factory(inverse=False)
    model = MoSKGE(triples_factory=tf, embedding_dim=4, n_components=2, random_seed=0).eval()
    hrt = torch.tensor([[0, 1, 3], [2, 0, 5]])
    with torch.no_grad():
        full = model.score_t(hrt[:, :2])
        torch.testing.assert_close(model.score_hrt(hrt), full.gather(1, hrt[:, 2:]))
        torch.testing.assert_close(
            model.score_t(hrt[:, :2], tails=torch.tensor([3, 4])), full[:, [3, 4]]
        )
        r_scores = model.score_r(hrt[:, [0, 2]])  # (B, R)
        torch.testing.assert_close(r_scores[0, 1], full[0, 3])
        heads = model.score_h(hrt[:, 1:])  # reciprocal relation of the KGE
        torch.testing.assert_close(heads, model.kge(hrt[:, 2], hrt[:, 1] + 2))
        torch.testing.assert_close(model.score_t(hrt[:, :2], slice_size=3), full)


def test_slcwa_and_wrong_loss_are_refused():
    tf = _factory()
    with pytest.raises(ValueError, match="CrossEntropyLoss"):
        MoSKGE(triples_factory=tf, loss="marginranking")
    model = MoSKGE(triples_factory=tf, embedding_dim=4).train()
    with pytest.raises(ValueError, match="sLCWA"):
        model.score_hrt(torch.tensor([[0, 0, 1]]))
    assert "lcwa" in SLCWA_ERROR
    # what a user sees when asking PyKEEN's pipeline for negative sampling
    with pytest.raises(ValueError, match="sLCWA negative sampling"):
        pipeline(
            training=tf,
            testing=tf,
            model=MoSKGE,
            model_kwargs=dict(embedding_dim=4, n_components=2),
            training_loop="slcwa",
            loss="crossentropy",
            epochs=1,
            random_seed=0,
            device="cpu",
            training_kwargs=dict(batch_size=16, use_tqdm=False),
        )


def test_lcwa_pipeline_on_a_bundled_pykeen_dataset():
    # PyKEEN's own Nations dataset (inverse triples), LCWA training and rank-based evaluator
    result = pipeline(
        dataset="nations",
        dataset_kwargs=dict(create_inverse_triples=True),
        model=MoSKGE,
        model_kwargs=dict(embedding_dim=8, scorer="distmult", n_components=2),
        training_loop="lcwa",
        loss="crossentropy",
        epochs=2,
        random_seed=0,
        device="cpu",
        training_kwargs=dict(batch_size=512, use_tqdm=False),
        evaluation_kwargs=dict(use_tqdm=False),
    )
    assert result.model.kge.n_entities == 14 and result.model.kge.relation.shape[0] == 2 * 55
    hr = torch.tensor([[0, 0], [5, 54]])
    with torch.no_grad():
        scores = result.model.predict_t(hr)
    torch.testing.assert_close(torch.logsumexp(scores, -1), torch.zeros(2))
    mrr = result.metric_results.get_metric("both.realistic.inverse_harmonic_mean_rank")
    assert 1 / 14 < mrr <= 1.0 and np.isfinite(result.losses).all()


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
