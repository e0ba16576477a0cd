"""OnePO loss: gradient identities by autograd vs closed form, PPO bit equality, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from icml26_onepo import (
    AGG_MODES,
    aggregate_loss,
    compute_onepo_policy_loss,
    onepo_per_token_loss,
    onepo_policy_loss,
    teacher_mask_context,
)

F, EL, EH, C = 0.1, 0.2, 0.28, 10.0


def plain_dual_clip_ppo(old, new, adv, eps_low=EL, eps_high=EH, c=C):
    """A separate transcription of verl's vanilla dual-clip PPO token loss (per token)."""
    r = torch.exp(torch.clamp(new - old, -20.0, 20.0))
    surrogate = torch.maximum(-adv * r, -adv * torch.clamp(r, 1 - eps_low, 1 + eps_high))
    return torch.where(adv < 0, torch.minimum(-adv * c, surrogate), surrogate)


def _leaf(values):
    return torch.tensor(values, dtype=torch.float64).log().reshape(1, -1).requires_grad_(True)


def _grad(old_p, new_p, adv, teacher, agg="token-mean"):
    logp = _leaf(new_p)
    old = torch.tensor(old_p, dtype=torch.float64).log().reshape(1, -1)
    a = torch.tensor(adv, dtype=torch.float64).reshape(1, -1)
    resp = torch.ones_like(a, dtype=torch.bool)
    tmask = torch.tensor(teacher, dtype=torch.bool).reshape(1, -1)
    loss, _ = onepo_policy_loss(old, logp, a, resp, tmask, agg=agg)
    (g,) = torch.autograd.grad(loss, logp)
    return loss, g[0]


def test_low_support_positive_teacher_token_gets_sft_gradient():
    # p_old < f, A > 0, π below the absolute trust region f(1+ε_high) = 0.128: ∂L/∂log π = −A/N
    new = [1e-4, 0.01, 0.05, 0.12, 0.127]
    old = [1e-5, 0.02, 0.09, 0.05, 0.001]
    adv = [0.7, 1.3, 2.0, 0.4, 1.0]
    _, g = _grad(old, new, adv, [1] * 5)
    expected = -torch.tensor(adv, dtype=torch.float64) / 5
    torch.testing.assert_close(g, expected, rtol=1e-12, atol=0)


def test_sft_gradient_in_parameter_space():
    """On low-support positive teacher tokens the parameter gradient equals −A·∇ log π (SFT)."""
    torch.manual_seed(0)
    W = (0.01 * torch.randn(12, 6, dtype=torch.float64)).requires_grad_(True)  # (V, D)
    x = torch.randn(3, 4, 6, dtype=torch.float64)  # (B, T, D)
    tokens = torch.randint(0, 12, (3, 4))
    adv = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)

    def logp_of(weight):
        logits = x @ weight.T  # (B, T, V)
        return torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]  # (B, T)

    logp = logp_of(W)
    old = logp.detach() - 4.0  # all p_old < f (π ≈ 1/12 < 0.128)
    mask = torch.ones(3, 4, dtype=torch.bool)
    loss, metrics = onepo_policy_loss(old, logp, adv, mask, mask)
    (g_onepo,) = torch.autograd.grad(loss, W)
    sft = -(adv[:, None] * logp_of(W)).mean()
    (g_sft,) = torch.autograd.grad(sft, W)
    torch.testing.assert_close(g_onepo, g_sft, rtol=1e-10, atol=1e-14)
    assert metrics["onepo/rescaled_token_fraction"] == 1.0


def test_positive_teacher_token_past_trust_region_has_zero_gradient():
    # p_old < f but π > f(1+ε_high): r = π/f > 1.28, clipped
    _, g = _grad([0.01, 0.05], [0.13, 0.5], [1.0, 2.0], [1, 1])
    assert torch.equal(g, torch.zeros(2, dtype=torch.float64))


def test_trust_region_boundary_is_absolute():
    """Without the floor (plain PPO) the same token is clipped at 1.28·p_old already."""
    old, new, adv = [0.001], [0.01], [1.0]
    _, g_teacher = _grad(old, new, adv, [1])
    _, g_student = _grad(old, new, adv, [0])
    assert g_teacher.item() == pytest.approx(-1.0, rel=1e-12)
    assert g_student.item() == 0.0  # r = 10 > 1.28: clipped under vanilla PPO


def test_nonpositive_low_support_teacher_token():
    # A ≤ 0, p_old < f: r = π/f; zero gradient where r < 1 − ε_low (π < 0.08) ...
    _, g = _grad([0.01, 0.05, 0.02], [0.01, 0.079, 0.0001], [-1.0, -2.0, 0.0], [1, 1, 1])
    assert torch.equal(g, torch.zeros(3, dtype=torch.float64))
    # ... and the plain PPO gradient on r = π/f for 0.08 ≤ π < f: ∂(−A r)/∂log π = −A π / f
    new, adv = [0.0801, 0.095], [-1.5, -0.5]
    _, g = _grad([0.01, 0.02], new, adv, [1, 1])
    expected = torch.tensor(
        [-a * p / F / 2 for a, p in zip(adv, new, strict=True)], dtype=torch.float64
    )
    torch.testing.assert_close(g, expected, rtol=1e-12, atol=0)


def _random_batch(seed, B=6, T=9, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g, dtype=dtype) * 6.0  # p_old spans e^-6 .. 1
    new = old + 0.4 * torch.randn(B, T, generator=g, dtype=dtype)
    new = new.clamp_max(0.0)
    adv = torch.randn(B, generator=g, dtype=dtype)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    resp = torch.arange(T)[None, :] < lengths[:, None]
    teacher = torch.zeros(B, T, dtype=torch.bool)
    teacher[1] = resp[1]
    teacher[4] = resp[4]
    return old, new, adv, resp, teacher


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bit_equal_to_plain_ppo_off_low_support(seed):
    old, new, adv, resp, teacher = _random_batch(seed)
    logp = new.clone().requires_grad_(True)
    tok = onepo_per_token_loss(old, logp, adv, resp, teacher)
    plain = plain_dual_clip_ppo(old, new, adv[:, None].expand_as(new))
    off = resp & ~tok.low_support  # student tokens and teacher tokens with p_old >= f
    assert off.sum() > 10 and tok.low_support.sum() > 3
    assert torch.equal(tok.loss[off], plain[off])
    # gradients of the aggregated loss, token by token
    loss, _ = onepo_policy_loss(old, logp, adv, resp, teacher)
    (g,) = torch.autograd.grad(loss, logp)
    ref_logp = new.clone().requires_grad_(True)
    m = resp.float()
    ref = (plain_dual_clip_ppo(old, ref_logp, adv[:, None].expand_as(new)) * m).sum() / m.sum()
    (g_ref,) = torch.autograd.grad(ref, ref_logp)
    assert torch.equal(g[off], g_ref[off])


def test_without_teacher_equals_plain_ppo_exactly():
    old, new, adv, resp, _ = _random_batch(5)
    logp = new.clone().requires_grad_(True)
    loss, _ = onepo_policy_loss(old, logp, adv, resp, None)
    m = resp.float()
    ref = (plain_dual_clip_ppo(old, new, adv[:, None].expand_as(new)) * m).sum() / m.sum()
    assert torch.equal(loss.detach(), ref)


def test_aggregation_modes_against_loops():
    old, new, adv, resp, teacher = _random_batch(3, dtype=torch.float64)
    resp[2] = False  # an empty response
    teacher[2] = False
    tok = onepo_per_token_loss(old, new, adv, resp, teacher)
    L = tok.loss.tolist()
    rows = [[L[b][t] for t in range(new.shape[1]) if resp[b, t]] for b in range(new.shape[0])]
    nonempty = [r for r in rows if r]
    expected = {
        "token-mean": sum(sum(r) for r in rows) / sum(len(r) for r in rows),
        "seq-mean-token-sum": sum(sum(r) for r in nonempty) / len(nonempty),
        "seq-mean-token-mean": sum(sum(r) / len(r) for r in nonempty) / len(nonempty),
        "seq-mean-token-sum-norm": sum(sum(r) for r in rows) / new.shape[1],
    }
    assert set(expected) == set(AGG_MODES)
    for mode, value in expected.items():
        loss, _ = onepo_policy_loss(old, new, adv, resp, teacher, agg=mode)
        assert loss.item() == pytest.approx(value, rel=1e-12), mode
    assert aggregate_loss(
        tok.loss, resp, "seq-mean-token-sum-norm", loss_scale_factor=4.0
    ).item() == (pytest.approx(sum(sum(r) for r in rows) / 4.0, rel=1e-12))


def test_metrics_count_by_brute_force():
    old, new, adv, resp, teacher = _random_batch(7)
    _, m = onepo_policy_loss(old, new, adv, resp, teacher)
    B, T = new.shape
    low = pos = 0
    for b in range(B):
        for t in range(T):
            if teacher[b, t] and math.exp(old[b, t].item()) < F:
                low += 1
                pos += adv[b].item() > 0
    assert m["onepo/low_support_tokens"] == low
    assert m["onepo/positive_advantage_teacher_tokens"] == pos
    assert m["onepo/rescaled_token_fraction"] == pytest.approx(pos / int(resp.sum()))
    assert m["onepo/teacher_token_fraction"] == pytest.approx(int(teacher.sum()) / int(resp.sum()))
    r = torch.exp(new - torch.where(teacher, old.clamp_min(math.log(F)), old))
    a = (
        torch.where(teacher & (old < math.log(F)) & (adv[:, None] > 0), F / torch.exp(new), 1.0)
        * adv[:, None]
    )
    clipped = (-a * r.clamp(1 - EL, 1 + EH)) > (-a * r)
    assert m["pg_clipfrac"] == pytest.approx(clipped[resp].float().mean().item(), rel=1e-6)


def test_verl_signature_and_context_mask():
    import inspect

    params = list(inspect.signature(compute_onepo_policy_loss).parameters)
    # verl's registered policy losses: (old_log_prob, log_prob, advantages, response_mask,
    # loss_agg_mode="token-mean", config=None, rollout_is_weights=None)
    assert params[:7] == [
        "old_log_prob",
        "log_prob",
        "advantages",
        "response_mask",
        "loss_agg_mode",
        "config",
        "rollout_is_weights",
    ]
    old, new, adv, resp, teacher = _random_batch(4)
    adv2 = adv[:, None].expand_as(new)
    cfg = {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 10.0}
    ours, _ = onepo_policy_loss(old, new, adv2, resp, teacher)
    with teacher_mask_context(teacher):
        via_ctx, metrics = compute_onepo_policy_loss(old, new, adv2, resp, "token-mean", cfg)
    assert torch.equal(ours, via_ctx)
    assert "actor/pg_clipfrac" in metrics and "onepo/rescaled_token_fraction" in metrics
    with pytest.raises(RuntimeError, match="teacher_mask"):
        compute_onepo_policy_loss(old, new, adv2, resp, "token-mean", cfg)


def test_rollout_is_weights_multiply_token_loss():
    old, new, adv, resp, teacher = _random_batch(8, dtype=torch.float64)
    w = torch.rand_like(new)
    loss, _ = onepo_policy_loss(old, new, adv, resp, teacher, rollout_is_weights=w)
    tok = onepo_per_token_loss(old, new, adv, resp, teacher)
    assert loss.item() == pytest.approx(((tok.loss * w)[resp]).mean().item(), rel=1e-12)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(response_mask=torch.ones(6, 8, dtype=torch.bool)), "response_mask"),
        (dict(teacher_mask=torch.full((6, 9), 0.5)), "teacher_mask"),
        (dict(response_mask=torch.full((6, 9), 2)), "response_mask"),
        (dict(old_logp=torch.zeros(6, 8)), "old_logp"),
        (dict(advantages=torch.zeros(5)), "advantages"),
        (dict(floor=0.0), "floor"),
        (dict(floor=1.0), "floor"),
        (dict(floor=-0.1), "floor"),
        (dict(clip_c=1.0), "clip_c"),
        (dict(clip_low=1.0), "clip_low"),
        (dict(agg="sum"), "agg"),
    ],
)
def test_bad_input_names_the_argument(change, match):
    old, new, adv, resp, teacher = _random_batch(0)
    kw = dict(old_logp=old, logp=new, advantages=adv, response_mask=resp, teacher_mask=teacher)
    kw.update(change)
    with pytest.raises((ValueError, TypeError), match=match):
        onepo_policy_loss(**kw)


def test_teacher_outside_response_and_nan_are_errors():
    old, new, adv, resp, teacher = _random_batch(0)
    bad_teacher = teacher.clone()
    bad_teacher[0, :] = True
    resp[0, -1] = False
    with pytest.raises(ValueError, match="teacher_mask.*outside"):
        onepo_policy_loss(old, new, adv, resp, bad_teacher)
    for name in ("logp", "old_logp"):
        x = (new if name == "logp" else old).clone()
        x[3, 0] = float("nan")
        kw = dict(old_logp=old, logp=new, advantages=adv, response_mask=resp, teacher_mask=teacher)
        kw[name] = x
        with pytest.raises(ValueError, match=f"`{name}` has NaN"):
            onepo_policy_loss(**kw)
    # NaN outside the response (padding) is ignored
    x = new.clone()
    x[0, -1] = float("nan")
    loss, _ = onepo_policy_loss(old, x, adv, resp, teacher & resp)
    assert torch.isfinite(loss)


def test_dual_clip_bounds_negative_advantage_loss():
    # A < 0 and r > c: loss = −A·c, no gradient; the same token below c: −A·r
    old = [0.001, 0.001]
    new = [0.02, 0.005]  # r = 20 > c = 10, r = 5
    loss, g = _grad(old, new, [-1.0, -1.0], [0, 0])
    assert loss.item() == pytest.approx((C + 5.0) / 2, rel=1e-12)
    assert g[0].item() == 0.0 and g[1].item() == pytest.approx(5.0 / 2, rel=1e-12)


def test_logits_instead_of_log_probs_are_refused():
    old, new, adv, resp, teacher = _random_batch(0)
    with pytest.raises(ValueError, match="`logp` must hold log-probabilities"):
        onepo_policy_loss(old, new + 5.0, adv, resp, teacher)
    with pytest.raises(ValueError, match="`old_logp` must hold log-probabilities"):
        onepo_policy_loss(old.abs() + 0.1, new, adv, resp, teacher)
    # a rounding hair above 0 (below LOGP_SLACK = 1e-6) is accepted
    hair = old.clone()
    hair[0, 0] = 5e-7  # resp[0, 0] is always a response token
    onepo_policy_loss(hair, new, adv, resp, teacher)


def test_integer_old_logp_is_refused():
    old, new, adv, resp, teacher = _random_batch(0)
    with pytest.raises(ValueError, match="`old_logp` must be a floating tensor"):
        onepo_policy_loss(old.long(), new, adv, resp, teacher)
