import numpy as np
import pytest
import torch
from icml26_kge_mos import MoSOutput, linear_log_probs, mos_log_probs_ref, mos_log_probs_sliced


def _inputs(b=5, k=3, n=11, d=4, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    log_pi = torch.log_softmax(torch.randn(b, k, generator=gen, dtype=dtype), -1)
    g = torch.randn(b, k, d, generator=gen, dtype=dtype)
    ent = torch.randn(n, d, generator=gen, dtype=dtype) * 2
    return log_pi, g, ent


@pytest.mark.parametrize("impl", ["ref", "sliced"])
def test_rows_are_normalised(impl):
    layer = MoSOutput(6, 4, chunk_size=5 if impl == "sliced" else None).double()
    h = torch.randn(7, 6, dtype=torch.float64) * 3
    ent = torch.randn(23, 6, dtype=torch.float64) * 3
    logp = layer(h, ent)
    assert logp.shape == (7, 23)
    torch.testing.assert_close(torch.logsumexp(logp, -1), torch.zeros(7, dtype=torch.float64))


def test_reference_matches_probability_space_mixture():
    log_pi, g, ent = _inputs()
    probs = torch.softmax(g @ ent.T, -1)  # (B, K, N)
    mix = (log_pi.exp().unsqueeze(-1) * probs).sum(1)
    torch.testing.assert_close(mos_log_probs_ref(log_pi, g, ent), mix.log())


def test_log_space_is_stable_where_probability_space_underflows():
    # float32 logits of order 1e3: mixing probabilities underflows to log(0) = -inf, the
    # log-space paths stay finite, normalised and equal to a float64 evaluation
    log_pi, g, ent = _inputs(dtype=torch.float32)
    g = g * 300
    naive = torch.log((log_pi.exp().unsqueeze(-1) * torch.softmax(g @ ent.T, -1)).sum(1))
    assert torch.isinf(naive).any()
    ref64 = mos_log_probs_ref(log_pi.double(), g.double(), ent.double())
    for fn in (mos_log_probs_ref, lambda *a: mos_log_probs_sliced(*a, chunk_size=4)):
        ins = [t.clone().requires_grad_() for t in (log_pi, g, ent)]
        out = fn(*ins)
        assert torch.isfinite(out).all()
        # float32 rounding of logits ~1e3 is ~1e-4 in absolute terms
        torch.testing.assert_close(torch.logsumexp(out, -1), torch.zeros(5), rtol=0, atol=1e-3)
        torch.testing.assert_close(out.double(), ref64, rtol=1e-5, atol=1e-3)
        out[:, 0].sum().backward()
        assert all(torch.isfinite(t.grad).all() for t in ins)


def test_k1_identity_head_is_the_linear_layer():
    torch.manual_seed(0)
    layer = MoSOutput(5, 1, activation="identity").double().set_identity_()
    h, ent = torch.randn(8, 5, dtype=torch.float64), torch.randn(13, 5, dtype=torch.float64)
    torch.testing.assert_close(layer(h, ent), torch.log_softmax(h @ ent.T, -1))
    torch.testing.assert_close(layer(h, ent), linear_log_probs(h, ent))


def test_tanh_k1_is_not_linear():
    # the tanh head changes the function: guards against the activation being ignored
    layer = MoSOutput(5, 1, activation="tanh").double().set_identity_()
    h, ent = torch.randn(8, 5, dtype=torch.float64) * 3, torch.randn(13, 5, dtype=torch.float64)
    assert not torch.allclose(layer(h, ent), linear_log_probs(h, ent))


@pytest.mark.parametrize("chunk", [1, 4, 11, 64])
def test_sliced_forward_and_grads_match_reference(chunk):
    log_pi, g, ent = _inputs(n=11)
    ref_in = [t.clone().requires_grad_() for t in (log_pi, g, ent)]
    fus_in = [t.clone().requires_grad_() for t in (log_pi, g, ent)]
    ref = mos_log_probs_ref(*ref_in)
    fus = mos_log_probs_sliced(*fus_in, chunk_size=chunk)
    torch.testing.assert_close(fus, ref)
    w = torch.randn_like(ref)
    (ref * w).sum().backward()
    (fus * w).sum().backward()
    for a, b in zip(ref_in, fus_in):
        torch.testing.assert_close(b.grad, a.grad)


def test_sliced_gradcheck():
    log_pi, g, ent = _inputs(b=3, k=2, n=7, d=3)
    ins = tuple(t.requires_grad_() for t in (log_pi, g, ent))
    assert torch.autograd.gradcheck(lambda a, b, c: mos_log_probs_sliced(a, b, c, 3), ins)


def test_layer_backward_through_sliced_path_matches_reference():
    torch.manual_seed(1)
    layer = MoSOutput(4, 3).double()
    h = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    ent = torch.randn(17, 4, dtype=torch.float64, requires_grad=True)
    grads = []
    for chunk in (None, 5):
        layer.zero_grad()
        h.grad = ent.grad = None
        layer(h, ent, chunk_size=chunk)[:, 3].sum().backward()
        grads.append([h.grad.clone(), ent.grad.clone(), layer.heads.weight.grad.clone()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_extra_parameters_independent_of_entities():
    layer = MoSOutput(8, 4)
    assert layer.extra_parameters() == 8 * 4 + 4 * 8 * 8 + 4 * 8 + 1  # gate, heads, τ


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(dim=0), "dim"),
        (dict(dim=4, n_components=0), "n_components"),
        (dict(dim=4, activation="relu"), "activation"),
        (dict(dim=4, chunk_size=0), "chunk_size"),
    ],
)
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MoSOutput(**kwargs)


def test_bad_shapes():
    layer = MoSOutput(4, 2)
    with pytest.raises(ValueError, match="h must have shape"):
        layer(torch.randn(3, 5), torch.randn(6, 4))
    with pytest.raises(ValueError, match="entities must have shape"):
        layer(torch.randn(3, 4), torch.randn(6, 3))
    log_pi, g, ent = _inputs()
    with pytest.raises(ValueError, match="chunk_size"):
        mos_log_probs_sliced(log_pi, g, ent, chunk_size=0)
    with pytest.raises(ValueError, match="g must have shape"):
        mos_log_probs_ref(log_pi, g[:, :1], ent)


def _numpy_mos(layer: MoSOutput, h: np.ndarray, ent: np.ndarray) -> np.ndarray:
    """Brute force from the layer's parameters, in NumPy float64 (no package function)."""
    wp = layer.gate.weight.detach().double().numpy()  # (K, d)
    wh = layer.heads.weight.detach().double().numpy()  # (K·d, d)
    bh = layer.heads.bias.detach().double().numpy()  # (K·d,)
    tau = float(layer.log_scale.detach().exp())
    k, d = layer.n_components, layer.dim
    out = np.zeros((len(h), len(ent)))
    for b, hb in enumerate(h):
        a = wp @ hb
        pi = np.exp(a - a.max()) / np.exp(a - a.max()).sum()
        for j in range(k):
            pre = wh[j * d : (j + 1) * d] @ hb + bh[j * d : (j + 1) * d]
            g = {"tanh": np.tanh(pre), "identity": pre, "residual": hb + np.tanh(pre)}[
                layer.activation
            ]
            z = ent @ (tau * g)
            out[b] += pi[j] * np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    return np.log(out)


@pytest.mark.parametrize("activation", ["residual", "tanh", "identity"])
def test_layer_matches_numpy_brute_force_and_gate_depends_on_h(activation):
    # A gate that ignores h (uniform or constant mixture) fails the first assert: the brute
    # force evaluates softmax(W_pi h) per query. The second pins that the gate is not constant.
    torch.manual_seed(3)
    layer = MoSOutput(4, 3, activation=activation, init="random").double()
    with torch.no_grad():
        layer.gate.weight.mul_(4.0)  # make the mixture weights far from uniform
        layer.log_scale.fill_(0.3)
    h = torch.randn(6, 4, dtype=torch.float64) * 2
    ent = torch.randn(9, 4, dtype=torch.float64) * 2
    expected = _numpy_mos(layer, h.numpy(), ent.numpy())
    np.testing.assert_allclose(layer(h, ent).detach().numpy(), expected, rtol=1e-10)
    log_pi = layer.mixture(h)[0].detach()
    assert float((log_pi.exp().max(1).values - log_pi.exp().min(1).values).min()) > 0.05
    assert float((log_pi[0] - log_pi[1]).abs().max()) > 0.05


@pytest.mark.parametrize("activation", ["residual", "identity"])
@pytest.mark.parametrize("k", [2, 5])
def test_identity_init_is_exactly_the_linear_layer(activation, k):
    # superset start: any K, any (random) gate, the layer equals log softmax(E h) at init
    torch.manual_seed(k)
    layer = MoSOutput(5, k, activation=activation).double()
    assert layer.init == "identity"
    h, ent = torch.randn(8, 5, dtype=torch.float64) * 2, torch.randn(13, 5, dtype=torch.float64)
    expected = h.numpy() @ ent.numpy().T
    expected = expected - np.log(np.exp(expected).sum(1, keepdims=True))
    np.testing.assert_allclose(layer(h, ent).detach().numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((4, True), {}, "n_components"),
        ((True,), {}, "dim"),
        ((4, 2.0), {}, "n_components"),
        ((4,), dict(init="zeros"), "init"),
        ((4,), dict(gate_bias=1), "gate_bias"),
    ],
)
def test_bad_constructor_values_name_the_argument(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        MoSOutput(*args, **kwargs)


def test_numpy_integer_sizes_are_accepted():
    layer = MoSOutput(np.int64(4), np.int64(2))
    assert (layer.dim, layer.n_components) == (4, 2) and type(layer.dim) is int


def test_bad_forward_inputs_name_the_argument():
    layer = MoSOutput(4, 2)  # float32
    h, ent = torch.randn(3, 4), torch.randn(6, 4)
    with pytest.raises(ValueError, match="h has dtype torch.float64"):
        layer(h.double(), ent)
    with pytest.raises(ValueError, match="entities has dtype"):
        layer(h, ent.double())
    bad = h.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="h holds NaN"):
        layer(bad, ent)
    bad = ent.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="entities holds NaN"):
        layer(h, bad)
