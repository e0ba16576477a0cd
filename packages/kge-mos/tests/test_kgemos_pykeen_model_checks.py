"""The checks PyKEEN's own ``ModelTestCase`` (pykeen tests/cases.py) makes of every model,
written here for :class:`MoSKGE` (no code copied). One function per check; each runs for every
configuration in ``CONFIGS``. Differences from PyKEEN's case, with the reason:

* ``reset_parameters_``: the MoS heads (weight, bias) and the temperature start at a constant
  (the linear layer) by design, so they are this model's ``num_constant_init`` (3 tensors;
  1, the temperature, with ``mos_init="random"``).
* the regularizer check is skipped when the model has no ``regularizer`` attribute, as in
  PyKEEN's case (``ERModel`` keeps regularizers on its representations).
* PyKEEN's pipeline defaults to ``MarginRankingLoss`` whatever a model's ``loss_default``;
  MoSKGE then trains with a warning. The CLI run passes ``--loss crossentropy --training-loop
  lcwa`` (the paper's objective).
* PyKEEN runs ``gc.collect()`` every epoch; the module freezes the collector's long-lived
  objects first (speed only).
"""

import gc
import tempfile
from pathlib import Path
from unittest.mock import patch

import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from click.testing import CliRunner  # noqa: E402
from icml26_kge_mos.pykeen_model import MoSKGE  # noqa: E402
from pykeen.datasets import Nations  # noqa: E402
from pykeen.datasets.nations import NATIONS_TRAIN_PATH  # noqa: E402
from pykeen.models.cli.builders import build_cli_from_cls  # noqa: E402
from pykeen.pipeline import pipeline  # noqa: E402
from pykeen.training import LCWATrainingLoop, SLCWATrainingLoop  # noqa: E402

BATCH = 20
CONFIGS = {
    "distmult-k4": dict(n_components=4),
    "complex-k3": dict(n_components=3, base="complex"),
    "distmult-k1": dict(n_components=1),
    "distmult-k2-tanh-random": dict(n_components=2, activation="tanh", mos_init="random"),
    "constrained-regularised": dict(
        n_components=2, entity_constrainer="normalize", regularizer="lp"
    ),
}


@pytest.fixture(scope="module", autouse=True)
def _frozen_gc():
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(scope="module")
def factory():
    return Nations(create_inverse_triples=False).training


@pytest.fixture(params=sorted(CONFIGS))
def case(request, factory):
    kwargs = dict(triples_factory=factory, embedding_dim=3, **CONFIGS[request.param])
    torch.manual_seed(42)
    return MoSKGE(**kwargs), kwargs


def _n_constant(kwargs):
    """Tensors with a constant initialisation: log τ = 0; identity init also W_k, b_k."""
    if kwargs.get("n_components", 4) == 1:
        return 0
    return 3 if kwargs.get("mos_init", "identity") == "identity" else 1


def test_get_grad_parameters(case):
    model, _ = case
    params = list(model.get_grad_params())
    assert params and all(p.requires_grad for p in params)
    torch.optim.SGD(params=params, lr=1.0)


def test_reset_parameters_in_place_changes_all_but_constant_init(case):
    model, kwargs = case
    params = list(model.parameters())
    old = {id(p): p.detach().clone() for p in params}
    model.reset_parameters_()
    assert {id(p) for p in model.parameters()} == set(old)
    unchanged = sum(bool((p == old[id(p)]).all()) for p in model.parameters())
    assert unchanged == _n_constant(kwargs)


def test_reset_parameters_called_once_in_constructor(case):
    _, kwargs = case
    with patch.object(MoSKGE, "reset_parameters_", return_value=None) as mock:
        MoSKGE(**kwargs)
    mock.assert_called_once()


def test_save(case):
    model, _ = case
    with tempfile.TemporaryDirectory() as d:
        torch.save(model, Path(d) / "model.pickle")


def _check(model, scores, shape):
    assert tuple(scores.shape) == shape
    assert torch.isfinite(scores).all()
    scores.mean().backward()
    model.post_parameter_update()


@pytest.mark.parametrize(
    ("name", "cols", "width"),
    [
        ("score_hrt", slice(None), lambda m: 1),
        ("score_t", slice(0, 2), lambda m: m.num_entities),
        ("score_h", slice(1, None), lambda m: m.num_entities),
        ("score_r", [0, 2], lambda m: m.num_relations),
    ],
)
def test_score_functions(case, factory, name, cols, width):
    model, _ = case
    batch = factory.mapped_triples[:BATCH, cols]
    _check(model, getattr(model, name)(batch, mode=None), (BATCH, width(model)))


@pytest.mark.parametrize(
    ("name", "cols", "arg", "max_id"),
    [
        ("score_t", slice(0, 2), "tails", "num_entities"),
        ("score_h", slice(1, None), "heads", "num_entities"),
        ("score_r", [0, 2], "relations", "num_relations"),
    ],
)
def test_score_functions_multi(case, factory, name, cols, arg, max_id):
    model, _ = case
    n = getattr(model, max_id)
    k = n // 2
    batch = factory.mapped_triples[:BATCH, cols]
    for ids in (torch.randperm(n)[:k], torch.randint(n, size=(BATCH, k))):
        model.zero_grad()
        _check(model, getattr(model, name)(batch, mode=None, **{arg: ids}), (BATCH, k))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("loop_cls", [SLCWATrainingLoop, LCWATrainingLoop])
def test_training_loops(case, factory, loop_cls):
    model, _ = case
    loop = loop_cls(
        model=model,
        triples_factory=factory,
        optimizer=torch.optim.Adagrad(params=model.get_grad_params(), lr=0.001),
    )
    losses = loop.train(triples_factory=factory, num_epochs=2, batch_size=400, use_tqdm=False)
    assert isinstance(losses, list) and len(losses) == 2


def test_save_load_model_state(case):
    _, kwargs = case
    a = MoSKGE(**{**kwargs, "random_seed": 42})
    b = MoSKGE(**{**kwargs, "random_seed": 21})
    with tempfile.TemporaryDirectory() as d:
        a.save_state(path=Path(d) / "test.pt")
        b.load_state(path=Path(d) / "test.pt")
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb and torch.equal(pa, pb)


def test_has_hpo_defaults(case):
    assert isinstance(MoSKGE.hpo_default, dict) and "n_components" in MoSKGE.hpo_default


def test_post_parameter_update_regularizer(case):
    model, _ = case
    if not hasattr(model, "regularizer"):
        pytest.skip("no model-level regularizer (ERModel keeps them on its representations)")


def test_post_parameter_update_enforces_constraints(case, factory):
    model, kwargs = case
    opt = torch.optim.SGD(params=model.parameters(), lr=1.0)
    model.score_hrt(hrt_batch=factory.mapped_triples[:BATCH], mode=None).mean().backward()
    opt.step()
    model.post_parameter_update()
    if kwargs.get("entity_constrainer") == "normalize":
        norms = model.entity_representations[0](indices=None).norm(dim=-1)
        torch.testing.assert_close(norms, torch.ones_like(norms))


def test_regularizer_contributes_to_the_loss(factory):
    model = MoSKGE(triples_factory=factory, embedding_dim=3, regularizer="lp")
    model.score_t(factory.mapped_triples[:BATCH, :2])
    assert float(model.collect_regularization_term()) > 0


def _cli(args):
    result = CliRunner().invoke(build_cli_from_cls(MoSKGE), [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)


def test_cli_exposes_the_hyperparameters_and_trains_nations():
    cli = build_cli_from_cls(MoSKGE)
    names = {o.name for o in cli.params}
    assert {"n_components", "base", "activation", "mos_init", "embedding_dim"} <= names
    assert "loss" in names
    _cli(["-t", NATIONS_TRAIN_PATH, "--silent", "--n-components", 3, "--base", "complex",
          "--loss", "crossentropy", "--training-loop", "lcwa", "--number-epochs", 2,
          "--embedding-dim", 3, "--batch-size", 400])  # fmt: skip


@pytest.mark.parametrize("base", ["distmult", "complex"])
def test_pipeline_nations_early_stopper(base):
    result = pipeline(
        model=MoSKGE,
        model_kwargs=dict(embedding_dim=3, n_components=2, base=base),
        dataset="nations",
        loss="crossentropy",
        training_loop="lcwa",
        stopper="early",
        stopper_kwargs={"frequency": 1},
        training_kwargs={"batch_size": 400, "num_epochs": 2},
    )
    assert isinstance(result.model, MoSKGE) and len(result.losses) == 2
