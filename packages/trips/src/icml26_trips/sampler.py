"""The TriPS sampler: FlowDPS-style posterior sampling with per-step CFG, DC and noise schedules.

Flow matching (SD3 convention): ``z_sigma = (1 - sigma) x_0 + sigma x_1`` with ``x_1 ~ N(0, I)``,
velocity ``v = x_1 - x_0``, sampled from ``sigma = 1`` down to ``sigma = 0``. Step ``i`` of TriPS
(official ``SD3FlowDPS.sample_final``), with schedules ``lambda_i`` (CFG), ``beta_i`` (DC) and
``eta_i`` (stochasticity)::

    v       = v(z, sigma, None) + lambda_i (v(z, sigma, c) - v(z, sigma, None))     # CFG
    x0_hat  = z - sigma v ;   x1_hat = z + (1 - sigma) v                            # Tweedie
    x0_y    = x0_hat - s_i grad L(x0_hat), repeated ``inner_steps`` times           # DC
              L(x) = (1 - l) || A+(A D(x)) - A+(y) || + l || A D(x) - y ||,  l = (1 - sigma)^phi
              s_i  = beta_i (0.25 + 0.75 sigma^2) / inner_steps
    x1_y    = sqrt(1 - eta_i^2) x1_hat + eta_i eps,  eps ~ N(0, I)                  # re-noise
    z       = (1 - sigma_next) x0_y + sigma_next x1_y

``A+`` is the regularised pseudo-inverse with ``eta_reg = max(1e-4, sigma_y^2 * pinv_weight)``.
With ``lambda = 1, beta = 0, eta = 0`` the step is exactly Euler: ``z + (sigma_next - sigma) v``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .operators import LinearOperator
from .schedules import TriadicSchedule

VelocityFn = Callable[[torch.Tensor, torch.Tensor, Any], torch.Tensor]


def flow_sigmas(
    nfe: int, shift: float = 3.0, *, num_train_timesteps: int | None = 1000, dtype=torch.float64
) -> torch.Tensor:
    """``nfe + 1`` SD3 noise levels from 1 down to a final 0; shape ``(nfe + 1,)``.

    With ``f(t) = shift t / (1 + (shift - 1) t)`` and ``N = num_train_timesteps``, the grid of
    diffusers' ``FlowMatchEulerDiscreteScheduler(shift=shift).set_timesteps(nfe)`` (static shift)
    followed by 0::

        t_min = f(1 / N),   sigma_k = f(t_k),  t_k = linspace(1, t_min, nfe),   sigma_nfe = 0

    The official TriPS runs use the SD3.5-M scheduler as built, **shift 3** (their
    ``scheduler.config.shift = 4.0`` does not reach a built scheduler), at 28 NFE:
    ``1, 0.98738, ..., 0.0089286, 0``. ``num_train_timesteps=None`` gives the continuous grid
    ``f(linspace(1, 0, nfe + 1))`` instead.
    """
    if not isinstance(nfe, int) or isinstance(nfe, bool) or nfe < 1:
        raise ValueError(f"nfe must be an integer >= 1, got {nfe!r}")
    if not (shift > 0 and math.isfinite(shift)):
        raise ValueError(f"shift must be finite and > 0, got {shift}")
    f = lambda t: shift * t / (1 + (shift - 1) * t)
    if num_train_timesteps is None:
        return f(torch.linspace(1.0, 0.0, nfe + 1, dtype=dtype))
    if not isinstance(num_train_timesteps, int) or num_train_timesteps < 1:
        raise ValueError(
            f"num_train_timesteps must be an integer >= 1, got {num_train_timesteps!r}"
        )
    t_min = f(1.0 / num_train_timesteps)
    t = torch.linspace(1.0, t_min, nfe, dtype=dtype)
    return torch.cat([f(t), torch.zeros(1, dtype=dtype)])


class FlowDPSSampler:
    """Posterior sampler for ``y = A D(x_0) + n`` over any flow-matching velocity model.

    Args:
        velocity_fn: ``(z (B, ...), sigma (B,), cond) -> v (B, ...)``; ``cond=None`` asks for the
            unconditional velocity (the CFG "null" branch).
        operator: the measurement ``A`` (a ``LinearOperator``), or ``None`` for unconditioned
            sampling (then ``beta`` must be 0).
        decode: ``D`` mapping the sampled state to the operator's input (a VAE decoder for
            latent models); identity when ``None``. DC gradients flow through it.
        sigmas: the ``nfe + 1`` noise levels (decreasing, ``sigmas[0] <= 1``, ``sigmas[-1] = 0``);
            default ``flow_sigmas(nfe, shift)`` (the diffusers SD3 grid).
        shift: SD3 time shift used when ``sigmas`` is not given: 3, the SD3.5-M scheduler the
            official runs use (their code sets ``config.shift = 4``, which does not take effect).
        sigma_y: measurement noise level (official: 0.03).
        pinv_weight: ``eta_reg = max(1e-4, sigma_y^2 pinv_weight)`` (official 0.8; 0 for SR).
        phi: exponent of the mixing weight ``l = (1 - sigma)^phi`` (official 1).
        inner_steps: DC gradient steps per sampling step (the step is divided by it); official
            runs (``run_demo_TriPS_G_test.sh``): 6 for SR and deblurring, 12 for inpainting.
    """

    def __init__(
        self,
        velocity_fn: VelocityFn,
        operator: LinearOperator | None,
        *,
        decode: Callable[[torch.Tensor], torch.Tensor] | None = None,
        sigmas: torch.Tensor | None = None,
        shift: float = 3.0,
        sigma_y: float = 0.03,
        pinv_weight: float = 0.8,
        phi: float = 1.0,
        inner_steps: int = 6,
    ):
        if inner_steps < 1:
            raise ValueError(f"inner_steps must be >= 1, got {inner_steps}")
        if sigma_y < 0 or pinv_weight < 0 or phi < 0:
            raise ValueError("sigma_y, pinv_weight and phi must be non-negative")
        if sigmas is not None:
            sigmas = torch.as_tensor(sigmas)
            if sigmas.ndim != 1 or sigmas.numel() < 2:
                raise ValueError(
                    f"sigmas must be 1-D with nfe + 1 >= 2 entries, got {tuple(sigmas.shape)}"
                )
            if (
                not bool((sigmas[1:] < sigmas[:-1]).all())
                or float(sigmas[0]) > 1
                or float(sigmas[-1]) != 0
            ):
                raise ValueError("sigmas must decrease strictly from <= 1 to exactly 0")
        self.velocity_fn = velocity_fn
        self.operator = operator
        self.decode = decode
        self.sigmas = sigmas
        self.shift = shift
        self.sigma_y = sigma_y
        self.eta_reg = max(1e-4, sigma_y**2 * pinv_weight)
        self.phi = phi
        self.inner_steps = inner_steps

    # ------------------------------------------------------------------ pieces of one step

    def guided_velocity(
        self, z: torch.Tensor, sigma: torch.Tensor, cond: Any, lam: torch.Tensor
    ) -> torch.Tensor:
        """``v_null + lambda (v_cond - v_null)``; skips the null branch where every ``lambda = 1``."""
        v_c = self.velocity_fn(z, sigma, cond)
        if cond is None or bool((lam == 1).all()):
            return v_c
        v_u = self.velocity_fn(z, sigma, None)
        return v_u + lam * (v_c - v_u)

    def dc_loss(
        self, x0: torch.Tensor, y: torch.Tensor, sigma: float, y_pinv: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-sample ``(1 - l) ||A+ A D(x) - A+ y|| + l ||A D(x) - y||`` (norms not squared); ``(B,)``.

        ``y_pinv`` is ``A+ y`` when already computed (it is constant over a trajectory).
        """
        assert self.operator is not None
        ax = self.operator(self.decode(x0) if self.decode is not None else x0)
        dims = tuple(range(1, ax.ndim))
        mix = (1.0 - sigma) ** self.phi
        resid = torch.linalg.vector_norm(ax - y, dim=dims)
        if mix == 1.0:
            return resid
        a_pinv = self.operator.pinv
        if y_pinv is None:
            y_pinv = a_pinv(y, self.eta_reg)
        back = torch.linalg.vector_norm(a_pinv(ax, self.eta_reg) - y_pinv, dim=dims)
        return (1.0 - mix) * back + mix * resid

    def data_consistency(
        self,
        x0: torch.Tensor,
        y: torch.Tensor,
        sigma: float,
        beta: torch.Tensor,
        y_pinv: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``inner_steps`` gradient steps of length ``beta (0.25 + 0.75 sigma^2) / inner_steps``."""
        if self.operator is None or bool((beta == 0).all()):
            return x0
        step = beta * (0.25 + 0.75 * sigma**2) / self.inner_steps
        x = x0.detach()
        for _ in range(self.inner_steps):
            with torch.enable_grad():
                x = x.requires_grad_(True)
                loss = self.dc_loss(x, y, sigma, y_pinv).sum()
                (grad,) = torch.autograd.grad(loss, x)
            x = (x - step * grad).detach()
        return x

    # ------------------------------------------------------------------ the loop

    @torch.no_grad()
    def sample(
        self,
        y: torch.Tensor | None,
        schedule: TriadicSchedule,
        generator: torch.Generator | None = None,
        *,
        cond: Any = None,
        z_init: torch.Tensor | None = None,
        shape: tuple[int, ...] | None = None,
        trace: list[dict[str, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """Run the TriPS loop and return the final state ``x_0`` (not decoded).

        Args:
            y: measurements ``(B, *A.out_shape)``; ``None`` when ``operator`` is ``None``.
            schedule: ``TriadicSchedule`` with ``nfe`` steps, arrays ``(nfe,)`` or ``(nfe, B)``.
            generator: seeds the initial noise and the re-noising.
            cond: passed to ``velocity_fn`` (class labels, prompt embeddings...).
            z_init: initial noise ``(B, ...)``; drawn from ``N(0, I)`` when ``None``.
            shape: the state shape ``(B, ...)`` when ``z_init`` is ``None``; defaults to
                ``(B, *A.in_shape)`` (pixel space, no decoder).
            trace: if a list, one dict per step is appended: ``residual`` ``||A D(x0_hat) - y||``
                before DC, shape ``(B,)``, and ``x0_hat``.
        """
        nfe = schedule.nfe
        sigmas = self.sigmas if self.sigmas is not None else flow_sigmas(nfe, self.shift)
        if sigmas.numel() != nfe + 1:
            raise ValueError(
                f"schedule has nfe={nfe} steps but sigmas has {sigmas.numel()} entries (need nfe + 1)"
            )
        if self.operator is None:
            if y is not None:
                raise ValueError("y must be None when operator is None")
            if bool((schedule.dc != 0).any()):
                raise ValueError("schedule.dc must be 0 without an operator")
        elif y is None:
            raise ValueError("y is required when an operator is given")
        elif not bool(torch.isfinite(y).all()):
            raise ValueError("y has non-finite entries")
        elif tuple(y.shape[1:]) != tuple(self.operator.out_shape):
            raise ValueError(
                f"y must have shape (B, {', '.join(map(str, self.operator.out_shape))}) for this operator, "
                f"got {tuple(y.shape)}"
            )
        if z_init is None:
            if shape is None:
                if self.operator is None or self.decode is not None or y is None:
                    raise ValueError("give z_init or shape (the state shape cannot be inferred)")
                shape = (y.shape[0], *self.operator.in_shape)
            dtype = y.dtype if y is not None else torch.float32
            device = y.device if y is not None else None
            z = torch.randn(shape, generator=generator, dtype=dtype, device=device)
        else:
            z = z_init.clone()
        if y is not None and z.shape[0] != y.shape[0]:
            raise ValueError(f"batch sizes disagree: state has {z.shape[0]}, y has {y.shape[0]}")
        batch = z.shape[0]
        if bool((schedule.cfg < 1).any()):
            raise ValueError(
                "schedule.cfg (the CFG scale lambda) must be >= 1 (1 = conditional only; the "
                f"official range is [1, 8]), got min {float(schedule.cfg.min()):.4g}"
            )
        if schedule.cfg.ndim == 2 and schedule.cfg.shape[1] != batch:
            raise ValueError(
                f"per-sample schedule has B={schedule.cfg.shape[1]} but the batch is {batch}"
            )
        sig = sigmas.to(torch.float64).tolist()
        # A+ y is constant over the trajectory: computed once (conjugate gradients for blur)
        y_pinv = (
            self.operator.pinv(y, self.eta_reg)
            if self.operator is not None and y is not None
            else None
        )

        def per_sample(
            values: torch.Tensor, i: int
        ) -> torch.Tensor:  # (nfe,) or (nfe, B) -> broadcastable
            v = values[i].to(z)
            return v.reshape(-1, *([1] * (z.ndim - 1))) if v.ndim == 1 else v

        for i in range(nfe):
            sigma, sigma_next = sig[i], sig[i + 1]
            lam, beta, eta = (
                per_sample(schedule.cfg, i),
                per_sample(schedule.dc, i),
                per_sample(schedule.eta, i),
            )
            t = torch.full((batch,), sigma, dtype=z.dtype, device=z.device)
            v = self.guided_velocity(z, t, cond, lam)
            if not bool(torch.isfinite(v).all()):
                raise FloatingPointError(
                    f"velocity_fn returned non-finite values at step {i} (sigma = {sigma:.4g})"
                )
            x0_hat = z - sigma * v  # (B, ...)
            x1_hat = z + (1.0 - sigma) * v
            if trace is not None:
                entry = {"x0_hat": x0_hat.clone()}
                if self.operator is not None and y is not None:
                    ax = self.operator(self.decode(x0_hat) if self.decode is not None else x0_hat)
                    entry["residual"] = torch.linalg.vector_norm(
                        ax - y, dim=tuple(range(1, ax.ndim))
                    )
                trace.append(entry)
            x0_y = (
                self.data_consistency(x0_hat, y, sigma, beta, y_pinv) if y is not None else x0_hat
            )
            if bool((eta != 0).any()):
                eps = torch.randn(z.shape, generator=generator, dtype=z.dtype, device=z.device)
                x1_y = torch.sqrt(1.0 - eta**2) * x1_hat + eta * eps
            else:
                x1_y = x1_hat
            z = (1.0 - sigma_next) * x0_y + sigma_next * x1_y
        return z

    def sample_decoded(
        self, y: torch.Tensor | None, schedule: TriadicSchedule, generator=None, **kwargs
    ) -> torch.Tensor:
        """``D(sample(...))``: the reconstruction in the operator's domain."""
        z = self.sample(y, schedule, generator, **kwargs)
        return self.decode(z) if self.decode is not None else z
