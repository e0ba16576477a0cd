"""Diffusion resampling and the baselines: targets, gradients, consistency, edge cases."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from icml26_diffusion_resampling import (
    INTEGRATORS,
    GaussianReference,
    diffusion_resample,
    diffusion_resample_from_noise,
    diffusion_resample_ref,
    empirical_reference,
    gumbel_softmax_resample,
    multinomial_resample,
    ot_resample,
    sinkhorn_plan_ref,
    soft_resample,
    stop_gradient_resample,
    stratified_resample,
    systematic_resample,
)

KEY = jax.random.PRNGKey(0)


# ---------------------------------------------------------------------------------------------
# the weighted-target identity: X = θ + ε, log w = log N(0; X, 1)  =>  target N(θ/2, 1/2)
# ---------------------------------------------------------------------------------------------


def _theta_problem(resampler, n=1000):
    eps = jax.random.normal(jax.random.PRNGKey(1), (n,))

    def mean_var(theta):
        x = theta + eps
        log_w = -0.5 * x**2
        _, y = resampler(KEY, log_w, x)
        return jnp.mean(y), jnp.var(y)

    def weighted_mean(theta):
        x = theta + eps
        return jnp.sum(jax.nn.softmax(-0.5 * x**2) * x)

    @jax.jit
    def all_(theta):
        m, v = mean_var(theta)
        g = jax.grad(lambda t: mean_var(t)[0])(theta)
        return m, v, g, weighted_mean(theta)

    return all_


def test_theta_identity_diffusion_mean_variance_and_gradient():
    m, v, g, _ = _theta_problem(diffusion_resample)(0.7)
    # the output matches the weighted particles it resamples, up to the resampling noise: one
    # draw's mean has SE ~ sqrt(v / N) = 0.022, so the old bound 0.01 held only for one RNG
    # stream (jax 0.4.30's draw missed by 0.062, nox lowest). Over 8 keys, within 4 SE of the
    # 8 draws' own spread (a biased resampler, e.g. one ignoring w, misses by ~0.35)
    eps = jax.random.normal(jax.random.PRNGKey(1), (1000,))
    x = 0.7 + eps
    log_w = -0.5 * x**2
    wmean = float(jnp.sum(jax.nn.softmax(log_w) * x))
    keys = jax.random.split(jax.random.PRNGKey(11), 8)
    draws = jax.jit(jax.vmap(lambda k: jnp.mean(diffusion_resample(k, log_w, x)[1])))(keys)
    d = np.asarray(draws, dtype=np.float64) - wmean
    se = d.std(ddof=1) / np.sqrt(d.size)
    assert abs(d.mean()) < 4 * se + 1e-3, (d.mean(), se)
    assert 0.002 < d.std(ddof=1) < 0.1  # real resampling noise, of the order of sqrt(v / N)
    # ... and hence the target N(θ/2, 1/2) up to Monte Carlo error at N = 1000
    assert abs(float(m) - 0.35) < 0.1
    assert abs(float(v) - 0.5) < 0.05
    # the reparametrised gradient is the target's d mean/dθ = 1/2
    assert abs(float(g) - 0.5) < 0.03


def test_theta_identity_multinomial_gradient_is_wrong():
    m, _, g, wm = _theta_problem(multinomial_resample)(0.7)
    assert abs(float(m) - float(wm)) < 0.1  # right value ...
    assert float(g) == pytest.approx(1.0, abs=1e-6)  # ... wrong pathwise gradient (ignores w)


# ---------------------------------------------------------------------------------------------
# the fast path equals the generic-form reference (score by autodiff of the mixture density)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ode", "reference"),
    [
        (True, "empirical"),
        (False, GaussianReference(jnp.array([0.3, -0.2]), jnp.array([1.5, 0.7]))),
    ],
    ids=["ode-empirical", "sde-fixed"],
)
def test_fast_path_matches_reference(ode, reference):
    x = jax.random.normal(KEY, (16, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(3), (16,))
    noise = jax.random.normal(jax.random.PRNGKey(4), (5, 16, 2))
    kw = dict(a=-0.7, T=1.5, n_steps=4, ode=ode, reference=reference)
    lw_f, y_f = diffusion_resample_from_noise(log_w, x, noise, **kw)
    _, y_r = jax.jit(lambda lw, xx, nz: diffusion_resample_ref(lw, xx, nz, **kw))(log_w, x, noise)
    np.testing.assert_allclose(y_f, y_r, atol=2e-5)
    np.testing.assert_allclose(lw_f, jnp.full(16, -jnp.log(16.0)), atol=1e-6)
    assert y_f.std() > 0.1  # not trivially collapsed


def test_callable_reference_equals_fixed_and_empirical():
    x = jax.random.normal(KEY, (16, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(3), (16,))
    noise = jax.random.normal(jax.random.PRNGKey(4), (5, 16, 2))
    kw = dict(n_steps=4)
    a = diffusion_resample_from_noise(log_w, x, noise, **kw)[1]
    b = diffusion_resample_from_noise(log_w, x, noise, reference=empirical_reference, **kw)[1]
    c = diffusion_resample_from_noise(
        log_w, x, noise, reference=empirical_reference(log_w, x), **kw
    )[1]
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a, c, atol=1e-6)


def test_integrators_converge_to_each_other():
    """Three discretisations of the same probability-flow ODE: the gap shrinks with n_steps."""
    x = jax.random.normal(KEY, (16, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(3), (16,))

    def gap(n_steps):
        noise = jnp.broadcast_to(jax.random.normal(KEY, (1, 16, 2)), (n_steps + 1, 16, 2))
        ys = [
            diffusion_resample_from_noise(log_w, x, noise, n_steps=n_steps, integrator=i)[1]
            for i in INTEGRATORS
            if i != "tweedie"  # SDE-only
        ]
        return max(float(jnp.abs(ys[0] - y).mean()) for y in ys[1:])

    coarse, fine = gap(4), gap(256)
    assert fine < coarse / 10
    assert fine < 0.01


# ---------------------------------------------------------------------------------------------
# consistency: sliced-Wasserstein distance to the weighted empirical measure falls with N
# ---------------------------------------------------------------------------------------------


def _sliced_w1(xa, wa, xb, n_proj=64):
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(n_proj, xa.shape[1]))
    theta /= np.linalg.norm(theta, axis=1, keepdims=True)
    total = 0.0
    for t in theta:  # W1 in 1-D = ∫ |F_a − F_b|
        pts = np.concatenate([xa @ t, xb @ t])
        mass = np.concatenate([wa, -np.full(len(xb), 1.0 / len(xb))])
        order = np.argsort(pts)
        total += np.sum(np.abs(np.cumsum(mass[order])[:-1]) * np.diff(pts[order]))
    return total / n_proj


def test_consistency_sliced_wasserstein_falls_with_n():
    resample = jax.jit(diffusion_resample)
    dists = []
    for n in (64, 512, 2048):
        x = jax.random.normal(jax.random.PRNGKey(n), (n, 2))
        log_w = -0.5 * jnp.sum((x - 1.0) ** 2, axis=1)
        _, y = resample(jax.random.PRNGKey(7), log_w, x)
        w = np.asarray(jax.nn.softmax(log_w), dtype=np.float64)
        dists.append(_sliced_w1(np.asarray(x, np.float64), w, np.asarray(y, np.float64)))
    assert dists[0] > dists[1] > dists[2]
    assert dists[2] < 0.03


# ---------------------------------------------------------------------------------------------
# every resampler preserves the weighted mean in expectation (fixed seeds, z-test)
# ---------------------------------------------------------------------------------------------

RESAMPLERS = {
    "multinomial": multinomial_resample,
    "systematic": systematic_resample,
    "stratified": stratified_resample,
    "stop_gradient": stop_gradient_resample,
    "soft": functools.partial(soft_resample, alpha=0.5),
    "gumbel_tau0.05": functools.partial(gumbel_softmax_resample, tau=0.05),
    "diffusion": diffusion_resample,
}


@pytest.mark.parametrize("name", sorted(RESAMPLERS))
def test_resampler_preserves_weighted_mean_in_expectation(name):
    resampler = RESAMPLERS[name]
    n, m = 24, 400
    x = jax.random.normal(KEY, (n, 2)) * jnp.array([1.0, 3.0])
    log_w = 1.5 * jax.random.normal(jax.random.PRNGKey(5), (n,))
    target = jax.nn.softmax(log_w) @ x

    @jax.jit
    def per_seed_means(keys):
        def one(k):
            lw, y = resampler(k, log_w, x)
            return jax.nn.softmax(lw) @ y

        return jax.vmap(one)(keys)

    means = np.asarray(per_seed_means(jax.random.split(jax.random.PRNGKey(11), m)))
    se = means.std(axis=0) / np.sqrt(m) + 1e-3  # the 1e-3 floors exact (zero-variance) schemes
    z = (means.mean(axis=0) - np.asarray(target)) / se
    assert np.all(np.abs(z) < 4.5), z


def test_gumbel_softmax_is_biased_at_large_temperature():
    """The flip side of the test above: at τ = 2 Gumbel-softmax shrinks towards the plain mean."""
    x = jnp.array([[0.0], [10.0]])
    log_w = jnp.log(jnp.array([0.9, 0.1]))
    keys = jax.random.split(KEY, 400)
    ys = jax.vmap(lambda k: gumbel_softmax_resample(k, log_w, x, tau=2.0)[1])(keys)
    assert float(ys.mean()) > 1.0 + 0.5  # weighted mean is 1.0


def test_ot_preserves_mean_and_matches_reference_sinkhorn():
    x = jax.random.normal(KEY, (10, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(5), (10,))
    ot = functools.partial(ot_resample, epsilon=0.5, threshold=1e-6, max_iterations=3000)
    _, y = ot(KEY, log_w, x)
    plan = sinkhorn_plan_ref(log_w, x, epsilon=0.5, n_iter=3000)
    np.testing.assert_allclose(y, 10 * plan.T @ x, atol=2e-4)
    np.testing.assert_allclose(y.mean(0), jax.nn.softmax(log_w) @ x, atol=2e-4)


@pytest.mark.slow
def test_ot_gradient_matches_finite_differences():
    x = jax.random.normal(KEY, (10, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(5), (10,))
    ot = jax.jit(lambda lw: ot_resample(KEY, lw, x, epsilon=0.5)[1][:, 0].sum())
    g = jax.grad(ot)(log_w)  # unrolled Sinkhorn
    e = jnp.zeros(10).at[2].set(1e-2)
    fd = (ot(log_w + e) - ot(log_w - e)) / 2e-2
    assert np.all(np.isfinite(g))
    assert abs(float(g[2]) - float(fd)) < 0.05 * abs(float(fd)) + 1e-3


def test_systematic_counts_are_floor_or_ceil_of_n_w():
    n = 16
    x = jnp.arange(n, dtype=jnp.float32)
    log_w = jax.random.normal(KEY, (n,)) * 2
    w = np.asarray(jax.nn.softmax(log_w))
    for k in jax.random.split(KEY, 5):
        _, y = systematic_resample(k, log_w, x)
        counts = np.bincount(np.asarray(y, int), minlength=n)
        assert np.all(counts >= np.floor(n * w) - 1e-6) and np.all(counts <= np.ceil(n * w) + 1e-6)


def test_soft_with_alpha_one_is_multinomial():
    x = jax.random.normal(KEY, (20, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(5), (20,))
    lw_s, y_s = soft_resample(KEY, log_w, x, alpha=1.0)
    lw_m, y_m = multinomial_resample(KEY, log_w, x)
    np.testing.assert_allclose(y_s, y_m)
    np.testing.assert_allclose(lw_s, lw_m, atol=1e-5)


def test_stop_gradient_is_unbiased_score_function_gradient():
    """E[∇ Σ_j w*_j f(X*_j)] = ∇ Σ_i w_i(θ) f(X_i) with w ∝ exp(θ X)."""
    x = jnp.linspace(-1.0, 1.0, 8)

    def exact(theta):
        return jax.nn.softmax(theta * x) @ x**2

    def est(theta, k):
        lw, y = stop_gradient_resample(k, theta * x, x)
        return jnp.sum(jnp.exp(lw) * y**2)

    keys = jax.random.split(KEY, 4000)
    grads = jax.jit(jax.vmap(jax.grad(est), in_axes=(None, 0)))(0.8, keys)
    target = jax.grad(exact)(0.8)
    assert abs(float(grads.mean()) - float(target)) < 4 * float(grads.std()) / np.sqrt(4000)
    assert float(target) != 0.0


# ---------------------------------------------------------------------------------------------
# numerics: degenerate weights, zero variance, N = 1, all-zero weights, jit / vmap
# ---------------------------------------------------------------------------------------------


def test_degenerate_weights_return_the_heavy_particle_without_nan():
    x = jax.random.normal(KEY, (16, 2))
    log_w = jnp.full(16, -jnp.inf).at[3].set(0.0)
    _, y = diffusion_resample(KEY, log_w, x)
    np.testing.assert_allclose(y, jnp.broadcast_to(x[3], (16, 2)))
    g = jax.grad(lambda xx: diffusion_resample(KEY, log_w, xx)[1].sum())(x)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g[3], jnp.full(2, 16.0))  # each output is x_3 itself


def test_zero_variance_dimension_is_a_point_mass():
    x = jax.random.normal(KEY, (16, 2)).at[:, 1].set(2.5)
    log_w = jax.random.normal(jax.random.PRNGKey(5), (16,))
    for ode in (True, False):
        _, y = diffusion_resample(KEY, log_w, x, ode=ode)
        assert np.all(np.isfinite(y))
        np.testing.assert_allclose(y[:, 1], 2.5, atol=1e-5)
        assert float(jnp.ptp(y[:, 1])) == 0.0  # exactly the point mass μ_d, no noise
        assert float(y[:, 0].std()) > 0.1
    g = jax.grad(lambda xx: diffusion_resample(KEY, log_w, xx)[1].sum())(x)
    assert np.all(np.isfinite(g))


def test_single_particle_is_returned_unchanged():
    x = jnp.array([[1.0, -2.0]])
    lw, y = diffusion_resample(KEY, jnp.array([0.3]), x)
    np.testing.assert_allclose(y, x)
    np.testing.assert_allclose(lw, [0.0])


def test_all_zero_weights_raise_eagerly_and_are_uniform_under_jit():
    x = jax.random.normal(KEY, (16, 2))
    log_w = jnp.full(16, -jnp.inf)
    with pytest.raises(ValueError, match="log_w"):
        diffusion_resample(KEY, log_w, x)
    _, y = jax.jit(diffusion_resample)(KEY, log_w, x)
    _, y_uniform = diffusion_resample(KEY, jnp.zeros(16), x)
    np.testing.assert_allclose(y, y_uniform, atol=1e-5)


def test_jit_and_vmap_agree_with_a_python_loop():
    x = jax.random.normal(KEY, (16, 2))
    log_w = jax.random.normal(jax.random.PRNGKey(5), (16,))
    keys = jax.random.split(KEY, 3)
    batched = jax.jit(jax.vmap(diffusion_resample, in_axes=(0, None, None)))(keys, log_w, x)[1]
    looped = jnp.stack([diffusion_resample(k, log_w, x)[1] for k in keys])
    np.testing.assert_allclose(batched, looped, atol=1e-5)


def test_one_dimensional_input_keeps_its_shape():
    lw, y = diffusion_resample(KEY, jnp.zeros(5), jnp.arange(5.0))
    assert y.shape == (5,) and lw.shape == (5,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(a=0.5), "a must be < 0"),
        (dict(T=0.0), "T must be > 0"),
        (dict(n_steps=0), "n_steps"),
        (dict(integrator="rk4"), "integrator"),
        (dict(reference="kde"), "reference"),
        (dict(reference=GaussianReference(jnp.zeros(2), jnp.array([1.0, 0.0]))), "var > 0"),
    ],
)
def test_bad_diffusion_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        diffusion_resample(KEY, jnp.zeros(4), jnp.ones((4, 2)), **kwargs)


def test_bad_shapes_and_options_raise():
    x = jnp.ones((4, 2))
    with pytest.raises(ValueError, match="log_w must have shape"):
        diffusion_resample(KEY, jnp.zeros(3), x)
    with pytest.raises(ValueError, match="leading particle axis"):
        multinomial_resample(KEY, jnp.zeros(4), jnp.ones(()))
    with pytest.raises(ValueError, match="log_w contains NaN"):
        systematic_resample(KEY, jnp.array([0.0, jnp.nan, 0.0, 0.0]), x)
    with pytest.raises(ValueError, match="noise must have shape"):
        diffusion_resample_from_noise(jnp.zeros(4), x, jnp.zeros((3, 4, 2)), n_steps=8)
    with pytest.raises(ValueError, match="alpha"):
        soft_resample(KEY, jnp.zeros(4), x, alpha=0.0)
    with pytest.raises(ValueError, match="tau"):
        gumbel_softmax_resample(KEY, jnp.zeros(4), x, tau=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        ot_resample(KEY, jnp.zeros(4), x, epsilon=-1.0)
