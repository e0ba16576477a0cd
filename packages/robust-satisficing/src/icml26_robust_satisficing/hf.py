"""transformers integration: `IRSTrainer`, a `transformers.Trainer` whose loss is IRS.

Install with the `[hf]` extra. Each batch carries a `group_ids` column (B,) that the trainer
pops before calling the model; the model's logits give per-sample losses (cross-entropy for
classification, squared error when `num_labels == 1`; pass `per_sample_loss_fn` for anything
else), which `IRSLoss` turns into the Danskin loss (p*·L)/KL(p*‖π). Logged: `irs/kappa`,
`irs/kl`, `irs/h_star`, `irs/worst_group_loss`.

    from icml26_robust_satisficing import IRSLoss
    from icml26_robust_satisficing.hf import IRSTrainer
    trainer = IRSTrainer(model=model, args=args, train_dataset=ds,
                         irs_loss=IRSLoss.from_counts(train_group_counts))

Rows need a `group_ids` integer column (or pass `group_key=`); it is kept through
`remove_unused_columns`. With `irs_loss=IRSLoss()` (no prior) it tilts over samples instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from transformers import Trainer

from .irs import IRSLoss

__all__ = ["IRSTrainer", "default_per_sample_loss"]


def default_per_sample_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B,) losses: cross-entropy for logits (B, C>1), squared error for (B,) / (B, 1)."""
    if logits.ndim == 2 and logits.shape[-1] > 1:
        return F.cross_entropy(logits.float(), labels.long(), reduction="none")
    if logits.ndim <= 2:
        return (logits.float().reshape(-1) - labels.float().reshape(-1)) ** 2
    raise ValueError(
        f"default_per_sample_loss handles logits (B,) or (B, C); got {tuple(logits.shape)}; "
        "pass per_sample_loss_fn= to IRSTrainer"
    )


class IRSTrainer(Trainer):
    """`transformers.Trainer` whose `compute_loss` is the IRS loss over the batch's groups.

    Semantics under accumulation and data parallelism (as the official code, which trains on
    one device):

    - **Gradient accumulation**: each micro-batch is its own IRS problem (its own group losses,
      restricted prior, τ, p* and KL); `num_items_in_batch` is ignored, and the Trainer averages
      the micro-batch losses. IRS is not additive over samples, so 4×2 is *not* 8×1: an IRS step
      on the union of micro-batches would need the group sums before the inner max.
    - **DDP**: each rank computes p* from its own shard's group losses (no all-reduce of the
      group sums), and DDP averages the ranks' gradients. With small per-rank batches a group
      may be absent on one rank and present on another; use per-rank batches large enough to
      hold every group, or one process.
    """

    def __init__(
        self,
        *args: Any,
        irs_loss: IRSLoss,
        group_key: str = "group_ids",
        per_sample_loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(irs_loss, IRSLoss):
            raise TypeError(f"irs_loss must be an IRSLoss, got {type(irs_loss).__name__}")
        self.irs_loss = irs_loss
        self.group_key = group_key
        self.per_sample_loss_fn = per_sample_loss_fn or default_per_sample_loss
        super().__init__(*args, **kwargs)

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()  # type: ignore[misc]
        cols = self._signature_columns  # type: ignore[has-type]
        if cols is not None and self.group_key not in cols:
            self._signature_columns = [*cols, self.group_key]

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        inputs = dict(inputs)
        group_ids = inputs.pop(self.group_key, None)
        if group_ids is None and self.irs_loss.prior is not None:
            raise KeyError(
                f"batch has no '{self.group_key}' column; IRSTrainer needs group ids per row"
            )
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        per_sample = self.per_sample_loss_fn(logits, labels)  # (B,)
        loss, stats = self.irs_loss(per_sample, group_ids)
        if model.training and self.state.global_step % max(self.args.logging_steps, 1) == 0:
            fr = stats.fragility
            present = stats.prior > 0
            self._irs_logs = {
                "irs/kappa": float(fr.kappa),
                "irs/kl": float(fr.kl),
                "irs/h_star": float(fr.h_star),
                "irs/worst_group_loss": float(stats.group_losses[present].max()),
            }
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        extra = getattr(self, "_irs_logs", None)
        if extra and "loss" in logs:
            logs = {**logs, **extra}
        super().log(logs, *args, **kwargs)
