"""Diffusion resampling and the differentiable-resampling baselines (JAX).

Andersson & Zhao, "Diffusion differentiable resampling", ICML 2026 (arXiv 2512.10401).

Every resampler here has one signature::

    resampler(key, log_w, x, **options) -> (log_w_out, x_out)
    #          (2,)  (N,)  (N, d) or (N,)     (N,)       same shape as x

`log_w` are (unnormalised) log-weights of the particles `x`; the output is a new particle set
whose weighted empirical measure approximates the input's. Bind options with
`functools.partial` to get a plain `(key, log_w, x)` resampler for `smc.particle_filter`.

Diffusion resampling (the method, Section 3 of the paper)
---------------------------------------------------------
The weighted particles define π_N = Σ_i w_i δ(X_i). Take a Gaussian reference
π_ref = N(μ, diag σ²) (by default fitted to the particles: μ = Σ w_i X_i, σ² = Σ w_i (X_i − μ)²)
and the Ornstein–Uhlenbeck process that has π_ref as its stationary law (a < 0)::

    dX_t = a (X_t − μ) dt + b dW_t,      b² = −2 a σ²,

whose transition kernel is Gaussian::

    X_t | X_0 = X_i  ~  N(m_i(t), s_t²),   m_i(t) = e^{at} X_i + (1 − e^{at}) μ,
                                           s_t²   = σ² (1 − e^{2at}).

Started at π_N, the marginal p_t = Σ_i w_i N(m_i(t), s_t²) is a Gaussian mixture, so its score
is exact and needs no training (the "ensemble score")::

    ∇ log p_t(x) = Σ_i α_i(x, t) (m_i(t) − x) / s_t²,   α_i ∝ w_i N(x; m_i(t), s_t²).

Resampling = running the time reversal Y_τ = X_{T−τ} from Y_0 ~ π_ref ≈ p_T to τ = T::

    ODE (probability flow, default):  dY = [−a (Y − μ) + ½ b² ∇log p_{T−τ}(Y)] dτ
    SDE:                              dY = [−a (Y − μ) +   b² ∇log p_{T−τ}(Y)] dτ + b dW

Each output is a smooth function of (w, X, base noise), hence reparametrised: the output
particles carry equal weights 1/N and gradients flow through both the weights and the particles.
Cost O(N² · n_steps · d): the score is an N × N softmax (attention with keys m_i(t)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import checkify

Array = jax.Array

__all__ = [
    "INTEGRATORS",
    "GaussianReference",
    "diffusion_resample",
    "diffusion_resample_from_noise",
    "diffusion_resample_generic",
    "diffusion_resample_ref",
    "empirical_reference",
    "gumbel_softmax_resample",
    "multinomial_resample",
    "ot_marginal_error",
    "ot_resample",
    "sinkhorn_plan_ref",
    "soft_resample",
    "stop_gradient_resample",
    "stratified_resample",
    "systematic_resample",
]

INTEGRATORS = (
    "euler",
    "lord_and_rougemont",
    "lord_and_rougemont_exact",
    "jentzen_and_kloeden",
    "tweedie",
)


# --------------------------------------------------------------------------------------------
# input checks
#
# validate=True (the default): concrete (eager) inputs are checked on the host and raise
# ValueError naming the argument. Traced inputs (under jit / vmap / scan) are checked with
# `jax.experimental.checkify.debug_check`: a no-op in a plain `jax.jit`, an error when the
# caller wraps the function in `checkify.checkify` (then `err.throw()` raises it). Whatever the
# flag, invalid inputs never produce plausible numbers: the output particles are all NaN (the
# NaN-propagation contract). validate=False skips the host checks (no device-to-host sync per
# call) and the debug checks; the NaN contract still holds.
# --------------------------------------------------------------------------------------------


def _is_concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def _as_2d(x) -> tuple[Array, bool]:
    x = jnp.asarray(x)
    if x.ndim == 1:
        return x[:, None], True
    if x.ndim != 2:
        raise ValueError(f"x must have shape (N,) or (N, d); got shape {x.shape}")
    return x, False


def _is_array_like(x) -> bool:
    return isinstance(x, jax.Array | np.ndarray | list | float | int) or np.isscalar(x)


def _flatten_particles(x) -> tuple[Array, Callable[[Array], object]]:
    """(N, ...) array, or a pytree of (N, ...) leaves -> (N, D) array and its inverse.

    The inverse maps an (M, D) array back to the input's structure with leading size M.
    """
    if _is_array_like(x):
        arr = jnp.asarray(x)
        if arr.ndim < 1:
            raise ValueError(f"x must have a leading particle axis (N, ...); got shape {arr.shape}")
        if not jnp.issubdtype(arr.dtype, jnp.floating):
            raise ValueError(f"x must be a floating-point array; got dtype {arr.dtype}")
        tail = arr.shape[1:]
        flat = arr.reshape(arr.shape[0], -1) if arr.ndim != 2 else arr
        return flat, lambda y: y.reshape((y.shape[0], *tail))
    leaves, treedef = jax.tree_util.tree_flatten(x)
    if not leaves:
        raise ValueError("x is an empty pytree: no particles")
    leaves = [jnp.asarray(leaf) for leaf in leaves]
    n = leaves[0].shape[0] if leaves[0].ndim else None
    for leaf in leaves:
        if leaf.ndim < 1 or leaf.shape[0] != n:
            raise ValueError(
                f"every leaf of the particle pytree x must have the same leading size N; "
                f"got shapes {[lf.shape for lf in leaves]}"
            )
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise ValueError(f"x must hold floating-point leaves; got dtype {leaf.dtype}")
    dtype = jnp.result_type(*leaves)
    tails = [leaf.shape[1:] for leaf in leaves]
    sizes = [math.prod(t) for t in tails]
    dtypes = [leaf.dtype for leaf in leaves]
    flat = jnp.concatenate([leaf.reshape(n, -1).astype(dtype) for leaf in leaves], axis=1)

    def unflatten(y):
        parts = jnp.split(y, np.cumsum(sizes)[:-1], axis=1)
        out = [p.reshape((y.shape[0], *t)).astype(dt) for p, t, dt in zip(parts, tails, dtypes)]
        return jax.tree_util.tree_unflatten(treedef, out)

    return flat, unflatten


def _check_particles(log_w, x, validate: bool = True) -> tuple[Array, Array, Callable]:
    """Shape/dtype checks always; value checks per `validate` (host or checkify)."""
    x2, unflatten = _flatten_particles(x)
    log_w = jnp.asarray(log_w)
    if log_w.ndim != 1 or log_w.shape[0] != x2.shape[0]:
        raise ValueError(
            f"log_w must have shape (N,) with N = x.shape[0] = {x2.shape[0]}; got {log_w.shape}"
        )
    if x2.shape[0] < 1:
        raise ValueError("x must hold at least one particle (N >= 1)")
    if not validate:
        return log_w, x2, unflatten
    if _is_concrete(log_w, x2):
        lw = np.asarray(log_w)
        if np.isnan(lw).any() or np.isposinf(lw).any():
            raise ValueError("log_w contains NaN or +inf")
        if np.isneginf(lw).all():
            raise ValueError("log_w is -inf everywhere: every weight is zero, nothing to resample")
        if not np.isfinite(np.asarray(x2)).all():
            raise ValueError("x contains NaN or inf")
    else:
        checkify.debug_check(
            ~jnp.any(jnp.isnan(log_w) | jnp.isposinf(log_w)), "log_w contains NaN or +inf"
        )
        checkify.debug_check(
            ~jnp.all(jnp.isneginf(log_w)),
            "log_w is -inf everywhere: every weight is zero, nothing to resample",
        )
        checkify.debug_check(jnp.all(jnp.isfinite(x2)), "x contains NaN or inf")
    return log_w, x2, unflatten


def _check_scalar(name: str, value, ok: Callable, what: str, validate: bool) -> None:
    """`ok(value)` must hold: ValueError eagerly, checkify.debug_check when traced."""
    if not validate:
        return
    if _is_concrete(value):
        if not bool(np.all(ok(np.asarray(value)))):
            raise ValueError(f"{name} must be {what}; got {np.asarray(value).tolist()}")
    else:
        checkify.debug_check(jnp.all(ok(value)), f"{name} must be {what}")


def _invalid(log_w: Array, x2: Array) -> Array:
    """() bool: inputs for which the output is defined to be all-NaN (all -inf is allowed)."""
    return jnp.any(jnp.isnan(log_w) | jnp.isposinf(log_w)) | ~jnp.all(jnp.isfinite(x2))


def _positive_int(name: str, value) -> int:
    """`value` as a Python int >= 1, else ValueError naming `name` (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")
    return int(value)


def _poison(bad: Array, y: Array) -> Array:
    return jnp.where(bad, jnp.asarray(jnp.nan, y.dtype), y)


def _normalise(log_w: Array) -> Array:
    """log-softmax that maps an all -inf vector to uniform weights instead of NaN (under jit)."""
    all_zero = jnp.all(jnp.isneginf(log_w))
    log_w = jnp.where(all_zero, jnp.zeros_like(log_w), log_w)
    return jax.nn.log_softmax(log_w)


def _uniform_log_w(n: int, dtype) -> Array:
    return jnp.full((n,), -math.log(n), dtype=dtype)


# --------------------------------------------------------------------------------------------
# diffusion resampling
# --------------------------------------------------------------------------------------------


class GaussianReference(NamedTuple):
    """Diagonal Gaussian reference π_ref = N(mean, diag(var)); `mean`, `var`: (d,)."""

    mean: Array
    var: Array


def empirical_reference(log_w: Array, x: Array) -> GaussianReference:
    """The particles' weighted mean and (diagonal) variance: μ = Σ w_i X_i, σ² = Σ w_i (X_i−μ)²."""
    x, _ = _as_2d(x)
    w = jnp.exp(_normalise(log_w))  # (N,)
    mean = w @ x  # (d,)
    var = w @ (x - mean) ** 2  # (d,)
    return GaussianReference(mean, var)


ReferenceArg = str | GaussianReference | Callable[[Array, Array], GaussianReference]


def _resolve_reference(
    reference: ReferenceArg, log_w: Array, x: Array, validate: bool = True
) -> GaussianReference:
    if isinstance(reference, str):
        if reference != "empirical":
            raise ValueError(
                f"reference must be 'empirical', a GaussianReference or a callable "
                f"(log_w, x) -> GaussianReference; got {reference!r}"
            )
        return empirical_reference(log_w, x)
    ref = reference(log_w, x) if callable(reference) else reference
    if not isinstance(ref, GaussianReference):
        raise ValueError(
            f"reference must be (or return) a GaussianReference; got {type(ref).__name__}"
        )
    d = x.shape[1]
    mean = jnp.broadcast_to(jnp.asarray(ref.mean, x.dtype), (d,))
    var = jnp.broadcast_to(jnp.asarray(ref.var, x.dtype), (d,))
    if validate and _is_concrete(var) and not bool(np.all(np.asarray(var) > 0)):
        raise ValueError("a user-chosen reference needs var > 0 in every dimension")
    return GaussianReference(mean, var)


def _time_grid(T, n_steps, ts, dtype, validate: bool) -> tuple[Array, int]:
    """The reverse-time grid 0 = t_0 < t_1 < ... < t_n = T: (n_steps + 1,), and n_steps."""
    if ts is None:
        T = 2.0 if T is None else T
        n_steps = 8 if n_steps is None else n_steps
        if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
            raise ValueError(f"n_steps must be a positive int; got {n_steps!r}")
        _check_scalar("T", T, lambda v: v > 0, "> 0", validate)
        return jnp.linspace(0.0, 1.0, n_steps + 1, dtype=dtype) * jnp.asarray(T, dtype), n_steps
    if T is not None:
        raise ValueError("give either ts or T (T is ts[-1]), not both")
    ts = jnp.asarray(ts, dtype)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"ts must have shape (n_steps + 1,) with n_steps >= 1; got {ts.shape}")
    if n_steps is not None and n_steps != ts.shape[0] - 1:
        raise ValueError(f"n_steps = {n_steps!r} disagrees with len(ts) - 1 = {ts.shape[0] - 1}")
    _check_scalar("ts", ts[0], lambda v: v == 0, "a grid starting at 0 (ts[0] == 0)", validate)
    _check_scalar("ts", jnp.diff(ts), lambda v: v > 0, "strictly increasing", validate)
    return ts, ts.shape[0] - 1


def _grid_invalid(ts: Array) -> Array:
    return (ts[0] != 0) | jnp.any(jnp.diff(ts) <= 0) | ~jnp.all(jnp.isfinite(ts))


def _check_options(a, ode, integrator, validate) -> None:
    _check_scalar("a", a, lambda v: v < 0, "< 0 (a mean-reverting OU process)", validate)
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator must be one of {INTEGRATORS}; got {integrator!r}")
    if not isinstance(ode, bool):
        raise ValueError(f"ode must be a bool; got {ode!r}")
    if integrator == "tweedie" and ode:
        raise ValueError("integrator='tweedie' is a reverse-SDE scheme: use it with ode=False")


def _noise_shape(n: int, d: int, n_steps: int) -> tuple[int, int, int]:
    # slot 0: the initial draw Y_0 ~ π_ref; slots 1..n_steps: the SDE increments (unused by the ODE)
    return (n_steps + 1, n, d)


def diffusion_resample_from_noise(
    log_w: Array,
    x,
    noise: Array,
    *,
    a: float = -1.0,
    T: float | None = None,
    n_steps: int | None = None,
    ts: Array | None = None,
    ode: bool = True,
    integrator: str = "euler",
    reference: ReferenceArg = "empirical",
    jitter: float = 0.0,
    validate: bool = True,
) -> tuple[Array, object]:
    """Diffusion resampling with the standard-normal noise given: `noise` (n_steps + 1, M, D).

    D is the flattened particle size; M the number of output particles (N by default).
    Deterministic in (log_w, x, noise); `diffusion_resample` draws the noise from a key. The
    torch port (`icml26_diffusion_resampling.torch`) takes the same noise and returns the same
    particles. See `diffusion_resample` for the arguments.
    """
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    _check_options(a, ode, integrator, validate)
    grid, n_steps = _time_grid(T, n_steps, ts, x2.dtype, validate)
    _, d = x2.shape
    noise = jnp.asarray(noise, x2.dtype)
    if noise.ndim != 3 or noise.shape[0] != n_steps + 1 or noise.shape[2] != d:
        raise ValueError(
            f"noise must have shape (n_steps + 1, M, D) = ({n_steps + 1}, M, {d}); "
            f"got {noise.shape}"
        )
    if isinstance(reference, str) and reference == "empirical":
        ref = None  # fitted inside the compiled core
    else:
        ref = _resolve_reference(reference, _normalise(log_w), x2, validate)
    y, bad = _diffusion_core(
        log_w, x2, noise, ref, a, grid, jitter, n_steps=n_steps, ode=ode, integrator=integrator
    )
    m = noise.shape[1]
    return _poison(bad, _uniform_log_w(m, x2.dtype)), unflatten(y)


@functools.partial(jax.jit, static_argnames=("n_steps", "ode", "integrator"))
def _diffusion_core(log_w, x2, noise, ref, a, ts, jitter, *, n_steps, ode, integrator):
    """The reverse-time integration; x2 (N, d), noise (n_steps + 1, M, d), ts (n_steps + 1,)
    -> ((M, d) particles, () bool `bad`). Invalid inputs (NaN / +inf weights, non-finite x,
    a >= 0, a bad grid): `bad` is True and the particles are NaN."""
    bad = _invalid(log_w, x2) | ~jnp.asarray(a < 0) | _grid_invalid(ts)
    lw = _normalise(log_w)  # (N,)
    if ref is None:
        ref = empirical_reference(lw, x2)
    mean = ref.mean  # (d,)
    var = ref.var + jitter  # (d,)
    bad = bad | ~jnp.all(var >= 0)
    # A dimension with zero variance (all weighted mass on one value, e.g. degenerate weights or
    # N = 1) is a point mass: the output there is μ_d exactly. It is masked out of the softmax
    # and its noise scale is 0; the safe variance keeps the gradient NaN-free.
    # (below float resolution of the mean counts as zero: roundoff in Σ w_i X_i leaves ~eps² var)
    point_mass = var <= (8.0 * jnp.finfo(var.dtype).eps * jnp.abs(mean)) ** 2
    var_safe = jnp.where(point_mass, 1.0, var)
    lam = jnp.where(a < 0, -a, 1.0)  # > 0: the reverse-time linear drift λ (Y − μ)
    c = 0.5 if ode else 1.0
    b = jnp.where(point_mass, 0.0, jnp.sqrt(2.0 * lam * var_safe))  # (d,) diffusion coefficient
    T = ts[-1]

    def scaled_score(y, t):
        # σ² ∇log p_t(y) = (Σ_j α_j m_j(t) − y) / (1 − e^{2at}), so that c b² ∇log p_t is
        # c · 2λ · this (b² = 2λσ²); y (M, d) queries, m (N, d) keys
        decay = jnp.exp(-lam * t)
        one_minus = 1.0 - decay**2
        m = decay * x2 + (1.0 - decay) * mean  # (N, d) means of the forward kernels
        inv_s = jnp.where(point_mass, 0.0, 1.0 / jnp.sqrt(var_safe * one_minus))  # (d,)
        ys, ms = y * inv_s, m * inv_s  # (M, d), (N, d) scaled queries / keys
        # α_ij ∝ w_j N(y_i; m_j, s²): logits = log w_j + <y_i, m_j>/s² − ‖m_j‖²/2s²  (the ‖y_i‖²
        # term is constant along j and cancels in the softmax)
        logits = lw[None, :] + ys @ ms.T - 0.5 * jnp.sum(ms**2, axis=-1)[None, :]  # (M, N)
        alpha = jax.nn.softmax(logits, axis=-1)  # (M, N)
        return (alpha @ m - y) / one_minus  # (M, d)

    sde = 0.0 if ode else 1.0

    def step(y, inputs):
        t_prev, t_next, xi = inputs  # reverse times τ_k, τ_{k+1}; xi: (M, d) standard normal
        h = t_next - t_prev
        t = T - t_prev  # forward time at the left end of the reverse step (never 0)
        g = scaled_score(y, t)  # (M, d)
        f = c * 2.0 * lam * g  # the nonlinear drift c b² ∇log p_t
        growth = jnp.exp(lam * h)  # e^{λh}
        if integrator == "euler":  # Euler(-Maruyama)
            y = y + h * (lam * (y - mean) + f) + sde * b * jnp.sqrt(h) * xi
        elif integrator == "lord_and_rougemont":  # diffres: e^{λh}(Y + h(−λμ + f)) + e^{λh} b √h ξ
            y = growth * (y + h * (f - lam * mean) + sde * b * jnp.sqrt(h) * xi)
        elif integrator == "lord_and_rougemont_exact":  # Euler step on (Y − μ), exact e^{λh}
            y = mean + growth * ((y - mean) + h * f + sde * b * jnp.sqrt(h) * xi)
        elif integrator == "jentzen_and_kloeden":  # linear part and noise exact, f frozen
            y = (
                mean
                + growth * (y - mean)
                + (growth - 1.0) / lam * f
                + sde * b * jnp.sqrt((growth**2 - 1.0) / (2.0 * lam)) * xi
            )
        else:  # tweedie (SDE): E[X_{t−h} | X_t = y] of the forward kernel, plus its noise
            sg = 1.0 / growth  # e^{ah}
            trans = 1.0 - sg**2  # transition variance / σ²
            y = (y - (1.0 - sg) * mean + trans * g) / sg + b / jnp.sqrt(2.0 * lam) * jnp.sqrt(
                trans
            ) * xi
        return y, None

    y0 = mean + jnp.sqrt(jnp.where(point_mass, 0.0, var_safe)) * noise[0]  # Y_0 ~ π_ref
    y, _ = lax.scan(step, y0, (ts[:-1], ts[1:], noise[1:]))
    return _poison(bad, jnp.where(point_mass, mean, y)), bad


def diffusion_resample(
    key: Array,
    log_w: Array,
    x,
    *,
    a: float = -1.0,  # OU mean-reversion rate (< 0); the paper's LGSSM runs use -1
    T: float | None = None,  # horizon, default 2 (pydpf's diffusion_time); = ts[-1] with ts
    n_steps: int | None = None,  # reverse steps, default 8; the LGSSM sweep uses 4..32
    ts: Array | None = None,  # reverse-time grid 0 = t_0 < ... < t_n = T (diffres's `ts`)
    ode: bool = True,  # probability-flow ODE (deterministic given Y_0) or the reverse SDE
    integrator: str = "euler",
    reference: ReferenceArg = "empirical",
    jitter: float = 0.0,  # added to the reference variance (guards near-degenerate particles)
    num_resampled: int | None = None,  # M output particles (default N); blackjax waste-free
    validate: bool = True,
):
    """Resample by integrating the reverse diffusion whose score is the exact ensemble score.

    Args:
        key: PRNG key.
        log_w: (N,) unnormalised log-weights.
        x: (N, ...) particles, or a pytree whose leaves all have leading size N (ravelled per
            particle to (N, D) internally; the output has the same structure).
        a, ode, integrator: the reverse process (`integrator` in `INTEGRATORS`; "tweedie" is
            SDE-only).
        T, n_steps: a uniform grid of n_steps steps on [0, T] (defaults 2 and 8); or
        ts: an explicit (n_steps + 1,) grid with ts[0] = 0, strictly increasing (diffres's ts).
        reference: "empirical" (N(Σ w X, diag weighted variance)), a fixed `GaussianReference`,
            or a callable `(log_w, x) -> GaussianReference`. For a non-Gaussian reference use
            `diffusion_resample_generic`.
        jitter: added to the reference variance.
        num_resampled: number M of output particles (default N).
        validate: see the module notes: eager ValueError / traced `checkify.debug_check`;
            False skips both (no host sync). Invalid inputs give all-NaN particles either way.

    Returns:
        (log_w_out, x_out): uniform log-weights -log M and M new particles shaped like `x`.

    Edge cases: a dimension of zero weighted variance (degenerate weights, N = 1) is returned as
    the point mass μ_d; all-zero weights raise ValueError eagerly (and under checkify) and are
    treated as uniform under plain jit (an SMC then reports log-likelihood -inf).
    """
    x2, _ = _flatten_particles(x)
    n, d = x2.shape
    if n < 1:
        raise ValueError(f"x must hold at least one particle (N >= 1); got shape {x2.shape}")
    m = n if num_resampled is None else _positive_int("num_resampled", num_resampled)
    steps = (jnp.asarray(ts).shape[0] - 1) if ts is not None else (n_steps or 8)
    noise = jax.random.normal(key, _noise_shape(m, d, steps), dtype=x2.dtype)
    return diffusion_resample_from_noise(
        log_w,
        x,
        noise,
        a=a,
        T=T,
        n_steps=n_steps,
        ts=ts,
        ode=ode,
        integrator=integrator,
        reference=reference,
        jitter=jitter,
        validate=validate,
    )


def diffusion_resample_generic(
    key: Array,
    log_w: Array,
    x: Array,
    *,
    ref_sampler: Callable[[Array], Array],
    logpdf_trans: Callable[[Array, Array, Array, Array], Array],
    score_ref: Callable[[Array], Array],
    b: float | Array,
    ts: Array,
    ode: bool = True,
    validate: bool = True,
) -> tuple[Array, Array]:
    """Diffusion resampling with a user-chosen reference π_ref (diffres's generic form).

    The forward process is the Langevin diffusion dX = b² ∇log π_ref(X) dt + √2 b dW, with
    transition density p_{t|s}; started at Σ w_i δ(X_i) its marginal is Σ_i w_i p_{t|0}(· | X_i),
    whose score is the exact ensemble score ∇_x log Σ_i w_i p_{t|0}(x | X_i) (by autodiff here).
    The reverse process is integrated by Euler(-Maruyama) from Y_0 ~ π_ref over the grid `ts`::

        ODE: dY = b² (−∇log π_ref(Y) + ∇log p_{T−τ}(Y)) dτ
        SDE: dY = b² (−∇log π_ref(Y) + 2 ∇log p_{T−τ}(Y)) dτ + √2 b dW

    Args:
        x: (N, D) or (N,) particles (work on the flattened representation for other shapes).
        ref_sampler: key -> (N, D) draws from π_ref (shaped like x).
        logpdf_trans: (x_t (D,), x_s (N, D), t, s) -> (N,) log p_{t|s}(x_t | x_s) (shaped like x).
        score_ref: (N, D) -> (N, D), ∇log π_ref.
        b: dispersion (scalar or (D,)).
        ts: (n_steps + 1,) grid, ts[0] = 0.

    With π_ref = N(μ, σ²) and b² = −aσ² this is `diffusion_resample(..., a=a, ts=ts)` with the
    Euler integrator (checked by the tests).
    """
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    grid, n_steps = _time_grid(None, None, ts, x2.dtype, validate)
    n, d = x2.shape
    shaped = lambda z: unflatten(z)  # (N, D) -> x's shape
    lw = _normalise(log_w)
    bad = _invalid(log_w, x2) | _grid_invalid(grid)
    T = grid[-1]
    b = jnp.asarray(b, x2.dtype)
    b_flat = jnp.broadcast_to(b.reshape(-1) if b.ndim else b, (d,))

    def log_p(y_flat, t):  # one query point (D,) -> log Σ_i w_i p_{t|0}(y | X_i)
        return jax.scipy.special.logsumexp(lw + logpdf_trans(shaped(y_flat[None])[0], x, t, 0.0))

    score = jax.vmap(jax.grad(log_p), in_axes=(0, None))  # (N, D)
    k_ref, k_noise = jax.random.split(key)
    y = jnp.asarray(ref_sampler(k_ref), x2.dtype).reshape(n, d)
    noise = jax.random.normal(k_noise, (n_steps, n, d), dtype=x2.dtype)
    c = 1.0 if ode else 2.0

    def step(y, inputs):
        t_prev, t_next, xi = inputs
        h = t_next - t_prev
        s_ref = jnp.asarray(score_ref(shaped(y)), x2.dtype).reshape(n, d)
        drift = b_flat**2 * (-s_ref + c * score(y, T - t_prev))
        y = y + h * drift
        if not ode:
            y = y + math.sqrt(2.0) * b_flat * jnp.sqrt(h) * xi
        return y, None

    y, _ = lax.scan(step, y, (grid[:-1], grid[1:], noise))
    return _poison(bad, _uniform_log_w(n, x2.dtype)), unflatten(_poison(bad, y))


def diffusion_resample_ref(
    log_w: Array,
    x: Array,
    noise: Array,
    *,
    a: float = -1.0,
    T: float = 2.0,
    n_steps: int = 8,
    ode: bool = True,
    reference: ReferenceArg = "empirical",
) -> tuple[Array, Array]:
    """Reference: Euler(-Maruyama) on the generic (Langevin) form, score by autodiff.

    Written independently of the fast path: the forward process is the Langevin diffusion
    dX = ½ b² ∇log π_ref(X) dt + b dW (equal to the OU process above for a Gaussian π_ref), the
    reverse drift is ½ b² (−∇log π_ref + 2c ∇log p_t) with c = ½ (ODE) or 1 (SDE), and
    ∇log p_t is `jax.grad` of log Σ_i w_i N(y; m_i(t), s_t²), one query point at a time.
    No point-mass handling: needs var > 0 in every dimension.
    """
    log_w, x2, unflatten = _check_particles(log_w, x)
    n = x2.shape[0]
    lw = jax.nn.log_softmax(log_w)
    ref = _resolve_reference(reference, lw, x2)
    mean, var = ref.mean, ref.var
    b2 = -2.0 * a * var  # (d,)
    c = 0.5 if ode else 1.0
    h = T / n_steps

    def log_pt(y, t):  # y: (d,) -> log of the Gaussian-mixture marginal of the forward process
        decay = jnp.exp(a * t)
        m = decay * x2 + (1.0 - decay) * mean
        s2 = var * (1.0 - decay**2)
        comp = -0.5 * jnp.sum((y - m) ** 2 / s2 + jnp.log(2 * jnp.pi * s2), axis=-1)  # (N,)
        return jax.scipy.special.logsumexp(lw + comp)

    grad_log_ref = lambda y: -(y - mean) / var
    y = mean + jnp.sqrt(var) * noise[0]
    for k in range(n_steps):
        t = T - k * h
        score = jax.vmap(jax.grad(log_pt), in_axes=(0, None))(y, t)  # (N, d)
        drift = 0.5 * b2 * (-jax.vmap(grad_log_ref)(y) + 2.0 * c * score)
        y = y + h * drift
        if not ode:
            y = y + jnp.sqrt(b2 * h) * noise[k + 1]
    return _uniform_log_w(n, x2.dtype), unflatten(y)


# --------------------------------------------------------------------------------------------
# baselines (same signature)
# --------------------------------------------------------------------------------------------


def _gather(x2: Array, idx: Array, unflatten: Callable, bad: Array):
    return unflatten(_poison(bad, x2[idx]))


def multinomial_resample(key: Array, log_w: Array, x, *, validate: bool = True):
    """Multinomial: N i.i.d. ancestors I_j ~ Cat(w). Not differentiable (w gets no gradient)."""
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    n = x2.shape[0]
    idx = jax.random.categorical(key, _normalise(log_w), shape=(n,))
    return _poison(bad, _uniform_log_w(n, x2.dtype)), _gather(x2, idx, unflatten, bad)


def _inverse_cdf(log_w: Array, u: Array) -> Array:
    cdf = jnp.cumsum(jnp.exp(_normalise(log_w)))  # (N,)
    idx = jnp.searchsorted(cdf, u, side="right")
    return jnp.clip(idx, 0, log_w.shape[0] - 1)


def systematic_resample(key: Array, log_w: Array, x, *, validate: bool = True):
    """Systematic: one uniform U, ancestors at the quantiles (U + j) / N."""
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    n = x2.shape[0]
    u = (jax.random.uniform(key, dtype=x2.dtype) + jnp.arange(n, dtype=x2.dtype)) / n
    return _poison(bad, _uniform_log_w(n, x2.dtype)), _gather(
        x2, _inverse_cdf(log_w, u), unflatten, bad
    )


def stratified_resample(key: Array, log_w: Array, x, *, validate: bool = True):
    """Stratified: one uniform per stratum, ancestors at (U_j + j) / N."""
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    n = x2.shape[0]
    u = (jax.random.uniform(key, (n,), dtype=x2.dtype) + jnp.arange(n, dtype=x2.dtype)) / n
    return _poison(bad, _uniform_log_w(n, x2.dtype)), _gather(
        x2, _inverse_cdf(log_w, u), unflatten, bad
    )


def stop_gradient_resample(key: Array, log_w: Array, x, *, validate: bool = True):
    """Stop-gradient multinomial: log w*_j = −log N + log w_I − sg(log w_I).

    Values are uniform; the gradient of a weighted average is the score-function (REINFORCE)
    estimator of the weights' gradient.
    """
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    n = x2.shape[0]
    lw = _normalise(log_w)
    idx = jax.random.categorical(key, lax.stop_gradient(lw), shape=(n,))
    picked = lw[idx]
    out_lw = -math.log(n) + picked - lax.stop_gradient(picked)
    return _poison(bad, out_lw), _gather(x2, idx, unflatten, bad)


def soft_resample(key: Array, log_w: Array, x, *, alpha: float = 0.5, validate: bool = True):
    """Soft resampling: ancestors from q = α w + (1 − α)/N, new weights ∝ w_I / q_I."""
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    _check_scalar("alpha", alpha, lambda v: (v > 0) & (v <= 1), "in (0, 1]", validate)
    bad = bad | ~jnp.asarray((alpha > 0) & (alpha <= 1))
    n = x2.shape[0]
    lw = _normalise(log_w)
    log_q = jnp.logaddexp(jnp.log(alpha) + lw, jnp.log1p(-alpha) - math.log(n))  # (N,)
    idx = jax.random.categorical(key, lax.stop_gradient(log_q), shape=(n,))
    new_lw = lw[idx] - log_q[idx]
    return _poison(bad, jax.nn.log_softmax(new_lw)), _gather(x2, idx, unflatten, bad)


def gumbel_softmax_resample(
    key: Array, log_w: Array, x, *, tau: float = 0.5, validate: bool = True
):
    """Gumbel-softmax: X*_j = Σ_i softmax_i((log w_i + g_ji) / τ) X_i, g ~ Gumbel (N, N).

    Exact multinomial as τ → 0; for τ > 0 each output is a convex combination (biased).
    """
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    _check_scalar("tau", tau, lambda v: v > 0, "> 0", validate)
    bad = bad | ~jnp.asarray(tau > 0)
    n = x2.shape[0]
    g = jax.random.gumbel(key, (n, n), dtype=x2.dtype)  # (N_out, N_in)
    p = jax.nn.softmax((_normalise(log_w)[None, :] + g) / tau, axis=-1)  # (N_out, N_in)
    out = p @ x2
    return _poison(bad, _uniform_log_w(n, x2.dtype)), unflatten(_poison(bad, out))


def sinkhorn_plan_ref(log_w: Array, x: Array, *, epsilon: float, n_iter: int = 500) -> Array:
    """Reference log-domain Sinkhorn for the plan P (N, N) between Σ w_i δ_{X_i} and uniform.

    P_ij = exp((f_i + g_j − ‖X_i − X_j‖²) / ε), rows summing to w and columns to 1/N.
    """
    x2, _ = _as_2d(x)
    n = x2.shape[0]
    lw = _normalise(log_w)
    lb = jnp.full((n,), -math.log(n), dtype=x2.dtype)
    cost = jnp.sum((x2[:, None, :] - x2[None, :, :]) ** 2, axis=-1)  # (N, N)
    lse = jax.scipy.special.logsumexp

    def body(_, fg):
        f, g = fg
        f = epsilon * (lw - lse((g[None, :] - cost) / epsilon, axis=1))
        g = epsilon * (lb - lse((f[:, None] - cost) / epsilon, axis=0))
        return f, g

    zeros = jnp.zeros((n,), x2.dtype)
    f, g = lax.fori_loop(0, n_iter, body, (zeros, zeros))
    return jnp.exp((f[:, None] + g[None, :] - cost) / epsilon)


def ot_resample(
    key: Array,
    log_w: Array,
    x,
    *,
    epsilon: float = 0.5,
    threshold: float = 1e-5,  # ott's marginal error; 1e-3 (ott's default) leaves 1/N off by 25 %
    max_iterations: int = 2000,
    validate: bool = True,
):
    """Entropy-regularised OT resampling (Corenflos et al. 2021) with ott-jax's Sinkhorn.

    P = argmin <P, C> − ε H(P) with P 1 = w, Pᵀ 1 = 1/N, C_ij = ‖X_i − X_j‖²;  X*_j = N Σ_i P_ij X_i.
    Deterministic (`key` unused); differentiated by unrolling the Sinkhorn iterations (ott's
    implicit differentiation is unstable here, see the diffres issue tracker). Needs the [ot] extra.
    `ot_marginal_error` reports how far the uniform marginal is from converged for the same
    options (float32 floors it near 1e-4).
    """
    del key
    log_w, x2, unflatten = _check_particles(log_w, x, validate)
    bad = _invalid(log_w, x2)
    _check_scalar("epsilon", epsilon, lambda v: v > 0, "> 0", validate)
    bad = bad | ~jnp.asarray(epsilon > 0)
    plan = _ot_plan(log_w, x2, epsilon, threshold=threshold, max_iterations=max_iterations)
    out = x2.shape[0] * plan.T @ x2  # (N, d)
    return _poison(bad, _uniform_log_w(x2.shape[0], x2.dtype)), unflatten(_poison(bad, out))


def ot_marginal_error(
    log_w: Array,
    x,
    *,
    epsilon: float = 0.5,
    threshold: float = 1e-5,
    max_iterations: int = 2000,
) -> Array:
    """Convergence of `ot_resample`'s Sinkhorn: max_j |N Σ_i P_ij − 1| (0 when converged)."""
    log_w, x2, _ = _check_particles(log_w, x)
    plan = _ot_plan(log_w, x2, epsilon, threshold=threshold, max_iterations=max_iterations)
    return jnp.max(jnp.abs(x2.shape[0] * jnp.sum(plan, axis=0) - 1.0))


@functools.partial(jax.jit, static_argnames=("threshold", "max_iterations"))
def _ot_plan(log_w, x2, epsilon, *, threshold, max_iterations):
    try:
        from ott.geometry import pointcloud
        from ott.problems.linear import linear_problem
        from ott.solvers.linear import sinkhorn
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "ot_resample needs ott-jax: pip install 'icml26-diffusion-resampling[ot]'"
        ) from err
    n = x2.shape[0]
    w = jnp.exp(_normalise(log_w))
    geom = pointcloud.PointCloud(x2, x2, epsilon=epsilon)
    prob = linear_problem.LinearProblem(geom, a=w, b=jnp.full((n,), 1.0 / n, dtype=x2.dtype))
    solver = sinkhorn.Sinkhorn(
        threshold=threshold, max_iterations=max_iterations, implicit_diff=None
    )
    return solver(prob).matrix  # (N, N): rows sum to w, columns to 1/N
