"""Differentiable particle filter, linear-Gaussian model with its Kalman filter, and fitting.

State-space model (k = 1..K)::

    x_0 ~ m_0,   x_k | x_{k-1} ~ f_θ(· | x_{k-1}),   y_k | x_k ~ g_θ(· | x_k).

`particle_filter` is the bootstrap filter (proposal f_θ) or, given a `Proposal` q, the guided
filter. At step k it (1) resamples when ESS_{k-1} <= ess_threshold · N, (2) proposes x_k,
(3) weights by the incremental weight

    log G_k = log g(y_k | x_k) + log f(x_k | x_{k-1}) − log q(x_k | x_{k-1}, y_k)

(= log g for the bootstrap filter), and (4) accumulates log Ẑ_k = log Σ_i W_{k-1,i} G_{k,i}, so
log p̂(y_{1:K}) = Σ_k log Ẑ_k. With a reparametrised resampler (`diffusion_resample`) every step
is differentiable, so `jax.grad` of the log-likelihood gives the parameter gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import optax
from jax import lax

from .resampling import diffusion_resample

Array = jax.Array
Params = Any
Resampler = Callable[[Array, Array, Array], tuple[Array, Array]]

__all__ = [
    "FilterOutput",
    "KalmanOutput",
    "LGSSMParams",
    "LinearGaussianSSM",
    "Proposal",
    "StateSpaceModel",
    "estimate_parameters",
    "gaussian_marginal_distances",
    "kalman_filter",
    "particle_filter",
]


class StateSpaceModel(Protocol):
    """What `particle_filter` needs from a model. Particles are (N, d) arrays."""

    def init_sample(self, key: Array, params: Params, n: int) -> Array:
        """x_0 ~ m_0: (n, d)."""
        ...

    def transition_sample(self, key: Array, params: Params, x_prev: Array, k: Array) -> Array:
        """x_k ~ f(· | x_{k-1}) for each row of x_prev (N, d)."""
        ...

    def transition_log_prob(self, params: Params, x: Array, x_prev: Array, k: Array) -> Array:
        """log f(x_k | x_{k-1}): (N,). Only the guided filter calls it."""
        ...

    def observation_log_prob(self, params: Params, y: Array, x: Array, k: Array) -> Array:
        """log g(y_k | x_k): (N,)."""
        ...


class Proposal(Protocol):
    """A guided proposal q(x_k | x_{k-1}, y_k)."""

    def sample(self, key: Array, params: Params, x_prev: Array, y: Array, k: Array) -> Array: ...

    def log_prob(self, params: Params, x: Array, x_prev: Array, y: Array, k: Array) -> Array: ...


class FilterOutput(NamedTuple):
    log_likelihood: Array  # () estimate of log p(y_{1:K})
    particles: Array  # (K, N, d) x_k after weighting by y_k
    log_weights: Array  # (K, N) normalised log W_k
    ess: Array  # (K,) effective sample size of W_{k-1}, the one the resampling test uses
    resampled: Array  # (K,) bool, whether step k resampled


def _ess(log_w: Array) -> Array:
    return jnp.exp(-jax.scipy.special.logsumexp(2.0 * log_w))  # 1 / Σ W² for normalised W


def particle_filter(
    key: Array,
    model: StateSpaceModel,
    params: Params,
    ys: Array,
    *,
    n_particles: int,
    resampler: Resampler = diffusion_resample,
    ess_threshold: float = 1.0,
    proposal: Proposal | None = None,
) -> FilterOutput:
    """Run the (bootstrap or guided) particle filter over observations `ys` (K, dy).

    Args:
        resampler: `(key, log_w, x) -> (log_w, x)`, e.g. `diffusion_resample` or a
            `functools.partial` of any resampler in this package.
        ess_threshold: resample when ESS <= ess_threshold · N; 1.0 resamples at every step
            (the paper's setting), 0.0 never.
        proposal: None for the bootstrap filter, else the guided proposal q.
    """
    if not isinstance(n_particles, int) or n_particles < 1:
        raise ValueError(f"n_particles must be a positive int; got {n_particles!r}")
    if not 0.0 <= float(ess_threshold) <= 1.0:
        raise ValueError(f"ess_threshold must be in [0, 1]; got {ess_threshold}")
    ys = jnp.asarray(ys)
    if ys.ndim == 1:
        ys = ys[:, None]
    if ys.ndim != 2:
        raise ValueError(f"ys must have shape (K,) or (K, dy); got {ys.shape}")
    n = n_particles
    k0, key = jax.random.split(key)
    x0 = model.init_sample(k0, params, n)  # (N, d)
    lw0 = jnp.full((n,), -math.log(n), dtype=x0.dtype)

    def maybe_resample(key_r, lw, x):
        ess = _ess(lw)
        if ess_threshold >= 1.0:  # always: no branch, no wasted work
            out_lw, out_x = resampler(key_r, lw, x)
            return jax.nn.log_softmax(out_lw), out_x, ess, jnp.array(True)
        if ess_threshold <= 0.0:
            return lw, x, ess, jnp.array(False)
        do = ess <= ess_threshold * n

        def yes(_):
            out_lw, out_x = resampler(key_r, lw, x)
            return jax.nn.log_softmax(out_lw).astype(lw.dtype), out_x.astype(x.dtype)

        out_lw, out_x = lax.cond(do, yes, lambda _: (lw, x), None)
        return out_lw, out_x, ess, do

    def step(carry, inputs):
        lw, x, loglik = carry
        k, y, key_k = inputs
        key_r, key_p = jax.random.split(key_k)
        lw_r, x_r, ess, did = maybe_resample(key_r, lw, x)
        if proposal is None:
            x_new = model.transition_sample(key_p, params, x_r, k)
            log_g = model.observation_log_prob(params, y, x_new, k)
        else:
            x_new = proposal.sample(key_p, params, x_r, y, k)
            log_g = (
                model.observation_log_prob(params, y, x_new, k)
                + model.transition_log_prob(params, x_new, x_r, k)
                - proposal.log_prob(params, x_new, x_r, y, k)
            )
        unnorm = lw_r + log_g
        log_z = jax.scipy.special.logsumexp(unnorm)  # log Σ W_{k-1} G_k
        lw_new = unnorm - log_z
        return (lw_new, x_new, loglik + log_z), (x_new, lw_new, ess, did)

    n_obs = ys.shape[0]
    ks = jnp.arange(1, n_obs + 1)
    keys = jax.random.split(key, n_obs)
    init = (lw0, x0, jnp.zeros((), x0.dtype))
    (_, _, loglik), (xs, lws, ess, did) = lax.scan(step, init, (ks, ys, keys))
    return FilterOutput(loglik, xs, lws, ess, did)


# --------------------------------------------------------------------------------------------
# linear-Gaussian state-space model and the Kalman filter (exact reference)
# --------------------------------------------------------------------------------------------


class LGSSMParams(NamedTuple):
    """x_k = A x_{k-1} + N(0, Q), y_k = H x_k + N(0, R), x_0 ~ N(m0, P0)."""

    A: Array  # (d, d)
    Q: Array  # (d, d)
    H: Array  # (dy, d)
    R: Array  # (dy, dy)
    m0: Array  # (d,)
    P0: Array  # (d, d)


def _mvn_log_prob(z: Array, cov: Array) -> Array:
    """log N(z; 0, cov) for z (..., d)."""
    d = z.shape[-1]
    chol = jnp.linalg.cholesky(cov)  # (d, d)
    sol = jax.scipy.linalg.solve_triangular(chol, z.reshape(-1, d).T, lower=True)  # (d, M)
    maha = jnp.sum(sol**2, axis=0)  # (M,)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return (-0.5 * (maha + logdet + d * jnp.log(2.0 * jnp.pi))).reshape(z.shape[:-1])


class LinearGaussianSSM:
    """The LGSSM as a `StateSpaceModel` (params: `LGSSMParams`), plus simulation and the
    locally optimal proposal p(x_k | x_{k-1}, y_k) for the guided filter."""

    def init_sample(self, key, params, n):
        d = params.m0.shape[0]
        eps = jax.random.normal(key, (n, d), dtype=params.m0.dtype)
        return params.m0 + eps @ jnp.linalg.cholesky(params.P0).T

    def transition_sample(self, key, params, x_prev, k):
        eps = jax.random.normal(key, x_prev.shape, dtype=x_prev.dtype)
        return x_prev @ params.A.T + eps @ jnp.linalg.cholesky(params.Q).T

    def transition_log_prob(self, params, x, x_prev, k):
        return _mvn_log_prob(x - x_prev @ params.A.T, params.Q)

    def observation_log_prob(self, params, y, x, k):
        return _mvn_log_prob(y - x @ params.H.T, params.R)

    def simulate(self, key, params, n_steps: int) -> tuple[Array, Array]:
        """Draw (xs (K, d), ys (K, dy)) for k = 1..K."""
        k0, key = jax.random.split(key)
        x0 = self.init_sample(k0, params, 1)[0]

        def step(x, key_k):
            kx, ky = jax.random.split(key_k)
            x = self.transition_sample(kx, params, x[None], 0)[0]
            dy = params.H.shape[0]
            y = x @ params.H.T + jnp.linalg.cholesky(params.R) @ jax.random.normal(ky, (dy,))
            return x, (x, y)

        _, (xs, ys) = lax.scan(step, x0, jax.random.split(key, n_steps))
        return xs, ys

    def optimal_proposal(self) -> Proposal:
        """q(x_k | x_{k-1}, y_k) = N(x_k; A x + K (y − H A x), (I − K H) Q), K = Q Hᵀ S⁻¹."""
        return _LGSSMOptimalProposal()


class _LGSSMOptimalProposal:
    @staticmethod
    def _moments(params, x_prev, y):
        S = params.H @ params.Q @ params.H.T + params.R
        gain = jnp.linalg.solve(S, params.H @ params.Q).T  # (d, dy) = Q Hᵀ S⁻¹
        pred = x_prev @ params.A.T  # (N, d)
        mean = pred + (y - pred @ params.H.T) @ gain.T
        cov = params.Q - gain @ params.H @ params.Q
        return mean, 0.5 * (cov + cov.T)

    def sample(self, key, params, x_prev, y, k):
        mean, cov = self._moments(params, x_prev, y)
        eps = jax.random.normal(key, mean.shape, dtype=mean.dtype)
        return mean + eps @ jnp.linalg.cholesky(cov).T

    def log_prob(self, params, x, x_prev, y, k):
        mean, cov = self._moments(params, x_prev, y)
        return _mvn_log_prob(x - mean, cov)


class KalmanOutput(NamedTuple):
    log_likelihood: Array  # () exact log p(y_{1:K})
    means: Array  # (K, d) filtering means E[x_k | y_{1:k}]
    covs: Array  # (K, d, d) filtering covariances


def kalman_filter(params: LGSSMParams, ys: Array) -> KalmanOutput:
    """Exact filtering for the LGSSM (same time convention as `particle_filter`)."""
    ys = jnp.asarray(ys)
    if ys.ndim == 1:
        ys = ys[:, None]

    def step(carry, y):
        m, P = carry
        m_pred = params.A @ m
        P_pred = params.A @ P @ params.A.T + params.Q
        S = params.H @ P_pred @ params.H.T + params.R
        resid = y - params.H @ m_pred
        ll = _mvn_log_prob(resid, S)
        gain = jnp.linalg.solve(S, params.H @ P_pred).T  # P_pred Hᵀ S⁻¹
        m = m_pred + gain @ resid
        P = P_pred - gain @ S @ gain.T
        P = 0.5 * (P + P.T)
        return (m, P), (ll, m, P)

    _, (lls, ms, Ps) = lax.scan(step, (params.m0, params.P0), ys)
    return KalmanOutput(jnp.sum(lls), ms, Ps)


def gaussian_marginal_distances(out: FilterOutput, kf: KalmanOutput) -> tuple[Array, Array]:
    """Mean over k of KL(N_PF ‖ N_KF) and of the Bures–Wasserstein distance W₂(N_PF, N_KF),
    where N_PF is the Gaussian with the particles' weighted mean and covariance at step k."""
    w = jnp.exp(out.log_weights)  # (K, N)
    mean = jnp.einsum("kn,knd->kd", w, out.particles)
    cen = out.particles - mean[:, None, :]
    cov = jnp.einsum("kn,kni,knj->kij", w, cen, cen)  # (K, d, d)
    d = mean.shape[-1]

    def kl(m1, S1, m2, S2):  # KL(N(m1,S1) ‖ N(m2,S2))
        S2inv = jnp.linalg.inv(S2)
        diff = m2 - m1
        _, ld1 = jnp.linalg.slogdet(S1)
        _, ld2 = jnp.linalg.slogdet(S2)
        return 0.5 * (jnp.trace(S2inv @ S1) + diff @ S2inv @ diff - d + ld2 - ld1)

    def sqrtm(S):
        vals, vecs = jnp.linalg.eigh(S)
        return (vecs * jnp.sqrt(jnp.clip(vals, 0.0))) @ vecs.T

    def bures(m1, S1, m2, S2):
        r2 = sqrtm(S2)
        cross = sqrtm(r2 @ S1 @ r2)
        sq = jnp.sum((m1 - m2) ** 2) + jnp.trace(S1 + S2 - 2.0 * cross)
        return jnp.sqrt(jnp.clip(sq, 0.0))

    kls = jax.vmap(kl)(mean, cov, kf.means, kf.covs)
    bws = jax.vmap(bures)(mean, cov, kf.means, kf.covs)
    return jnp.mean(kls), jnp.mean(bws)


# --------------------------------------------------------------------------------------------
# parameter estimation by gradient ascent on the filter's log-likelihood
# --------------------------------------------------------------------------------------------


def estimate_parameters(
    log_likelihood: Callable[[Any, Array], Array],
    theta0: Any,
    key: Array,
    *,
    n_iter: int = 100,
    optimizer: optax.GradientTransformation | None = None,
    common_random_numbers: bool = True,
) -> tuple[Any, Array]:
    """Maximise `log_likelihood(theta, key)` with optax (default Adam, lr 0.05).

    With `common_random_numbers` every iteration reuses `key`, so with a reparametrised
    resampler the objective is a smooth deterministic function of theta (the usual practice for
    particle-filter MLE); otherwise a fresh key per iteration (stochastic gradient ascent).

    Returns:
        (theta, trace) with trace the (n_iter,) log-likelihood at each iterate.
    """
    if not isinstance(n_iter, int) or n_iter < 1:
        raise ValueError(f"n_iter must be a positive int; got {n_iter!r}")
    opt = optax.adam(0.05) if optimizer is None else optimizer
    loss = lambda th, k: -log_likelihood(th, k)
    value_and_grad = jax.value_and_grad(loss)

    def step(carry, key_i):
        theta, state = carry
        k = key if common_random_numbers else key_i
        val, grad = value_and_grad(theta, k)
        updates, state = opt.update(grad, state, theta)
        return (optax.apply_updates(theta, updates), state), -val

    (theta, _), trace = lax.scan(step, (theta0, opt.init(theta0)), jax.random.split(key, n_iter))
    return theta, trace
