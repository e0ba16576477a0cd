"""An exact flow-matching velocity and closed-form posterior for Gaussian-mixture priors.

Prior: ``x_0 ~ sum_k w_k N(mu_k, diag(s_k^2))``, each component carrying a class label; the
class-``c`` prior is the mixture restricted to components labelled ``c``. Under
``z = (1 - sigma) x_0 + sigma x_1`` each component's marginal is
``N(a mu_k, diag(a^2 s_k^2 + sigma^2))`` with ``a = 1 - sigma``, so

    E[x_0 | z] = sum_k r_k(z) [mu_k + a s_k^2 / (a^2 s_k^2 + sigma^2) (z - a mu_k)],
    v(z, sigma) = (z - E[x_0 | z]) / sigma                       (exact, hence CFG is exact)

with responsibilities ``r_k`` of the marginal mixture. For ``y = A x_0 + sigma_y n`` the
posterior is again a mixture: ``C_k = (S_k^{-1} + A^T A / sigma_y^2)^{-1}``,
``m_k = C_k (S_k^{-1} mu_k + A^T y / sigma_y^2)``, weights ``∝ w_k N(y; A mu_k, A S_k A^T +
sigma_y^2 I)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def categorical(
    probs: torch.Tensor, n: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``n`` i.i.d. indices drawn with probabilities ``probs`` ``(K,)`` (need not sum to 1); ``(n,)``.

    What ``torch.multinomial(probs, n, replacement=True, generator=generator)`` does in the
    locked torch (2.15), written with ``torch.rand`` only, so that a seeded run is the same on
    every supported torch. ``multinomial`` draws a single sample (``n = 1``) by the exponential
    race ``argmax_k p_k / q_k``, ``q_k ~ Exp(1)`` from ``Tensor.exponential_``, and CPU
    ``exponential_`` changed between torch 2.6 and 2.15: up to 2.6 it seeded MKL's sampler with
    one number from the generator; later releases take one uniform per category. The category
    drawn is equally valid, but the generator is left at another state, so every later draw
    (the noise, the measurement, the sampler's initial state) differed, and the README toy
    printed 1.55 instead of 0.29 at the torch floor. Here ``n = 1`` is the same race on
    ``q_k = -log(1 - u_k)``, ``u = torch.rand(K, float64)`` (the later ``exponential_``); ``n > 1``
    is the inverse CDF of ``torch.rand(n, float64)`` (``multinomial``'s with-replacement kernel,
    unchanged across these releases). A zero-probability index is never drawn.
    """
    if probs.ndim != 1 or probs.numel() == 0:
        raise ValueError(f"probs must be 1-D and non-empty, got shape {tuple(probs.shape)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    p = probs.to(torch.float64)
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()) or not float(p.sum()) > 0:
        raise ValueError("probs must be finite and non-negative with a positive sum")
    if n == 1:
        u = torch.rand(p.shape, generator=generator, dtype=torch.float64, device=p.device)
        q = -torch.log1p(-u)  # Exp(1)
        race = torch.where(p > 0, p / q, torch.full_like(p, -math.inf))
        return race.argmax().reshape(1)
    cdf = torch.cumsum(p, 0)
    cdf = cdf / cdf[-1]
    u = torch.rand(n, generator=generator, dtype=torch.float64, device=p.device)
    return torch.searchsorted(cdf, u, right=True).clamp_max(p.numel() - 1)


@dataclass
class MixturePosterior:
    """A Gaussian mixture with full covariances: weights ``(K,)``, means ``(K, d)``, covs ``(K, d, d)``."""

    weights: torch.Tensor
    means: torch.Tensor
    covs: torch.Tensor

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` draws, shape ``(n, d)``."""
        comp = categorical(self.weights, n, generator)  # (n,)
        chol = torch.linalg.cholesky(self.covs)  # (K, d, d)
        eps = torch.randn(n, self.means.shape[1], generator=generator, dtype=self.means.dtype)
        return self.means[comp] + torch.einsum("nij,nj->ni", chol[comp], eps)


class GaussianMixturePrior:
    """Class-conditional diagonal Gaussian mixture with an exact flow-matching velocity.

    Args:
        means: ``(K, d)``; stds: ``(K,)`` or ``(K, d)`` positive; weights: ``(K,)`` positive;
        labels: ``(K,)`` integer class of each component.
        class_leak: ``0`` (default) gives the exact class-conditional velocity; ``rho > 0``
            keeps the other classes' components at weight ``rho w_k`` in the conditional
            branch: a model whose class conditioning is too weak, which CFG (``lambda > 1``)
            compensates. The unconditional branch is always exact.
    """

    def __init__(
        self,
        means: torch.Tensor,
        stds: torch.Tensor,
        weights: torch.Tensor,
        labels: torch.Tensor,
        *,
        class_leak: float = 0.0,
    ):
        if means.ndim != 2:
            raise ValueError(f"means must be (K, d), got {tuple(means.shape)}")
        k, d = means.shape
        stds = stds[:, None].expand(k, d) if stds.ndim == 1 else stds
        if stds.shape != (k, d) or bool((stds <= 0).any()):
            raise ValueError("stds must be positive with shape (K,) or (K, d)")
        if weights.shape != (k,) or bool((weights <= 0).any()):
            raise ValueError("weights must be positive with shape (K,)")
        if labels.shape != (k,):
            raise ValueError("labels must have shape (K,)")
        self.means = means
        self.var = stds**2  # (K, d)
        self.log_w = torch.log(weights / weights.sum())
        self.labels = labels.long()
        if not 0.0 <= class_leak <= 1.0:
            raise ValueError(f"class_leak must lie in [0, 1], got {class_leak}")
        self.class_leak = class_leak

    @property
    def dim(self) -> int:
        return int(self.means.shape[1])

    def _log_weights(
        self, cond: torch.Tensor | None, batch: int, leak: float = 0.0
    ) -> torch.Tensor:
        logw = self.log_w.expand(batch, -1)  # (B, K)
        if cond is None:
            return logw
        cond = torch.as_tensor(cond).long().reshape(-1).expand(batch)
        mask = self.labels[None, :] == cond[:, None]
        if not bool(mask.any(1).all()):
            raise ValueError("cond names a class with no component")
        return (
            logw.masked_fill(~mask, -math.inf)
            if leak == 0
            else torch.where(mask, logw, logw + math.log(leak))
        )

    def denoise(
        self, z: torch.Tensor, sigma: torch.Tensor, cond: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``E[x_0 | z_sigma]`` under the (class-``cond``) prior; z ``(B, d)``, sigma ``(B,)`` or scalar."""
        sigma = torch.as_tensor(sigma, dtype=z.dtype).reshape(-1, 1, 1).expand(z.shape[0], 1, 1)
        a = 1.0 - sigma  # (B, 1, 1)
        mu, var = self.means.to(z), self.var.to(z)  # (K, d)
        marg_var = a**2 * var + sigma**2  # (B, K, d)
        diff = z[:, None, :] - a * mu  # (B, K, d)
        log_lik = -0.5 * ((diff**2 / marg_var) + torch.log(2 * math.pi * marg_var)).sum(
            -1
        )  # (B, K)
        logw = self._log_weights(cond, z.shape[0], self.class_leak).to(z)
        resp = torch.softmax(logw + log_lik, dim=1)  # (B, K)  # (B, K)
        comp_mean = mu + a * var / marg_var * diff  # (B, K, d)
        return torch.einsum("bk,bkd->bd", resp, comp_mean)

    def velocity(
        self, z: torch.Tensor, sigma: torch.Tensor, cond: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Exact ``v = (z - E[x_0 | z]) / sigma``; ``sigma`` must be > 0."""
        s = torch.as_tensor(sigma, dtype=z.dtype)
        if bool((s <= 0).any()):
            raise ValueError(
                "sigma must be > 0 for the velocity (the sampler never evaluates sigma = 0)"
            )
        return (z - self.denoise(z, s, cond)) / s.reshape(-1, 1)

    __call__ = velocity

    def sample(
        self, n: int, cond: int | None = None, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``n`` prior draws ``(n, d)``, restricted to class ``cond`` when given."""
        logw = self._log_weights(None if cond is None else torch.tensor([cond]), 1)[0]
        comp = categorical(torch.softmax(logw, 0), n, generator)
        eps = torch.randn(n, self.dim, generator=generator, dtype=self.means.dtype)
        return self.means[comp] + self.var[comp].sqrt() * eps

    def component_of(self, x: torch.Tensor) -> torch.Tensor:
        """Most likely prior component of each row of ``x`` ``(n, d)`` -> ``(n,)``."""
        diff = x[:, None, :] - self.means
        log_lik = -0.5 * (diff**2 / self.var + torch.log(2 * math.pi * self.var)).sum(-1)
        return (self.log_w + log_lik).argmax(1)

    def posterior(
        self, matrix: torch.Tensor, y: torch.Tensor, sigma_y: float, cond: int | None = None
    ) -> MixturePosterior:
        """Closed-form ``p(x_0 | y, c)`` for ``y = A x_0 + sigma_y n``; matrix ``(m, d)``, y ``(m,)``."""
        if sigma_y <= 0:
            raise ValueError("sigma_y must be > 0 for the closed-form posterior")
        a = matrix.to(self.means)
        keep = (
            torch.ones_like(self.labels, dtype=torch.bool) if cond is None else self.labels == cond
        )
        mu, var, logw = self.means[keep], self.var[keep], self.log_w[keep]
        s_inv = torch.diag_embed(1.0 / var)  # (K, d, d)
        prec = s_inv + a.T @ a / sigma_y**2
        cov = torch.linalg.inv(prec)
        cov = 0.5 * (cov + cov.transpose(-1, -2))
        mean = torch.einsum("kij,kj->ki", cov, mu / var + (a.T @ y) / sigma_y**2)
        pred_cov = torch.einsum("md,kd,nd->kmn", a, var, a) + sigma_y**2 * torch.eye(
            a.shape[0], dtype=a.dtype
        )
        diff = y - mu @ a.T  # (K, m)
        log_ev = -0.5 * (
            torch.einsum("km,km->k", diff, torch.linalg.solve(pred_cov, diff[..., None])[..., 0])
            + torch.logdet(pred_cov)
        )
        return MixturePosterior(torch.softmax(logw + log_ev, 0), mean, cov)
