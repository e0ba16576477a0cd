"""blackjax SMC adapter (needs the [blackjax] extra).

blackjax's SMC step resamples by *indices* (`resample_fn(key, weights, n) -> idx`); diffusion
resampling (and Gumbel / OT) produce *new points*, not ancestors. `blackjax_step` is
`blackjax.smc.base.step` with the index resampler replaced by a particle resampler
`(key, log_w, x) -> (log_w, x)` from this package; particle pytrees are flattened per particle.
`index_resampler` goes the other way: it wraps a blackjax index resampler (systematic, ...) into
the particle signature, so blackjax's schemes plug into `particle_filter` too.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

__all__ = ["blackjax_step", "index_resampler"]

Array = jax.Array


def index_resampler(
    resample_fn: Callable[[Array, Array, int], Array],
) -> Callable[[Array, Array, Array], tuple[Array, Array]]:
    """Wrap a blackjax index resampler `(key, weights, n) -> idx` as `(key, log_w, x) -> (log_w, x)`."""

    def resample(key, log_w, x):
        n = x.shape[0]
        idx = resample_fn(key, jnp.exp(jax.nn.log_softmax(log_w)), n)
        return jnp.full((n,), -jnp.log(n), dtype=x.dtype), x[idx]

    return resample


def blackjax_step(
    rng_key: Array,
    state,
    update_fn: Callable,
    weight_fn: Callable,
    resampler: Callable[[Array, Array, Array], tuple[Array, Array]],
):
    """One SMC step like `blackjax.smc.base.step`, resampling with a particle resampler.

    Args:
        state: `blackjax.smc.base.SMCState` (particles: pytree with leading axis N).
        update_fn, weight_fn: as in blackjax (batched by the caller).
        resampler: e.g. `diffusion_resample` or a `functools.partial` of a baseline.

    Returns:
        (SMCState, SMCInfo). `SMCInfo.ancestors` is -1 everywhere (new points have no
        ancestor); `log_likelihood_increment` is log Σ_i W̃_i G_i, with W̃ the resampler's
        output weights (uniform for diffusion, so this equals blackjax's log mean G).
    """
    from blackjax.smc.base import SMCInfo, SMCState

    updating_key, resampling_key = jax.random.split(rng_key, 2)
    n = state.weights.shape[0]
    first = jax.tree.map(lambda leaf: leaf[0], state.particles)
    _, unravel = ravel_pytree(first)
    flat = jax.vmap(lambda p: ravel_pytree(p)[0])(state.particles)  # (N, D)
    log_w = jnp.log(state.weights)
    res_lw, res_flat = resampler(resampling_key, log_w, flat)
    res_lw = jax.nn.log_softmax(res_lw)
    particles = jax.vmap(unravel)(res_flat)

    keys = jax.random.split(updating_key, n)
    particles, update_info = update_fn(keys, particles, state.update_parameters)

    unnorm = res_lw + weight_fn(particles)
    log_z = jax.scipy.special.logsumexp(unnorm)
    weights = jnp.exp(unnorm - log_z)
    ancestors = jnp.full((n,), -1, dtype=jnp.int32)
    return SMCState(particles, weights, state.update_parameters), SMCInfo(
        ancestors, log_z, update_info
    )
