"""Issue 52: what a PyKEEN user relies on. ``import icml26_kge_mos`` registers "moskge" (fresh
process); ``model_kwargs=dict(n_components=k)`` reaches the layer; one score function on both
sides (``score_h`` equals ``score_hrt`` for every candidate head); ``mos_pipeline`` defaults to
the paper's LCWA + cross-entropy and keeps the caller's overrides."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from icml26_kge_mos import synthetic_graph  # noqa: E402
from icml26_kge_mos.pykeen_model import MoSKGE, mos_pipeline  # noqa: E402
from pykeen.losses import CrossEntropyLoss, MarginRankingLoss, SoftplusLoss  # noqa: E402
from pykeen.pipeline import pipeline  # noqa: E402
from pykeen.training import LCWATrainingLoop, SLCWATrainingLoop  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402


def _factory(n=10, inverse=True):
    trip = synthetic_graph(n, 2, n_queries=n, n_relations=2, seed=0)
    return TriplesFactory(
        mapped_triples=torch.from_numpy(trip),
        entity_to_id={f"e{i}": i for i in range(n)},
        relation_to_id={"r0": 0, "r1": 1},
        create_inverse_triples=inverse,
    )


def _tol(ref: torch.Tensor, n: int) -> dict:
    """The brief's tolerance for a float32 result of reductions of length ``n``."""
    eps = torch.finfo(ref.dtype).eps
    return dict(rtol=8 * eps, atol=8 * eps * float(ref.abs().max()) * float(np.sqrt(n)))


def _run(code: str, timeout: int) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stderr[-4000:]}"
    return proc.stdout.strip().splitlines()[-1]


_FRESH = """
    import json, sys
    import icml26_kge_mos  # only the package: no icml26_kge_mos.pykeen_model import here
    from pykeen.models import model_resolver
    registered = "moskge" in model_resolver.lookup_dict
    from pykeen.pipeline import pipeline
    r = pipeline(
        dataset="nations", model="moskge", model_kwargs=dict(embedding_dim=4, n_components=3),
        training_loop="lcwa", loss="crossentropy", epochs=1, random_seed=0, device="cpu",
        training_kwargs=dict(batch_size=400, use_tqdm=False),
        evaluation_kwargs=dict(use_tqdm=False),
    )
    print(json.dumps(dict(
        registered=registered,
        cls=type(r.model).__module__ + "." + type(r.model).__name__,
        k=r.model.output.n_components,
        mrr=r.metric_results.get_metric("both.realistic.inverse_harmonic_mean_rank"),
    )))
"""

_NO_PYKEEN = """
    import sys, warnings
    warnings.simplefilter("error")  # no "failed to register" warning: PyKEEN is just absent
    sys.modules["pykeen"] = None  # PyKEEN not importable
    import icml26_kge_mos
    assert "icml26_kge_mos.pykeen_model" not in sys.modules
    model = icml26_kge_mos.KGEModel(5, 2, 4, n_components=2)  # the core works without it
    print(model(*[__import__("torch").tensor([0, 1])] * 2).shape[1])
"""


@pytest.mark.timeout(900)
def test_import_registers_moskge_in_a_fresh_process():
    # a fresh interpreter: the test session's own imports cannot have registered anything
    got = json.loads(_run(_FRESH, timeout=800))
    assert got["registered"] is True
    assert got["cls"] == "icml26_kge_mos.pykeen_model.MoSKGE" and got["k"] == 3
    assert 0.0 < got["mrr"] <= 1.0
    # without PyKEEN the core imports and runs, and nothing PyKEEN-side is imported
    assert _run(_NO_PYKEEN, timeout=800) == "5"


@pytest.mark.parametrize(("base", "k", "d"), [("distmult", 3, 4), ("complex", 5, 2)])
def test_n_components_reaches_the_layer(base, k, d):
    # by name through PyKEEN's pipeline, as a user passes it; a layer built with any other K
    # (e.g. always 2) has other shapes and another parameter count
    tf = _factory()
    result = pipeline(
        training=tf,
        testing=tf,
        model="moskge",
        model_kwargs=dict(embedding_dim=d, n_components=k, base=base),
        training_loop="lcwa",
        loss="crossentropy",
        epochs=1,
        random_seed=0,
        device="cpu",
        training_kwargs=dict(batch_size=64, use_tqdm=False),
        evaluation_kwargs=dict(use_tqdm=False),
    )
    model = result.model
    q = 2 * d if base == "complex" else d  # real query dimension
    out = model.output
    assert (out.n_components, out.dim) == (k, q)
    assert tuple(out.gate.weight.shape) == (k, q)  # W_π: d -> K
    assert tuple(out.heads.weight.shape) == (k * q, q) and tuple(out.heads.bias.shape) == (k * q,)
    log_pi, g = out.mixture(torch.randn(7, q))
    assert tuple(log_pi.shape) == (7, k) and tuple(g.shape) == (7, k, q)
    # (|E| + |R| incl. inverses) · q reals of embeddings + K·q² + K·q (gate) + K·q (bias) + τ
    embeddings = (tf.num_entities + tf.num_relations) * q
    assert sum(p.numel() for p in model.parameters()) == embeddings + k * q * q + 2 * k * q + 1
    linear = MoSKGE(triples_factory=tf, embedding_dim=d, n_components=1, base=base)
    assert linear.output is None
    assert sum(p.numel() for p in linear.parameters()) == embeddings


@pytest.mark.parametrize("base", ["distmult", "complex"])
def test_score_h_is_score_hrt_for_every_head(base):
    # PyKEEN's invariant: score_h(r, t)[h'] = score_hrt(h', r, t) for every candidate h', so
    # the evaluator, predict_h and score_hrt rank with one model
    tf = _factory(inverse=False)
    n = tf.num_entities
    model = MoSKGE(triples_factory=tf, embedding_dim=4, n_components=3, base=base, random_seed=0)
    with torch.no_grad():  # move away from the linear start
        model.output.heads.weight.normal_()
        model.output.heads.bias.normal_()
    rt = torch.tensor([[0, 3], [1, 2], [0, 9]])
    hrt = torch.stack(
        [torch.arange(n).repeat(3), rt[:, 0].repeat_interleave(n), rt[:, 1].repeat_interleave(n)],
        1,
    )
    q = 2 * 4 if base == "complex" else 4
    with torch.no_grad():
        ref = model.score_hrt(hrt).view(3, n)  # (B, N)
        tol = _tol(ref, q * n * 3)  # dot (q), logsumexp over N and K
        torch.testing.assert_close(model.score_h(rt), ref, **tol)
        torch.testing.assert_close(model.score_h(rt, slice_size=4), ref, **tol)
        heads = torch.tensor([5, 0, 7])
        torch.testing.assert_close(model.score_h(rt, heads=heads), ref[:, heads], **tol)
        heads2 = torch.tensor([[1, 2], [3, 4], [9, 0]])
        torch.testing.assert_close(model.score_h(rt, heads=heads2), ref.gather(1, heads2), **tol)
        torch.testing.assert_close(model.predict_h(rt), ref, **tol)  # the evaluator's path
    # gradients agree too (LCWA with target="head" trains through score_h)
    model.train()
    grads = []
    for fn in (lambda: model.score_h(rt).sum(), lambda: model.score_hrt(hrt).sum()):
        model.zero_grad()
        fn().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, **_tol(b, q * n * 3))

    # the labelled variant is a second model: normalised over heads, not equal to score_hrt
    other = MoSKGE(triples_factory=tf, embedding_dim=4, n_components=3, base=base,
                   head_scoring="head_mixture", random_seed=0)  # fmt: skip
    other.load_state_dict(model.state_dict())
    with torch.no_grad():
        mix = other.score_h(rt)
        torch.testing.assert_close(torch.logsumexp(mix, -1), torch.zeros(3))
        torch.testing.assert_close(other.score_hrt(hrt).view(3, n), ref)
        assert (mix - ref).abs().max() > 0.1


def test_mos_pipeline_defaults_to_lcwa_crossentropy_and_keeps_overrides():
    tf = _factory()
    common = dict(
        training=tf,
        testing=tf,
        model_kwargs=dict(embedding_dim=3, n_components=2),
        epochs=1,
        random_seed=0,
        device="cpu",
        training_kwargs=dict(batch_size=64, use_tqdm=False),
        evaluation_kwargs=dict(use_tqdm=False),
    )
    result = mos_pipeline(**common)
    assert isinstance(result.model, MoSKGE)
    assert isinstance(result.model.loss, CrossEntropyLoss)
    assert isinstance(result.training_loop, LCWATrainingLoop)
    with pytest.warns(UserWarning, match="mos_pipeline"):
        result = mos_pipeline(**common, training_loop="slcwa", loss="softplus")
    assert isinstance(result.model.loss, SoftplusLoss)
    assert isinstance(result.training_loop, SLCWATrainingLoop)
    # a model-level default PyKEEN honours: direct construction uses loss_default
    assert isinstance(MoSKGE(triples_factory=tf, embedding_dim=3).loss, CrossEntropyLoss)
    # ... and why mos_pipeline exists: PyKEEN's pipeline resolves loss=None to margin ranking
    with pytest.warns(UserWarning, match="MarginRankingLoss"):
        result = pipeline(model="moskge", **common)
    assert isinstance(result.model.loss, MarginRankingLoss)
    assert isinstance(result.training_loop, SLCWATrainingLoop)
