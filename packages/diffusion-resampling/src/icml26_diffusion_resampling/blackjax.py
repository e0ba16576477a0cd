"""blackjax SMC integration (needs the [blackjax] extra).

blackjax's SMC kernels resample by *indices*: `resample_fn(key, weights, num_resampled) -> idx`
and then gather `particles[idx]`. Diffusion resampling (and Gumbel / OT) produce *new points*
that have no ancestor index, so no `resample_fn` can carry them: the index contract makes a
drop-in `resample_fn` impossible. blackjax's real extension point one level up is
`update_particles_fn` of `blackjax.tempered_smc` / `blackjax.adaptive_tempered_smc` (its
`tempered.build_kernel`), which replaces `smc_from_mcmc.build_kernel`. This module provides:

* `blackjax_step`: `blackjax.smc.base.step` (with `num_resampled`, so waste-free SMC works)
  where the index resampler is replaced by a particle resampler `(key, log_w, x) -> (log_w, x)`
  from this package; particle pytrees are resampled as pytrees (ravelled per particle);
* `update_particles_fn(mcmc_step_fn, mcmc_init_fn, resampler, update_strategy)`: the same as
  blackjax's `smc_from_mcmc.build_kernel` with `blackjax_step` inside; pass it as
  `update_particles_fn=` to `blackjax.tempered_smc` / `blackjax.adaptive_tempered_smc`
  (their `resampling_fn` argument is then unused);
* `index_resampler`: the other way round, a blackjax index resampler (systematic, ...) in the
  particle signature, so blackjax's schemes plug into `particle_filter`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from .resampling import _positive_int

__all__ = ["blackjax_step", "index_resampler", "update_particles_fn"]

Array = jax.Array
ParticleResampler = Callable[..., tuple[Array, object]]


def index_resampler(
    resample_fn: Callable[[Array, Array, int], Array],
) -> Callable[[Array, Array, Array], tuple[Array, Array]]:
    """Wrap a blackjax index resampler `(key, weights, n) -> idx` as `(key, log_w, x) -> (log_w, x)`."""

    def resample(key, log_w, x, num_resampled=None):
        if log_w.ndim != 1 or log_w.shape[0] < 1:
            raise ValueError(f"log_w must have shape (N,) with N >= 1; got {log_w.shape}")
        n = (
            log_w.shape[0]
            if num_resampled is None
            else _positive_int("num_resampled", num_resampled)
        )
        idx = resample_fn(key, jnp.exp(jax.nn.log_softmax(log_w)), n)
        return jnp.full((n,), -jnp.log(n), dtype=log_w.dtype), jax.tree.map(lambda v: v[idx], x)

    return resample


def blackjax_step(
    rng_key: Array,
    state,
    update_fn: Callable,
    weight_fn: Callable,
    resampler: ParticleResampler,
    num_resampled: int | None = None,
):
    """One SMC step like `blackjax.smc.base.step`, resampling with a particle resampler.

    Args:
        state: `blackjax.smc.base.SMCState` (particles: pytree with leading axis N).
        update_fn, weight_fn: as in blackjax (batched by the caller).
        resampler: `(key, log_w, x) -> (log_w, x)`, e.g. `diffusion_resample` or a
            `functools.partial` of a baseline; called with `num_resampled=M` when M != N
            (`diffusion_resample` and `index_resampler` accept it).
        num_resampled: M particles to resample (waste-free SMC: the update returns N).

    Returns:
        (SMCState, SMCInfo). `SMCInfo.ancestors` is -1 everywhere (new points have no
        ancestor index). With W̃ (M,) the resampler's normalised output weights and
        G = weight_fn(updated particles)::

            M = N:   log_likelihood_increment = log Σ_j W̃_j G_j,   weights ∝ W̃_j G_j

        (W̃ = 1/N for diffusion and the index resamplers: blackjax's log mean G). A resampler
        with non-uniform output weights (soft resampling, or none at all) carries them into
        both. For M != N (waste-free) the update's N particles are weighted uniformly as in
        blackjax, which is correct only for a resampler with uniform output weights.
    """
    from blackjax.smc.base import SMCInfo, SMCState

    updating_key, resampling_key = jax.random.split(rng_key, 2)
    n = state.weights.shape[0]
    m = n if num_resampled is None else _positive_int("num_resampled", num_resampled)
    log_w = jnp.log(state.weights)
    if m == n:
        res_lw, particles = resampler(resampling_key, log_w, state.particles)
    else:
        res_lw, particles = resampler(
            resampling_key, log_w, state.particles, num_resampled=num_resampled
        )

    keys = jax.random.split(updating_key, m)
    particles, update_info = update_fn(keys, particles, state.update_parameters)

    log_g = weight_fn(particles)
    n_out = log_g.shape[0]
    if n_out == m:
        unnorm = jax.nn.log_softmax(res_lw) + log_g
    else:
        unnorm = log_g - jnp.log(n_out)
    log_z = jax.scipy.special.logsumexp(unnorm)
    weights = jnp.exp(unnorm - log_z)
    ancestors = jnp.full((m,), -1, dtype=jnp.int32)
    return SMCState(particles, weights, state.update_parameters), SMCInfo(
        ancestors, log_z, update_info
    )


def update_particles_fn(
    mcmc_step_fn: Callable,
    mcmc_init_fn: Callable,
    resampler: ParticleResampler,
    update_strategy: Callable | None = None,
) -> Callable:
    """blackjax's `smc_from_mcmc.build_kernel` with a particle resampler.

    Pass the result as `update_particles_fn=` to `blackjax.tempered_smc` or
    `blackjax.adaptive_tempered_smc`; `update_strategy` defaults to blackjax's
    `update_and_take_last` (use `blackjax.smc.waste_free.waste_free_smc(n, p)` for waste-free).
    """
    from blackjax.smc.base import SMCState, update_and_take_last
    from blackjax.smc.from_mcmc import unshared_parameters_and_step_fn

    strategy = update_and_take_last if update_strategy is None else update_strategy

    def step(rng_key, state, num_mcmc_steps, mcmc_parameters, logposterior_fn, log_weights_fn):
        unshared, shared_step_fn = unshared_parameters_and_step_fn(mcmc_parameters, mcmc_step_fn)
        update_fn, num_resampled = strategy(
            mcmc_init_fn,
            logposterior_fn,
            shared_step_fn,
            n_particles=state.weights.shape[0],
            num_mcmc_steps=num_mcmc_steps,
        )
        return blackjax_step(
            rng_key,
            SMCState(state.particles, state.weights, unshared),
            update_fn,
            jax.vmap(log_weights_fn),
            resampler,
            num_resampled,
        )

    return step
