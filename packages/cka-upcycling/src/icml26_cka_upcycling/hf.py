"""`transformers.Trainer` integration: selective upcycling over a task sequence (extra ``hf``).

One ``Trainer.train()`` per task, the same :class:`SelectiveUpcyclingCallback` (and the same
:class:`~.bilevel.BilevelUpcycler`) across tasks:

* ``on_train_begin``: snapshot the pre-task teacher, add provisional copies everywhere, build the
  Gumbel mask; the optimizer's parameter list is updated in place (growth creates new tensors).
* ``on_step_begin`` (search phase): draw a hard mask for the Trainer's forward/backward.
* ``on_pre_optimizer_step``: add ∇_w[λ_r L(M) + λ_c Σ_ℓ (1 - CKA)] on a replay batch to the
  Trainer's gradients (after its clipping), then, during the search, one outer step on α with
  the first-order hypergradient on a validation batch.
* ``on_step_end`` after ``search_steps`` optimizer steps: discretize, drop unselected copies,
  freeze kept sources, update the optimizer again; the rest of the task trains the final
  architecture.
* ``on_train_end``: close the search if still open, drop the teacher. Between tasks,
  :meth:`SelectiveUpcyclingCallback.set_task` adds the finished task's examples to the replay
  buffer and sets the next task's validation batches.

Batches are dicts of tensors accepted by ``model(**batch)`` with ``labels`` (the loss is
``model(**batch).loss``). Only the first-order hypergradient is available here: the Trainer's
own batch is not visible to callbacks, and the finite-difference form needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

from .bilevel import BilevelUpcycler, ReservoirBuffer, UpcyclePlan
from .upcycle import UpcycledMoE, upcycle_ffn

__all__ = ["SelectiveUpcyclingCallback", "causal_lm_loss", "replace_mlp"]


def causal_lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``model(**batch).loss`` (the task objective of a Hugging Face causal LM)."""
    return model(**batch).loss


def replace_mlp(
    model: nn.Module,
    *,
    num_experts: int,
    top_k: int,
    expert_size: int | None = None,
    upcycle: bool = False,
    **config: Any,
) -> list[str]:
    """Replace every Llama-style MLP (``gate_proj``, ``up_proj``, ``down_proj``: LlamaMLP,
    Qwen2MLP, MistralMLP, ...) by an :class:`UpcycledMoE`. Returns the replaced module names.

    ``upcycle=True`` is sparse upcycling of the pretrained model: each MLP becomes
    ``num_experts`` SwiGLU copies of itself (:func:`~.upcycle.upcycle_ffn`; ``config`` goes to it,
    e.g. ``router_init``, ``noise``, ``generator``), so the model's logits are unchanged until
    the copies train. ``upcycle=False`` builds fresh, randomly initialised GELU experts of width
    ``expert_size`` (``config`` goes to :class:`UpcycledMoE`).
    """
    targets = [
        (parent, cname, f"{pname}.{cname}" if pname else cname)
        for pname, parent in model.named_modules()
        for cname, child in parent.named_children()
        if all(
            isinstance(getattr(child, a, None), nn.Linear)
            for a in ("gate_proj", "up_proj", "down_proj")
        )
    ]
    if not targets:
        raise ValueError(
            "model has no Llama-style MLP (a module with gate_proj, up_proj and down_proj)"
        )
    for parent, cname, full in targets:
        mlp = getattr(parent, cname)
        w = mlp.gate_proj.weight
        if upcycle:
            if expert_size is not None and expert_size != w.shape[0]:
                raise ValueError(
                    f"expert_size must be None or the MLP's intermediate size {w.shape[0]} when "
                    f"upcycle=True (the copies are the pretrained MLP); got {expert_size} at {full}"
                )
            moe = upcycle_ffn(mlp, num_experts, top_k=top_k, **config)
        else:
            if expert_size is None:
                raise ValueError("expert_size is required when upcycle=False (random experts)")
            moe = UpcycledMoE(w.shape[1], num_experts, top_k, expert_size, **config)
        setattr(parent, cname, moe.to(device=w.device, dtype=w.dtype))
    return [full for _, _, full in targets]


def _sync_optimizer(optimizer: Any, model: nn.Module) -> None:
    """Point the optimizer at the model's current trainable parameters; state of replaced ones is dropped."""
    opt = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
    current = [p for p in model.parameters() if p.requires_grad]
    known = {id(p) for g in opt.param_groups for p in g["params"]}
    live = {id(p) for p in current}
    for g in opt.param_groups:
        g["params"] = [p for p in g["params"] if id(p) in live]
    new = [p for p in current if id(p) not in known]
    if new:
        opt.param_groups[0]["params"].extend(new)
    for p in list(opt.state):
        if id(p) not in live:
            del opt.state[p]


class SelectiveUpcyclingCallback(TrainerCallback):
    """Runs :class:`BilevelUpcycler` inside ``Trainer.train()``, one call per task.

    Args:
        upcycler: built on the Trainer's model, with ``loss_fn=causal_lm_loss`` (or your own).
        val_batches: the current task's validation batches for the outer objective; replace
            them between tasks with :meth:`set_task`.
        search_steps: optimizer steps of the search phase at the start of each task.
        replay: a :class:`ReservoirBuffer` of past examples (one tensor per key of
            ``batch_keys``), filled by :meth:`set_task` / ``on_train_end``.
        replay_batch_size: examples per replay batch.
        batch_keys: the keys of a batch dict, in the buffer's tuple order.
        cache_teacher_features: compute the frozen teacher's CKA features of the whole replay
            buffer once per ``train()`` (:meth:`BilevelUpcycler.cache_teacher`) instead of a
            teacher forward every step; costs buffer size × sequence length × width per CKA
            layer of memory.
    """

    def __init__(
        self,
        upcycler: BilevelUpcycler,
        *,
        val_batches: Sequence[dict[str, torch.Tensor]] = (),
        search_steps: int = 20,
        replay: ReservoirBuffer | None = None,
        replay_batch_size: int = 16,
        batch_keys: Sequence[str] = ("input_ids", "attention_mask", "labels"),
        cache_teacher_features: bool = False,
    ) -> None:
        if upcycler.mode != "first_order":
            raise ValueError(
                "upcycler.hypergradient must be 'first_order' inside a Trainer callback"
            )
        if not isinstance(search_steps, int) or search_steps < 0:
            raise ValueError(f"search_steps must be a non-negative int; got {search_steps!r}")
        self.up, self.search_steps = upcycler, search_steps
        self.val_batches = list(val_batches)
        self.replay, self.replay_batch_size, self.batch_keys = (
            replay,
            replay_batch_size,
            tuple(batch_keys),
        )
        self.cache_teacher_features = cache_teacher_features
        self.plans: list[UpcyclePlan] = []
        self._pending: dict[str, torch.Tensor] | None = None
        self._start = 0
        self._i = 0

    def set_task(
        self,
        val_batches: Sequence[dict[str, torch.Tensor]],
        remember: dict[str, torch.Tensor] | None = None,
    ) -> None:
        """Before the next ``train()``: the new task's validation batches; ``remember``, examples
        of the task just finished to add to the replay buffer (one tensor per ``batch_keys``)."""
        self.val_batches = list(val_batches)
        if remember is not None:
            if self.replay is None:
                raise ValueError(
                    "remember needs a replay buffer (pass replay=ReservoirBuffer(...))"
                )
            missing = [k for k in self.batch_keys if k not in remember]
            if missing:
                raise ValueError(f"remember is missing keys {missing} of batch_keys")
            self.replay.add(*(remember[k] for k in self.batch_keys))

    @property
    def searching(self) -> bool:
        return self.up.mask is not None

    def _replay_batch(
        self, device: torch.device
    ) -> tuple[dict[str, torch.Tensor] | None, torch.Tensor | None]:
        if self.replay is None or len(self.replay) == 0:
            return None, None
        cols, idx = self.replay.sample(self.replay_batch_size, return_index=True)
        batch = {k: v.to(device) for k, v in zip(self.batch_keys, cols)}
        return batch, (idx if self.cache_teacher_features else None)

    def _cache(self) -> None:
        if self.cache_teacher_features and self.replay is not None and len(self.replay) > 0:
            device = next(self.up.model.parameters()).device
            self.up.cache_teacher(
                self.replay,
                batch_size=self.replay_batch_size,
                collate=lambda cols: {k: v.to(device) for k, v in zip(self.batch_keys, cols)},
            )

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self._start = state.global_step
        if self.search_steps > 0:
            if not self.val_batches:
                raise ValueError(
                    "val_batches is empty: pass the task's validation batches (set_task)"
                )
            self.up.begin_task()
        else:
            self.up.snapshot_teacher()
        self._cache()
        if optimizer is not None and model is not None:
            _sync_optimizer(optimizer, model)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.searching:
            self.up.sample_presence()

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        device = next(self.up.model.parameters()).device
        replay, idx = self._replay_batch(device)
        if replay is not None:
            self.up.regularizer(replay, idx).backward()  # accumulates into the Trainer's .grad
        if self.searching:
            val = {
                k: v.to(device)
                for k, v in self.val_batches[self._i % len(self.val_batches)].items()
            }
            self._i += 1
            self.up.outer_step(val, val, replay, replay_index=idx)
            assert self.up.mask is not None
            self.up.mask.advance()

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.searching and state.global_step - self._start >= self.search_steps:
            self._finish(model, optimizer)

    def on_train_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.searching:
            self._finish(model, optimizer)
        self.up.end_task()

    def _finish(self, model, optimizer) -> None:
        self.plans.append(self.up.end_search())
        if optimizer is not None and model is not None:
            _sync_optimizer(optimizer, model)
