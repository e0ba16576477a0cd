"""Diagnostics of forgetting: per-layer CKA drift across a task, and loss-landscape sharpness.

* CKA drift of module ℓ between the model before (θ⁻) and after (θ⁺) a task, on the same
  inputs: ``drift_ℓ = 1 - CKA_lin(H_ℓ(θ⁻), H_ℓ(θ⁺))`` (the paper reports deep layers drifting
  most; which layers and which inputs it used is not in the abstract).
* Flatness. The abstract does not say which measure; two standard ones are given (stated):
  ρ-sharpness, the first-order SAM ascent (Foret et al. 2021)

      S_ρ(θ) = L(θ + ρ g/‖g‖) - L(θ),   g = ∇L(θ)

  and the Hessian trace by Hutchinson's estimator, tr(H) ≈ (1/s) Σ_i z_iᵀ H z_i with
  Rademacher z_i (exact for a diagonal H), H z by double back-propagation.
* Diagnostic growth (:func:`diagnostic_plan`, **[recon]**): the abstract's two findings as a
  score for every candidate slot (ℓ, e) at the start of a task,

      score_{ℓe} = (drift_ℓ / mean drift) · (s_{ℓe} / mean s),
      s_{ℓe}     = ‖∂L_t/∂θ_{ℓe}‖_F / ‖θ_{ℓe}‖_F        (expert sensitivity to the new task)

  with drift_ℓ the CKA drift of layer ℓ's output on old-task (replay) inputs after a short probe
  fine-tune of a copy of the model on the new task, θ_{ℓe} all weights of slot e's copies. The
  ``budget`` highest-scoring slots grow. No search, no Gumbel mask: an alternative to the
  bilevel plan that uses the paper's diagnostics directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from .bilevel import UpcyclePlan, find_moe_layers
from .cka import linear_cka

__all__ = [
    "cka_drift",
    "collect_features",
    "diagnostic_plan",
    "expert_sensitivity",
    "hessian_trace",
    "rho_sharpness",
]


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


def expert_sensitivity(
    model: nn.Module, loss_fn: Callable[[nn.Module, Any], torch.Tensor], batches: Iterable[Any]
) -> dict[str, list[float]]:
    """s_{ℓe} = ‖Σ_b ∂L(b)/∂θ_{ℓe}‖_F / ‖θ_{ℓe}‖_F for every slot e of every UpcycledMoE layer ℓ.

    θ_{ℓe} is W1 (and b1) and W2 of all the slot's copies; frozen copies count too (their
    freezing is lifted for the measurement and restored). Nothing is updated.
    """
    layers = find_moe_layers(model)
    if not layers:
        raise ValueError("model has no UpcycledMoE layer")
    saved = {n: lay.frozen.clone() for n, lay in layers.items()}
    params = {
        n: [t for t in (lay.w1, lay.w2, lay.b1) if t is not None] for n, lay in layers.items()
    }
    flat = [t for ts in params.values() for t in ts]
    was = [t.requires_grad for t in flat]
    acc = [torch.zeros_like(t) for t in flat]
    try:
        for lay in layers.values():
            lay.frozen.zero_()
        for t in flat:
            t.requires_grad_(True)
        n_batches = 0
        for b in batches:
            gs = torch.autograd.grad(loss_fn(model, b), flat, allow_unused=True)
            for a, g in zip(acc, gs):
                if g is not None:
                    a.add_(g)
            n_batches += 1
        if n_batches == 0:
            raise ValueError("batches is empty")
    finally:
        for n, lay in layers.items():
            lay.frozen.copy_(saved[n])
        for t, w in zip(flat, was):
            t.requires_grad_(w)
    out: dict[str, list[float]] = {}
    i = 0
    for n, lay in layers.items():
        k = len(params[n])
        g2 = torch.stack([a.detach().double().pow(2).flatten(1).sum(1) for a in acc[i : i + k]])
        g2 = g2.sum(0)  # (P,) squared gradient norm of each copy
        w2 = torch.stack([t.detach().double().pow(2).flatten(1).sum(1) for t in params[n]])
        w2 = w2.sum(0)  # (P,) squared weight norm of each copy
        i += k
        s_num = torch.zeros(lay.num_experts, dtype=torch.float64).index_add_(0, lay.slot_of, g2)
        s_den = torch.zeros(lay.num_experts, dtype=torch.float64).index_add_(0, lay.slot_of, w2)
        out[n] = (s_num.sqrt() / s_den.sqrt().clamp_min(1e-300)).tolist()
    return out


def diagnostic_plan(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    task_batches: Sequence[Any],
    old_batches: Sequence[Any],
    *,
    budget: int,
    lr: float = 1e-3,
) -> UpcyclePlan:
    """Grow the ``budget`` slots with the highest drift × sensitivity score (module docstring).

    ``task_batches``: new-task batches; the probe fine-tunes a copy of ``model`` (Adam, ``lr``)
    one step per batch, and the sensitivity is the summed gradient over them. ``old_batches``:
    replay / old-task inputs on which the CKA drift of each layer's output is measured. The
    model itself is not changed; apply the returned plan with :func:`~.bilevel.apply_plan`.
    ``plan.p_grow`` holds the normalised scores (max 1), not probabilities.
    """
    import copy

    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
        raise ValueError(f"budget must be a non-negative int; got {budget!r}")
    if not task_batches or not old_batches:
        raise ValueError("task_batches and old_batches must be non-empty")
    layers = find_moe_layers(model)
    if not layers:
        raise ValueError("model has no UpcycledMoE layer")
    n_cand = sum(lay.num_experts for lay in layers.values())
    if budget > n_cand:
        raise ValueError(f"budget must be <= the number of slots ({n_cand}); got {budget}")
    sens = expert_sensitivity(model, loss_fn, task_batches)
    probe = copy.deepcopy(model).train()
    opt = torch.optim.Adam([p for p in probe.parameters() if p.requires_grad], lr=lr)
    for b in task_batches:
        opt.zero_grad()
        loss_fn(probe, b).backward()
        opt.step()
    drift = cka_drift(model, probe, list(old_batches), list(layers), forward=loss_fn)
    d_mean = max(sum(drift.values()) / len(drift), 1e-300)
    s_all = [v for vs in sens.values() for v in vs]
    s_mean = max(sum(s_all) / len(s_all), 1e-300)
    scores = {n: [drift[n] / d_mean * v / s_mean for v in sens[n]] for n in layers}
    ranked = sorted(
        ((sc, n, e) for n in layers for e, sc in enumerate(scores[n])), key=lambda t: -t[0]
    )
    grow: dict[str, list[int]] = {n: [] for n in layers}
    for _, n, e in ranked[:budget]:
        grow[n].append(e)
    top = max(max(v) for v in scores.values()) or 1.0
    return UpcyclePlan(
        grow={n: sorted(v) for n, v in grow.items()},
        p_grow={n: [v / top for v in scores[n]] for n in layers},
    )
