"""TriPS-G: episode-level GRPO over Bernstein-Beta schedule policies.

The action is a whole schedule: ``3 x (n + 1)`` Bernstein coefficients ``c ~ Beta(kappa mu,
kappa (1 - mu))`` (independent; official ``n = 25``, ``kappa = 50``), mapped to the
(CFG, DC, eta) curves by ``bernstein_schedule``; ``mu`` is initialised at an L-BFGS fit of a
TriPS-T template, and the trainable parameters are ``log alpha`` and ``log beta`` (the official
``DiagBetaPolicy``: mean and concentration both learn). One iteration (official ``train_grpo_schedule_w_val.py``):

1. draw ``G`` schedules per image, ``G * I`` in all (``actions_per_image=True``, the official
   trainer: ``policy_old.sample(img_batch * group_size)``), or one group of ``G`` schedules
   shared by all ``I`` images (``actions_per_image=False``, the default here: lower variance
   across images, one rollout batch); rewards (averaged over seeds) ``R`` of shape ``(G, I)``;
2. group-relative advantages per image: ``A = (R - mean_G R) / std_G R``;
3. ``epochs`` Adam steps on the PPO-clip objective with a KL anchor to the initial policy::

       L = -( mean_{g,i} min(r_g A_gi, clip(r_g, 1 - eps, 1 + eps) A_gi) - kl_coef KL(pi || pi_ref) )
       r_g = exp(log pi(c_g) - log pi_old(c_g))
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.distributions import Beta, kl_divergence

from .schedules import ScheduleBounds, TriadicSchedule, bernstein_schedule


class BernsteinBetaPolicy(nn.Module):
    """Independent Beta distributions over Bernstein coefficients ``(3, degree + 1)``.

    Args:
        init_coeffs: initial means ``mu_0`` in ``(0, 1)``, shape ``(3, degree + 1)`` ordered
            (cfg, dc, eta), e.g. ``fit_schedule(make_template(...))``.
        kappa: initial concentration; ``alpha = kappa mu``, ``beta = kappa (1 - mu)`` at init
            (official 50). Trained: ``log_alpha`` and ``log_beta`` (official parametrisation).
        bounds: the boxes the coefficients are mapped into.
        nfe: number of sampling steps of the produced schedules.
    """

    def __init__(
        self,
        init_coeffs: torch.Tensor,
        *,
        kappa: float = 50.0,
        bounds: ScheduleBounds | None = None,
        nfe: int = 28,
    ):
        super().__init__()
        if init_coeffs.ndim != 2 or init_coeffs.shape[0] != 3:
            raise ValueError(f"init_coeffs must be (3, degree + 1), got {tuple(init_coeffs.shape)}")
        if bool((init_coeffs <= 0).any()) or bool((init_coeffs >= 1).any()):
            raise ValueError("init_coeffs must lie strictly inside (0, 1)")
        if kappa <= 0:
            raise ValueError(f"kappa must be > 0, got {kappa}")
        mu0 = init_coeffs.detach().to(torch.float64)
        self.log_alpha = nn.Parameter(torch.log(kappa * mu0))  # (3, n+1)
        self.log_beta = nn.Parameter(torch.log(kappa * (1.0 - mu0)))  # (3, n+1)
        self.bounds = bounds if bounds is not None else ScheduleBounds()
        self.nfe = nfe

    @property
    def mean(self) -> torch.Tensor:
        """``alpha / (alpha + beta)``, ``(3, n+1)``."""
        return torch.sigmoid(self.log_alpha - self.log_beta)

    @property
    def concentration(self) -> torch.Tensor:
        """``alpha + beta`` (``kappa`` at init), ``(3, n+1)``."""
        return self.log_alpha.exp() + self.log_beta.exp()

    def distribution(self) -> Beta:
        return Beta(self.log_alpha.exp().clamp_min(1e-6), self.log_beta.exp().clamp_min(1e-6))

    def sample(self, group_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``group_size`` coefficient sets ``(G, 3, n + 1)``; seeded by ``generator``."""
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        # torch's Beta sampler has no generator argument: seed a forked global RNG from it
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            c = self.distribution().sample((group_size,))
        return c.clamp(1e-6, 1 - 1e-6)

    def log_prob(self, coeffs: torch.Tensor) -> torch.Tensor:
        """Joint log-density of each coefficient set: ``(G, 3, n + 1) -> (G,)``."""
        return self.distribution().log_prob(coeffs).sum((-2, -1))

    def schedule(self, coeffs: torch.Tensor) -> TriadicSchedule:
        """Per-sample schedules (arrays ``(nfe, G)``) for ``(G, 3, n + 1)`` coefficients."""
        return bernstein_schedule(coeffs, self.bounds, self.nfe)

    def mean_schedule(self) -> TriadicSchedule:
        """The deterministic schedule at the policy mean (what is deployed after training)."""
        return bernstein_schedule(self.mean.detach(), self.bounds, self.nfe)


def group_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(R - mean_G R) / (std_G R + eps)`` over the group axis 0; rewards ``(G,)`` or ``(G, I)``."""
    if rewards.ndim not in (1, 2) or rewards.shape[0] < 2:
        raise ValueError(f"rewards must be (G,) or (G, I) with G >= 2, got {tuple(rewards.shape)}")
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("rewards must be finite")
    centred = rewards - rewards.mean(0, keepdim=True)
    return centred / (rewards.std(0, unbiased=False, keepdim=True) + eps)


def grpo_loss(
    policy: BernsteinBetaPolicy,
    ref: BernsteinBetaPolicy,
    coeffs: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    kl_coef: float = 1e-3,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO-clip surrogate with analytic ``KL(pi || pi_ref)``; advantages ``(G,)`` or ``(G, I)``."""
    logp = policy.log_prob(coeffs)  # (G,)
    ratio = torch.exp(logp - logp_old)  # (G,)
    r = ratio.reshape(-1, *([1] * (advantages.ndim - 1)))
    surrogate = torch.minimum(
        r * advantages, r.clamp(1 - clip_eps, 1 + clip_eps) * advantages
    ).mean()
    kl = kl_divergence(policy.distribution(), ref.distribution()).sum()
    loss = -(surrogate - kl_coef * kl)
    return loss, {"ratio": ratio.detach(), "kl": kl.detach(), "surrogate": surrogate.detach()}


def grpo_update(
    policy: BernsteinBetaPolicy,
    ref: BernsteinBetaPolicy,
    optimizer: torch.optim.Optimizer,
    coeffs: torch.Tensor,
    rewards: torch.Tensor,
    *,
    epochs: int = 4,
    clip_eps: float = 0.2,
    kl_coef: float = 1e-3,
    max_grad_norm: float = 1.0,
    actions_per_image: bool = False,
) -> dict[str, torch.Tensor]:
    """One GRPO iteration on a rolled-out group: ``epochs`` clipped steps; returns first-epoch stats.

    ``rewards`` is ``(G,)`` or ``(G, I)``. Shared group (``actions_per_image=False``): ``coeffs``
    is ``(G, 3, n + 1)``, every image saw the same ``G`` schedules. Per image
    (``actions_per_image=True``, official): ``coeffs`` is ``(I * G, 3, n + 1)`` image-major (row
    ``i * G + g`` is image ``i``'s ``g``-th action, rewarded ``rewards[g, i]``); advantages are
    normalised over each image's own group and paired with their own action.
    """
    if rewards.ndim == 1:
        rewards = rewards[:, None]
    g_size, n_img = rewards.shape[0], rewards.shape[1]
    expected = g_size * n_img if actions_per_image else g_size
    if coeffs.shape[0] != expected:
        what = "I * G" if actions_per_image else "G"
        raise ValueError(
            f"coeffs has {coeffs.shape[0]} action rows but rewards (G={g_size}, I={n_img}) "
            f"needs {what} = {expected}"
        )
    advantages = group_advantages(rewards).to(torch.float64)  # (G, I)
    if actions_per_image:
        advantages = advantages.T.reshape(-1)  # (I * G,), image-major like coeffs
    with torch.no_grad():
        logp_old = policy.log_prob(coeffs)
    first: dict[str, torch.Tensor] = {}
    for epoch in range(epochs):
        loss, stats = grpo_loss(
            policy, ref, coeffs, logp_old, advantages, clip_eps=clip_eps, kl_coef=kl_coef
        )
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
        optimizer.step()
        if epoch == 0:
            first = {**stats, "loss": loss.detach()}
    return first


@dataclass
class GRPOConfig:
    """Official TriPS-G settings (Sec. TriPS-G); iterations scaled down for small problems."""

    iterations: int = 400
    group_size: int = 4  # G schedules per group (per image when actions_per_image)
    epochs: int = 4  # PPO epochs per rolled-out group
    lr: float = 1e-2  # Adam
    clip_eps: float = 0.2
    kl_coef: float = 1e-3
    max_grad_norm: float = 1.0
    # official: each image gets its own G actions (img_batch * group_size draws); then
    # ``images`` is the number of images the reward function scores per iteration
    actions_per_image: bool = False
    images: int = 1


@dataclass
class GRPOHistory:
    mean_reward: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)


def train_grpo(
    policy: BernsteinBetaPolicy,
    reward_fn: Callable[[TriadicSchedule, int], torch.Tensor],
    config: GRPOConfig | None = None,
    generator: torch.Generator | None = None,
) -> GRPOHistory:
    """Train ``policy`` in place; ``reward_fn(schedules, iteration) -> rewards (G, I)``.

    ``schedules`` has arrays ``(nfe, G)`` (one group shared by all images) or, with
    ``config.actions_per_image``, ``(nfe, I * G)`` image-major: column ``i * G + g`` is for image
    ``i`` and its reward goes to ``rewards[g, i]``. The reference policy is a frozen copy of
    ``policy`` at entry; ``config`` defaults to ``GRPOConfig()``.
    """
    config = config if config is not None else GRPOConfig()
    if config.images < 1:
        raise ValueError(f"config.images must be >= 1, got {config.images}")
    draws = config.group_size * (config.images if config.actions_per_image else 1)
    ref = copy.deepcopy(policy).requires_grad_(False)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr)
    history = GRPOHistory()
    for it in range(config.iterations):
        with torch.no_grad():
            coeffs = policy.sample(draws, generator)
        rewards = torch.as_tensor(reward_fn(policy.schedule(coeffs), it))
        if rewards.ndim == 1:
            rewards = rewards[:, None]
        if config.actions_per_image and tuple(rewards.shape) != (config.group_size, config.images):
            raise ValueError(
                f"reward_fn must return (G, I) = ({config.group_size}, {config.images}) rewards "
                f"with actions_per_image, got {tuple(rewards.shape)}"
            )
        stats = grpo_update(
            policy, ref, optimizer, coeffs, rewards,
            epochs=config.epochs, clip_eps=config.clip_eps, kl_coef=config.kl_coef,
            max_grad_norm=config.max_grad_norm, actions_per_image=config.actions_per_image,
        )  # fmt: skip
        history.mean_reward.append(float(rewards.mean()))
        history.kl.append(float(stats["kl"]))
    return history


def trips_reward(
    distortion: torch.Tensor, perception: torch.Tensor, distortion_weight: float = 0.3
) -> torch.Tensor:
    """The official mix ``0.3 * distortion + 0.7 * perception`` (both already normalised)."""
    return distortion_weight * distortion + (1 - distortion_weight) * perception
