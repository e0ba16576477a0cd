"""blackjax adapter: identical to blackjax's own step for index resamplers; diffusion plugs in."""

import functools

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
    soft_resample,
    systematic_resample,
)
from icml26_diffusion_resampling.blackjax import (  # noqa: E402
    blackjax_step,
    index_resampler,
    update_particles_fn,
)


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


# ---------------------------------------------------------------------------------------------
# a resampler with non-uniform output weights, against blackjax's own base.step
#
# blackjax's step resamples by indices and weights the moved particles by G alone. A resampler
# whose output weights W̃ are not uniform is expressed in blackjax's own terms by carrying a
# per-particle log-weight c through the index gather and adding log W̃ = log_softmax(c[idx]) in
# the weight function: blackjax then computes log Z = logsumexp(log G + log W̃ + log N) − log N
# = log Σ_j W̃_j G_j and weights ∝ W̃_j G_j, which is what `blackjax_step` must return.
# ---------------------------------------------------------------------------------------------

_ALPHA = 0.3


def _soft_reference(alpha):
    """Soft resampling in blackjax's index contract: ancestors ~ q = α w + (1 − α)/N, and the
    carried log-weight log w_i − log q_i (written here from the definition)."""

    def resample_fn(key, weights, n):
        q = alpha * weights + (1.0 - alpha) / weights.shape[0]
        return jax.random.categorical(key, jnp.log(q), shape=(n,))

    def carried(weights):
        q = alpha * weights + (1.0 - alpha) / weights.shape[0]
        return jnp.log(weights) - jnp.log(q)

    return resample_fn, carried


def _no_resampling_reference():
    """No resampling: ancestors 0..N-1 and the incoming weights carried unchanged."""
    return (lambda key, weights, n: jnp.arange(n)), jnp.log


_WEIGHTED = {
    "soft": (functools.partial(soft_resample, alpha=_ALPHA), _soft_reference(_ALPHA)),
    # unnormalised output log-weights (log W + 3): the step must normalise them
    "none": (lambda key, log_w, x: (log_w + 3.0, x), _no_resampling_reference()),
}


@pytest.mark.parametrize("case", list(_WEIGHTED))
def test_weighted_output_resampler_matches_blackjax_base_step(case):
    resampler, (ref_resample_fn, carried) = _WEIGHTED[case]
    state, update_fn, weight_fn = _setup()
    # strongly non-uniform incoming weights, so the resampler's output weights are far from 1/N
    state = state._replace(weights=jax.nn.softmax(2.0 * jnp.log(state.weights)))
    n = state.weights.shape[0]
    key = jax.random.PRNGKey(5)

    ref_state = base.SMCState(
        {"p": state.particles, "c": carried(state.weights)}, state.weights, {}
    )

    def ref_update(keys, ps, params):
        moved, info = update_fn(keys, ps["p"], params)
        return {"p": moved, "c": ps["c"]}, info

    def ref_weight(ps):
        return weight_fn(ps["p"]) + jax.nn.log_softmax(ps["c"]) + jnp.log(n)

    ref_out, ref_info = jax.jit(
        lambda k, s: base.step(k, s, ref_update, ref_weight, ref_resample_fn)
    )(key, ref_state)
    out, info = jax.jit(lambda k, s: blackjax_step(k, s, update_fn, weight_fn, resampler))(
        key, state
    )

    eps = float(jnp.finfo(jnp.float32).eps)
    for leaf in ("a", "b"):  # same ancestors, same moves
        np.testing.assert_allclose(
            out.particles[leaf], ref_out.particles["p"][leaf], rtol=8 * eps, atol=8 * eps
        )
    ref_w = np.asarray(ref_out.weights)
    np.testing.assert_allclose(
        out.weights, ref_w, rtol=8 * eps, atol=8 * eps * ref_w.max() * np.sqrt(n)
    )
    ref_z = float(ref_info.log_likelihood_increment)
    atol = 8 * eps * max(abs(ref_z), 1.0) * np.sqrt(n)
    np.testing.assert_allclose(float(info.log_likelihood_increment), ref_z, rtol=0, atol=atol)
    # headroom: ignoring the output weights (blackjax's log mean G on the same particles) is off
    # by far more than the tolerance, so the comparison can tell the two apart
    log_g = weight_fn(ref_out.particles["p"])
    uniform_z = float(jax.scipy.special.logsumexp(log_g) - jnp.log(n))
    assert abs(uniform_z - ref_z) > 1e3 * atol
    assert float(jnp.max(jnp.abs(ref_w - jax.nn.softmax(log_g)))) > 1e3 * 8 * eps


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


# ---------------------------------------------------------------------------------------------
# blackjax's own tempered SMC, end to end, with the diffusion resampler
# ---------------------------------------------------------------------------------------------

_S2 = 0.5  # likelihood variance; prior N(0, I): posterior N(y / (1 + s²), s² / (1 + s²))
_Y = jnp.array([1.0, -0.5])


def _tempered_run(update_particles, n=256, n_temps=8, num_mcmc_steps=2):
    import blackjax
    from blackjax.smc import extend_params

    logprior = lambda x: -0.5 * jnp.sum(x**2)
    loglik = lambda x: -0.5 * jnp.sum((x - _Y) ** 2) / _S2 - jnp.log(2 * jnp.pi * _S2)
    params = extend_params(
        dict(step_size=0.3, inverse_mass_matrix=jnp.ones(2), num_integration_steps=5)
    )
    kw = {} if update_particles is None else dict(update_particles_fn=update_particles)
    smc = blackjax.tempered_smc(
        logprior,
        loglik,
        blackjax.hmc.build_kernel(),
        blackjax.hmc.init,
        params,
        resampling.systematic,
        num_mcmc_steps=num_mcmc_steps,
        **kw,
    )
    x0 = jax.random.normal(jax.random.PRNGKey(0), (n, 2))

    @jax.jit
    def run(key):
        def body(state, inp):
            k, lam = inp
            state, info = smc.step(k, state, lam)
            return state, info.log_likelihood_increment

        temps = jnp.linspace(0.0, 1.0, n_temps + 1)[1:]
        state, incs = jax.lax.scan(body, smc.init(x0), (jax.random.split(key, n_temps), temps))
        return state, jnp.sum(incs)

    return run(jax.random.PRNGKey(1))


def test_blackjax_tempered_smc_runs_with_the_diffusion_resampler():
    """`blackjax.tempered_smc(update_particles_fn=...)`: posterior moments and log Z exact."""
    import blackjax

    update = update_particles_fn(blackjax.hmc.build_kernel(), blackjax.hmc.init, diffusion_resample)
    state, log_z = _tempered_run(update)
    w = state.weights
    mean = w @ state.particles
    var = w @ (state.particles - mean) ** 2
    post_mean, post_var = _Y / (1 + _S2), _S2 / (1 + _S2)
    exact_log_z = float(jnp.sum(-0.5 * _Y**2 / (1 + _S2) - 0.5 * jnp.log(2 * jnp.pi * (1 + _S2))))
    np.testing.assert_allclose(mean, post_mean, atol=0.1)
    np.testing.assert_allclose(var, jnp.full(2, post_var), rtol=0.25)
    assert abs(float(log_z) - exact_log_z) < 0.15
    # blackjax's own systematic resampling, same run: the same answers
    _, ref_log_z = _tempered_run(None)
    assert abs(float(ref_log_z) - exact_log_z) < 0.15
    # the particle resampler really ran: the ancestors are -1, not indices
    _, info = update(
        jax.random.PRNGKey(3),
        base.SMCState(state.particles, state.weights, {}),
        1,
        blackjax.smc.extend_params(
            dict(step_size=0.3, inverse_mass_matrix=jnp.ones(2), num_integration_steps=1)
        ),
        lambda x: -0.5 * jnp.sum(x**2),
        lambda x: 0.0 * jnp.sum(x),
    )
    assert np.all(np.asarray(info.ancestors) == -1)


@pytest.mark.slow
def test_waste_free_num_resampled_is_honoured():
    """blackjax's waste-free strategy resamples M = N / p particles; the step passes M on."""
    import blackjax
    from blackjax.smc.waste_free import waste_free_smc

    n, p = 64, 4
    update = update_particles_fn(
        blackjax.hmc.build_kernel(),
        blackjax.hmc.init,
        diffusion_resample,
        update_strategy=waste_free_smc(n, p),
    )
    state, log_z = _tempered_run(update, n=n, n_temps=4, num_mcmc_steps=None)
    assert state.particles.shape == (n, 2) and np.isfinite(float(log_z))
    _, y = diffusion_resample(
        jax.random.PRNGKey(0), jnp.zeros(n), state.particles, num_resampled=16
    )
    assert y.shape == (16, 2)


def test_zero_particles_and_bad_num_resampled_raise_naming_the_argument():
    wrapped = index_resampler(resampling.systematic)
    with pytest.raises(ValueError, match="log_w must have shape \\(N,\\) with N >= 1"):
        wrapped(jax.random.PRNGKey(0), jnp.zeros(0), jnp.zeros((0, 2)))
    with pytest.raises(ValueError, match="num_resampled must be a positive int"):
        wrapped(jax.random.PRNGKey(0), jnp.zeros(4), jnp.zeros((4, 2)), num_resampled=0)
    state, update_fn, weight_fn = _setup(8)
    with pytest.raises(ValueError, match="num_resampled must be a positive int"):
        blackjax_step(jax.random.PRNGKey(0), state, update_fn, weight_fn, diffusion_resample, 0)
