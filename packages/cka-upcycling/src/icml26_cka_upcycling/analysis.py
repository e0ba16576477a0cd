"""Diagnostics of forgetting: per-layer CKA drift across a task, and loss-landscape sharpness.

* CKA drift of module ℓ between the model before (θ⁻) and after (θ⁺) a task, on the same
  inputs: ``drift_ℓ = 1 - CKA_lin(H_ℓ(θ⁻), H_ℓ(θ⁺))`` (the paper reports deep layers drifting
  most; which layers and which inputs it used is not in the abstract).
* Flatness. The abstract does not say which measure; two standard ones are given (stated):
  ρ-sharpness, the first-order SAM ascent (Foret et al. 2021)

      S_ρ(θ) = L(θ + ρ g/‖g‖) - L(θ),   g = ∇L(θ)

  and the Hessian trace by Hutchinson's estimator, tr(H) ≈ (1/s) Σ_i z_iᵀ H z_i with
  Rademacher z_i (exact for a diagonal H), H z by double back-propagation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from .cka import linear_cka

__all__ = ["cka_drift", "collect_features", "hessian_trace", "rho_sharpness"]


def collect_features(
    model: nn.Module,
    batches: Iterable[Any],
    layers: Sequence[str],
    forward: Callable[[nn.Module, Any], Any] | None = None,
) -> dict[str, torch.Tensor]:
    """Outputs of the named modules over ``batches``, flattened to (samples, features) and stacked."""
    mods = dict(model.named_modules())
    missing = [n for n in layers if n not in mods]
    if missing:
        raise ValueError(f"layers names modules the model does not have: {missing}")
    feats: dict[str, list[torch.Tensor]] = {n: [] for n in layers}

    def hook(name: str):
        def fn(mod: nn.Module, inp: Any, out: Any) -> None:
            h = out[0] if isinstance(out, tuple) else out
            feats[name].append(h.detach().reshape(-1, h.shape[-1]))

        return fn

    handles = [mods[n].register_forward_hook(hook(n)) for n in layers]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for b in batches:
                forward(model, b) if forward is not None else model(b)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return {n: torch.cat(v) for n, v in feats.items()}


def cka_drift(
    before: nn.Module,
    after: nn.Module,
    batches: Sequence[Any],
    layers: Sequence[str],
    *,
    forward: Callable[[nn.Module, Any], Any] | None = None,
    debiased: bool = False,
) -> dict[str, float]:
    """1 - CKA_lin between the two models' features at each named module, on the same inputs."""
    fb = collect_features(before, batches, layers, forward)
    fa = collect_features(after, batches, layers, forward)
    return {
        n: float(1 - linear_cka(fb[n].double(), fa[n].double(), debiased=debiased)) for n in layers
    }


def _params(model: nn.Module) -> list[nn.Parameter]:
    ps = [p for p in model.parameters() if p.requires_grad]
    if not ps:
        raise ValueError("model has no trainable parameters")
    return ps


def rho_sharpness(
    model: nn.Module, loss_fn: Callable[[nn.Module], torch.Tensor], rho: float = 0.05
) -> float:
    """S_ρ = L(θ + ρ g/‖g‖) - L(θ) (first-order SAM ascent); parameters are restored."""
    if not rho > 0:
        raise ValueError(f"rho must be > 0; got {rho}")
    ps = _params(model)
    loss = loss_fn(model)
    raw = torch.autograd.grad(loss, ps, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(ps, raw)]
    norm = torch.stack([(g.double() ** 2).sum() for g in grads]).sum().sqrt()
    if float(norm) == 0.0:
        return 0.0
    backup = [p.detach().clone() for p in ps]
    try:
        with torch.no_grad():
            for p, g in zip(ps, grads):
                p.add_(g * (rho / norm).to(p.dtype))
            up = loss_fn(model)
    finally:
        with torch.no_grad():
            for p, b in zip(ps, backup):
                p.copy_(b)
    return float(up - loss.detach())


def hessian_trace(
    model: nn.Module,
    loss_fn: Callable[[nn.Module], torch.Tensor],
    num_samples: int = 16,
    *,
    generator: torch.Generator | None = None,
) -> float:
    """Hutchinson estimate of tr(∇²L) over the trainable parameters, Rademacher probes."""
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive int; got {num_samples!r}")
    ps = _params(model)
    grads = torch.autograd.grad(loss_fn(model), ps, create_graph=True, allow_unused=True)
    pairs = [(p, g) for p, g in zip(ps, grads) if g is not None]
    total = 0.0
    for i in range(num_samples):
        zs = [
            (torch.randint(0, 2, p.shape, generator=generator, dtype=torch.int64) * 2 - 1).to(
                p.device, p.dtype
            )
            for p, _ in pairs
        ]
        hz = torch.autograd.grad(
            [g for _, g in pairs],
            [p for p, _ in pairs],
            grad_outputs=zs,
            retain_graph=i < num_samples - 1,
        )
        total += float(sum((z * h).sum() for z, h in zip(zs, hz)))
    return total / num_samples
