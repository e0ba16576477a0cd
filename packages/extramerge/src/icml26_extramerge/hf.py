"""`transformers.Trainer` integration: ExtraMergeCallback (needs the `hf` extra).

During training the callback snapshots the model every `every` optimizer steps from `start_step`
on (the stable phase of a WSD / constant schedule) and keeps a streaming merge:

    merge="sma":  a window of the last `window` snapshots and their running sum S (float64),
                  S <- S + theta_new - theta_oldest, M_k = S / W      O(|theta|) work per snapshot
    merge="ema":  m_k = decay m_{k-1} + (1 - decay) theta_k           (no window kept)

appends each merge M_k to a short merged trajectory (the last `history` of them) and, at the end
of training, writes

    <output_dir>/merged.safetensors      M_K, the latest merge
    <output_dir>/extramerge.safetensors  theta_EM = M_K + alpha g   (see `extra_merge`)

The configuration is checked in `on_train_begin` against `state.max_steps`: a schedule that
cannot produce two merges raises there, before any training step.

Memory on CPU: (window + 1 float64 sum + history) model copies for SMA, (1 + history) for EMA.
The callback only reads parameters, so it works with any optimizer (AdamW, torch.optim.Muon).

Sharded models: parameters that are DTensors (FSDP2 `fully_shard`, tensor parallel) or live in
FSDP1 `FullyShardedDataParallel` modules are gathered with torch's
`get_model_state_dict(full_state_dict=True, cpu_offload=True)` (a collective, run on every rank
at every snapshot; only rank 0 receives and keeps the full state dict, and only rank 0 merges,
calls `eval_fn` and writes the files). DeepSpeed ZeRO-3 partitions are refused with an error
unless `state_dict_fn` is given, e.g. `state_dict_fn=accelerator.get_state_dict` (accelerate's
collective gather; it returns {} on the ranks that do not keep the result).

Load a result with `model.load_state_dict(safetensors.torch.load_file(path), strict=False)`
plus `model.tie_weights()` (tied keys are written once each), or use `callback.result.state_dict`.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import TrainerCallback

from .extrapolate import DEFAULT_ALPHAS, ExtraMergeResult, extra_merge
from .merge import _alias_map, _is_float, save_checkpoint

__all__ = ["ExtraMergeCallback"]

StateDictFn = Callable[[torch.nn.Module], dict]


def _is_sharded(model: torch.nn.Module) -> str | None:
    """'fsdp' / 'dtensor' / 'zero3' when parameters are sharded across ranks, else None."""
    dtensor: tuple[type, ...] = ()
    try:
        from torch.distributed.tensor import DTensor

        dtensor = (DTensor,)
    except ImportError:  # pragma: no cover - torch without distributed
        pass
    for p in model.parameters():
        if hasattr(p, "ds_id") or hasattr(p, "ds_status"):
            return "zero3"
        if dtensor and isinstance(p, dtensor):
            return "dtensor"
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # pragma: no cover
        return None
    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        return "fsdp"
    return None


def _full_state_dict(model: torch.nn.Module, state_dict_fn: StateDictFn | None) -> dict:
    """The full (unsharded) state dict on CPU, or {} on a rank that does not keep it."""
    if state_dict_fn is not None:
        sd = state_dict_fn(model)
    else:
        kind = _is_sharded(model)
        if kind == "zero3":
            raise RuntimeError(
                "ExtraMergeCallback: the model's parameters are DeepSpeed ZeRO-3 partitions; a "
                "snapshot of model.state_dict() would hold this rank's shards only. Pass "
                "state_dict_fn=accelerator.get_state_dict (with "
                "stage3_gather_16bit_weights_on_model_save=true) or use ZeRO stage <= 2 / FSDP."
            )
        if kind is None:
            sd = model.state_dict()
        else:  # FSDP1 / FSDP2 / DTensor: collective all-gather, full tensors on rank 0 only
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_model_state_dict,
            )

            sd = get_model_state_dict(
                model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
    alias = _alias_map(sd)
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"state_dict_fn: key {k!r} is a {type(v).__name__}, not a Tensor")
        out[k] = out[alias[k]] if alias[k] != k else v.detach().to("cpu", copy=True)
    return out


def _n_snapshots(max_steps: int, every: int, start_step: int) -> int:
    """Steps s in [max(start_step, 1), max_steps] with (s - start_step) % every == 0."""
    first = start_step if start_step >= 1 else every  # global_step is >= 1 at on_step_end
    return 0 if max_steps < first else (max_steps - first) // every + 1


class ExtraMergeCallback(TrainerCallback):
    """Streaming SMA / EMA merge + Extra-Merge extrapolation for `transformers.Trainer`.

    every: snapshot interval in optimizer steps (the paper's checkpoint interval Delta)
    window: W, snapshots per SMA merge (merge="sma")
    start_step: first step eligible for a snapshot (start of the stable phase)
    history: merged checkpoints kept for the direction (2 suffices for "diff"; more for "pc1")
    merge: "sma" (the paper's base) or "ema" (decay required): the trajectory extrapolated
    decay: EMA decay b in (0, 1) per snapshot (merge="ema")
    alpha, direction, eval_fn, alphas: passed to `extra_merge` at the end of training (eval_fn
        gets full CPU state dicts, on rank 0 only in a distributed run)
    output_dir: where to write the two files (default: <TrainingArguments.output_dir>/extramerge)
    save: write the files at the end of training
    state_dict_fn: model -> full CPU-able state dict ({} on ranks that keep nothing); default
        model.state_dict(), or torch's full-state-dict gather for FSDP / DTensor parameters
    """

    def __init__(
        self,
        *,
        every: int,
        window: int | None = None,
        start_step: int = 0,
        history: int = 2,
        merge: str = "sma",
        decay: float | None = None,
        alpha: float | None = None,
        direction: str = "diff",
        eval_fn: Callable[[dict[str, torch.Tensor]], float] | None = None,
        alphas: Sequence[float] = DEFAULT_ALPHAS,
        output_dir: str | None = None,
        save: bool = True,
        state_dict_fn: StateDictFn | None = None,
    ) -> None:
        for name, val, lo in (("every", every, 1), ("history", history, 2)):
            if not isinstance(val, int) or val < lo:
                raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
        if not isinstance(start_step, int) or start_step < 0:
            raise ValueError(f"start_step: must be an int >= 0, got {start_step!r}")
        if merge not in ("sma", "ema"):
            raise ValueError(f"merge: expected 'sma' or 'ema', got {merge!r}")
        if merge == "sma" and (not isinstance(window, int) or window < 1):
            raise ValueError(f"window: must be an int >= 1 for merge='sma', got {window!r}")
        if merge == "ema" and (decay is None or not 0.0 < float(decay) < 1.0):
            raise ValueError(f"decay: must lie in (0, 1) for merge='ema', got {decay!r}")
        if direction not in ("diff", "pc1"):
            raise ValueError(f"direction: expected 'diff' or 'pc1', got {direction!r}")
        self.every, self.start_step, self.history = every, start_step, history
        self.merge = merge
        self.window: int = window if merge == "sma" and window is not None else 1
        self.decay = None if decay is None else float(decay)
        self.alpha, self.direction, self.eval_fn, self.alphas = alpha, direction, eval_fn, alphas
        self.output_dir, self.save, self.state_dict_fn = output_dir, save, state_dict_fn
        self.snapshots: deque[dict[str, torch.Tensor]] = deque(maxlen=self.window)
        self.snapshot_steps: deque[int] = deque(maxlen=self.window)
        self.merged: deque[dict[str, torch.Tensor]] = deque(maxlen=history)
        self.result: ExtraMergeResult | None = None
        self._acc: dict[str, torch.Tensor] = {}  # running window sum (SMA) or EMA state, float64
        self._keys: list[str] = []  # floating keys that own their storage (tied keys skipped)
        self._n = 0  # snapshots kept
        self._calls = 0  # snapshot steps seen (more than _n on ranks that keep nothing)

    # --- configuration ----------------------------------------------------------------------
    def _needed(self) -> int:
        return self.window + 1 if self.merge == "sma" else 2

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any):
        """Fail before the first step if max_steps cannot give two merged checkpoints."""
        max_steps = int(getattr(state, "max_steps", 0) or 0)
        if max_steps > 0:
            n = _n_snapshots(max_steps, self.every, self.start_step)
            if n < self._needed():
                what = f"window + 1 = {self.window + 1}" if self.merge == "sma" else "2 (EMA)"
                raise ValueError(
                    f"ExtraMergeCallback: every={self.every}, start_step={self.start_step} give "
                    f"{n} snapshot(s) in max_steps={max_steps} steps; need at least {what} for "
                    f"two merged checkpoints (window={self.window}). Lower `every`, `window` or "
                    f"`start_step`, or train longer."
                )
        return control

    # --- streaming merge --------------------------------------------------------------------
    def _take(self, step: int, model: torch.nn.Module) -> None:
        self._calls += 1
        sd = _full_state_dict(model, self.state_dict_fn)
        if not sd:  # a rank that does not keep the gathered state dict
            return
        if not self._keys:
            alias = _alias_map(sd)
            self._keys = [k for k, v in sd.items() if _is_float(v) and alias[k] == k]
        if self.merge == "sma":
            old = self.snapshots[0] if len(self.snapshots) == self.window else None
            for k in self._keys:
                x = sd[k].to(torch.float64)
                if k not in self._acc:
                    self._acc[k] = x.clone()
                else:  # S <- S + theta_new - theta_oldest (the oldest leaves the window)
                    self._acc[k].add_(x)
                    if old is not None:
                        self._acc[k].sub_(old[k].to(torch.float64))
            self.snapshots.append(sd)
            self.snapshot_steps.append(step)
            if len(self.snapshots) == self.window:
                self.merged.append(self._materialise(sd, 1.0 / self.window))
        else:
            b = float(self.decay)  # type: ignore[arg-type]
            for k in self._keys:
                x = sd[k].to(torch.float64)
                if k not in self._acc:
                    self._acc[k] = x.clone()  # m_1 = theta_1
                else:
                    self._acc[k].mul_(b).add_(x, alpha=1.0 - b)
            self.snapshot_steps.append(step)
            self.merged.append(self._materialise(sd, 1.0))
        self._n += 1

    def _materialise(self, latest: dict[str, torch.Tensor], scale: float) -> dict:
        """acc * scale cast to the snapshot dtypes; integer buffers from the latest; ties kept."""
        alias = _alias_map(latest)
        out: dict[str, torch.Tensor] = {}
        for k, v in latest.items():
            if alias[k] != k:
                out[k] = out[alias[k]]
            elif k in self._acc:
                out[k] = (self._acc[k] * scale).to(v.dtype)
            else:
                out[k] = v.clone()
        return out

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any):
        step = int(state.global_step)
        if model is None or step < self.start_step or (step - self.start_step) % self.every:
            return control
        self._take(step, model)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any):
        if self._calls > 0 and self._n == 0:
            return control  # a rank that received no gathered state dict: rank 0 merges
        if len(self.merged) < 2:
            raise RuntimeError(
                f"ExtraMergeCallback: {len(self.merged)} merged checkpoint(s) at the end of "
                f"training; need 2, i.e. at least {self._needed()} snapshots "
                f"(every={self.every} steps from start_step={self.start_step})"
            )
        self.result = extra_merge(
            list(self.merged),
            alpha=self.alpha,
            direction=self.direction,
            eval_fn=self.eval_fn,
            alphas=self.alphas,
        )
        if self.save:
            out = self.output_dir or os.path.join(args.output_dir, "extramerge")
            os.makedirs(out, exist_ok=True)
            save_checkpoint(self.merged[-1], os.path.join(out, "merged.safetensors"))
            save_checkpoint(self.result.state_dict, os.path.join(out, "extramerge.safetensors"))
        return control
