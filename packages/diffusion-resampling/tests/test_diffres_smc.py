"""Particle filter vs the Kalman filter, the Kalman filter vs brute force, parameter fitting."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from icml26_diffusion_resampling import (
    LGSSMParams,
    LinearGaussianSSM,
    diffusion_resample,
    estimate_parameters,
    gaussian_marginal_distances,
    kalman_filter,
    particle_filter,
)

MODEL = LinearGaussianSSM()


def lgssm(theta1, theta2):
    """The paper's 1-D LGSSM: x_k = θ₁ x_{k-1} + N(0, θ₂²), y_k = x_k + N(0, 0.5), x_0 ~ N(0, 1)."""
    f = lambda v: jnp.reshape(jnp.asarray(v, jnp.float32), (1, 1))
    return LGSSMParams(f(theta1), f(theta2) ** 2, f(1.0), f(0.5), jnp.zeros(1), f(1.0))


PARAMS = lgssm(0.5, 1.0)
_, YS = MODEL.simulate(jax.random.PRNGKey(0), PARAMS, 16)


def test_kalman_filter_matches_brute_force_joint_gaussian():
    d, dy, k_steps = 2, 1, 5
    rng = np.random.default_rng(0)
    A = rng.normal(size=(d, d)) * 0.5
    Q = np.eye(d) * 0.3 + 0.1
    H = rng.normal(size=(dy, d))
    R = np.eye(dy) * 0.4
    m0, P0 = np.array([0.2, -0.1]), np.eye(d)
    ys = rng.normal(size=(k_steps, dy))
    params = LGSSMParams(*(jnp.asarray(v, jnp.float32) for v in (A, Q, H, R, m0, P0)))
    kf = kalman_filter(params, ys)
    # brute force: x_{1:K} and y_{1:K} are jointly Gaussian; build their moments explicitly
    means = []
    m = m0
    Phi = [np.eye(d)]
    for k in range(1, k_steps + 1):
        m = A @ m
        means.append(m)
        Phi.append(A @ Phi[-1])
    Sx = np.zeros((k_steps * d, k_steps * d))
    for i in range(1, k_steps + 1):
        for j in range(1, k_steps + 1):
            # Cov(x_i, x_j) = A^i P0 A^jᵀ + Σ_{s ≤ min(i,j)} A^{i-s} Q A^{j-s}ᵀ
            c = Phi[i] @ P0 @ Phi[j].T
            for s in range(1, min(i, j) + 1):
                c = c + Phi[i - s] @ Q @ Phi[j - s].T
            Sx[(i - 1) * d : i * d, (j - 1) * d : j * d] = c
    Hb = np.kron(np.eye(k_steps), H)
    Sy = Hb @ Sx @ Hb.T + np.kron(np.eye(k_steps), R)
    my = Hb @ np.concatenate(means)
    resid = ys.reshape(-1) - my
    _, logdet = np.linalg.slogdet(Sy)
    ll = -0.5 * (resid @ np.linalg.solve(Sy, resid) + logdet + len(resid) * np.log(2 * np.pi))
    np.testing.assert_allclose(float(kf.log_likelihood), ll, rtol=1e-4)
    # filtering mean at the last step: E[x_K | y_{1:K}] by Gaussian conditioning
    Sxy = Sx @ Hb.T
    post = np.concatenate(means) + Sxy @ np.linalg.solve(Sy, resid)
    np.testing.assert_allclose(np.asarray(kf.means[-1]), post[-d:], atol=1e-4)


@functools.lru_cache(maxsize=1)
def _diffusion_pf_stats():
    """LL and ∇θ LL of the diffusion-resampling filter over 16 seeds, N = 128 (one compile)."""

    def ll(theta, key):
        return particle_filter(
            key, MODEL, lgssm(theta[0], theta[1]), YS, n_particles=128
        ).log_likelihood

    keys = jax.random.split(jax.random.PRNGKey(1), 16)
    vals, grads = jax.jit(jax.vmap(jax.value_and_grad(ll), in_axes=(None, 0)))(
        jnp.array([0.5, 1.0]), keys
    )
    return np.asarray(vals), np.asarray(grads)


def test_particle_filter_log_likelihood_and_gradient_approach_kalman():
    vals, grads = _diffusion_pf_stats()
    theta = jnp.array([0.5, 1.0])
    kf_ll = float(kalman_filter(PARAMS, YS).log_likelihood)
    kf_grad = np.asarray(
        jax.grad(lambda th: kalman_filter(lgssm(th[0], th[1]), YS).log_likelihood)(theta)
    )
    se = vals.std() / 4
    assert abs(vals.mean() - kf_ll) < 4 * se + 0.2, (vals.mean(), kf_ll)
    g_se = grads.std(axis=0) / 4
    # tight enough to catch a biased gradient: the same filter with multinomial resampling (whose
    # pathwise gradient ignores the weights) misses kf_grad ≈ (-2.22, -7.52) by (0.29, 0.59) here,
    # against this bound of about (0.44, 0.35); diffusion misses by about (0.12, 0.12)
    assert np.all(np.abs(grads.mean(axis=0) - kf_grad) < 3 * g_se + 0.1), (grads.mean(0), kf_grad)
    assert np.all(np.isfinite(grads))


def test_guided_filter_with_optimal_proposal_beats_bootstrap():
    keys = jax.random.split(jax.random.PRNGKey(2), 32)
    kf_ll = float(kalman_filter(PARAMS, YS).log_likelihood)
    from icml26_diffusion_resampling import multinomial_resample

    @jax.jit
    def both(keys):
        run = lambda prop: jax.vmap(
            lambda k: (
                particle_filter(
                    k,
                    MODEL,
                    PARAMS,
                    YS,
                    n_particles=16,
                    resampler=multinomial_resample,
                    proposal=prop,
                ).log_likelihood
            )
        )(keys)
        return run(None), run(MODEL.optimal_proposal())

    boot, guided = map(np.asarray, both(keys))
    assert guided.std() < 0.6 * boot.std()
    assert abs(guided.mean() - kf_ll) < 4 * guided.std() / np.sqrt(32) + 0.1


def test_no_resampling_is_sequential_importance_sampling():
    """ess_threshold = 0: never resamples, and log Ẑ = log mean_i Π_k g(y_k | x_k^i)."""
    out = jax.jit(
        lambda k: particle_filter(k, MODEL, PARAMS, YS[:6], n_particles=64, ess_threshold=0.0)
    )(jax.random.PRNGKey(3))
    assert not bool(out.resampled.any())
    log_g = jax.vmap(lambda y, x: MODEL.observation_log_prob(PARAMS, y, x, 0))(
        YS[:6], out.particles
    )  # (K, N)
    expected = jax.scipy.special.logsumexp(log_g.sum(0)) - jnp.log(64.0)
    np.testing.assert_allclose(out.log_likelihood, expected, rtol=1e-5)
    # the ESS reported at step k is that of the weights before step k
    ess = 1.0 / jnp.sum(jnp.exp(out.log_weights[:-1]) ** 2, axis=1)
    np.testing.assert_allclose(out.ess[1:], ess, rtol=1e-4)


def test_ess_threshold_triggers_exactly_when_ess_is_low():
    out = jax.jit(
        lambda k: particle_filter(k, MODEL, PARAMS, YS, n_particles=32, ess_threshold=0.5)
    )(jax.random.PRNGKey(4))
    np.testing.assert_array_equal(np.asarray(out.resampled), np.asarray(out.ess <= 16.0))
    assert 0 < int(out.resampled.sum()) < len(YS)


def test_jit_vmap_matches_python_loop():
    run = lambda k: particle_filter(k, MODEL, PARAMS, YS[:5], n_particles=8).log_likelihood
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    batched = jax.jit(jax.vmap(run))(keys)
    looped = jnp.stack([jax.jit(run)(k) for k in keys])
    np.testing.assert_allclose(batched, looped, rtol=1e-5)


def test_marginal_distances_are_zero_for_exact_moments():
    kf = kalman_filter(PARAMS, YS)
    # two particles at m ± sqrt(P) with equal weights have exactly the Kalman moments
    sd = jnp.sqrt(kf.covs[:, 0, 0])
    parts = jnp.stack([kf.means[:, 0] - sd, kf.means[:, 0] + sd], axis=1)[..., None]  # (K, 2, 1)
    from icml26_diffusion_resampling import FilterOutput

    n_obs = len(YS)
    out = FilterOutput(
        jnp.zeros(()), parts, jnp.full((n_obs, 2), -jnp.log(2.0)), jnp.ones(n_obs), jnp.ones(n_obs)
    )
    dist = jax.jit(gaussian_marginal_distances)
    kl, bw = dist(out, kf)
    assert float(kl) == pytest.approx(0.0, abs=1e-5)
    assert float(bw) == pytest.approx(0.0, abs=2e-3)
    shifted = out._replace(particles=parts + 0.3)
    kl, bw = dist(shifted, kf)
    assert float(bw) == pytest.approx(0.3, abs=2e-3)  # W₂ of a pure shift is the shift


def test_estimate_parameters_reaches_the_kalman_mle():
    ll = lambda th, _key: kalman_filter(lgssm(th[0], th[1]), YS).log_likelihood
    theta, trace = jax.jit(
        lambda th0: estimate_parameters(ll, th0, jax.random.PRNGKey(0), n_iter=300)
    )(jnp.array([0.2, 0.6]))
    grad = jax.grad(lambda th: ll(th, None))(theta)
    assert float(jnp.abs(grad).max()) < 0.05  # a stationary point of the exact likelihood
    assert float(trace[-1]) > float(trace[0])


@pytest.mark.slow
def test_diffusion_filter_parameter_estimate_is_close_to_kalman_mle():
    _, ys = MODEL.simulate(jax.random.PRNGKey(9), PARAMS, 64)
    kf_ll = lambda th, _k: kalman_filter(lgssm(th[0], th[1]), ys).log_likelihood
    pf_ll = lambda th, k: (
        particle_filter(
            k, MODEL, lgssm(th[0], th[1]), ys, n_particles=64, resampler=diffusion_resample
        ).log_likelihood
    )
    th0 = jnp.array([0.2, 0.6])
    opt = optax.adam(0.03)
    kf_theta, _ = estimate_parameters(kf_ll, th0, jax.random.PRNGKey(0), n_iter=300, optimizer=opt)
    pf_theta, _ = jax.jit(
        lambda t: estimate_parameters(pf_ll, t, jax.random.PRNGKey(1), n_iter=300, optimizer=opt)
    )(th0)
    assert float(jnp.linalg.norm(pf_theta - kf_theta)) < 0.1


def test_bad_filter_arguments_raise():
    with pytest.raises(ValueError, match="n_particles"):
        particle_filter(jax.random.PRNGKey(0), MODEL, PARAMS, YS, n_particles=0)
    with pytest.raises(ValueError, match="ess_threshold"):
        particle_filter(jax.random.PRNGKey(0), MODEL, PARAMS, YS, n_particles=4, ess_threshold=2)
    with pytest.raises(ValueError, match="ys"):
        particle_filter(jax.random.PRNGKey(0), MODEL, PARAMS, jnp.zeros((2, 2, 2)), n_particles=4)
    with pytest.raises(ValueError, match="n_iter"):
        estimate_parameters(lambda t, k: t, jnp.zeros(1), jax.random.PRNGKey(0), n_iter=0)
