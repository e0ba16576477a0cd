"""The torch port equals the JAX implementation (same noise), with batching and autograd."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from icml26_diffusion_resampling import INTEGRATORS, diffusion_resample_from_noise  # noqa: E402
from icml26_diffusion_resampling.torch import (  # noqa: E402
    DiffusionResampler,
    diffusion_resample_torch,
)

N, D, STEPS = 16, 2, 6


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D)).astype(np.float32)
    log_w = rng.normal(size=N).astype(np.float32)
    noise = rng.normal(size=(STEPS + 1, N, D)).astype(np.float32)
    return log_w, x, noise


@pytest.mark.parametrize("ode", [True, False])
@pytest.mark.parametrize("integrator", [i for i in INTEGRATORS if i != "tweedie"])
def test_torch_equals_jax(ode, integrator):
    log_w, x, noise = _inputs()
    kw = dict(a=-0.8, T=1.7, n_steps=STEPS, ode=ode, integrator=integrator)
    _, y_j = diffusion_resample_from_noise(log_w, x, noise, **kw)
    lw_t, y_t = diffusion_resample_torch(
        torch.from_numpy(log_w), torch.from_numpy(x), torch.from_numpy(noise), **kw
    )
    np.testing.assert_allclose(y_t.numpy(), np.asarray(y_j), atol=2e-5)
    np.testing.assert_allclose(lw_t.numpy(), np.full(N, -np.log(N)), atol=1e-6)


def test_torch_gradient_equals_jax_gradient():
    log_w, x, noise = _inputs(1)
    proj = np.linspace(-1, 1, N * D).reshape(N, D).astype(np.float32)
    loss_j = lambda lw, xx: jnp.sum(
        diffusion_resample_from_noise(lw, xx, noise, n_steps=STEPS)[1] * proj
    )
    g_lw, g_x = jax.grad(loss_j, argnums=(0, 1))(log_w, x)
    lw_t = torch.from_numpy(log_w).requires_grad_()
    x_t = torch.from_numpy(x).requires_grad_()
    loss_t = (
        DiffusionResampler(n_steps=STEPS)(lw_t, x_t, noise=torch.from_numpy(noise))[1]
        * torch.from_numpy(proj)
    ).sum()
    loss_t.backward()
    np.testing.assert_allclose(lw_t.grad.numpy(), np.asarray(g_lw), atol=1e-4)
    np.testing.assert_allclose(x_t.grad.numpy(), np.asarray(g_x), atol=1e-4)


def test_torch_batch_equals_per_item_and_handles_degenerate_cases():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, N, D, generator=gen)
    x[1, :, 1] = 4.0  # zero-variance dimension in item 1
    log_w = torch.randn(3, N, generator=gen)
    log_w[2] = -torch.inf
    log_w[2, 5] = 0.0  # item 2: one particle carries all the weight
    noise = torch.randn(9, 3, N, D, generator=gen)
    _, y = DiffusionResampler()(log_w, x, noise=noise)
    for b in range(3):
        _, yb = DiffusionResampler()(log_w[b], x[b], noise=noise[:, b])
        torch.testing.assert_close(y[b], yb)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y[1, :, 1], torch.full((N,), 4.0))
    torch.testing.assert_close(y[2], x[2, 5].expand(N, D))


def test_torch_bad_inputs_raise():
    x = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="a must be < 0"):
        DiffusionResampler(a=1.0)(torch.zeros(4), x)
    with pytest.raises(ValueError, match="log_w"):
        DiffusionResampler()(torch.zeros(3), x)
    with pytest.raises(ValueError, match="every weight is zero"):
        DiffusionResampler()(torch.full((4,), -torch.inf), x)
    with pytest.raises(ValueError, match="integrator"):
        DiffusionResampler(integrator="rk4")(torch.zeros(4), x)


def test_torch_constant_coordinate_with_roundoff_variance_equals_jax():
    """A constant coordinate whose weighted variance is ~eps² from roundoff, not exactly 0, must
    still be the point mass in both ports (else the 1/s² logits swamp the other coordinate)."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(N, D)).astype(np.float32)
    x[:, 1] = 2.57
    log_w = (3.0 * rng.normal(size=N)).astype(np.float32)
    noise = rng.normal(size=(9, N, D)).astype(np.float32)
    _, y_j = diffusion_resample_from_noise(log_w, x, noise)
    x_t = torch.from_numpy(x).requires_grad_()
    _, y_t = diffusion_resample_torch(torch.from_numpy(log_w), x_t, torch.from_numpy(noise))
    np.testing.assert_allclose(y_t.detach().numpy(), np.asarray(y_j), atol=2e-5)
    assert float(y_t[:, 1].detach().max() - y_t[:, 1].detach().min()) == 0.0
    y_t.sum().backward()
    assert float(x_t.grad.abs().max()) < 10 * N  # no roundoff-driven blow-up (was ~1e14)
