"""Conditional generator of reference distributions (RC-FCL, "retrospective" part).

RC-FCL keeps a conditional generative model G(z, y) that synthesises class-conditional
reference distributions R_y of the concepts learned so far; clients test their current data
against R_y (drift.py) and replay it against forgetting.

[recon] The paper's generator is not public. We use a conditional VAE (Sohn et al., 2015):
    encoder q(z | x, y) = N(mu(x, y), diag(exp(logvar(x, y))))
    decoder p(x | z, y) = N(dec(z, y), I)          (squared error reconstruction)
    ELBO    = E_q[log p(x | z, y)] - KL(q(z | x, y) || N(0, I))
A CVAE rather than a cGAN: it trains stably in a few local epochs on tens of samples per
client, and its weights average well under FedAvg (a GAN's do not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class CVAEConfig:
    x_dim: int = 64  # digits: 8x8 pixels, scaled to [0, 1]
    n_classes: int = 10
    hidden: int = 64  # one hidden layer each side: the data are 64-dimensional
    z_dim: int = 8  # small latent: tens of samples per class per client
    beta_kl: float = 1.0  # plain ELBO


class ConditionalVAE(nn.Module):
    """CVAE with ``fit(x, y)`` and ``sample(y, n)``; parameters average under FedAvg."""

    def __init__(self, config: CVAEConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or CVAEConfig()
        self.enc = nn.Sequential(nn.Linear(c.x_dim + c.n_classes, c.hidden), nn.ReLU())
        self.mu = nn.Linear(c.hidden, c.z_dim)
        self.logvar = nn.Linear(c.hidden, c.z_dim)
        self.dec = nn.Sequential(
            nn.Linear(c.z_dim + c.n_classes, c.hidden),
            nn.ReLU(),
            nn.Linear(c.hidden, c.x_dim),
        )

    def _onehot(self, y: torch.Tensor) -> torch.Tensor:
        return F.one_hot(y.long(), self.config.n_classes).to(torch.float32)

    def _check_labels(self, y: torch.Tensor, name: str) -> None:
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= self.config.n_classes):
            raise ValueError(
                f"{name}: labels must lie in [0, {self.config.n_classes}); "
                f"got range [{int(y.min())}, {int(y.max())}]"
            )

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Negative ELBO per sample, averaged. x: (B, x_dim), y: (B,)."""
        yo = self._onehot(y)  # (B, C)
        h = self.enc(torch.cat([x, yo], dim=1))  # (B, H)
        mu, logvar = self.mu(h), self.logvar(h).clamp(-8.0, 8.0)  # (B, Z)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        xr = self.dec(torch.cat([z, yo], dim=1))  # (B, x_dim)
        rec = 0.5 * ((xr - x) ** 2).sum(dim=1)
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(dim=1)
        return (rec + self.config.beta_kl * kl).mean()

    def fit(
        self,
        x: np.ndarray | torch.Tensor,
        y: np.ndarray | torch.Tensor,
        *,
        epochs: int = 50,
        lr: float = 1e-2,
        batch_size: int = 64,
        seed: int = 0,
    ) -> ConditionalVAE:
        """Maximise the ELBO on (x, y) with Adam; deterministic given ``seed``."""
        xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
        if xt.ndim != 2 or xt.shape[1] != self.config.x_dim:
            raise ValueError(f"x: expected shape (n, {self.config.x_dim}); got {tuple(xt.shape)}")
        if yt.shape != (xt.shape[0],):
            raise ValueError(f"y: expected shape ({xt.shape[0]},); got {tuple(yt.shape)}")
        if not torch.isfinite(xt).all():
            raise ValueError("x: contains NaN or inf")
        self._check_labels(yt, "y")
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        params: list[torch.Tensor] = list(self.parameters())
        # Adam (Kingma & Ba), written out: torch.optim's first use imports torch._dynamo
        # (seconds per process, and per Flower actor)
        m1 = [torch.zeros_like(p) for p in params]
        m2 = [torch.zeros_like(p) for p in params]
        b1, b2, eps, step = 0.9, 0.999, 1e-8, 0
        n = xt.shape[0]
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for i in range(0, n, batch_size):
                idx = perm[i : i + batch_size]
                grads = torch.autograd.grad(self.loss(xt[idx], yt[idx]), params)
                step += 1
                with torch.no_grad():  # multi-tensor ops: one call per step, not per tensor
                    torch._foreach_mul_(m1, b1)
                    torch._foreach_add_(m1, grads, alpha=1 - b1)
                    torch._foreach_mul_(m2, b2)
                    torch._foreach_addcmul_(m2, grads, grads, value=1 - b2)
                    denom = torch._foreach_sqrt(m2)
                    torch._foreach_div_(denom, math.sqrt(1 - b2**step))
                    torch._foreach_add_(denom, eps)
                    torch._foreach_addcdiv_(params, m1, denom, value=-lr / (1 - b1**step))
        return self

    @torch.no_grad()
    def sample(
        self,
        y: int | np.ndarray | torch.Tensor,
        n: int | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Draw x ~ p(x | z, y), z ~ N(0, I): ``sample(3, 100)`` or ``sample(labels)``.

        Returns the decoder mean for each z (the usual CVAE sample), shape (n, x_dim).
        """
        if isinstance(y, int | np.integer):
            if n is None or n < 0:
                raise ValueError(f"n: a non-negative sample count is needed with an int y; got {n}")
            yt = torch.full((n,), int(y), dtype=torch.long)
        else:
            yt = torch.as_tensor(np.asarray(y), dtype=torch.long).reshape(-1)
        self._check_labels(yt, "y")
        z = torch.randn(yt.shape[0], self.config.z_dim, generator=generator)  # (n, Z)
        return self.dec(torch.cat([z, self._onehot(yt)], dim=1))
