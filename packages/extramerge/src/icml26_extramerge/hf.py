"""`transformers.Trainer` integration: ExtraMergeCallback (needs the `hf` extra).

During training the callback snapshots the model every `every` optimizer steps from `start_step`
on (the stable phase of a WSD / constant schedule) into a CPU window of the last `window`
snapshots, appends the window's SMA to a short merged trajectory, and at the end of training
writes

    <output_dir>/merged.safetensors      M_K, the SMA of the last `window` snapshots
    <output_dir>/extramerge.safetensors  theta_EM = M_K + alpha g   (see `extra_merge`)

Memory: (window + history) copies of the model on CPU. The callback only reads parameters, so
it works with any optimizer (AdamW, torch.optim.Muon, ...). Load a result with
`model.load_state_dict(safetensors.torch.load_file(path), strict=False)` plus `model.tie_weights()`
(tied keys are written once each), or use `callback.result.state_dict` directly.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import TrainerCallback

from .extrapolate import DEFAULT_ALPHAS, ExtraMergeResult, extra_merge
from .merge import _alias_map, save_checkpoint, sma

__all__ = ["ExtraMergeCallback"]


def _cpu_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    sd = model.state_dict()
    alias = _alias_map(sd)
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        out[k] = out[alias[k]] if alias[k] != k else v.detach().to("cpu", copy=True)
    return out


class ExtraMergeCallback(TrainerCallback):
    """Streaming SMA merge + Extra-Merge extrapolation for `transformers.Trainer`.

    every: snapshot interval in optimizer steps (the paper's checkpoint interval Delta)
    window: W, snapshots per SMA merge
    start_step: first step eligible for a snapshot (start of the stable phase)
    history: merged checkpoints kept for the direction (2 suffices for "diff"; more for "pc1")
    alpha, direction, eval_fn, alphas: passed to `extra_merge` at the end of training
    output_dir: where to write the two files (default: <TrainingArguments.output_dir>/extramerge);
        None with save=False writes nothing
    """

    def __init__(
        self,
        *,
        every: int,
        window: int,
        start_step: int = 0,
        history: int = 2,
        alpha: float | None = None,
        direction: str = "diff",
        eval_fn: Callable[[dict[str, torch.Tensor]], float] | None = None,
        alphas: Sequence[float] = DEFAULT_ALPHAS,
        output_dir: str | None = None,
        save: bool = True,
    ) -> None:
        for name, val, lo in (("every", every, 1), ("window", window, 1), ("history", history, 2)):
            if not isinstance(val, int) or val < lo:
                raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
        if not isinstance(start_step, int) or start_step < 0:
            raise ValueError(f"start_step: must be an int >= 0, got {start_step!r}")
        if direction not in ("diff", "pc1"):
            raise ValueError(f"direction: expected 'diff' or 'pc1', got {direction!r}")
        self.every, self.window, self.start_step = every, window, start_step
        self.alpha, self.direction, self.eval_fn, self.alphas = alpha, direction, eval_fn, alphas
        self.output_dir, self.save = output_dir, save
        self.snapshots: deque[dict[str, torch.Tensor]] = deque(maxlen=window)
        self.snapshot_steps: deque[int] = deque(maxlen=window)
        self.merged: deque[dict[str, torch.Tensor]] = deque(maxlen=history)
        self.result: ExtraMergeResult | None = None

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any):
        step = int(state.global_step)
        if model is None or step < self.start_step or (step - self.start_step) % self.every:
            return control
        self.snapshots.append(_cpu_snapshot(model))
        self.snapshot_steps.append(step)
        if len(self.snapshots) == self.window:
            self.merged.append(sma(self.snapshots))
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any):
        if len(self.merged) < 2:
            raise RuntimeError(
                f"ExtraMergeCallback: {len(self.merged)} merged checkpoint(s) at the end of "
                f"training; need 2, i.e. at least window + 1 = {self.window + 1} snapshots "
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
