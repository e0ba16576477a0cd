"""Bilevel search over where to upcycle: Gumbel masks outside, CKA-regularized replay inside.

Reconstruction from the abstract (notes §1; no public code). At the start of task t every slot
(ℓ, e) of every :class:`~.upcycle.UpcycledMoE` gets a *provisional* copy whose presence is the
grow indicator m_{ℓe}(α) of a :class:`~.mask.GumbelMask`; existing copies are frozen during
the search. Then, alternately (DARTS, Liu et al. 2019):

    outer   α ← α - η_α ∇_α [ L_val(D_t^val ∪ M; w, m(α)) + λ_p Σ_i p_grow(α_i) |θ_i| / |θ̄| ]
    inner   w ← w - η_w ∇_w [ L_task(D_t) + λ_r L_task(M) + λ_c Σ_{ℓ∈S} (1 - CKA(H_ℓ^old(M), H_ℓ^w(M))) ]

M is a reservoir replay buffer, H^old the features of the frozen pre-task model at the modules
S (the deep layers, where the paper finds drift), |θ_i| the parameters a growth adds. The
hypergradient ∇_α L_val is

* ``"first_order"``: ∂_α L_val(w, α) at the current w (DARTS first order);
* ``"finite_difference"``: the one-step unrolled gradient of L_val(w - ξ∇_w L_in(w, α), α),
  whose mixed second derivative is a central finite difference (DARTS second order):

      ∇_α L_val(w', α) - ξ [∇_α L_in(w⁺, α) - ∇_α L_in(w⁻, α)] / (2ε),
      w' = w - ξ ∇_w L_in(w, α),   w± = w ± ε ∇_{w'} L_val(w', α),   ε = ε₀ / ‖∇_{w'} L_val‖.

Which weights the inner step trains (``inner_presence``):

* ``"all"`` (default since issue 47): every candidate trains on every inner step (presence 1),
  and the Gumbel mask enters only the outer objective, as DARTS trains every candidate
  operation of its supernet. The weights do not depend on the draws, so ∂L_val/∂α compares
  trained copies. **[recon]**: the abstract does not say which weights the inner step trains.
* ``"sampled"`` (GDAS-style hard draws; the default before issue 47): the inner step runs with
  the same hard draw as the outer step, so a candidate trains only on the steps where it was
  drawn present. At the start ∂L_val/∂α is exactly 0 (a provisional copy is an exact replica
  sharing its source's mass), so the first draws decide which copies train, and the grow
  probabilities follow each copy's sampling history (issue 47).
* ``"uniform"`` (SPOS-style, Guo et al. 2020): each candidate is present in the inner step with
  probability 1/2, independently of α and of the other candidates. The weights do not depend
  on α (as with "all"), and a copy cannot lean on the others being present: it is trained to
  be useful in a random context, so its marginal value in the outer step is closer to its own.
  A labelled variant (issue 47's planted-depth check).

The CKA term's H^old comes from a teacher forward per replay batch, or, after
:meth:`BilevelUpcycler.cache_teacher`, from features of the whole (fixed) replay buffer computed
once per task and indexed by ``replay_index`` (``buffer.sample(n, return_index=True)``).

At the end the masks are discretized (grow where p_grow > 1/2), unselected copies are dropped
(exactly the presence-0 function) and the sources of kept copies are frozen: an
:class:`UpcyclePlan`, which :func:`apply_plan` can also apply to a fresh copy of the model.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import torch
from torch import nn

from .cka import cka_loss
from .mask import GumbelMask
from .upcycle import UpcycledMoE

__all__ = [
    "BilevelUpcycler",
    "ReservoirBuffer",
    "UpcyclePlan",
    "apply_plan",
    "find_moe_layers",
    "hypergradient",
]


# ----------------------------------------------------------------------------- replay
class ReservoirBuffer:
    """Reservoir sampling (Vitter's algorithm R): after n items, each is stored w.p. capacity/n.

    Items are tuples of tensors sliced along the first axis (e.g. ``add(x, y)`` with x (B, ...)
    and y (B,)); :meth:`sample` returns stacked tensors.
    """

    def __init__(self, capacity: int, *, seed: int = 0) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be a positive int; got {capacity!r}")
        self.capacity = capacity
        self.items: list[tuple[torch.Tensor, ...]] = []
        self.seen = 0
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, *tensors: torch.Tensor) -> None:
        if not tensors:
            raise ValueError("add needs at least one tensor")
        b = tensors[0].shape[0]
        if any(t.shape[0] != b for t in tensors):
            raise ValueError(
                f"tensors must share their first (batch) axis; got {[tuple(t.shape) for t in tensors]}"
            )
        for i in range(b):
            item = tuple(t[i].detach().clone() for t in tensors)
            if len(self.items) < self.capacity:
                self.items.append(item)
            else:
                j = self.rng.randrange(self.seen + 1)
                if j < self.capacity:
                    self.items[j] = item
            self.seen += 1

    @overload
    def sample(self, n: int) -> tuple[torch.Tensor, ...]: ...
    @overload
    def sample(
        self, n: int, *, return_index: Literal[True]
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]: ...
    @overload
    def sample(self, n: int, *, return_index: bool) -> Any: ...

    def sample(self, n: int, *, return_index: bool = False) -> Any:
        """min(n, len) distinct items, stacked. ``return_index=True`` also returns their
        positions in the buffer, (n,) long: the key of :meth:`BilevelUpcycler.cache_teacher`."""
        if len(self.items) == 0:
            raise ValueError("sample from an empty ReservoirBuffer")
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int; got {n!r}")
        picks = self.rng.sample(range(len(self.items)), min(n, len(self.items)))
        batch = tuple(torch.stack(col) for col in zip(*(self.items[i] for i in picks)))
        return (batch, torch.tensor(picks, dtype=torch.long)) if return_index else batch

    def stacked(self) -> tuple[torch.Tensor, ...]:
        """Every stored item, stacked in buffer order (position i = row i)."""
        if len(self.items) == 0:
            raise ValueError("stacked() of an empty ReservoirBuffer")
        return tuple(torch.stack(col) for col in zip(*self.items))


# ----------------------------------------------------------------------------- hypergradient
def _grads(loss: torch.Tensor, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    gs = torch.autograd.grad(loss, list(params), allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, gs)]


def hypergradient(
    train_loss: Callable[[], torch.Tensor],
    val_loss: Callable[[], torch.Tensor],
    weights: Sequence[torch.Tensor],
    arch: Sequence[torch.Tensor],
    *,
    mode: str = "first_order",
    xi: float = 0.01,
    eps: float = 0.01,
) -> list[torch.Tensor]:
    """∇_α of the outer objective, for closures that read ``weights`` and ``arch`` in place.

    ``mode="first_order"``: ∂_α val_loss at the current weights. ``mode="finite_difference"``:
    the one-step unrolled hypergradient with the mixed Hessian-vector product by central
    differences (see the module docstring); the weights are restored before returning.
    """
    if mode not in ("first_order", "finite_difference"):
        raise ValueError(f"mode must be 'first_order' or 'finite_difference'; got {mode!r}")
    if not (xi > 0 and eps > 0):
        raise ValueError(f"xi and eps must be > 0; got xi={xi}, eps={eps}")
    weights, arch = list(weights), list(arch)
    if mode == "first_order":
        return _grads(val_loss(), arch)
    backup = [w.detach().clone() for w in weights]
    try:
        g_tr = _grads(train_loss(), weights)
        with torch.no_grad():
            for w, g in zip(weights, g_tr):
                w.sub_(xi * g)  # w' = w - ξ ∇_w L_in(w, α)
        lv = val_loss()
        gv = _grads(lv, weights + arch)
        dw, dalpha = gv[: len(weights)], gv[len(weights) :]
        if not dw:
            return dalpha
        norm = torch.stack([(g.double() ** 2).sum() for g in dw]).sum().sqrt().item()
        if norm == 0.0:
            return dalpha
        r = eps / norm
        hv = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for w, b, g in zip(weights, backup, dw):
                    w.copy_(b + sign * r * g)  # w± = w ± ε ∇_{w'} L_val
            hv.append(_grads(train_loss(), arch))
        return [da - xi * (hp - hm) / (2 * r) for da, hp, hm in zip(dalpha, hv[0], hv[1])]
    finally:
        with torch.no_grad():
            for w, b in zip(weights, backup):
                w.copy_(b)


# ----------------------------------------------------------------------------- plan
@dataclass
class UpcyclePlan:
    """Where to grow: ``grow[layer_name] = [slots]``; ``p_grow`` the final probabilities;
    ``drawn`` the fraction of the search's outer steps in which each candidate's hard Gumbel
    draw was "grow" (a diagnostic: a search whose p_grow tracks ``drawn`` replays its sampling
    history rather than a signal)."""

    grow: dict[str, list[int]]
    p_grow: dict[str, list[float]] = field(default_factory=dict)
    added_params: int = 0
    drawn: dict[str, list[float]] = field(default_factory=dict)

    def num_grown(self) -> int:
        return sum(len(v) for v in self.grow.values())


def find_moe_layers(model: nn.Module) -> dict[str, UpcycledMoE]:
    """Every :class:`UpcycledMoE` submodule of ``model`` by qualified name, in module order."""
    return {n: m for n, m in model.named_modules() if isinstance(m, UpcycledMoE)}


def apply_plan(
    model: nn.Module,
    plan: UpcyclePlan,
    *,
    freeze_source: bool = True,
    noise: float = 0.0,
    growth: str = "slot",
    bias_offset: float = 0.0,
) -> int:
    """Grow ``model``'s MoE layers as ``plan`` says; returns the parameters added.

    ``growth="slot"`` (what the search uses): a copy inside each planned slot, mixed with its
    source by the slot's softmax (:meth:`UpcycledMoE.grow`; function-preserving at ``noise=0``).
    ``growth="router"``: a new routed expert per planned slot, a replica of it with a new
    router column (:meth:`UpcycledMoE.add_experts`, as in sparse-upcycling / LLaMA-MoE growth);
    its selection bias is the source's minus ``bias_offset``: 0 lets it compete for the top k
    at once (the function changes as it displaces experts), a large offset keeps the function
    exactly but the new expert is never selected, so never trained, until the bias is lowered.
    ``freeze_source`` freezes the sources (every copy of a source slot for router growth).
    """
    if growth not in ("slot", "router"):
        raise ValueError(f"growth must be 'slot' or 'router'; got {growth!r}")
    layers = find_moe_layers(model)
    missing = [n for n in plan.grow if n not in layers]
    if missing:
        raise ValueError(
            f"plan names layers that are not UpcycledMoE modules of the model: {missing}; have {list(layers)}"
        )
    added = 0
    for name, slots in plan.grow.items():
        layer = layers[name]
        if growth == "slot":
            layer.grow(slots, freeze_source=freeze_source, noise=noise)
            added += len(slots) * layer.expert_params()
            continue
        before = sum(p.numel() for p in layer.parameters())
        layer.add_experts(slots, bias_offset=bias_offset, noise=noise)
        if freeze_source:
            with torch.no_grad():
                for s in slots:
                    layer.frozen[layer.slot_of == s] = True
        added += sum(p.numel() for p in layer.parameters()) - before
    return added


class _Tap:
    """Forward hooks that keep the outputs of named modules."""

    def __init__(self, model: nn.Module, names: Sequence[str]) -> None:
        mods = dict(model.named_modules())
        missing = [n for n in names if n not in mods]
        if missing:
            raise ValueError(f"cka_layers names modules the model does not have: {missing}")
        self.out: dict[str, torch.Tensor] = {}
        self.handles = [mods[n].register_forward_hook(self._hook(n)) for n in names]

    def _hook(self, name: str):
        def hook(mod: nn.Module, inp: Any, out: Any) -> None:
            self.out[name] = out[0] if isinstance(out, tuple) else out

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


class BilevelUpcycler:
    """Selective upcycling of a model's :class:`UpcycledMoE` layers over a task sequence.

    Args:
        model: any module containing :class:`UpcycledMoE` layers.
        loss_fn: ``loss_fn(model, batch) -> scalar`` (the task objective).
        cka_layers: module names whose outputs enter the CKA term (the deep layers).
        lambda_replay, lambda_cka, lambda_param: λ_r, λ_c, λ_p of the objectives.
        tau: a temperature or schedule for the mask (:func:`~.mask.exponential_tau`).
        hypergradient: ``"first_order"`` or ``"finite_difference"``.
        outer_lr: Adam step size on the mask logits.
        init_grow_logit: initial α_grow - α_keep of every candidate.
        layers: restrict the candidates to these MoE layer names (default: all).
        xi, eps: the finite-difference hypergradient's inner step and probe size.
        inner_presence: ``"all"`` (every candidate present in the inner step), ``"sampled"``
            (inner step under the outer step's hard draw) or ``"uniform"`` (each present with
            probability 1/2, independent of α); see the module docstring.

    Per task::

        up.begin_task()                       # provisional copies everywhere, frozen teacher
        up.cache_teacher(buffer)              # optional: H^old of the fixed replay buffer, once
        opt = make_optimizer(up.trainable())  # parameters changed: a fresh optimizer
        for step in range(search_steps):
            replay_batch, idx = buffer.sample(n, return_index=True)
            up.search_step(batch, val_batch, replay_batch, opt, replay_index=idx)
        plan = up.end_search()                # discretize, drop, freeze
        opt = make_optimizer(up.trainable())
        for step in range(train_steps):
            loss = up.inner_loss(batch, replay_batch); ...
        up.end_task()
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        *,
        cka_layers: Sequence[str] = (),
        lambda_replay: float = 1.0,
        lambda_cka: float = 1.0,
        lambda_param: float = 0.01,
        tau: float | Callable[[int], float] = 1.0,
        hypergradient: str = "first_order",
        outer_lr: float = 0.05,
        init_grow_logit: float = 0.0,
        layers: Sequence[str] | None = None,
        xi: float = 0.01,
        eps: float = 0.01,
        inner_presence: str = "all",
    ) -> None:
        if inner_presence not in ("sampled", "all", "uniform"):
            raise ValueError(
                f"inner_presence must be 'all', 'sampled' or 'uniform'; got {inner_presence!r}"
            )
        if hypergradient not in ("first_order", "finite_difference"):
            raise ValueError(
                f"hypergradient must be 'first_order' or 'finite_difference'; got {hypergradient!r}"
            )
        for name, v in [
            ("lambda_replay", lambda_replay),
            ("lambda_cka", lambda_cka),
            ("lambda_param", lambda_param),
        ]:
            if not v >= 0:
                raise ValueError(f"{name} must be >= 0; got {v}")
        all_layers = find_moe_layers(model)
        if not all_layers:
            raise ValueError("model has no UpcycledMoE layer (see upcycle_ffn / upcycle_moe)")
        if layers is not None:
            missing = [n for n in layers if n not in all_layers]
            if missing:
                raise ValueError(f"layers names modules that are not UpcycledMoE layers: {missing}")
        names = list(all_layers) if layers is None else list(layers)
        mods = dict(model.named_modules())
        missing = [n for n in cka_layers if n not in mods]
        if missing:
            raise ValueError(f"cka_layers names modules the model does not have: {missing}")
        self.model, self.loss_fn = model, loss_fn
        self.layer_names, self.cka_layers = names, list(cka_layers)
        self.lambda_replay, self.lambda_cka, self.lambda_param = (
            lambda_replay,
            lambda_cka,
            lambda_param,
        )
        self.tau, self.mode, self.outer_lr = tau, hypergradient, outer_lr
        self.init_grow_logit, self.xi, self.eps = init_grow_logit, xi, eps
        self.inner_presence = inner_presence
        self.teacher: nn.Module | None = None
        self._cache: dict[str, Any] | None = None  # cache_teacher(): H^old of the replay buffer
        self.mask: GumbelMask | None = None
        self.history: list[UpcyclePlan] = []

    # ------------------------------------------------------------------ helpers
    @property
    def layers(self) -> dict[str, UpcycledMoE]:
        mods = dict(self.model.named_modules())
        return {n: mods[n] for n in self.layer_names}  # type: ignore[misc]

    def trainable(self) -> list[nn.Parameter]:
        """The weights w of the inner problem (the current parameter objects)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def _set_presence(self, m: torch.Tensor | None) -> None:
        i = 0
        for layer in self.layers.values():
            n = int(layer.provisional.sum())
            layer.presence = None if m is None else m[i : i + n]
            i += n

    def _features(
        self, module: nn.Module, tap: _Tap, batch: Any
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        tap.out.clear()
        loss = self.loss_fn(module, batch)
        return loss, dict(tap.out)

    def inner_loss(
        self, batch: Any, replay: Any | None = None, replay_index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """L_task(batch) + λ_r L_task(replay) + λ_c Σ_ℓ (1 - CKA(H_ℓ^old, H_ℓ^w)) on the replay batch."""
        loss = self.loss_fn(self.model, batch)
        return loss if replay is None else loss + self.regularizer(replay, replay_index)

    def regularizer(self, replay: Any, replay_index: torch.Tensor | None = None) -> torch.Tensor:
        """λ_r L_task(replay) + λ_c Σ_{ℓ∈S} (1 - CKA_lin(H_ℓ^old(replay), H_ℓ^w(replay))).

        ``replay_index`` (from ``buffer.sample(n, return_index=True)``): read H^old from the
        features :meth:`cache_teacher` computed once for the buffer, instead of a teacher
        forward on every call (the same value; the buffer is fixed during a task)."""
        use_cka = self.lambda_cka > 0 and self.cka_layers and self.teacher is not None
        if not use_cka:
            return self.lambda_replay * self.loss_fn(self.model, replay)
        tap = _Tap(self.model, self.cka_layers)
        try:
            r_loss, h_new = self._features(self.model, tap, replay)
        finally:
            tap.remove()
        h_old = self._teacher_features(replay, replay_index)
        for n in self.cka_layers:
            if h_old[n].shape != h_new[n].shape:
                raise ValueError(
                    f"replay_index selects cached teacher features of shape {tuple(h_old[n].shape)} "
                    f"at {n!r}, but the replay batch gives {tuple(h_new[n].shape)}"
                )
        drift = sum(cka_loss(h_old[n].detach(), h_new[n]) for n in self.cka_layers)
        return self.lambda_replay * r_loss + self.lambda_cka * drift

    def _teacher_features(
        self, replay: Any, replay_index: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        if replay_index is None:  # a teacher forward on this batch
            assert self.teacher is not None
            ttap = _Tap(self.teacher, self.cka_layers)
            try:
                with torch.no_grad():
                    _, h_old = self._features(self.teacher, ttap, replay)
            finally:
                ttap.remove()
            return h_old
        c = self._cache
        if c is None:
            raise ValueError(
                "replay_index given but no cached teacher features: call cache_teacher(buffer) "
                "after begin_task() / snapshot_teacher()"
            )
        if c["buffer"].seen != c["seen"]:
            raise ValueError(
                "the replay buffer changed since cache_teacher(); call cache_teacher(buffer) again"
            )
        if not isinstance(replay_index, torch.Tensor) or replay_index.dim() != 1:
            raise ValueError("replay_index must be a 1-D tensor of buffer positions")
        if replay_index.numel() and not (
            0 <= int(replay_index.min()) and int(replay_index.max()) < c["n"]
        ):
            raise ValueError(f"replay_index must lie in [0, {c['n']}) (the cached buffer's size)")
        return {n: f[replay_index.to(f.device)] for n, f in c["feats"].items()}

    @torch.no_grad()
    def cache_teacher(
        self,
        buffer: ReservoirBuffer,
        *,
        batch_size: int = 256,
        collate: Callable[[tuple[torch.Tensor, ...]], Any] | None = None,
    ) -> None:
        """Compute H_ℓ^old(M) of every item of the replay buffer once (the buffer and the teacher
        are fixed during a task); then pass ``replay_index`` to :meth:`inner_loss` /
        :meth:`search_step` and no teacher forward runs per step. Valid until the buffer
        changes or the teacher is re-snapshot (begin_task / snapshot_teacher / end_task).
        Assumes an item's features do not depend on the rest of its batch (the teacher runs
        in eval mode). ``collate`` turns stacked buffer columns into what ``loss_fn`` takes
        (e.g. a dict by key, moved to the model's device); default: the tuple itself. Memory:
        n_items × (per-item feature size) per layer of ``cka_layers``, in the teacher's dtype."""
        if self.teacher is None:
            raise RuntimeError(
                "cache_teacher needs a teacher: call begin_task() or snapshot_teacher()"
            )
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
        items = buffer.stacked()  # (n, ...) per column
        n = items[0].shape[0]
        feats: dict[str, list[torch.Tensor]] = {k: [] for k in self.cka_layers}
        ttap = _Tap(self.teacher, self.cka_layers)
        try:
            for i in range(0, n, batch_size):
                chunk = tuple(t[i : i + batch_size] for t in items)
                _, h = self._features(
                    self.teacher, ttap, chunk if collate is None else collate(chunk)
                )
                for k in feats:
                    feats[k].append(h[k].detach())
        finally:
            ttap.remove()
        self._cache = {
            "buffer": buffer,
            "seen": buffer.seen,
            "n": n,
            "feats": {k: torch.cat(v) for k, v in feats.items()},  # (n, ..., d) per layer
        }

    def _param_cost(self) -> torch.Tensor:
        assert self.mask is not None
        costs = torch.tensor(
            [
                float(layer.expert_params())
                for layer in self.layers.values()
                for _ in range(int(layer.provisional.sum()))
            ],
            dtype=self.mask.logits.dtype,
        )
        return (self.mask.probs() * costs / costs.mean()).sum()

    # ------------------------------------------------------------------ task protocol
    def snapshot_teacher(self) -> None:
        """Freeze a copy of the current model: H^old of the CKA term (no search needed)."""
        self.teacher = copy.deepcopy(self.model).eval()
        self._cache = None
        for p in self.teacher.parameters():
            p.requires_grad_(False)

    def begin_task(self, *, candidates: dict[str, Sequence[int]] | None = None) -> int:
        """Snapshot the teacher, add a provisional copy to every candidate slot, freeze existing
        copies for the search, build the mask. Returns the number of candidates."""
        if self.mask is not None:
            raise RuntimeError("begin_task called twice without end_search")
        self.snapshot_teacher()
        self._frozen_before = {}
        n = 0
        for name, layer in self.layers.items():
            slots = (
                list(range(layer.num_experts))
                if candidates is None
                else list(candidates.get(name, []))
            )
            self._frozen_before[name] = layer.frozen.clone()
            layer.frozen.fill_(True)
            layer.grow(slots, provisional=True, freeze_source=False)
            n += len(slots)
        if n == 0:
            raise ValueError("no upcycling candidates: candidates selects no slot")
        self.mask = GumbelMask(n, self.tau, init_grow_logit=self.init_grow_logit).to(
            next(self.model.parameters()).device
        )
        self.outer_opt = torch.optim.Adam(
            self.mask.parameters(), lr=self.outer_lr, betas=(0.5, 0.999)
        )
        self._drawn = torch.zeros(n)  # hard "grow" draws per candidate in outer steps
        self._outer_steps = 0
        return n

    def outer_step(
        self,
        batch: Any,
        val_batch: Any,
        replay: Any | None,
        noise: torch.Tensor | None = None,
        replay_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One Adam step on α with the hypergradient of the outer objective; returns the draw used."""
        if self.mask is None:
            raise RuntimeError("outer_step before begin_task")
        mask = self.mask
        noise = mask.sample_noise() if noise is None else noise

        def train_loss() -> torch.Tensor:
            self._set_presence(mask(noise))
            return self.inner_loss(batch, replay, replay_index)

        def val_loss() -> torch.Tensor:
            self._set_presence(mask(noise))
            lv = self.loss_fn(self.model, val_batch)
            if replay is not None:
                lv = lv + self.lambda_replay * self.loss_fn(self.model, replay)
            return lv

        with torch.no_grad():
            self._drawn += mask(noise).detach().cpu().float()
            self._outer_steps += 1
        g = hypergradient(
            train_loss,
            val_loss,
            self.trainable(),
            [mask.logits],
            mode=self.mode,
            xi=self.xi,
            eps=self.eps,
        )[0]
        (g_cost,) = torch.autograd.grad(self.lambda_param * self._param_cost(), [mask.logits])
        self.outer_opt.zero_grad()
        mask.logits.grad = g + g_cost
        self.outer_opt.step()
        self._set_presence(None)
        return noise

    def sample_presence(self, noise: torch.Tensor | None = None) -> None:
        """Fix the provisional copies' presence for the inner step (no gradient to α): a hard
        Gumbel draw ("sampled"), all ones ("all") or Bernoulli(1/2) draws ("uniform")."""
        if self.mask is None:
            raise RuntimeError("sample_presence before begin_task")
        with torch.no_grad():
            if self.inner_presence == "all":
                self._set_presence(torch.ones_like(self.mask.logits[:, 0]))
            elif self.inner_presence == "uniform":
                ones = torch.ones_like(self.mask.logits[:, 0])
                self._set_presence(torch.bernoulli(0.5 * ones))
            else:
                self._set_presence(self.mask(noise))

    def search_step(
        self,
        batch: Any,
        val_batch: Any,
        replay: Any | None,
        inner_opt: torch.optim.Optimizer,
        replay_index: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """One outer step on α (hypergradient) then one inner step on w, same Gumbel draw."""
        noise = self.outer_step(batch, val_batch, replay, replay_index=replay_index)
        assert self.mask is not None
        self.sample_presence(noise)
        inner_opt.zero_grad()
        loss = self.inner_loss(batch, replay, replay_index)
        loss.backward()
        inner_opt.step()
        self._set_presence(None)
        self.mask.advance()
        return {
            "inner": float(loss.detach()),
            "tau": self.mask.tau,
            "p_grow_mean": float(self.mask.probs().mean().detach()),
        }

    def end_search(self, *, threshold: float = 0.5) -> UpcyclePlan:
        """Discretize the mask, drop unselected copies, freeze kept sources; returns the plan."""
        if self.mask is None:
            raise RuntimeError("end_search before begin_task")
        keep = self.mask.decide(threshold)
        probs = self.mask.probs().detach()
        drawn = (self._drawn / max(self._outer_steps, 1)).tolist()
        self._set_presence(None)
        plan = UpcyclePlan(grow={}, p_grow={})
        i = 0
        for name, layer in self.layers.items():
            n = int(layer.provisional.sum())
            before = self._frozen_before[name]  # the existing copies' state before the search
            layer.frozen[: before.numel()] = before
            layer.frozen[before.numel() :] = False
            grown = layer.commit(keep[i : i + n])
            plan.grow[name] = grown
            plan.p_grow[name] = probs[i : i + n].tolist()
            plan.drawn[name] = drawn[i : i + n]
            plan.added_params += len(grown) * layer.expert_params()
            i += n
        self.mask = None
        self.history.append(plan)
        return plan

    def end_task(self) -> None:
        """Drop the teacher and its cached features (only needed during this task)."""
        self.teacher = None
        self._cache = None
