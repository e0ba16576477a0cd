"""Gumbel-Softmax growth mask over upcycling candidates, with temperature schedules.

Each candidate i (an expert slot of an MoE layer) has logits α_i over the two choices
{keep, grow} (notes §1.2, reconstruction). A sample is (Jang et al. 2017; Maddison et al. 2017)

    y_i = softmax((α_i + g_i) / τ),   g_i ~ Gumbel(0, 1) i.i.d.                   (soft)
    m_i = one_hot(argmax_c (α_ic + g_ic)) + (y_i - stop_grad(y_i))               (hard, straight-through)

so the forward value of a hard sample is exactly one-hot (the bracket is exactly 0; the
usual ``y_hard - y.detach() + y`` of ``F.gumbel_softmax`` rounds to 1 - 2⁻²⁴), argmax frequencies equal softmax(α)
(the Gumbel-max trick), and gradients flow through the soft relaxation. The returned grow
indicator is ``m[:, 1]``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["GumbelMask", "constant_tau", "cosine_tau", "exponential_tau", "linear_tau"]


def _check_tau(tau0: float, tau1: float, steps: int) -> None:
    if not (tau0 > 0 and tau1 > 0):
        raise ValueError(f"temperatures must be > 0; got tau0={tau0}, tau1={tau1}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int; got {steps!r}")


def constant_tau(tau: float):
    """τ(t) = τ."""
    _check_tau(tau, tau, 1)
    return lambda step: float(tau)


def linear_tau(tau0: float, tau1: float, steps: int):
    """τ(t) = τ0 + (τ1 - τ0)·min(t/steps, 1)."""
    _check_tau(tau0, tau1, steps)
    return lambda step: tau0 + (tau1 - tau0) * min(max(step, 0) / steps, 1.0)


def exponential_tau(tau0: float, tau1: float, steps: int):
    """τ(t) = τ0·(τ1/τ0)^min(t/steps, 1), the annealing of Jang et al. (2017)."""
    _check_tau(tau0, tau1, steps)
    return lambda step: tau0 * (tau1 / tau0) ** min(max(step, 0) / steps, 1.0)


def cosine_tau(tau0: float, tau1: float, steps: int):
    """τ(t) = τ1 + (τ0 - τ1)·(1 + cos(π·min(t/steps, 1)))/2."""
    _check_tau(tau0, tau1, steps)
    return lambda step: (
        tau1 + (tau0 - tau1) * (1 + math.cos(math.pi * min(max(step, 0) / steps, 1.0))) / 2
    )


class GumbelMask(nn.Module):
    """Learnable {keep, grow} logits for ``n`` candidates; samples straight-through masks.

    Args:
        n: number of candidates.
        tau: initial temperature, or a schedule ``step -> τ`` (see :func:`exponential_tau`).
        hard: straight-through one-hot samples (True) or the soft relaxation (False).
        init_grow_logit: initial α_grow - α_keep (0: p(grow) = 1/2).
    """

    def __init__(self, n: int, tau=1.0, *, hard: bool = True, init_grow_logit: float = 0.0) -> None:
        super().__init__()
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be a positive int (number of candidates); got {n!r}")
        self.schedule = tau if callable(tau) else constant_tau(float(tau))
        self.hard = hard
        self.step = 0
        logits = torch.zeros(n, 2)
        logits[:, 1] = init_grow_logit
        self.logits = nn.Parameter(logits)  # α: (n, 2) = [keep, grow]

    @property
    def tau(self) -> float:
        return float(self.schedule(self.step))

    def probs(self) -> torch.Tensor:
        """p(grow) = softmax(α)[:, 1], (n,)."""
        return torch.softmax(self.logits, -1)[:, 1]

    def sample_noise(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Gumbel(0, 1) noise of the logits' shape: g = -log(-log U)."""
        u = torch.rand(self.logits.shape, generator=generator, dtype=self.logits.dtype)
        u = u.to(self.logits.device).clamp(torch.finfo(u.dtype).tiny, 1.0)
        return -torch.log(-torch.log(u))

    def forward(
        self, noise: torch.Tensor | None = None, *, hard: bool | None = None
    ) -> torch.Tensor:
        """A (n,) grow indicator in [0, 1] (exactly {0, 1} when hard); fixed ``noise`` reuses a draw."""
        g = self.sample_noise() if noise is None else noise
        if g.shape != self.logits.shape:
            raise ValueError(
                f"noise must have shape {tuple(self.logits.shape)}; got {tuple(g.shape)}"
            )
        y = torch.softmax((self.logits + g) / self.tau, -1)  # (n, 2)
        if self.hard if hard is None else hard:
            one_hot = torch.zeros_like(y).scatter_(-1, y.argmax(-1, keepdim=True), 1.0)
            y = one_hot + (y - y.detach())  # (y - y) is exactly 0: the value is exactly one-hot
        return y[:, 1]

    def decide(self, threshold: float = 0.5) -> torch.Tensor:
        """The discrete architecture at the end of the search: grow where p(grow) > threshold."""
        return self.probs().detach() > threshold

    def advance(self) -> None:
        """One step of the temperature schedule."""
        self.step += 1
