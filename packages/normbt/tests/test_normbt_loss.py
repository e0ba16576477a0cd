"""The loss: gradient identities, EMA state, weights, pooling, bad input."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F
from icml26_normbt import (
    NormBTState,
    bt_loss,
    head_gradient_factors,
    head_gradient_norms_autograd,
    last_token_pool,
    normbt_loss,
    normbt_weights,
)


def _batch(b=7, h=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    h_c = torch.randn(b, h, generator=g, dtype=torch.float64)
    # distances spread over two orders of magnitude so the identities are not trivially met
    scales = torch.logspace(-1, 1, b, dtype=torch.float64)
    h_r = h_c + scales[:, None] * torch.randn(b, h, generator=g, dtype=torch.float64)
    v = torch.randn(h, generator=g, dtype=torch.float64)
    return h_c, h_r, v


def _per_pair_head_grads(loss_fn, v, h_c, h_r):
    """Per-pair ∂ℓ_i/∂v by one backward per pair (independent of torch.func)."""
    out = []
    for i in range(h_c.shape[0]):
        vv = v.clone().requires_grad_(True)
        loss_fn(i, vv).backward()
        out.append(vv.grad.clone())
    return torch.stack(out)


def test_bt_loss_is_negative_log_bradley_terry_probability():
    r_c, r_r = torch.randn(6), torch.randn(6)
    margin = torch.rand(6)
    p = torch.exp(r_c) / (torch.exp(r_c) + torch.exp(r_r + margin))  # P(c ≻ r) with margin
    torch.testing.assert_close(bt_loss(r_c, r_r, margin), -torch.log(p).mean())
    torch.testing.assert_close(bt_loss(r_c[:, None], r_r[:, None], 0.3), bt_loss(r_c, r_r, 0.3))


def test_bt_head_gradient_identity_autograd_vs_closed_form():
    h_c, h_r, v = _batch()
    r_c, r_r = h_c @ v, h_r @ v
    margin = torch.linspace(-0.5, 0.5, h_c.shape[0])
    # closed form ‖∇_v ℓ_i‖ = σ(−(Δr_i − m_i)) · d_i
    f = head_gradient_factors(r_c, r_r, h_c, h_r, margin=margin)
    sig = torch.sigmoid(-(r_c - r_r - margin))
    d = torch.linalg.vector_norm(h_c - h_r, dim=-1)
    torch.testing.assert_close(f.grad_norm.double(), (sig * d), rtol=1e-5, atol=1e-6)
    # per-sample autograd (torch.func) agrees
    auto = head_gradient_norms_autograd(v, h_c, h_r, margin=margin)
    torch.testing.assert_close(auto, sig * d, rtol=1e-10, atol=1e-12)
    # and so does one backward per pair, including the direction −σ(·)(h_c − h_r)
    grads = _per_pair_head_grads(
        lambda i, vv: bt_loss(h_c[i : i + 1] @ vv, h_r[i : i + 1] @ vv, margin[i : i + 1]),
        v,
        h_c,
        h_r,
    )
    torch.testing.assert_close(grads, -sig[:, None] * (h_c - h_r))


def test_head_gradient_autograd_with_bias_and_linear_layer():
    lin = torch.nn.Linear(5, 1).double()
    h_c, h_r, _ = _batch(h=5)
    auto = head_gradient_norms_autograd(lin.weight, h_c, h_r, head_bias=lin.bias)
    r_c, r_r = lin(h_c)[:, 0], lin(h_r)[:, 0]
    expect = torch.sigmoid(-(r_c - r_r)) * torch.linalg.vector_norm(h_c - h_r, dim=-1)
    torch.testing.assert_close(auto, expect.detach())


@pytest.mark.parametrize("eps", [0.0, 0.05])
def test_normbt_head_gradient_is_m_times_prediction_error(eps):
    h_c, h_r, v = _batch(b=9, seed=1)
    r_c, r_r = h_c @ v, h_r @ v
    _, w = normbt_loss(r_c, r_r, h_c, h_r, state=None, eps=eps)
    d = torch.linalg.vector_norm(h_c - h_r, dim=-1)
    m = d.mean()
    sig = torch.sigmoid(-(r_c - r_r))
    torch.testing.assert_close(w, m / (d + eps * m))  # ε relative to m
    # per-pair ‖∇_v(w_i ℓ_i)‖ = m σ(−Δr_i) d_i/(d_i+ε·m): independent of d_i up to ε
    auto = head_gradient_norms_autograd(v, h_c, h_r, weights=w)
    torch.testing.assert_close(auto, m * sig * d / (d + eps * m))
    if eps == 0.0:
        torch.testing.assert_close(auto, m * sig)
    # while BT's per-pair norms track d (sanity: the identity is not met by BT)
    bt_norms = head_gradient_norms_autograd(v, h_c, h_r)
    assert not torch.allclose(bt_norms, m * sig, rtol=1e-2)
    # the batch gradient is the weighted mean of the per-pair gradients
    vv = v.clone().requires_grad_(True)
    normbt_loss(h_c @ vv, h_r @ vv, h_c, h_r, state=None, eps=eps)[0].backward()
    expect = (-(w * sig)[:, None] * (h_c - h_r)).mean(0)
    torch.testing.assert_close(vv.grad, expect)


def test_normbt_equals_bt_when_all_distances_are_equal():
    g = torch.Generator().manual_seed(3)
    b, h = 6, 4
    h_c = torch.randn(b, h, generator=g)
    u = F.normalize(torch.randn(b, h, generator=g), dim=-1)
    h_r = h_c + 2.5 * u  # every d_i = 2.5
    v = torch.randn(h, generator=g, requires_grad=True)
    margin = torch.rand(b, generator=g)
    for state in (None, NormBTState(0.9)):  # batch mean, and an EMA at its first update
        v.grad = None
        loss_n, w = normbt_loss(h_c @ v, h_r @ v, h_c, h_r, state=state, margin=margin, eps=0.0)
        (gn,) = torch.autograd.grad(loss_n, v)
        loss_b = bt_loss(h_c @ v, h_r @ v, margin)
        (gb,) = torch.autograd.grad(loss_b, v)
        torch.testing.assert_close(w, torch.ones(b))
        torch.testing.assert_close(loss_n, loss_b)
        torch.testing.assert_close(gn, gb)


def test_weights_carry_no_gradient():
    h_c, h_r, v = _batch(seed=4)
    h_c = h_c.clone().requires_grad_(True)
    h_r = h_r.clone().requires_grad_(True)
    loss, w = normbt_loss(h_c @ v, h_r @ v, h_c, h_r, state=None)
    assert not w.requires_grad
    g_normbt = torch.autograd.grad(loss, (h_c, h_r))
    # the same loss with w as a constant: gradients are identical only if w is stop-gradient
    const = w.detach().clone()
    loss2 = (const * -F.logsigmoid(h_c @ v - h_r @ v)).mean()
    g_const = torch.autograd.grad(loss2, (h_c, h_r))
    for a, b in zip(g_normbt, g_const):
        torch.testing.assert_close(a, b)
    # a differentiable m/(d+ε) would give a different gradient (the test can tell)
    d = torch.linalg.vector_norm(h_c - h_r, dim=-1)
    loss3 = ((d.mean() / d) * -F.logsigmoid(h_c @ v - h_r @ v)).mean()
    g_diff = torch.autograd.grad(loss3, (h_c, h_r))
    assert not torch.allclose(g_diff[0], g_normbt[0])


def _debiased_ema(xs, beta):
    """m_n = Σ_k (1−β) β^(n−k) x_k / (1 − βⁿ), written out (not recursive)."""
    n = len(xs)
    num = sum((1 - beta) * beta ** (n - 1 - k) * float(x) for k, x in enumerate(xs))
    return num / (1 - beta**n) if beta > 0 else float(xs[-1])


def test_ema_state_recursion_eval_mode_and_decay_zero():
    st = NormBTState(decay=0.8)
    batches = [torch.rand(5) * k for k in (1.0, 3.0, 0.5, 2.0)]
    for n in range(1, len(batches) + 1):
        out = st.update(batches[n - 1])
        expect = _debiased_ema([b.mean() for b in batches[:n]], 0.8)
        assert float(out) == pytest.approx(expect, rel=1e-6)
    assert float(st.mean_distance) == pytest.approx(_debiased_ema([b.mean() for b in batches], 0.8))
    assert int(st.num_updates) == 4
    st.eval()
    before = st.mean_distance.clone()
    out = st.update(torch.full((3,), 100.0))
    torch.testing.assert_close(out, before)
    torch.testing.assert_close(st.mean_distance, before)  # eval does not update
    assert float(st.pending[1]) == 0  # nor record anything for a later step
    fresh = NormBTState(0.5).eval()  # eval before any training update: batch mean, no update
    torch.testing.assert_close(fresh.update(torch.tensor([1.0, 3.0])), torch.tensor(2.0))
    assert int(fresh.num_updates) == 0
    st0 = NormBTState(decay=0.0)
    for d in batches:
        torch.testing.assert_close(st0.update(d).double(), d.mean().double(), rtol=1e-6, atol=1e-7)


def test_observe_then_step_folds_once_per_optimizer_step():
    """Gradient accumulation: micro-batches of one step share m; the step folds their pooled mean."""
    st = NormBTState(decay=0.9, auto_step=False)
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([7.0])
    m_a = st.observe(a)  # no m yet: the running mean so far
    m_b = st.observe(b)
    assert float(m_a) == pytest.approx(2.0) and float(m_b) == pytest.approx(13.0 / 4)
    assert int(st.num_updates) == 0
    st.step()
    assert int(st.num_updates) == 1 and float(st.mean_distance) == pytest.approx(13.0 / 4)
    # the next step: every micro-batch sees the m the step started with
    assert float(st.observe(torch.tensor([100.0]))) == pytest.approx(13.0 / 4)
    assert float(st.observe(torch.tensor([0.5, 0.5]))) == pytest.approx(13.0 / 4)
    st.step()
    expect = _debiased_ema([13.0 / 4, 101.0 / 3], 0.9)
    assert float(st.mean_distance) == pytest.approx(expect, rel=1e-6)
    assert int(st.num_updates) == 2
    st.step()  # nothing pending: no-op
    assert int(st.num_updates) == 2


def test_normbt_loss_weights_use_m_before_the_batch_over_a_sequence():
    """EMA, not the batch mean: batch k is weighted with m of batches < k (written out here)."""
    g = torch.Generator().manual_seed(7)
    st = NormBTState(decay=0.7)
    seen = []
    for k in range(4):
        h_c = torch.randn(5, 3, generator=g)
        h_r = h_c + (k + 1) ** 2 * torch.randn(5, 3, generator=g)  # scale changes per batch
        d = torch.sqrt(((h_c - h_r) ** 2).sum(-1))
        m = _debiased_ema(seen, 0.7) if seen else float(d.mean())
        _, w = normbt_loss(torch.zeros(5), torch.zeros(5), h_c, h_r, state=st, eps=0.0)
        torch.testing.assert_close(w, m / d, rtol=1e-5, atol=0)
        seen.append(float(d.mean()))
    assert float(st.mean_distance) == pytest.approx(_debiased_ema(seen, 0.7), rel=1e-5)


def test_degenerate_first_batch_does_not_initialise_m():
    st = NormBTState(decay=0.99)
    h = torch.randn(4, 3)
    r_c, r_r = torch.randn(4), torch.randn(4)
    loss, w = normbt_loss(r_c, r_r, h, h.clone(), state=st)  # every pair identical: d = 0
    torch.testing.assert_close(w, torch.ones(4))  # no scale known: BT
    torch.testing.assert_close(loss, bt_loss(r_c, r_r))
    assert int(st.num_updates) == 0
    h_r = h + torch.tensor([[3.0, 4.0, 0.0]])  # d = 5 for every pair
    normbt_loss(r_c, r_r, h, h_r, state=st)
    assert float(st.mean_distance) == pytest.approx(5.0)  # the first real batch sets m
    assert int(st.num_updates) == 1


def test_identical_pair_weight_is_bounded_by_relative_eps():
    h_c = torch.randn(4, 3)
    h_r = h_c.clone()
    h_r[1:] += torch.tensor([1.0, 0.0, 0.0])  # d = 0, 1, 1, 1
    r_c, r_r = torch.zeros(4), torch.zeros(4)
    loss, w = normbt_loss(r_c, r_r, h_c, h_r, state=None)  # default eps = 0.05
    m = 0.75
    torch.testing.assert_close(
        w, torch.tensor([1 / 0.05, m / (1 + 0.05 * m), m / (1 + 0.05 * m), m / (1 + 0.05 * m)])
    )
    assert float(loss) <= 20 * float(bt_loss(r_c, r_r))
    with pytest.raises(ValueError, match="eps"):
        normbt_loss(r_c, r_r, h_c, h_r, state=None, eps=0.0)  # m/0: asks for eps or clip
    _, wc = normbt_loss(r_c, r_r, h_c, h_r, state=None, eps=0.0, clip=4.0)
    assert float(wc[0]) == 4.0


def test_non_finite_distance_never_enters_the_state():
    st = NormBTState(decay=0.5)
    st.update(torch.tensor([2.0, 2.0]))
    h_c = torch.randn(3, 2)
    h_r = h_c + 1.0
    h_r[1, 0] = float("nan")
    r_c, r_r = torch.randn(3), torch.randn(3)
    with pytest.warns(RuntimeWarning, match="non-finite"):
        loss, w = normbt_loss(r_c, r_r, h_c, h_r, state=st, eps=0.0)
    assert float(st.mean_distance) == 2.0 and int(st.num_updates) == 1  # untouched
    assert torch.isfinite(loss) and float(w[1]) == 1.0  # that pair falls back to BT
    d = 2**0.5
    torch.testing.assert_close(w[[0, 2]], torch.full((2,), 2.0 / d))
    # the next finite batch updates normally (the state was not poisoned)
    normbt_loss(r_c, r_r, h_c, h_c + 1.0, state=st)
    assert torch.isfinite(st.mean_distance) and int(st.num_updates) == 2


def test_state_checkpoint_round_trip():
    st = NormBTState(decay=0.9)
    for k in range(3):
        st.update(torch.rand(4) + k)
    buf = io.BytesIO()
    torch.save(st.state_dict(), buf)
    buf.seek(0)
    st2 = NormBTState(decay=0.9)
    st2.load_state_dict(torch.load(buf, weights_only=True))
    assert set(st.state_dict()) == {"mean_distance", "num_updates"}
    torch.testing.assert_close(st2.mean_distance, st.mean_distance)
    assert int(st2.num_updates) == 3
    d = torch.rand(4) * 7
    torch.testing.assert_close(st2.update(d), st.update(d))  # continues identically
    fresh = NormBTState(decay=0.9)
    assert not torch.allclose(fresh.update(d), st.mean_distance)  # a fresh state would not


def test_ema_state_in_normbt_loss_uses_m_then_folds_the_batch():
    h_c, h_r, v = _batch(seed=5)
    st = NormBTState(0.5)
    st.update(torch.tensor([10.0, 10.0]))  # m = 10
    _, w = normbt_loss(h_c @ v, h_r @ v, h_c, h_r, state=st, eps=0.05)
    d = torch.sqrt(((h_c - h_r) ** 2).sum(-1)).float()
    torch.testing.assert_close(w.float(), 10.0 / (d + 0.5))  # ε·m = 0.05·10
    expect = (0.5 * 0.5 * 10.0 + 0.5 * float(d.mean())) / (1 - 0.25)
    assert float(st.mean_distance) == pytest.approx(expect, rel=1e-5)


def test_clip_and_renormalize():
    d = torch.tensor([0.01, 0.5, 1.0, 4.0])
    m = d.mean()
    w = normbt_weights(d, m, clip=5.0)
    assert w.max() == 5.0
    torch.testing.assert_close(w[1:], m / (d[1:] + 0.05 * m))
    wr = normbt_weights(d, m, clip=5.0, renormalize=True)
    torch.testing.assert_close(wr.mean(), torch.tensor(1.0))
    torch.testing.assert_close(wr, w / w.mean())
    # m fixed to 1 (the "1/d without m" ablation) through normbt_loss
    _, w1 = normbt_loss(torch.zeros(4), torch.zeros(4), torch.zeros(4, 1), d[:, None], state=1.0)
    torch.testing.assert_close(w1, 1.0 / (d + 0.05))


def test_last_token_pool_matches_hf_sequence_classification(tiny_llama):
    model = tiny_llama.eval()
    pad = model.config.pad_token_id
    lengths = [5, 9, 3, 7]
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, 40, (n,), generator=g) for n in lengths]
    t = max(lengths)
    right = torch.full((4, t), pad)
    left = torch.full((4, t), pad)
    for i, s in enumerate(seqs):
        right[i, : len(s)] = s
        left[i, t - len(s) :] = s
    for ids, last in ((right, [n - 1 for n in lengths]), (left, [t - 1] * 4)):
        out = model(input_ids=ids, attention_mask=(ids != pad).long(), output_hidden_states=True)
        hidden = out.hidden_states[-1]  # (B, T, H)
        pooled = last_token_pool(hidden, ids, pad)
        torch.testing.assert_close(pooled, hidden[torch.arange(4), torch.tensor(last)])
        # the score head on our pooled state is exactly the model's reward
        torch.testing.assert_close(model.score(pooled), out.logits)
    # no pad token: the last position
    h = torch.randn(2, 4, 3)
    torch.testing.assert_close(
        last_token_pool(h, torch.ones(2, 4, dtype=torch.long), None), h[:, -1]
    )


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"r_chosen": torch.randn(3), "r_rejected": torch.randn(4)}, ValueError, "same shape"),
        ({"r_chosen": torch.tensor([0.0, float("nan")])}, ValueError, "r_chosen.*NaN"),
        ({"r_rejected": torch.tensor([0.0, float("inf")])}, ValueError, "r_rejected.*NaN or inf"),
        ({"r_chosen": torch.zeros(0), "r_rejected": torch.zeros(0)}, ValueError, "empty batch"),
        ({"h_chosen": torch.randn(4)}, ValueError, "h_chosen.*batch dimension"),
        ({"h_rejected": torch.randn(3, 4)}, ValueError, "h_rejected.*batch size 3"),
        ({"h_chosen": torch.randn(2, 5)}, ValueError, "same shape"),
        ({"margin": torch.ones(3)}, ValueError, "margin"),
        ({"state": "ema"}, TypeError, "state"),
        ({"r_chosen": [0.0, 1.0]}, TypeError, "r_chosen"),
        ({"eps": -1.0}, ValueError, "eps"),
        ({"eps": float("nan")}, ValueError, "eps"),
        ({"eps": float("inf")}, ValueError, "eps"),
        ({"clip": 0.0}, ValueError, "clip"),
        ({"clip": float("nan")}, ValueError, "clip"),
        ({"renormalize": 1}, TypeError, "renormalize"),
        ({"margin": torch.tensor([0.0, float("nan")])}, ValueError, "margin.*NaN"),
        ({"margin": float("nan")}, ValueError, "margin"),
        ({"state": -1.0}, ValueError, "state"),
        ({"state": float("nan")}, ValueError, "state"),
    ],
)
def test_bad_input_names_the_argument(kwargs, exc, match):
    base = {
        "r_chosen": torch.randn(2),
        "r_rejected": torch.randn(2),
        "h_chosen": torch.randn(2, 4),
        "h_rejected": torch.randn(2, 4),
        "state": None,
    }
    base.update(kwargs)
    r_c, r_r, h_c, h_r = (base.pop(k) for k in ("r_chosen", "r_rejected", "h_chosen", "h_rejected"))
    with pytest.raises(exc, match=match):
        normbt_loss(r_c, r_r, h_c, h_r, **base)


def test_bad_state_and_pool_arguments():
    with pytest.raises(ValueError, match="decay"):
        NormBTState(decay=1.0)
    with pytest.raises(ValueError, match="decay"):
        NormBTState(decay=float("nan"))
    with pytest.raises(TypeError, match="sync"):
        NormBTState(sync="yes")
    with pytest.raises(ValueError, match="`m`"):
        normbt_weights(torch.ones(3), -1.0)
    with pytest.raises(ValueError, match="`m`"):
        normbt_weights(torch.ones(3), torch.tensor(float("nan")))
    with pytest.raises(ValueError, match="negative"):
        normbt_weights(torch.tensor([1.0, -1.0]), 1.0)
    with pytest.raises(ValueError, match="`d`"):
        NormBTState().update(torch.zeros(0))
    with pytest.raises(ValueError, match="hidden"):
        last_token_pool(torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="input_ids"):
        last_token_pool(torch.randn(2, 3, 4), torch.ones(2, 5, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="r_chosen.*empty"):
        bt_loss(torch.zeros(0), torch.zeros(0))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_with_state_on_either_device():
    h_c, h_r, v = _batch(b=16, h=32, seed=6)
    ref_loss, ref_w = normbt_loss(h_c @ v, h_r @ v, h_c, h_r, state=NormBTState(0.9))
    for state in (NormBTState(0.9), NormBTState(0.9).cuda()):
        hc, hr, vv = h_c.cuda(), h_r.cuda(), v.cuda()
        loss, w = normbt_loss(hc @ vv, hr @ vv, hc, hr, state=state)
        assert loss.device.type == "cuda" and w.device.type == "cuda"
        torch.testing.assert_close(loss.cpu(), ref_loss, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(w.cpu(), ref_w, rtol=1e-5, atol=1e-6)


def test_stop_gradient_through_a_backbone_matches_per_pair_constant_weights():
    """A backbone h = tanh(W x) feeding the head: ∇_W NormBT = (1/B) Σ w_i ∇_W ℓ_i with w_i plain
    floats (written out m/(d_i+ε·m)); a differentiable weight would add ∇_W w_i · ℓ_i terms."""
    g = torch.Generator().manual_seed(11)
    b, k, h = 6, 4, 3
    x_c = torch.randn(b, k, generator=g, dtype=torch.float64)
    x_r = x_c + torch.logspace(-1, 0.5, b, dtype=torch.float64)[:, None] * torch.randn(
        b, k, generator=g, dtype=torch.float64
    )
    w_mat = torch.randn(h, k, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(h, generator=g, dtype=torch.float64)
    h_c, h_r = torch.tanh(x_c @ w_mat.T), torch.tanh(x_r @ w_mat.T)
    loss, _ = normbt_loss(h_c @ v, h_r @ v, h_c, h_r, state=None)
    (g_normbt,) = torch.autograd.grad(loss, w_mat)
    with torch.no_grad():
        d = [float(((h_c[i] - h_r[i]) ** 2).sum().sqrt()) for i in range(b)]
    m = sum(d) / b
    expect = torch.zeros_like(w_mat)
    for i in range(b):
        hc, hr = torch.tanh(x_c[i] @ w_mat.T), torch.tanh(x_r[i] @ w_mat.T)
        (gi,) = torch.autograd.grad(-F.logsigmoid(hc @ v - hr @ v), w_mat)
        expect += m / (d[i] + 0.05 * m) * gi / b
    torch.testing.assert_close(g_normbt, expect)
