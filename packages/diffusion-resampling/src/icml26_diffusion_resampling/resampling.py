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

Array = jax.Array

__all__ = [
    "INTEGRATORS",
    "GaussianReference",
    "diffusion_resample",
    "diffusion_resample_from_noise",
    "diffusion_resample_ref",
    "empirical_reference",
    "gumbel_softmax_resample",
    "multinomial_resample",
    "ot_resample",
    "sinkhorn_plan_ref",
    "soft_resample",
    "stop_gradient_resample",
    "stratified_resample",
    "systematic_resample",
]

INTEGRATORS = ("euler", "lord_and_rougemont", "jentzen_and_kloeden")


# --------------------------------------------------------------------------------------------
# input checks (eager values are checked; traced values are handled as documented per function)
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


def _check_particles(log_w, x) -> tuple[Array, Array, bool]:
    """Shape/dtype checks; value checks when the inputs are concrete (not under jit)."""
    x, squeeze = _as_2d(x)
    log_w = jnp.asarray(log_w)
    if log_w.ndim != 1 or log_w.shape[0] != x.shape[0]:
        raise ValueError(
            f"log_w must have shape (N,) with N = x.shape[0] = {x.shape[0]}; got {log_w.shape}"
        )
    if x.shape[0] < 1:
        raise ValueError("x must hold at least one particle (N >= 1)")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"x must be a floating-point array; got dtype {x.dtype}")
    if _is_concrete(log_w, x):
        lw = np.asarray(log_w)
        if np.isnan(lw).any() or np.isposinf(lw).any():
            raise ValueError("log_w contains NaN or +inf")
        if np.isneginf(lw).all():
            raise ValueError("log_w is -inf everywhere: every weight is zero, nothing to resample")
        if not np.isfinite(np.asarray(x)).all():
            raise ValueError("x contains NaN or inf")
    return log_w, x, squeeze


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


def _resolve_reference(reference: ReferenceArg, log_w: Array, x: Array) -> GaussianReference:
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
    if _is_concrete(var) and not bool(np.all(np.asarray(var) > 0)):
        raise ValueError("a user-chosen reference needs var > 0 in every dimension")
    return GaussianReference(mean, var)


def _check_schedule(a, T, n_steps, ode, integrator) -> None:
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int; got {n_steps!r}")
    if _is_concrete(a) and not float(a) < 0:
        raise ValueError(f"a must be < 0 (a mean-reverting OU process); got {float(a)}")
    if _is_concrete(T) and not float(T) > 0:
        raise ValueError(f"T must be > 0; got {float(T)}")
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator must be one of {INTEGRATORS}; got {integrator!r}")
    if not isinstance(ode, bool):
        raise ValueError(f"ode must be a bool; got {ode!r}")


def _noise_shape(n: int, d: int, n_steps: int) -> tuple[int, int, int]:
    # slot 0: the initial draw Y_0 ~ π_ref; slots 1..n_steps: the SDE increments (unused by the ODE)
    return (n_steps + 1, n, d)


def diffusion_resample_from_noise(
    log_w: Array,
    x: Array,
    noise: Array,
    *,
    a: float = -1.0,
    T: float = 2.0,
    n_steps: int = 8,
    ode: bool = True,
    integrator: str = "euler",
    reference: ReferenceArg = "empirical",
    jitter: float = 0.0,
) -> tuple[Array, Array]:
    """Diffusion resampling with the standard-normal noise given: `noise` (n_steps + 1, N, d).

    Deterministic in (log_w, x, noise); `diffusion_resample` draws the noise from a key. The
    torch port (`icml26_diffusion_resampling.torch`) takes the same noise and returns the same
    particles. See `diffusion_resample` for the arguments.
    """
    _check_schedule(a, T, n_steps, ode, integrator)
    log_w, x2, squeeze = _check_particles(log_w, x)
    n, d = x2.shape
    noise = jnp.asarray(noise, x2.dtype)
    if noise.shape != _noise_shape(n, d, n_steps):
        raise ValueError(
            f"noise must have shape (n_steps + 1, N, d) = {_noise_shape(n, d, n_steps)}; "
            f"got {noise.shape}"
        )
    if isinstance(reference, str) and reference == "empirical":
        ref = None  # fitted inside the compiled core
    else:
        ref = _resolve_reference(reference, _normalise(log_w), x2)
    y = _diffusion_core(
        log_w, x2, noise, ref, a, T, jitter, n_steps=n_steps, ode=ode, integrator=integrator
    )
    return _uniform_log_w(n, x2.dtype), (y[:, 0] if squeeze else y)


@functools.partial(jax.jit, static_argnames=("n_steps", "ode", "integrator"))
def _diffusion_core(log_w, x2, noise, ref, a, T, jitter, *, n_steps, ode, integrator):
    """The reverse-time integration; x2 (N, d), noise (n_steps + 1, N, d) -> (N, d)."""
    lw = _normalise(log_w)  # (N,)
    if ref is None:
        ref = empirical_reference(lw, x2)
    mean = ref.mean  # (d,)
    var = ref.var + jitter  # (d,)
    # A dimension with zero variance (all weighted mass on one value, e.g. degenerate weights or
    # N = 1) is a point mass: the output there is μ_d exactly. It is masked out of the softmax
    # and its noise scale is 0; the safe variance keeps the gradient NaN-free.
    # (below float resolution of the mean counts as zero: roundoff in Σ w_i X_i leaves ~eps² var)
    point_mass = var <= (8.0 * jnp.finfo(var.dtype).eps * jnp.abs(mean)) ** 2
    var_safe = jnp.where(point_mass, 1.0, var)
    lam = -a  # > 0: the reverse-time linear drift λ (Y − μ)
    c = 0.5 if ode else 1.0
    b = jnp.where(point_mass, 0.0, jnp.sqrt(2.0 * lam * var_safe))  # (d,) diffusion coefficient
    h = T / n_steps

    def nonlinear_drift(y, t):
        # c b² ∇log p_t(y) = c b² (Σ α_i m_i(t) − y) / s_t²  with  b² / s_t² = 2λ / (1 − e^{2at})
        decay = jnp.exp(a * t)
        one_minus = 1.0 - decay**2
        m = decay * x2 + (1.0 - decay) * mean  # (N, d) means of the forward kernels
        inv_s = jnp.where(point_mass, 0.0, 1.0 / jnp.sqrt(var_safe * one_minus))  # (d,)
        ys, ms = y * inv_s, m * inv_s  # (N, d) scaled queries / keys
        # α_ij ∝ w_j N(y_i; m_j, s²): logits = log w_j + <y_i, m_j>/s² − ‖m_j‖²/2s²  (the ‖y_i‖²
        # term is constant along j and cancels in the softmax)
        logits = lw[None, :] + ys @ ms.T - 0.5 * jnp.sum(ms**2, axis=-1)[None, :]  # (N, N)
        alpha = jax.nn.softmax(logits, axis=-1)  # (N, N)
        return c * 2.0 * lam * (alpha @ m - y) / one_minus  # (N, d)

    growth = jnp.exp(lam * h)  # e^{λh}
    sqrt_h = jnp.sqrt(h)
    sde = 0.0 if ode else 1.0

    def step(y, inputs):
        k, xi = inputs  # k: step index, xi: (N, d) standard normal
        t = T - k * h  # forward time at the left end of the reverse step (never 0)
        f = nonlinear_drift(y, t)
        if integrator == "euler":  # Euler(-Maruyama)
            y = y + h * (lam * (y - mean) + f) + sde * b * sqrt_h * xi
        elif integrator == "lord_and_rougemont":  # Euler step, then the exact linear flow e^{λh}
            y = mean + growth * ((y - mean) + h * f + sde * b * sqrt_h * xi)
        else:  # jentzen_and_kloeden: linear part and noise integrated exactly, f frozen
            y = (
                mean
                + growth * (y - mean)
                + (growth - 1.0) / lam * f
                + sde * b * jnp.sqrt((growth**2 - 1.0) / (2.0 * lam)) * xi
            )
        return y, None

    y0 = mean + jnp.sqrt(jnp.where(point_mass, 0.0, var_safe)) * noise[0]  # Y_0 ~ π_ref
    ks = jnp.arange(n_steps, dtype=x2.dtype)
    y, _ = lax.scan(step, y0, (ks, noise[1:]))
    return jnp.where(point_mass, mean, y)


def diffusion_resample(
    key: Array,
    log_w: Array,
    x: Array,
    *,
    a: float = -1.0,  # OU mean-reversion rate (< 0); the paper's LGSSM runs use -1
    T: float = 2.0,  # horizon: π_ref is reached up to e^{aT} (pydpf's default diffusion_time)
    n_steps: int = 8,  # reverse steps; cost is linear in it, the LGSSM sweep uses 4..32
    ode: bool = True,  # probability-flow ODE (deterministic given Y_0) or the reverse SDE
    integrator: str = "euler",
    reference: ReferenceArg = "empirical",
    jitter: float = 0.0,  # added to the reference variance (guards near-degenerate particles)
) -> tuple[Array, Array]:
    """Resample by integrating the reverse diffusion whose score is the exact ensemble score.

    Args:
        key: PRNG key.
        log_w: (N,) unnormalised log-weights.
        x: (N, d) or (N,) particles.
        a, T, n_steps, ode, integrator: the reverse process (`integrator` in `INTEGRATORS`).
        reference: "empirical" (N(Σ w X, diag weighted variance)), a fixed `GaussianReference`,
            or a callable `(log_w, x) -> GaussianReference` (the generic reference).
        jitter: added to the reference variance.

    Returns:
        (log_w_out, x_out): uniform log-weights -log N and N new particles shaped like `x`.

    Edge cases: a dimension of zero weighted variance (degenerate weights, N = 1) is returned as
    the point mass μ_d; all-zero weights raise ValueError eagerly and are treated as uniform
    under jit (an SMC then reports log-likelihood -inf).
    """
    x2, _ = _as_2d(x)
    n, d = x2.shape
    noise = jax.random.normal(key, _noise_shape(n, d, n_steps), dtype=x2.dtype)
    return diffusion_resample_from_noise(
        log_w,
        x,
        noise,
        a=a,
        T=T,
        n_steps=n_steps,
        ode=ode,
        integrator=integrator,
        reference=reference,
        jitter=jitter,
    )


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
    log_w, x2, squeeze = _check_particles(log_w, x)
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
    return _uniform_log_w(n, x2.dtype), (y[:, 0] if squeeze else y)


# --------------------------------------------------------------------------------------------
# baselines (same signature)
# --------------------------------------------------------------------------------------------


def _gather(x2: Array, idx: Array, squeeze: bool) -> Array:
    out = x2[idx]
    return out[:, 0] if squeeze else out


def multinomial_resample(key: Array, log_w: Array, x: Array) -> tuple[Array, Array]:
    """Multinomial: N i.i.d. ancestors I_j ~ Cat(w). Not differentiable (w gets no gradient)."""
    log_w, x2, squeeze = _check_particles(log_w, x)
    n = x2.shape[0]
    idx = jax.random.categorical(key, _normalise(log_w), shape=(n,))
    return _uniform_log_w(n, x2.dtype), _gather(x2, idx, squeeze)


def _inverse_cdf(log_w: Array, u: Array) -> Array:
    cdf = jnp.cumsum(jnp.exp(_normalise(log_w)))  # (N,)
    idx = jnp.searchsorted(cdf, u, side="right")
    return jnp.clip(idx, 0, log_w.shape[0] - 1)


def systematic_resample(key: Array, log_w: Array, x: Array) -> tuple[Array, Array]:
    """Systematic: one uniform U, ancestors at the quantiles (U + j) / N."""
    log_w, x2, squeeze = _check_particles(log_w, x)
    n = x2.shape[0]
    u = (jax.random.uniform(key, dtype=x2.dtype) + jnp.arange(n, dtype=x2.dtype)) / n
    return _uniform_log_w(n, x2.dtype), _gather(x2, _inverse_cdf(log_w, u), squeeze)


def stratified_resample(key: Array, log_w: Array, x: Array) -> tuple[Array, Array]:
    """Stratified: one uniform per stratum, ancestors at (U_j + j) / N."""
    log_w, x2, squeeze = _check_particles(log_w, x)
    n = x2.shape[0]
    u = (jax.random.uniform(key, (n,), dtype=x2.dtype) + jnp.arange(n, dtype=x2.dtype)) / n
    return _uniform_log_w(n, x2.dtype), _gather(x2, _inverse_cdf(log_w, u), squeeze)


def stop_gradient_resample(key: Array, log_w: Array, x: Array) -> tuple[Array, Array]:
    """Stop-gradient multinomial: log w*_j = −log N + log w_I − sg(log w_I).

    Values are uniform; the gradient of a weighted average is the score-function (REINFORCE)
    estimator of the weights' gradient.
    """
    log_w, x2, squeeze = _check_particles(log_w, x)
    n = x2.shape[0]
    lw = _normalise(log_w)
    idx = jax.random.categorical(key, lax.stop_gradient(lw), shape=(n,))
    picked = lw[idx]
    return -math.log(n) + picked - lax.stop_gradient(picked), _gather(x2, idx, squeeze)


def soft_resample(key: Array, log_w: Array, x: Array, *, alpha: float = 0.5) -> tuple[Array, Array]:
    """Soft resampling: ancestors from q = α w + (1 − α)/N, new weights ∝ w_I / q_I."""
    log_w, x2, squeeze = _check_particles(log_w, x)
    if _is_concrete(alpha) and not 0.0 < float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in (0, 1]; got {float(alpha)}")
    n = x2.shape[0]
    lw = _normalise(log_w)
    log_q = jnp.logaddexp(jnp.log(alpha) + lw, jnp.log1p(-alpha) - math.log(n))  # (N,)
    idx = jax.random.categorical(key, lax.stop_gradient(log_q), shape=(n,))
    new_lw = lw[idx] - log_q[idx]
    return jax.nn.log_softmax(new_lw), _gather(x2, idx, squeeze)


def gumbel_softmax_resample(
    key: Array, log_w: Array, x: Array, *, tau: float = 0.5
) -> tuple[Array, Array]:
    """Gumbel-softmax: X*_j = Σ_i softmax_i((log w_i + g_ji) / τ) X_i, g ~ Gumbel (N, N).

    Exact multinomial as τ → 0; for τ > 0 each output is a convex combination (biased).
    """
    log_w, x2, squeeze = _check_particles(log_w, x)
    if _is_concrete(tau) and not float(tau) > 0:
        raise ValueError(f"tau must be > 0; got {float(tau)}")
    n = x2.shape[0]
    g = jax.random.gumbel(key, (n, n), dtype=x2.dtype)  # (N_out, N_in)
    p = jax.nn.softmax((_normalise(log_w)[None, :] + g) / tau, axis=-1)  # (N_out, N_in)
    out = p @ x2
    return _uniform_log_w(n, x2.dtype), (out[:, 0] if squeeze else out)


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
    x: Array,
    *,
    epsilon: float = 0.5,
    threshold: float = 1e-3,
    max_iterations: int = 200,
) -> tuple[Array, Array]:
    """Entropy-regularised OT resampling (Corenflos et al. 2021) with ott-jax's Sinkhorn.

    P = argmin <P, C> − ε H(P) with P 1 = w, Pᵀ 1 = 1/N, C_ij = ‖X_i − X_j‖²;  X*_j = N Σ_i P_ij X_i.
    Deterministic (`key` unused); differentiated by unrolling the Sinkhorn iterations (ott's
    implicit differentiation is unstable here, see the diffres issue tracker). Needs the [ot] extra.
    """
    del key
    log_w, x2, squeeze = _check_particles(log_w, x)
    if _is_concrete(epsilon) and not float(epsilon) > 0:
        raise ValueError(f"epsilon must be > 0; got {float(epsilon)}")
    out = _ot_core(log_w, x2, epsilon, threshold=threshold, max_iterations=max_iterations)
    return _uniform_log_w(x2.shape[0], x2.dtype), (out[:, 0] if squeeze else out)


@functools.partial(jax.jit, static_argnames=("threshold", "max_iterations"))
def _ot_core(log_w, x2, epsilon, *, threshold, max_iterations):
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
    plan = solver(prob).matrix  # (N, N): rows sum to w, columns to 1/N
    return n * plan.T @ x2  # (N, d)
