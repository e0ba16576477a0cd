import math

import pytest
import torch
from icml26_trips import (
    FlowDPSSampler,
    GaussianMixturePrior,
    MatrixOperator,
    TriadicSchedule,
    flow_sigmas,
    make_template,
    sliced_wasserstein,
)

D = torch.float64


def mixture(leak=0.0, seed=0, d=4):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(4, d, generator=g, dtype=D) * 2
    stds = 0.3 + torch.rand(4, d, generator=g, dtype=D) * 0.4
    weights = torch.tensor([1.0, 2.0, 1.5, 0.5], dtype=D)
    return GaussianMixturePrior(means, stds, weights, torch.tensor([0, 0, 1, 1]), class_leak=leak)


def mlp_velocity(d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    w1, w2 = (
        torch.randn(d + 2, 16, generator=g, dtype=D) / 3,
        torch.randn(16, d, generator=g, dtype=D) / 4,
    )

    def v(z, sigma, cond):
        c = (
            torch.zeros_like(sigma)
            if cond is None
            else torch.as_tensor(cond, dtype=D).expand_as(sigma)
        )
        h = torch.tanh(torch.cat([z, sigma[:, None], c[:, None]], 1) @ w1)
        return h @ w2

    return v


def test_reduces_to_plain_euler():
    """lambda = 1, beta = 0, eta = 0: z <- z + (sigma_next - sigma) v(z, sigma, c)."""
    v = mlp_velocity()
    op = MatrixOperator(torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=D))
    y = torch.randn(5, 3, dtype=D)
    z0 = torch.randn(5, 6, generator=torch.Generator().manual_seed(2), dtype=D)
    out = FlowDPSSampler(v, op).sample(y, TriadicSchedule.constant(12), cond=1.0, z_init=z0)
    sig = flow_sigmas(12)  # the default grid (shift 3, diffusers' SD3 spacing)
    z = z0.clone()
    for i in range(12):
        z = z + (sig[i + 1] - sig[i]) * v(z, torch.full((5,), float(sig[i]), dtype=D), 1.0)
    torch.testing.assert_close(out, z, rtol=1e-12, atol=1e-12)


def test_cfg_and_renoise_follow_the_step_equations():
    """One step with lambda, eta by hand: v_u + lambda (v_c - v_u), then sqrt(1-eta^2) x1 + eta eps."""
    v = mlp_velocity()
    z0 = torch.randn(4, 6, generator=torch.Generator().manual_seed(3), dtype=D)
    sigmas = torch.tensor([0.8, 0.3, 0.0], dtype=D)
    sched = TriadicSchedule(torch.tensor([3.0, 1.0]), torch.zeros(2), torch.tensor([0.6, 0.0]))
    out_trace: list = []
    FlowDPSSampler(v, None, sigmas=sigmas).sample(
        None, sched, torch.Generator().manual_seed(4), cond=1.0, z_init=z0, trace=out_trace
    )
    t = torch.full((4,), 0.8, dtype=D)
    vg = v(z0, t, None) + 3.0 * (v(z0, t, 1.0) - v(z0, t, None))
    x0, x1 = z0 - 0.8 * vg, z0 + 0.2 * vg
    eps = torch.randn(4, 6, generator=torch.Generator().manual_seed(4), dtype=D)
    z1 = 0.7 * x0 + 0.3 * (math.sqrt(1 - 0.36) * x1 + 0.6 * eps)
    torch.testing.assert_close(out_trace[0]["x0_hat"], x0)
    # the second step's x0_hat is computed from z1
    v1 = v(z1, torch.full((4,), 0.3, dtype=D), 1.0)
    torch.testing.assert_close(out_trace[1]["x0_hat"], z1 - 0.3 * v1)


def test_dc_step_is_normalised_residual_gradient():
    """At sigma -> 0 (l = 1) one DC step moves x by -s A^T r / ||r|| with s = beta (0.25 + 0.75 sigma^2)."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(3, 6, generator=g, dtype=D)
    x0, y = torch.randn(2, 6, generator=g, dtype=D), torch.randn(2, 3, generator=g, dtype=D)
    sampler = FlowDPSSampler(mlp_velocity(), MatrixOperator(a), inner_steps=2)
    beta = torch.tensor(0.4, dtype=D)
    out = sampler.data_consistency(x0, y, 0.0, beta)
    x = x0.clone()
    for _ in range(2):
        r = x @ a.T - y
        x = x - 0.4 * 0.25 / 2 * (r @ a) / r.norm(dim=1, keepdim=True)
    torch.testing.assert_close(out, x)
    # at sigma = 0.5: l = 0.5, step beta (0.25 + 0.75 / 4), the pseudo-inverse as a dense matrix
    p = torch.linalg.solve(a.T @ a + sampler.eta_reg * torch.eye(6, dtype=D), a.T)  # (6, 3)
    xh = x0.clone().requires_grad_(True)
    hand = 0.5 * ((xh @ a.T - y) @ p.T).norm(dim=1) + 0.5 * (xh @ a.T - y).norm(dim=1)
    (g,) = torch.autograd.grad(hand.sum(), xh)
    one = FlowDPSSampler(mlp_velocity(), MatrixOperator(a), inner_steps=1).data_consistency(
        x0, y, 0.5, beta
    )
    torch.testing.assert_close(one, x0 - 0.4 * (0.25 + 0.75 * 0.25) * g)
    # at sigma = 1 the loss is the back-projected residual ||A+ A x - A+ y|| (pinv branch)
    loss = sampler.dc_loss(x0, y, 1.0)
    ap = MatrixOperator(a).pinv
    torch.testing.assert_close(
        loss, (ap(x0 @ a.T, sampler.eta_reg) - ap(y, sampler.eta_reg)).norm(dim=1)
    )


def test_mixture_denoiser_matches_monte_carlo():
    """E[x0 | z] by importance weighting prior draws with N(z; (1 - sigma) x0, sigma^2)."""
    prior = mixture()
    x0 = prior.sample(400_000, generator=torch.Generator().manual_seed(6))
    z = torch.randn(3, 4, generator=torch.Generator().manual_seed(7), dtype=D)
    sigma = 0.6
    logw = -((z[:, None, :] - (1 - sigma) * x0[None]) ** 2).sum(-1) / (2 * sigma**2)  # (3, N)
    mc = torch.softmax(logw, 1) @ x0
    exact = prior.denoise(z, torch.tensor(sigma, dtype=D))
    torch.testing.assert_close(exact, mc, rtol=0.05, atol=0.05)


def test_single_gaussian_flow_is_the_affine_map():
    """For N(mu, s^2) the probability-flow map from x1 = eps is x0 = mu + s eps."""
    mu, s = torch.tensor([[1.0, -2.0, 0.5]], dtype=D), torch.tensor([[0.5, 2.0, 1.0]], dtype=D)
    prior = GaussianMixturePrior(mu, s, torch.ones(1, dtype=D), torch.zeros(1))
    eps = torch.randn(50, 3, generator=torch.Generator().manual_seed(8), dtype=D)
    sigmas = flow_sigmas(400, 1.0, num_train_timesteps=None)
    sigmas[-2] = 1e-4  # keep the last velocity call away from sigma = 0
    out = FlowDPSSampler(prior.velocity, None, sigmas=sigmas).sample(
        None, TriadicSchedule.constant(400), z_init=eps
    )
    torch.testing.assert_close(out, mu + s * eps, rtol=0, atol=2e-2)


def test_unconditioned_sampler_reproduces_the_prior():
    prior = mixture()
    ref = prior.sample(4000, cond=1, generator=torch.Generator().manual_seed(9))
    ref2 = prior.sample(4000, cond=1, generator=torch.Generator().manual_seed(10))
    sampler = FlowDPSSampler(prior.velocity, None)
    cond = torch.ones(4000, dtype=torch.long)
    x = sampler.sample(
        None,
        TriadicSchedule.constant(48),
        torch.Generator().manual_seed(11),
        cond=cond,
        shape=(4000, 4),
    )
    sw = lambda a, b: float(sliced_wasserstein(a, b, 256, torch.Generator().manual_seed(0)))
    assert sw(x, ref) < 1.5 * sw(ref2, ref)
    # class 1 only (components 2, 3), in the prior's 1.5 : 0.5 proportions
    comp = prior.component_of(x)
    assert bool((comp >= 2).all())
    assert abs(float((comp == 2).to(D).mean()) - 0.75) < 0.03


def test_posterior_closed_form_matches_importance_sampling():
    prior = mixture()
    a = torch.randn(2, 4, generator=torch.Generator().manual_seed(12), dtype=D)
    x_true = prior.sample(1, cond=0, generator=torch.Generator().manual_seed(23))[0]
    y = a @ x_true + 0.5 * torch.randn(2, generator=torch.Generator().manual_seed(24), dtype=D)
    post = prior.posterior(a, y, 0.5, cond=0)
    x0 = prior.sample(400_000, cond=0, generator=torch.Generator().manual_seed(13))
    w = torch.softmax(-((x0 @ a.T - y) ** 2).sum(1) / (2 * 0.5**2), 0)
    assert float(1 / (w**2).sum()) > 2000  # effective sample size of the brute-force estimate
    comp = prior.component_of(x0)
    torch.testing.assert_close(
        torch.stack([w[comp == k].sum() for k in (0, 1)]), post.weights, rtol=0.05, atol=0.02
    )
    torch.testing.assert_close(post.weights @ post.means, w @ x0, rtol=0.05, atol=0.03)
    second_is = torch.einsum("n,ni,nj->ij", w, x0, x0)
    second_cf = torch.einsum(
        "k,kij->ij", post.weights, post.covs + post.means[:, :, None] * post.means[:, None, :]
    )
    torch.testing.assert_close(second_cf, second_is, rtol=0.05, atol=0.05)


def test_posterior_approach_improves_with_nfe():
    """Exact prior + linear-Gaussian measurement: SW to the closed-form posterior falls with NFE."""
    prior = mixture(seed=1)
    a = torch.randn(2, 4, generator=torch.Generator().manual_seed(14), dtype=D)
    x_true = prior.sample(1, cond=0, generator=torch.Generator().manual_seed(15))
    y = x_true @ a.T + 0.1 * torch.randn(1, 2, generator=torch.Generator().manual_seed(16), dtype=D)
    ref = prior.posterior(a, y[0], 0.1, cond=0).sample(1000, torch.Generator().manual_seed(17))
    sampler = FlowDPSSampler(prior.velocity, MatrixOperator(a), sigma_y=0.1)
    cond = torch.zeros(1000, dtype=torch.long)
    sws = []
    for nfe in (7, 28, 112):
        x = sampler.sample(
            y.expand(1000, 2),
            TriadicSchedule.constant(nfe, dc=0.5),
            torch.Generator().manual_seed(18),
            cond=cond,
        )
        sws.append(float(sliced_wasserstein(x, ref, 256, torch.Generator().manual_seed(0))))
    prior_only = sampler.sample(
        y.expand(1000, 2),
        TriadicSchedule.constant(112),
        torch.Generator().manual_seed(18),
        cond=cond,
    )
    sw_prior = float(sliced_wasserstein(prior_only, ref, 256, torch.Generator().manual_seed(0)))
    assert sws[0] > sws[1] > sws[2], sws
    assert sws[2] < 0.5 * sw_prior, (sws, sw_prior)


def test_per_sample_schedules_equal_separate_runs():
    prior = mixture()
    op = MatrixOperator(torch.randn(2, 4, generator=torch.Generator().manual_seed(19), dtype=D))
    y = torch.randn(2, 2, generator=torch.Generator().manual_seed(20), dtype=D)
    z0 = torch.randn(2, 4, generator=torch.Generator().manual_seed(21), dtype=D)
    s1, s2 = (
        make_template(nfe=6, dc_range=(2, 0.2)),
        TriadicSchedule.constant(6, cfg=2.0, dc=0.5, eta=0.0),
    )
    both = TriadicSchedule(
        *(torch.stack([getattr(s1, k), getattr(s2, k)], 1) for k in ("cfg", "dc", "eta"))
    )
    sampler = FlowDPSSampler(prior.velocity, op)
    cond = torch.zeros(2, dtype=torch.long)
    out = sampler.sample(y, both, torch.Generator().manual_seed(0), cond=cond, z_init=z0)
    eps_free = TriadicSchedule(both.cfg, both.dc, torch.zeros_like(both.eta))
    out0 = sampler.sample(y, eps_free, cond=cond, z_init=z0)
    sep = sampler.sample(y[1:], s2, cond=cond[1:], z_init=z0[1:])
    torch.testing.assert_close(out0[1], sep[0])
    assert out.shape == (2, 4)


def test_bad_input_raises():
    prior = mixture()
    op = MatrixOperator(torch.randn(2, 4, dtype=D))
    sampler = FlowDPSSampler(prior.velocity, op)
    y = torch.zeros(3, 2, dtype=D)
    with pytest.raises(ValueError, match=r"y must have shape \(B, 2\)"):
        sampler.sample(torch.zeros(3, 5, dtype=D), TriadicSchedule.constant(4))
    with pytest.raises(ValueError, match="nfe"):
        sampler.sample(y, TriadicSchedule.constant(0))
    with pytest.raises(ValueError, match="non-finite"):
        sampler.sample(torch.full((3, 2), float("nan"), dtype=D), TriadicSchedule.constant(4))
    with pytest.raises(ValueError, match="nfe"):
        flow_sigmas(0)
    with pytest.raises(ValueError, match="sigmas"):
        FlowDPSSampler(prior.velocity, op, sigmas=torch.tensor([1.0, 0.5, 0.6, 0.0]))
    with pytest.raises(ValueError, match="nfe=4 steps but sigmas"):
        FlowDPSSampler(prior.velocity, op, sigmas=flow_sigmas(6)).sample(
            y, TriadicSchedule.constant(4)
        )
    with pytest.raises(ValueError, match="per-sample schedule"):
        sampler.sample(y, TriadicSchedule(torch.ones(4, 2), torch.zeros(4, 2), torch.zeros(4, 2)))
    with pytest.raises(ValueError, match="batch sizes"):
        sampler.sample(y, TriadicSchedule.constant(4), z_init=torch.zeros(2, 4, dtype=D))
    with pytest.raises(ValueError, match="dc must be 0 without an operator"):
        FlowDPSSampler(prior.velocity, None).sample(
            None, TriadicSchedule.constant(4, dc=1.0), shape=(2, 4)
        )
    with pytest.raises(ValueError, match="sigma must be > 0"):
        prior.velocity(torch.zeros(1, 4, dtype=D), torch.zeros(1, dtype=D))
    with pytest.raises(ValueError, match="inner_steps"):
        FlowDPSSampler(prior.velocity, op, inner_steps=0)
    with pytest.raises(ValueError, match=r"schedule.cfg \(the CFG scale lambda\) must be >= 1"):
        sampler.sample(
            y, TriadicSchedule.constant(4, cfg=-2.0), cond=torch.zeros(3, dtype=torch.long)
        )
    with pytest.raises(ValueError, match="shift"):
        flow_sigmas(4, 0.0)


def test_non_finite_velocity_raises():
    op = MatrixOperator(torch.randn(2, 4, dtype=D))
    calls = []

    def v(z, sigma, cond):
        calls.append(1)
        out = torch.zeros_like(z)
        return out if len(calls) < 3 else out + float("nan")

    with pytest.raises(
        FloatingPointError, match="velocity_fn returned non-finite values at step 2"
    ):
        FlowDPSSampler(v, op).sample(torch.zeros(3, 2, dtype=D), TriadicSchedule.constant(6))
