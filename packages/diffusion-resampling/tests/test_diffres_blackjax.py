"""blackjax adapter: identical to blackjax's own step for index resamplers; diffusion plugs in."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

blackjax = pytest.importorskip("blackjax")

from blackjax.smc import base, resampling  # noqa: E402
from icml26_diffusion_resampling import (  # noqa: E402
    LGSSMParams,
    LinearGaussianSSM,
    diffusion_resample,
    particle_filter,
    systematic_resample,
)
from icml26_diffusion_resampling.blackjax import blackjax_step, index_resampler  # noqa: E402


def _setup(n=32):
    particles = {"a": jax.random.normal(jax.random.PRNGKey(0), (n, 2)), "b": jnp.arange(n) * 0.1}
    state = base.init(particles, {})
    state = state._replace(weights=jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(1), (n,))))

    def update_fn(keys, ps, _params):
        noise = jax.vmap(lambda k: jax.random.normal(k, (2,)))(keys)
        return {"a": ps["a"] + 0.1 * noise, "b": ps["b"]}, None

    weight_fn = lambda ps: -0.5 * jnp.sum(ps["a"] ** 2, axis=1) + ps["b"]
    return state, update_fn, weight_fn


def test_index_resampler_reproduces_blackjax_step():
    state, update_fn, weight_fn = _setup()
    key = jax.random.PRNGKey(2)
    ref_state, ref_info = jax.jit(
        lambda k, s: base.step(k, s, update_fn, weight_fn, resampling.systematic)
    )(key, state)
    ours_state, ours_info = jax.jit(
        lambda k, s: blackjax_step(
            k, s, update_fn, weight_fn, index_resampler(resampling.systematic)
        )
    )(key, state)
    np.testing.assert_allclose(ours_state.particles["a"], ref_state.particles["a"], atol=1e-6)
    np.testing.assert_allclose(ours_state.particles["b"], ref_state.particles["b"], atol=1e-6)
    np.testing.assert_allclose(ours_state.weights, ref_state.weights, atol=1e-6)
    np.testing.assert_allclose(
        ours_info.log_likelihood_increment, ref_info.log_likelihood_increment, atol=1e-5
    )


def test_diffusion_resampler_in_blackjax_step_is_differentiable():
    state, update_fn, weight_fn = _setup()

    def log_z(shift):
        st = state._replace(particles={**state.particles, "a": state.particles["a"] + shift})
        _, info = blackjax_step(jax.random.PRNGKey(3), st, update_fn, weight_fn, diffusion_resample)
        return info.log_likelihood_increment

    g = jax.jit(jax.grad(log_z))(0.2)
    eps = 1e-2
    log_z_jit = jax.jit(log_z)
    fd = (log_z_jit(0.2 + eps) - log_z_jit(0.2 - eps)) / (2 * eps)
    assert np.isfinite(float(g)) and abs(float(g) - float(fd)) < 0.05 * abs(float(fd)) + 1e-2


def test_blackjax_index_resampler_plugs_into_particle_filter():
    """blackjax's systematic scheme through the wrapper = this package's systematic scheme."""
    model = LinearGaussianSSM()
    f = lambda v: jnp.reshape(jnp.asarray(v, jnp.float32), (1, 1))
    params = LGSSMParams(f(0.5), f(1.0), f(1.0), f(0.5), jnp.zeros(1), f(1.0))
    _, ys = model.simulate(jax.random.PRNGKey(0), params, 4)
    run = lambda res: (
        particle_filter(
            jax.random.PRNGKey(4), model, params, ys, n_particles=8, resampler=res
        ).log_likelihood
    )
    ours = jax.jit(lambda: run(systematic_resample))()
    theirs = jax.jit(lambda: run(index_resampler(resampling.systematic)))()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
