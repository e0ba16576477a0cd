"""Constants and directions pinned against the official code (mundongju/TriPS), computed here
without the package's own functions: templates and their names, the sigma grid, eta_reg, the DC
step, the Beta KL direction and GRPO's gradient clipping."""

import copy
import math

import numpy as np
import pytest
import torch
from icml26_trips import (
    BernsteinBetaPolicy,
    FlowDPSSampler,
    GRPOConfig,
    MatrixOperator,
    TriadicSchedule,
    flow_sigmas,
    grpo_loss,
    grpo_update,
    make_template,
    official_template,
    train_grpo,
)

D = torch.float64
NFE = 28
U = np.arange(NFE) / (NFE - 1)


# ---- the official template shapes, written out per (component, name) from the TriPS-T loop
def _exp(u, a):
    return (np.exp(a * u) - 1.0) / (np.exp(a) - 1.0)


def _log(u, a):
    return np.log(1.0 + a * u) / np.log(1.0 + a)


HAND = {
    ("cfg", "linear"): lambda u: 1.0 + 5.0 * u,
    ("cfg", "exponential"): lambda u: 1.0 + 5.0 * _exp(u, 6.0),
    ("cfg", "logarithm"): lambda u: 1.0 + 5.0 * _log(u, 6.0),
    ("eta", "linear"): lambda u: 1.0 - u,
    ("eta", "logarithm"): lambda u: 1.0 - np.expm1(15.0 * u) / np.expm1(15.0),  # late drop
    ("eta", "exponential"): lambda u: 1.0 - np.log1p(50.0 * u) / np.log1p(50.0),
}


def hand_dc(name, b0, b1, u):
    if name == "linear":
        return b0 + (b1 - b0) * u
    if name == "logarithm":  # official: DC "logarithm" is phi_exp(u, 6)
        return b0 + (b1 - b0) * _exp(u, 6.0)
    return b0 + (b1 - b0) * _log(u, 6.0)  # DC "exponential" is phi_log(u, 6)


# official build_init_schedules.py::CONFIGS, transcribed
CONFIGS = [
    ("DIV2K", "sr_bicubic", "linear", "logarithm", "logarithm", 300.0, 100.0),
    ("DIV2K", "deblur_gauss", "linear", "logarithm", "logarithm", 300.0, 200.0),
    ("DIV2K", "deblur_motion", "linear", "exponential", "linear", 350.0, 150.0),
    ("FFHQ", "sr_bicubic", "linear", "logarithm", "logarithm", 250.0, 50.0),
    ("FFHQ", "deblur_gauss", "logarithm", "logarithm", "logarithm", 200.0, 100.0),
    ("FFHQ", "deblur_motion", "linear", "exponential", "linear", 350.0, 150.0),
]


@pytest.mark.parametrize("dataset,task,dc,cfg,sto,b0,b1", CONFIGS)
def test_official_configurations_to_1e9(dataset, task, dc, cfg, sto, b0, b1):
    s = official_template(dataset, task)
    expected = {
        "cfg": HAND[("cfg", cfg)](U),
        "dc": hand_dc(dc, b0, b1, U),
        "eta": HAND[("eta", sto)](U),
    }
    for name, want in expected.items():
        got = getattr(s, name).numpy()
        assert got.shape == (NFE,)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9, err_msg=f"{dataset} {task} {name}")
    # make_template with the official names gives the same schedule
    m = make_template(dc=dc, cfg=cfg, sto=sto, dc_range=(b0, b1))
    for name in ("cfg", "dc", "eta"):
        np.testing.assert_allclose(getattr(m, name).numpy(), expected[name], rtol=0, atol=1e-9)


def test_default_template_is_div2k_sr_with_the_late_eta_drop():
    """The issue's number: the official DIV2K SR x8 eta at step 14 is 0.9993 (not 0.16)."""
    s = make_template()
    assert float(s.eta[14]) == pytest.approx(
        1 - math.expm1(15 * 14 / 27) / math.expm1(15), abs=1e-12
    )
    assert float(s.eta[14]) > 0.99
    # eta "exponential" drops early: below 0.2 at step 14
    e = make_template(sto="exponential")
    assert float(e.eta[14]) == pytest.approx(
        1 - math.log1p(50 * 14 / 27) / math.log1p(50), abs=1e-12
    )
    assert float(e.eta[14]) < 0.2


@pytest.mark.parametrize("name", ["linear", "exponential", "logarithm"])
def test_every_name_and_warp_constant(name):
    """Each (component, name) pair against its hand formula: pins alpha = 6, 6, 15 and 50."""
    s = make_template(dc=name, cfg=name, sto=name, dc_range=(30.0, 3.0))
    np.testing.assert_allclose(s.cfg.numpy(), HAND[("cfg", name)](U), rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.eta.numpy(), HAND[("eta", name)](U), rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.dc.numpy(), hand_dc(name, 30.0, 3.0, U), rtol=0, atol=1e-12)


def test_sto_weight_scales_only_the_logarithm_branch_and_caps_at_one():
    s = make_template(sto="logarithm", sto_weight=1.5)
    want = np.minimum(1.5 * HAND[("eta", "logarithm")](U), 1.0)
    np.testing.assert_allclose(s.eta.numpy(), want, rtol=0, atol=1e-12)
    lin = make_template(sto="linear", sto_weight=0.5)
    np.testing.assert_allclose(lin.eta.numpy(), 1.0 - U, rtol=0, atol=1e-12)


# ---- the noise grid: official values embedded in build_init_schedules.py (float32 rounding)
OFFICIAL_SIGMAS = {
    0: 1.0,
    1: 0.98738068342208862,
    2: 0.97410780191421509,
    13: 0.76467716693878174,
    20: 0.51507210731506348,
    26: 0.11090573668479919,
    27: 0.0089285718277096748,
}


def test_sigma_grid_is_the_official_shift_3_grid():
    sig = flow_sigmas(NFE)
    assert sig.shape == (NFE + 1,) and float(sig[-1]) == 0.0
    for i, v in OFFICIAL_SIGMAS.items():
        assert float(sig[i]) == pytest.approx(v, abs=2e-7), i
    # the sampler's default grid is that one
    assert FlowDPSSampler(lambda z, s, c: z, None).shift == 3.0
    # a shift-4 grid would be off by > 1e-3 at step 1
    assert abs(float(flow_sigmas(NFE, 4.0)[1]) - OFFICIAL_SIGMAS[1]) > 1e-3


@pytest.mark.parametrize("shift", [1.0, 3.0, 4.0])
def test_shift_formula(shift):
    """sigma = s t / (1 + (s - 1) t); the diffusers grid runs t from 1 to f(1/1000), unshifted."""
    t = np.linspace(1.0, 0.0, 11)
    want = shift * t / (1 + (shift - 1) * t)
    got = flow_sigmas(10, shift, num_train_timesteps=None).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    t_min = (shift / 1000) / (1 + (shift - 1) / 1000)
    t = np.linspace(1.0, t_min, 10)
    want = np.append(shift * t / (1 + (shift - 1) * t), 0.0)
    np.testing.assert_allclose(flow_sigmas(10, shift).numpy(), want, rtol=0, atol=1e-15)


# ---- eta_reg = max(1e-4, sigma_y^2 * 0.8) and the DC step it enters
@pytest.mark.parametrize(
    "sigma_y,pinv_weight,want", [(0.05, 0.8, 0.002), (0.03, 0.8, 0.00072), (0.005, 0.8, 1e-4)]
)
def test_eta_reg_is_sigma_y_squared(sigma_y, pinv_weight, want):
    s = FlowDPSSampler(lambda z, t, c: z, None, sigma_y=sigma_y, pinv_weight=pinv_weight)
    assert s.eta_reg == pytest.approx(want, rel=1e-12)


def test_dc_step_with_literal_eta_reg():
    """One DC step at sigma = 0.3 with eta_reg = 0.05^2 * 0.8 = 0.002 written out: the loss
    weights (1 - l) = 0.3 on the back-projected term and l = (1 - sigma)^1 = 0.7 on the residual."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 6, generator=g, dtype=D)
    x0 = torch.randn(2, 6, generator=g, dtype=D)
    y = torch.randn(2, 3, generator=g, dtype=D)
    sampler = FlowDPSSampler(lambda z, t, c: z, MatrixOperator(a), sigma_y=0.05, inner_steps=1)
    p = torch.linalg.solve(a.T @ a + 0.002 * torch.eye(6, dtype=D), a.T)  # (6, 3)
    x = x0.clone().requires_grad_(True)
    r = x @ a.T - y
    loss = 0.3 * (r @ p.T).norm(dim=1) + 0.7 * r.norm(dim=1)
    (grad,) = torch.autograd.grad(loss.sum(), x)
    want = x0 - 7.0 * (0.25 + 0.75 * 0.09) * grad
    got = sampler.data_consistency(x0, y, 0.3, torch.tensor(7.0, dtype=D))
    # both sides solve the same 6 x 6 system (condition number < 1e4 here): 1e-9 is ~1e3 eps cond
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9 * float(want.abs().max()))


# ---- GRPO: KL(pi || pi_ref) and gradient clipping, by hand
def _beta_kl(a1, b1, a2, b2):
    """Closed form KL(Beta(a1, b1) || Beta(a2, b2))."""
    lg, dg = torch.lgamma, torch.digamma
    log_b = lambda a, b: lg(a) + lg(b) - lg(a + b)
    return (
        log_b(a2, b2) - log_b(a1, b1)
        + (a1 - a2) * dg(a1) + (b1 - b2) * dg(b1) + (a2 - a1 + b2 - b1) * dg(a1 + b1)
    )  # fmt: skip


def _moved_policy():
    g = torch.Generator().manual_seed(1)
    init = 0.2 + 0.6 * torch.rand(3, 4, generator=g, dtype=D)
    ref = BernsteinBetaPolicy(init, kappa=50.0, nfe=8)
    pi = copy.deepcopy(ref)
    with torch.no_grad():
        pi.log_alpha.add_(0.3 * torch.randn(3, 4, generator=g, dtype=D))
        pi.log_beta.sub_(0.2 * torch.randn(3, 4, generator=g, dtype=D))
    return pi, ref.requires_grad_(False)


def test_kl_direction_and_coefficient():
    """With zero advantages the loss is 1e-3 KL(pi || pi_ref), the policy first (official kl_to)."""
    pi, ref = _moved_policy()
    coeffs = torch.full((2, 3, 4), 0.5, dtype=D)
    with torch.no_grad():
        logp_old = pi.log_prob(coeffs)
    loss, stats = grpo_loss(pi, ref, coeffs, logp_old, torch.zeros(2, dtype=D))
    a1, b1 = pi.log_alpha.detach().exp(), pi.log_beta.detach().exp()
    a2, b2 = ref.log_alpha.exp(), ref.log_beta.exp()
    forward = float(_beta_kl(a1, b1, a2, b2).sum())
    reverse = float(_beta_kl(a2, b2, a1, b1).sum())
    assert abs(forward - reverse) > 1e-3 * forward  # the direction is visible
    assert float(stats["kl"]) == pytest.approx(forward, rel=1e-10)
    assert float(loss.detach()) == pytest.approx(1e-3 * forward, rel=1e-10)


def _score(c, a, b):
    """d log Beta(c; a, b) / d (log a, log b), closed form; c (N, 3, k) -> two (N, 3, k)."""
    dg = torch.digamma
    return a * (torch.log(c) + dg(a + b) - dg(a)), b * (torch.log1p(-c) + dg(a + b) - dg(b))


def _clip(ga, gb, max_norm):
    norm = math.sqrt(float((ga**2).sum() + (gb**2).sum()))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return ga * scale, gb * scale, norm


def test_grpo_update_clips_the_gradient_norm_to_one():
    """One SGD(lr=1) epoch at the behaviour policy: theta <- theta - clip(-mean A grad log pi, 1)."""
    pi, _ = _moved_policy()
    ref = copy.deepcopy(pi).requires_grad_(False)  # KL and its gradient are 0 at pi = ref
    coeffs = pi.sample(4, torch.Generator().manual_seed(2))
    rewards = torch.tensor([3.0, -1.0, 0.5, 2.0], dtype=D)
    adv = (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-8)
    a, b = pi.log_alpha.detach().exp(), pi.log_beta.detach().exp()
    sa, sb = _score(coeffs, a, b)
    ga = -(adv[:, None, None] * sa).mean(0)
    gb = -(adv[:, None, None] * sb).mean(0)
    ga_c, gb_c, norm = _clip(ga, gb, 1.0)
    assert norm > 5.0  # the clip is active
    la0, lb0 = pi.log_alpha.detach().clone(), pi.log_beta.detach().clone()
    opt = torch.optim.SGD(pi.parameters(), lr=1.0)
    grpo_update(pi, ref, opt, coeffs, rewards, epochs=1)
    torch.testing.assert_close(pi.log_alpha.detach(), la0 - ga_c, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(pi.log_beta.detach(), lb0 - gb_c, rtol=1e-9, atol=1e-12)


def test_actions_per_image_pairs_each_advantage_with_its_own_action():
    """Official grouping: G actions per image, advantages normalised within each image's group."""
    pi, _ = _moved_policy()
    ref = copy.deepcopy(pi).requires_grad_(False)
    g_size, n_img = 3, 2
    coeffs = pi.sample(g_size * n_img, torch.Generator().manual_seed(3))  # image-major
    rewards = torch.tensor([[1.0, 10.0], [2.0, 30.0], [4.0, 20.0]], dtype=D)  # (G, I)
    adv = torch.empty(n_img, g_size, dtype=D)
    for i in range(n_img):
        r = rewards[:, i]
        adv[i] = (r - r.mean()) / (r.std(unbiased=False) + 1e-8)
    adv = adv.reshape(-1)  # row i * G + g
    a, b = pi.log_alpha.detach().exp(), pi.log_beta.detach().exp()
    sa, sb = _score(coeffs, a, b)
    ga = -(adv[:, None, None] * sa).mean(0)
    gb = -(adv[:, None, None] * sb).mean(0)
    ga_c, gb_c, _ = _clip(ga, gb, 1e9)  # no clipping
    la0, lb0 = pi.log_alpha.detach().clone(), pi.log_beta.detach().clone()
    opt = torch.optim.SGD(pi.parameters(), lr=1e-3)
    grpo_update(pi, ref, opt, coeffs, rewards, epochs=1, max_grad_norm=1e9, actions_per_image=True)
    torch.testing.assert_close(pi.log_alpha.detach(), la0 - 1e-3 * ga_c, rtol=1e-9, atol=1e-13)
    torch.testing.assert_close(pi.log_beta.detach(), lb0 - 1e-3 * gb_c, rtol=1e-9, atol=1e-13)
    with pytest.raises(ValueError, match="I \\* G = 6"):
        grpo_update(pi, ref, opt, coeffs[:3], rewards, actions_per_image=True)


def test_train_grpo_draws_g_actions_per_image():
    pi, _ = _moved_policy()
    seen = []

    def reward_fn(s: TriadicSchedule, it):
        seen.append(s.cfg.shape)
        return -s.cfg.mean(0).reshape(2, 3).T  # (I * G,) image-major -> (G, I)

    cfg = GRPOConfig(iterations=2, group_size=3, actions_per_image=True, images=2)
    train_grpo(pi, reward_fn, cfg, torch.Generator().manual_seed(4))
    assert seen == [(8, 6), (8, 6)]
    with pytest.raises(ValueError, match=r"\(G, I\) = \(3, 2\)"):
        train_grpo(pi, lambda s, it: torch.zeros(6), cfg, torch.Generator().manual_seed(4))
