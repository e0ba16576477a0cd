"""Torch port of diffusion resampling (needs the [torch] extra).

Same mathematics and the same noise layout as `resampling.diffusion_resample_from_noise`:
given the same (log_w, x, noise) both return the same particles (tested). Leading batch
dimensions are supported: log_w (..., N), x (..., N, d), noise (n_steps + 1, ..., N, d).
Only the empirical Gaussian reference is ported.
"""

from __future__ import annotations

import math

import torch

__all__ = ["DiffusionResampler", "diffusion_resample_torch"]

_INTEGRATORS = ("euler", "lord_and_rougemont", "lord_and_rougemont_exact", "jentzen_and_kloeden")


def diffusion_resample_torch(
    log_w: torch.Tensor,
    x: torch.Tensor,
    noise: torch.Tensor,
    *,
    a: float = -1.0,
    T: float = 2.0,
    n_steps: int = 8,
    ode: bool = True,
    integrator: str = "euler",
    jitter: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Diffusion resampling in torch; see the JAX module for the equations.

    Returns (log_w_out (..., N) = −log N, x_out (..., N, d)); differentiable by autograd.
    """
    if not a < 0:
        raise ValueError(f"a must be < 0 (a mean-reverting OU process); got {a}")
    if not T > 0:
        raise ValueError(f"T must be > 0; got {T}")
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int; got {n_steps!r}")
    if integrator not in _INTEGRATORS:
        raise ValueError(f"integrator must be one of {_INTEGRATORS}; got {integrator!r}")
    if x.dim() < 2 or log_w.shape != x.shape[:-1]:
        raise ValueError(
            f"x must be (..., N, d) and log_w (..., N); got x {tuple(x.shape)}, "
            f"log_w {tuple(log_w.shape)}"
        )
    if noise.shape != (n_steps + 1, *x.shape):
        raise ValueError(
            f"noise must have shape (n_steps + 1, *x.shape) = {(n_steps + 1, *x.shape)}; "
            f"got {tuple(noise.shape)}"
        )
    if torch.isnan(log_w).any() or torch.isposinf(log_w).any():
        raise ValueError("log_w contains NaN or +inf")
    if torch.isneginf(log_w).all(dim=-1).any():
        raise ValueError("log_w is -inf everywhere: every weight is zero, nothing to resample")
    n = x.shape[-2]
    lw = torch.log_softmax(log_w, dim=-1)  # (..., N)
    w = lw.exp()
    mean = torch.einsum("...n,...nd->...d", w, x).unsqueeze(-2)  # (..., 1, d)
    var = torch.einsum("...n,...nd->...d", w, (x - mean) ** 2).unsqueeze(-2) + jitter
    # zero-variance dimension: output is the point mass μ_d. As in the JAX core, a variance
    # below float resolution of the mean counts as zero (roundoff in Σ w_i X_i of a constant
    # coordinate leaves ~eps² variance, which would otherwise blow up the 1/s² logits).
    point_mass = var <= (8.0 * torch.finfo(var.dtype).eps * mean.abs()) ** 2
    var_safe = torch.where(point_mass, torch.ones_like(var), var)
    lam = -a
    c = 0.5 if ode else 1.0
    b = torch.where(point_mass, torch.zeros_like(var), torch.sqrt(2.0 * lam * var_safe))
    h = T / n_steps
    growth = math.exp(lam * h)

    y = mean + torch.where(point_mass, torch.zeros_like(var), var_safe.sqrt()) * noise[0]
    for k in range(n_steps):
        t = T - k * h
        decay = math.exp(a * t)
        one_minus = 1.0 - decay**2
        m = decay * x + (1.0 - decay) * mean  # (..., N, d)
        inv_s = torch.where(
            point_mass, torch.zeros_like(var), 1.0 / torch.sqrt(var_safe * one_minus)
        )
        ys, ms = y * inv_s, m * inv_s
        logits = lw.unsqueeze(-2) + ys @ ms.transpose(-1, -2) - 0.5 * (ms**2).sum(-1).unsqueeze(-2)
        alpha = torch.softmax(logits, dim=-1)  # (..., N, N)
        f = c * 2.0 * lam * (alpha @ m - y) / one_minus
        xi = noise[k + 1]
        sde = 0.0 if ode else 1.0
        if integrator == "euler":
            y = y + h * (lam * (y - mean) + f) + sde * b * math.sqrt(h) * xi
        elif integrator == "lord_and_rougemont":  # diffres's scheme
            y = growth * (y + h * (f - lam * mean) + sde * b * math.sqrt(h) * xi)
        elif integrator == "lord_and_rougemont_exact":
            y = mean + growth * ((y - mean) + h * f + sde * b * math.sqrt(h) * xi)
        else:
            y = (
                mean
                + growth * (y - mean)
                + (growth - 1.0) / lam * f
                + sde * b * math.sqrt((growth**2 - 1.0) / (2.0 * lam)) * xi
            )
    y = torch.where(point_mass, mean.expand_as(y), y)
    return torch.full_like(log_w, -math.log(n)), y


class DiffusionResampler(torch.nn.Module):
    """`forward(log_w, x, noise=None, generator=None) -> (log_w, x)`, as a torch module.

    Args mirror `icml26_diffusion_resampling.diffusion_resample` (empirical reference).
    """

    def __init__(
        self,
        *,
        a: float = -1.0,
        T: float = 2.0,
        n_steps: int = 8,
        ode: bool = True,
        integrator: str = "euler",
        jitter: float = 0.0,
    ) -> None:
        super().__init__()
        self.a, self.T, self.n_steps = a, T, n_steps
        self.ode, self.integrator, self.jitter = ode, integrator, jitter

    def forward(
        self,
        log_w: torch.Tensor,
        x: torch.Tensor,
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if noise is None:
            noise = torch.randn(
                (self.n_steps + 1, *x.shape), generator=generator, dtype=x.dtype, device=x.device
            )
        return diffusion_resample_torch(
            log_w,
            x,
            noise,
            a=self.a,
            T=self.T,
            n_steps=self.n_steps,
            ode=self.ode,
            integrator=self.integrator,
            jitter=self.jitter,
        )

    def extra_repr(self) -> str:
        return (
            f"a={self.a}, T={self.T}, n_steps={self.n_steps}, ode={self.ode}, "
            f"integrator={self.integrator!r}"
        )
