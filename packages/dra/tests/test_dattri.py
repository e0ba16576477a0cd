"""Side by side with dattri (TRAIS-Lab) on a tiny MLP: TracIn / Grad-Cos and the adapter."""

import numpy as np
import pytest
import torch
from icml26_dra import DRA, DRAAttributor, GradSim, TracIn, per_sample_grads

dattri_task = pytest.importorskip("dattri.task")
dattri_tracin = pytest.importorskip("dattri.algorithm.tracin")


def _setup(n_ckpt=2):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ckpts = []
    for _ in range(n_ckpt):
        ckpts.append({k: v.clone() for k, v in model.state_dict().items()})
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
    x_tr, y_tr = torch.randn(24, 5), torch.randint(0, 3, (24,))
    x_te, y_te = torch.randn(6, 5), torch.randint(0, 3, (6,))

    def loss_func(params, data):
        x, y = data
        out = torch.func.functional_call(model, params, (x[None],))
        return torch.nn.functional.cross_entropy(out, y[None])

    task = dattri_task.AttributionTask(loss_func=loss_func, model=model, checkpoints=ckpts)
    dl = lambda x, y: torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=5, shuffle=False
    )
    return model, ckpts, task, (x_tr, y_tr, dl(x_tr, y_tr)), (x_te, y_te, dl(x_te, y_te))


def _ours(model, ckpt, x, y):
    model.load_state_dict(ckpt)

    def loss_fn(m, s):
        return torch.nn.functional.cross_entropy(m(s["x"]), s["y"])

    return per_sample_grads(model, {"x": x, "y": y}, loss_fn=loss_fn)


def test_tracin_matches_dattri_tracin():
    model, ckpts, task, (x_tr, y_tr, dl_tr), (x_te, y_te, dl_te) = _setup()
    eta = torch.tensor([0.5, 0.2])
    att = dattri_tracin.TracInAttributor(task, weight_list=eta, normalized_grad=False)
    att.projector_kwargs = None  # dattri always projects to 512 dims by default; compare exactly
    ref = att.attribute(dl_tr, dl_te).numpy()  # (24, 6)
    g = np.stack([_ours(model, c, x_tr, y_tr) for c in ckpts])  # (C, 24, P)
    gt = np.stack([_ours(model, c, x_te, y_te) for c in ckpts])
    ours = TracIn().fit(g, gt, weights=eta.numpy())
    np.testing.assert_allclose(ours.pairwise_, ref, rtol=1e-4, atol=1e-6)
    cos = dattri_tracin.TracInAttributor(task, weight_list=eta, normalized_grad=True)
    cos.projector_kwargs = None
    np.testing.assert_allclose(
        GradSim().fit(g, gt, weights=eta.numpy()).pairwise_,
        cos.attribute(dl_tr, dl_te).numpy(),
        rtol=1e-4,
        atol=1e-6,
    )


def test_dra_attributor_in_dattri_interface():
    model, ckpts, task, (x_tr, y_tr, dl_tr), (x_te, y_te, dl_te) = _setup(n_ckpt=1)
    # no denoising, every dim: Grad-Cos, i.e. dattri's TracIn with normalized gradients
    plain = DRAAttributor(task, center=False, whiten="none", k="all")
    plain.cache(dl_tr)
    ref = dattri_tracin.TracInAttributor(task, weight_list=torch.ones(1), normalized_grad=True)
    ref.projector_kwargs = None
    np.testing.assert_allclose(
        plain.attribute(dl_tr, dl_te).numpy(),
        ref.attribute(dl_tr, dl_te).numpy(),
        rtol=1e-4,
        atol=1e-6,
    )
    # the full DRA: same scores as DRA on our own per-sample gradients
    att = DRAAttributor(task)
    att.cache(dl_tr)
    pair = att.attribute(dl_tr, dl_te).numpy()  # (24, 6)
    dra = DRA("gradient").fit(
        _ours(model, ckpts[0], x_tr, y_tr), _ours(model, ckpts[0], x_te, y_te)
    )
    np.testing.assert_allclose(pair.mean(axis=1), dra.score(), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(np.sort(att.selection_.dims), np.sort(dra.dims_))


def test_adapter_implements_dattri_base_attributor_interface():
    """Not a subclass (importing dattri.algorithm pulls in scipy, sympy, triton...: too heavy
    for ``import icml26_dra``); it implements every abstract method of dattri's base class with
    the same parameter names (``BaseAttributor.register(DRAAttributor)`` makes it a virtual
    subclass where a caller needs ``isinstance``)."""
    import inspect

    base = pytest.importorskip("dattri.algorithm.base").BaseAttributor
    for name in base.__abstractmethods__:
        if name == "__init__":
            continue
        want = list(inspect.signature(getattr(base, name)).parameters)
        got = list(inspect.signature(getattr(DRAAttributor, name)).parameters)
        assert got == want, (name, got, want)
