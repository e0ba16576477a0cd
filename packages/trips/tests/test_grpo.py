import copy
import math

import pytest
import torch
from icml26_trips import (
    BernsteinBetaPolicy,
    GRPOConfig,
    ScheduleBounds,
    bernstein_schedule,
    group_advantages,
    grpo_loss,
    grpo_update,
    train_grpo,
)

D = torch.float64


def policy(degree=3, seed=0, kappa=50.0):
    g = torch.Generator().manual_seed(seed)
    init = 0.2 + 0.6 * torch.rand(3, degree + 1, generator=g, dtype=D)
    return BernsteinBetaPolicy(init, kappa=kappa, nfe=12)


def test_ratio_one_and_kl_zero_at_init_and_gradient_is_reinforce():
    pi = policy()
    ref = copy.deepcopy(pi).requires_grad_(False)
    coeffs = pi.sample(6, torch.Generator().manual_seed(1))
    with torch.no_grad():
        logp_old = pi.log_prob(coeffs)
    adv = torch.randn(6, 3, generator=torch.Generator().manual_seed(2), dtype=D)
    loss, stats = grpo_loss(pi, ref, coeffs, logp_old, adv)
    torch.testing.assert_close(stats["ratio"], torch.ones(6, dtype=D))
    assert float(stats["kl"]) == 0.0
    (g_ppo,) = torch.autograd.grad(loss, pi.log_alpha)
    # at r = 1 the clipped surrogate's gradient is the policy gradient -mean(A grad log pi)
    reinforce = -(pi.log_prob(coeffs)[:, None] * adv).mean()
    (g_pg,) = torch.autograd.grad(reinforce, pi.log_alpha)
    torch.testing.assert_close(g_ppo, g_pg)


def test_alpha_and_beta_both_learn_with_the_closed_form_score():
    """Official DiagBetaPolicy parametrisation: d log Beta(c; a, b) / d log a =
    a (log c + psi(a + b) - psi(a)), and likewise for b with log(1 - c)."""
    pi = policy(degree=2, seed=7)
    c = pi.sample(1, torch.Generator().manual_seed(8))[0]  # (3, 3)
    ga, gb = torch.autograd.grad(pi.log_prob(c[None]).sum(), (pi.log_alpha, pi.log_beta))
    a, b = pi.log_alpha.detach().exp(), pi.log_beta.detach().exp()
    dg = torch.digamma
    torch.testing.assert_close(ga, a * (torch.log(c) + dg(a + b) - dg(a)))
    torch.testing.assert_close(gb, b * (torch.log1p(-c) + dg(a + b) - dg(b)))
    torch.testing.assert_close(pi.concentration.detach(), torch.full((3, 3), 50.0, dtype=D))


def test_log_prob_is_sum_of_beta_densities():
    pi = policy(degree=2)
    c = pi.sample(3, torch.Generator().manual_seed(3))
    mu = pi.mean.detach()
    a, b = 50 * mu, 50 * (1 - mu)
    logb = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
    manual = ((a - 1) * torch.log(c) + (b - 1) * torch.log1p(-c) - logb).sum((-2, -1))
    torch.testing.assert_close(pi.log_prob(c), manual)


def test_clipping_stops_the_gradient_outside_the_trust_region():
    pi = policy()
    ref = copy.deepcopy(pi).requires_grad_(False)
    coeffs = pi.sample(2, torch.Generator().manual_seed(4))
    with torch.no_grad():
        logp_old = (
            pi.log_prob(coeffs) - 1.0
        )  # pretend the old policy was far less likely: r = e > 1.2
    adv = torch.tensor([1.0, 1.0], dtype=D)  # positive advantage, ratio above 1 + eps -> clipped
    loss, stats = grpo_loss(pi, ref, coeffs, logp_old, adv, kl_coef=0.0)
    assert bool((stats["ratio"] > 1.2).all())
    (grad,) = torch.autograd.grad(loss, pi.log_alpha)
    assert float(grad.abs().max()) == 0.0
    # negative advantage is not clipped from above: the gradient is back
    loss, _ = grpo_loss(pi, ref, coeffs, logp_old, -adv, kl_coef=0.0)
    (grad,) = torch.autograd.grad(loss, pi.log_alpha)
    assert float(grad.abs().max()) > 0.0


def test_group_advantages():
    r = torch.tensor([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0]], dtype=D)
    a = group_advantages(r)
    torch.testing.assert_close(
        a[:, 0], torch.tensor([-1.0, 1.0, 0.0], dtype=D) / math.sqrt(2 / 3), rtol=1e-6, atol=0
    )
    torch.testing.assert_close(
        a[:, 1], torch.zeros(3, dtype=D)
    )  # all-equal rewards carry no signal
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(torch.ones(1, 3))
    with pytest.raises(ValueError, match="finite"):
        group_advantages(torch.tensor([1.0, float("nan")]))


def test_grpo_solves_a_bandit_with_known_optimum():
    """Reward = -||schedule - target||^2 with the target inside the Bernstein family."""
    bounds = ScheduleBounds()
    target_c = torch.tensor(
        [[0.1, 0.3, 0.6, 0.9], [0.9, 0.7, 0.3, 0.1], [0.8, 0.5, 0.2, 0.05]], dtype=D
    )
    target = bernstein_schedule(target_c, bounds, 12)
    scale = {
        n: bounds.__getattribute__(n)[1] - bounds.__getattribute__(n)[0]
        for n in ("cfg", "dc", "eta")
    }

    def reward_fn(s, it):  # (nfe, G) -> (G,)
        err = sum(
            (((getattr(s, n) - getattr(target, n)[:, None]) / scale[n]) ** 2).mean(0) for n in scale
        )
        return -err

    pi = BernsteinBetaPolicy(torch.full((3, 4), 0.5, dtype=D), kappa=50.0, bounds=bounds, nfe=12)
    err0 = float((pi.mean.detach() - target_c).abs().max())
    hist = train_grpo(
        pi,
        reward_fn,
        GRPOConfig(iterations=150, group_size=8, lr=0.05, kl_coef=0.0),
        torch.Generator().manual_seed(5),
    )
    err1 = float((pi.mean.detach() - target_c).abs().max())
    assert err1 < 0.3 * err0, (err0, err1)
    assert sum(hist.mean_reward[-10:]) > 0.3 * sum(hist.mean_reward[:10])  # error down > 3x


def test_kl_anchor_holds_the_policy_back():
    """With a large KL coefficient the policy stays near the reference."""

    def reward_fn(s, it):
        return s.cfg.mean(0)  # push CFG up

    free, anchored = policy(seed=6), policy(seed=6)
    cfg = GRPOConfig(iterations=30, group_size=6, lr=0.05)
    train_grpo(
        free,
        reward_fn,
        GRPOConfig(**{**cfg.__dict__, "kl_coef": 0.0}),
        torch.Generator().manual_seed(7),
    )
    start = policy(seed=6).mean.detach()
    train_grpo(
        anchored,
        reward_fn,
        GRPOConfig(**{**cfg.__dict__, "kl_coef": 10.0}),
        torch.Generator().manual_seed(7),
    )
    moved_free = float((free.mean.detach() - start).abs().sum())
    moved_anchor = float((anchored.mean.detach() - start).abs().sum())
    assert moved_anchor < 0.5 * moved_free


def test_sampling_is_seeded_and_bad_input():
    pi = policy()
    a = pi.sample(4, torch.Generator().manual_seed(9))
    b = pi.sample(4, torch.Generator().manual_seed(9))
    assert torch.equal(a, b)
    assert pi.schedule(a).cfg.shape == (12, 4)
    with pytest.raises(ValueError, match="init_coeffs"):
        BernsteinBetaPolicy(torch.full((3, 4), 1.0))
    with pytest.raises(ValueError, match="init_coeffs must be"):
        BernsteinBetaPolicy(torch.full((2, 4), 0.5))
    with pytest.raises(ValueError, match="group_size"):
        pi.sample(0)
    with pytest.raises(ValueError, match="coeffs has 4 action rows"):
        opt = torch.optim.Adam(pi.parameters())
        grpo_update(pi, copy.deepcopy(pi), opt, a, torch.ones(3, 2))


def test_epochs_reuse_the_behaviour_policy(monkeypatch):
    """PPO: every epoch's ratio is against the policy that drew the group, not the current one."""
    import icml26_trips.grpo as grpo_mod

    seen, ratios = [], []
    real = grpo_mod.grpo_loss

    def spy(policy, ref, coeffs, logp_old, advantages, **kw):
        seen.append(logp_old.clone())
        loss, stats = real(policy, ref, coeffs, logp_old, advantages, **kw)
        ratios.append(stats["ratio"])
        return loss, stats

    monkeypatch.setattr(grpo_mod, "grpo_loss", spy)
    pi = policy()
    coeffs = pi.sample(4, torch.Generator().manual_seed(10))
    rewards = torch.tensor([1.0, 0.0, 2.0, -1.0], dtype=D)
    grpo_update(
        pi, copy.deepcopy(pi), torch.optim.Adam(pi.parameters(), lr=0.05), coeffs, rewards, epochs=4
    )
    assert len(seen) == 4 and all(torch.equal(s, seen[0]) for s in seen)
    torch.testing.assert_close(ratios[0], torch.ones(4, dtype=D))
    assert float((ratios[-1] - 1).abs().max()) > 1e-3  # later epochs see the moved policy
