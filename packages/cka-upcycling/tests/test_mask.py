"""Gumbel masks: one-hot straight-through samples, Gumbel-max frequencies (chi-square), schedules."""

import math

import pytest
import torch
from icml26_cka_upcycling import GumbelMask, constant_tau, cosine_tau, exponential_tau, linear_tau

# 0.999 quantile of chi-square with 6 degrees of freedom
CHI2_6_999 = 22.458


def test_hard_samples_are_one_hot_with_straight_through_gradient():
    torch.manual_seed(0)
    mask = GumbelMask(6, tau=0.7)
    m = mask()
    assert set(m.tolist()) <= {0.0, 1.0}
    (m * torch.arange(6.0)).sum().backward()
    assert mask.logits.grad is not None and mask.logits.grad.abs().sum() > 0
    soft = mask(hard=False)
    assert ((soft > 0) & (soft < 1)).all()


def test_argmax_frequencies_match_softmax_chi_square():
    torch.manual_seed(0)
    grow = torch.tensor([-2.0, -0.5, 0.0, 0.3, 1.0, 2.5])
    reps, draws = 2000, 10  # 6 candidates tiled 2000 times, 10 draws: N = 20000 per candidate
    mask = GumbelMask(6 * reps, tau=0.3)
    with torch.no_grad():
        mask.logits[:, 1] = grow.repeat(reps)
        counts = sum(mask().view(reps, 6).sum(0) for _ in range(draws))
    N = reps * draws
    p = torch.sigmoid(grow)  # softmax([0, a])[1]
    chi2 = ((counts - N * p) ** 2 / (N * p * (1 - p))).sum().item()
    assert chi2 < CHI2_6_999


def test_fixed_noise_reproduces_a_draw_and_temperature_does_not_move_the_argmax():
    mask = GumbelMask(5)
    g = mask.sample_noise(torch.Generator().manual_seed(1))
    assert torch.equal(mask(g), mask(g))
    hot = GumbelMask(5, tau=10.0)
    hot.logits = mask.logits
    assert torch.equal(hot(g), mask(g))


@pytest.mark.parametrize("tau", [0.25, 1.0, 4.0])
def test_soft_value_and_straight_through_gradient_follow_the_temperature(tau):
    """y = softmax((α + g)/τ); the straight-through gradient of y_grow wrt α_grow is y(1-y)/τ."""
    mask = GumbelMask(4, tau=tau)
    with torch.no_grad():
        mask.logits[:, 1] = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    g = mask.sample_noise(torch.Generator().manual_seed(4))
    a = mask.logits.detach()
    z = (a[:, 1] + g[:, 1] - a[:, 0] - g[:, 0]) / tau
    y = 1 / (1 + torch.exp(-z))  # two-class softmax, computed here, not by the package
    torch.testing.assert_close(mask(g, hard=False), y, rtol=1e-6, atol=0)
    mask(g).sum().backward()  # hard sample: exact one-hot value, soft gradient
    torch.testing.assert_close(mask.logits.grad[:, 1], y * (1 - y) / tau, rtol=1e-5, atol=0)
    torch.testing.assert_close(mask.logits.grad[:, 0], -y * (1 - y) / tau, rtol=1e-5, atol=0)


def test_schedules():
    for make in (linear_tau, exponential_tau, cosine_tau):
        f = make(2.0, 0.1, 100)
        assert (
            f(0) == pytest.approx(2.0)
            and f(100) == pytest.approx(0.1)
            and f(1000) == pytest.approx(0.1)
        )
        assert f(30) > f(60)
    assert exponential_tau(2.0, 0.1, 100)(50) == pytest.approx(math.sqrt(0.2))
    assert constant_tau(0.5)(7) == 0.5
    mask = GumbelMask(2, tau=exponential_tau(1.0, 0.25, 2))
    taus = [mask.tau]
    for _ in range(3):
        mask.advance()
        taus.append(mask.tau)
    assert taus == pytest.approx([1.0, 0.5, 0.25, 0.25])


def test_decide_and_init():
    mask = GumbelMask(3, init_grow_logit=math.log(3))
    assert mask.probs().tolist() == pytest.approx([0.75] * 3)
    assert mask.decide().tolist() == [True] * 3


def test_bad_input():
    with pytest.raises(ValueError, match="n must"):
        GumbelMask(0)
    with pytest.raises(ValueError, match="temperatures"):
        GumbelMask(2, tau=0.0)
    with pytest.raises(ValueError, match="steps"):
        linear_tau(1.0, 0.1, 0)
    with pytest.raises(ValueError, match="noise must have shape"):
        GumbelMask(2)(torch.zeros(3, 2))
