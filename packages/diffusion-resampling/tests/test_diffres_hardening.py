"""Issue 32: traced validation, the official integrators and time grids, the generic reference,
(N, ...) and pytree particles, the converged OT default."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from icml26_diffusion_resampling import (
    LGSSMParams,
    LinearGaussianSSM,
    diffusion_resample,
    diffusion_resample_from_noise,
    diffusion_resample_generic,
    gumbel_softmax_resample,
    multinomial_resample,
    ot_marginal_error,
    ot_resample,
    particle_filter,
    sinkhorn_plan_ref,
    soft_resample,
    stop_gradient_resample,
    stratified_resample,
    systematic_resample,
)
from jax.experimental import checkify

KEY = jax.random.PRNGKey(0)
N, D = 12, 2


def _inputs(seed=0, shift=1.5):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(N, D)) + shift).astype(np.float32)
    log_w = rng.normal(size=N).astype(np.float32)
    return log_w, x


# ---------------------------------------------------------------------------------------------
# finding 1: no silent NaN under jit
# ---------------------------------------------------------------------------------------------

_BAD = {
    "nan weight": (lambda lw, x: (lw.at[3].set(jnp.nan), x), "log_w contains NaN"),
    "+inf weight": (lambda lw, x: (lw.at[0].set(jnp.inf), x), "log_w contains NaN or \\+inf"),
    "nan particle": (lambda lw, x: (lw, x.at[2, 1].set(jnp.nan)), "x contains NaN"),
    "all -inf": (lambda lw, x: (jnp.full_like(lw, -jnp.inf), x), "every weight is zero"),
}


@pytest.mark.parametrize("case", list(_BAD))
def test_invalid_inputs_raise_under_checkify_of_jit(case):
    corrupt, match = _BAD[case]
    lw, x = corrupt(*map(jnp.asarray, _inputs()))
    f = jax.jit(lambda k, lw, x: diffusion_resample(k, lw, x)[1])
    err, _ = checkify.checkify(f)(KEY, lw, x)
    with pytest.raises(Exception, match=match):
        err.throw()
    # eagerly the same inputs raise ValueError
    with pytest.raises(ValueError, match=match):
        diffusion_resample(KEY, lw, x)


def test_valid_inputs_pass_checkify_and_invalid_ones_are_all_nan_under_plain_jit():
    lw, x = map(jnp.asarray, _inputs())
    f = jax.jit(lambda lw, x, a, T: diffusion_resample(KEY, lw, x, a=a, T=T)[1])
    err, y = checkify.checkify(f)(lw, x, -1.0, 2.0)
    assert err.get() is None and np.isfinite(np.asarray(y)).all()
    for bad in (
        (lw.at[3].set(jnp.nan), x, -1.0, 2.0),
        (lw.at[0].set(jnp.inf), x, -1.0, 2.0),
        (lw, x.at[0, 0].set(jnp.inf), -1.0, 2.0),
        (lw, x, 0.5, 2.0),  # traced a >= 0
        (lw, x, 0.0, 2.0),
        (lw, x, -1.0, -1.0),  # traced T <= 0
    ):
        assert np.isnan(np.asarray(f(*bad))).all()


@pytest.mark.parametrize(
    ("a", "T", "match"), [(0.5, 2.0, "a must be < 0"), (-1.0, 0.0, "T must be > 0")]
)
def test_traced_invalid_parameters_raise_under_checkify(a, T, match):
    lw, x = map(jnp.asarray, _inputs())
    f = jax.jit(lambda a, T: diffusion_resample(KEY, lw, x, a=a, T=T)[1])
    err, _ = checkify.checkify(f)(a, T)
    with pytest.raises(Exception, match=match):
        err.throw()


@pytest.mark.parametrize(
    "resampler",
    [
        multinomial_resample,
        systematic_resample,
        lambda k, lw, x: soft_resample(k, lw, x, alpha=0.5),
        lambda k, lw, x: gumbel_softmax_resample(k, lw, x, tau=0.3),
    ],
)
def test_baselines_poison_their_output_under_jit(resampler):
    lw, x = map(jnp.asarray, _inputs())
    y = jax.jit(resampler)(KEY, lw.at[1].set(jnp.nan), x)[1]
    assert np.isnan(np.asarray(y)).all()
    err, _ = checkify.checkify(jax.jit(resampler))(KEY, lw.at[1].set(jnp.nan), x)
    with pytest.raises(Exception, match="log_w contains NaN"):
        err.throw()


_ALL_RESAMPLERS = {
    "diffusion": diffusion_resample,
    "diffusion_sde_tweedie": lambda k, lw, x: diffusion_resample(
        k, lw, x, ode=False, integrator="tweedie"
    ),
    "multinomial": multinomial_resample,
    "systematic": systematic_resample,
    "stratified": stratified_resample,
    "stop_gradient": stop_gradient_resample,
    "soft": lambda k, lw, x: soft_resample(k, lw, x, alpha=0.5),
    "gumbel": lambda k, lw, x: gumbel_softmax_resample(k, lw, x, tau=0.3),
}


@pytest.mark.parametrize("name", list(_ALL_RESAMPLERS))
@pytest.mark.parametrize("where", ["particle", "weight"])
def test_nan_inputs_give_nan_log_weights_and_particles_under_plain_jit(name, where):
    """Issue 50: a NaN particle used to come back with finite uniform log-weights under jit."""
    lw, x = map(jnp.asarray, _inputs())
    if where == "particle":
        x = x.at[2, 1].set(jnp.nan)
    else:
        lw = lw.at[4].set(jnp.nan)
    out_lw, y = jax.jit(_ALL_RESAMPLERS[name])(KEY, lw, x)
    assert out_lw.shape == (N,) and np.isnan(np.asarray(out_lw)).all()
    assert np.isnan(np.asarray(y)).all()
    # valid inputs: finite log-weights that normalise
    out_lw, y = jax.jit(_ALL_RESAMPLERS[name])(KEY, *map(jnp.asarray, _inputs()))
    assert np.isfinite(np.asarray(y)).all()
    np.testing.assert_allclose(float(jax.scipy.special.logsumexp(out_lw)), 0.0, atol=1e-5)


def test_generic_and_ot_nan_particles_give_nan_log_weights_under_plain_jit():
    lw, x = map(jnp.asarray, _inputs())
    x = x.at[0, 0].set(jnp.nan)
    ts = jnp.linspace(0.0, 1.0, 4)
    generic = jax.jit(
        lambda lw, x: diffusion_resample_generic(
            KEY,
            lw,
            x,
            ref_sampler=lambda k: jax.random.normal(k, (N, D)),
            logpdf_trans=lambda xt, xs, t, s: -0.5 * jnp.sum((xt - xs) ** 2, axis=-1),
            score_ref=lambda z: -z,
            b=1.0,
            ts=ts,
        )
    )
    out_lw, _ = generic(lw, x)
    assert np.isnan(np.asarray(out_lw)).all()
    if importlib.util.find_spec("ott") is not None:
        out_lw, _ = jax.jit(lambda lw, x: ot_resample(KEY, lw, x, max_iterations=20))(lw, x)
        assert np.isnan(np.asarray(out_lw)).all()


def test_zero_particles_and_bad_num_resampled_name_the_argument():
    """Issue 50: N = 0 used to report 'num_resampled must be a positive int; got None'."""
    with pytest.raises(ValueError, match="x must hold at least one particle"):
        diffusion_resample(KEY, jnp.zeros(0), jnp.zeros((0, 2)))
    with pytest.raises(ValueError, match="x must hold at least one particle"):
        systematic_resample(KEY, jnp.zeros(0), jnp.zeros((0, 2)))
    lw, x = _inputs()
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="num_resampled must be a positive int"):
            diffusion_resample(KEY, lw, x, num_resampled=bad)
    assert diffusion_resample(KEY, lw, x, num_resampled=np.int64(5))[1].shape == (5, D)


def test_particle_filter_nan_observation_raises_under_checkify():
    model = LinearGaussianSSM()
    f = lambda v: jnp.full((1, 1), v, jnp.float32)
    params = LGSSMParams(f(0.5), f(1.0), f(1.0), f(0.5), jnp.zeros(1), f(1.0))
    ys = jnp.array([[0.1], [jnp.nan], [0.3], [0.2]])
    run = jax.jit(lambda ys: particle_filter(KEY, model, params, ys, n_particles=8).log_likelihood)
    err, _ = checkify.checkify(run)(ys)
    with pytest.raises(Exception, match="log_w contains NaN"):
        err.throw()
    err, ll = checkify.checkify(run)(jnp.nan_to_num(ys))
    assert err.get() is None and np.isfinite(float(ll))


def test_validate_false_skips_the_checks_but_keeps_the_nan_contract():
    lw, x = map(jnp.asarray, _inputs())
    _, y = diffusion_resample(KEY, lw.at[0].set(jnp.nan), x, validate=False)
    assert np.isnan(np.asarray(y)).all()


# ---------------------------------------------------------------------------------------------
# finding 5: the official integrators on an arbitrary grid, against a numpy transcription of
# diffres's semantics (written here from its equations, float64)
# ---------------------------------------------------------------------------------------------


def _np_official(log_w, x, noise, a, ts, integrator, ode):
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    mu = w @ x
    var = w @ (x - mu) ** 2
    b2 = -2 * a * var
    T = ts[-1]

    def score(y, t):  # ∇ log Σ w_i N(y; m_i(t), s_t²)
        sg = np.exp(a * t)
        s2 = var * (1 - sg**2)
        m = sg * x + (1 - sg) * mu
        logits = np.log(w) - 0.5 * np.sum((y[:, None] - m[None]) ** 2 / s2, axis=-1)
        al = np.exp(logits - logits.max(1, keepdims=True))
        al /= al.sum(1, keepdims=True)
        return (al @ m - y) / s2

    def f(y, t):
        return a * mu + (0.5 if ode else 1.0) * b2 * score(y, T - t)

    y = mu + np.sqrt(var) * noise[0]
    sde = 0.0 if ode else 1.0
    for k in range(len(ts) - 1):
        t0, dt, xi = ts[k], ts[k + 1] - ts[k], noise[k + 1]
        if integrator == "euler":
            y = y + (-a * y + f(y, t0)) * dt + sde * np.sqrt(b2 * dt) * xi
        elif integrator == "lord_and_rougemont":
            sg = np.exp(-a * dt)
            y = sg * y + dt * sg * f(y, t0) + sde * sg * np.sqrt(b2 * dt) * xi
        elif integrator == "jentzen_and_kloeden":
            sg = np.exp(-a * dt)
            y = sg * y + (sg - 1) / -a * f(y, t0) + sde * np.sqrt(b2 * (sg**2 - 1) / (-2 * a)) * xi
        else:  # tweedie
            sg = np.exp(a * dt)
            tv = var * (1 - sg**2)
            y = (y - (1 - sg) * mu + tv * score(y, T - t0)) / sg + np.sqrt(tv) * xi
    return y


@pytest.mark.parametrize(
    ("integrator", "ode"),
    [
        ("euler", True),
        ("euler", False),
        ("lord_and_rougemont", True),
        ("lord_and_rougemont", False),
        ("jentzen_and_kloeden", False),
        ("tweedie", False),
    ],
)
def test_integrators_on_a_nonuniform_grid_match_the_official_scheme(integrator, ode):
    log_w, x = _inputs()
    ts = np.array([0.0, 0.1, 0.25, 0.5, 0.9, 1.4, 2.0])
    noise = np.random.default_rng(1).normal(size=(len(ts), N, D)).astype(np.float32)
    _, y = diffusion_resample_from_noise(
        log_w, x, noise, a=-0.8, ts=ts, integrator=integrator, ode=ode
    )
    ref = _np_official(
        log_w.astype(float), x.astype(float), noise.astype(float), -0.8, ts, integrator, ode
    )
    np.testing.assert_allclose(np.asarray(y), ref, rtol=2e-4, atol=2e-4 * np.abs(ref).max())


def test_lord_and_rougemont_exact_is_a_different_scheme():
    log_w, x = _inputs(shift=3.0)
    noise = np.random.default_rng(1).normal(size=(5, N, D)).astype(np.float32)
    kw = dict(n_steps=4, T=2.0)
    _, y_off = diffusion_resample_from_noise(log_w, x, noise, integrator="lord_and_rougemont", **kw)
    _, y_ex = diffusion_resample_from_noise(
        log_w, x, noise, integrator="lord_and_rougemont_exact", **kw
    )
    assert float(jnp.max(jnp.abs(y_off - y_ex))) > 0.05


def test_time_grid_arguments():
    log_w, x = _inputs()
    noise = np.random.default_rng(1).normal(size=(5, N, D)).astype(np.float32)
    a = diffusion_resample_from_noise(log_w, x, noise, T=1.5, n_steps=4)[1]
    b = diffusion_resample_from_noise(log_w, x, noise, ts=jnp.linspace(0, 1.5, 5))[1]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="ts must be strictly increasing"):
        diffusion_resample_from_noise(log_w, x, noise, ts=jnp.array([0.0, 1.0, 0.5, 2.0, 3.0]))
    with pytest.raises(ValueError, match="ts\\[0\\] == 0"):
        diffusion_resample_from_noise(log_w, x, noise, ts=jnp.array([0.5, 1.0, 1.5, 2.0, 3.0]))
    with pytest.raises(ValueError, match="not both"):
        diffusion_resample_from_noise(log_w, x, noise, T=1.0, ts=jnp.linspace(0, 1, 5))
    with pytest.raises(ValueError, match="tweedie"):
        diffusion_resample_from_noise(log_w, x, noise, n_steps=4, integrator="tweedie")


def test_generic_reference_with_the_ou_kernel_equals_the_closed_form():
    """diffres's test_diffres_versions: the generic form with π_ref = N(μ, σ²) and its OU
    transition, score by autodiff, equals the closed-form ensemble score path."""
    log_w, x = _inputs()
    a, ts = -0.7, jnp.linspace(0.0, 1.5, 7)
    w = jax.nn.softmax(log_w)
    mu, var = w @ x, w @ (x - w @ x) ** 2
    noise0 = jax.random.normal(jax.random.PRNGKey(4), (N, D))

    def logpdf_trans(xt, xs, t, s):  # (D,), (N, D) -> (N,)
        sg = jnp.exp(a * (t - s))
        m, s2 = sg * xs + (1 - sg) * mu, var * (1 - sg**2)
        return jnp.sum(-0.5 * (xt - m) ** 2 / s2 - 0.5 * jnp.log(2 * jnp.pi * s2), axis=-1)

    _, y = diffusion_resample_generic(
        KEY,
        log_w,
        x,
        ref_sampler=lambda k: mu + jnp.sqrt(var) * noise0,
        logpdf_trans=logpdf_trans,
        score_ref=lambda z: -(z - mu) / var,
        b=jnp.sqrt(-a * var),
        ts=ts,
    )
    noise = jnp.concatenate([noise0[None], jnp.zeros((6, N, D))])
    _, y_closed = diffusion_resample_from_noise(log_w, x, noise, a=a, ts=ts)
    np.testing.assert_allclose(y, y_closed, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# finding 6: shapes, dtypes, OT default
# ---------------------------------------------------------------------------------------------


def test_trailing_shapes_and_pytrees_are_ravelled_per_particle():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 2, 3)).astype(np.float32)
    log_w = rng.normal(size=N).astype(np.float32)
    _, y = diffusion_resample(KEY, log_w, x)
    _, y_flat = diffusion_resample(KEY, log_w, x.reshape(N, 6))
    assert y.shape == (N, 2, 3)
    np.testing.assert_allclose(np.asarray(y).reshape(N, 6), y_flat, rtol=1e-6, atol=1e-6)
    tree = {"a": x[:, 0, :2], "b": x[:, 1, 0]}
    _, yt = diffusion_resample(KEY, log_w, tree)
    _, y3 = diffusion_resample(KEY, log_w, np.concatenate([x[:, 0, :2], x[:, 1, :1]], axis=1))
    assert yt["a"].shape == (N, 2) and yt["b"].shape == (N,)
    np.testing.assert_allclose(yt["a"], y3[:, :2], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(yt["b"], y3[:, 2], rtol=1e-6, atol=1e-6)
    _, ys = systematic_resample(KEY, log_w, tree)
    assert ys["b"].shape == (N,)


def test_integer_particles_raise_a_clear_error():
    with pytest.raises(ValueError, match="x must be a floating-point"):
        diffusion_resample(KEY, jnp.zeros(4), jnp.arange(4))


@pytest.mark.slow
def test_ot_default_converges_the_uniform_marginal():
    pytest.importorskip("ott")
    x = 6.0 * jax.random.normal(KEY, (64, 2))
    log_w = 2.0 * jax.random.normal(jax.random.PRNGKey(1), (64,))
    assert float(ot_marginal_error(log_w, x)) < 1e-3
    # ott's default tolerance with 200 iterations (this package's old default) is far off
    assert float(ot_marginal_error(log_w, x, threshold=1e-3, max_iterations=200)) > 0.05
    # and ot_resample's own default output equals the converged plan's N Pᵀ X
    _, y = ot_resample(KEY, log_w, x)
    ref = 64 * sinkhorn_plan_ref(log_w, x, epsilon=0.5, n_iter=3000).T @ x
    scale = float(jnp.abs(ref).max())
    np.testing.assert_allclose(y, ref, atol=2e-3 * scale)
