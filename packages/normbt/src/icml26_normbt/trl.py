"""TRL integration: `NormBTRewardTrainer`, a `trl.RewardTrainer` whose loss is NormBT.

Install with the `[trl]` extra. Everything TRL's RewardTrainer does is kept (dataset
preparation, `DataCollatorForPreference`, margins, `center_rewards_coefficient`, metrics);
only `compute_loss` changes. With `normbt_enabled=False` the loss is TRL's BT loss.

    from icml26_normbt.trl import NormBTConfig, NormBTRewardTrainer
    args = NormBTConfig(output_dir="rm", normbt_decay=0.99)
    trainer = NormBTRewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import RewardConfig, RewardTrainer

from .loss import NormBTState, bt_loss, last_token_pool, normbt_loss, pair_distance

__all__ = ["NormBTConfig", "NormBTRewardTrainer"]

STATE_FILE = "normbt_state.pt"


@dataclass
class NormBTConfig(RewardConfig):
    """`trl.RewardConfig` plus the NormBT options (see `icml26_normbt.normbt_loss`)."""

    normbt_enabled: bool = field(
        default=True, metadata={"help": "Use NormBT; False gives TRL's Bradley-Terry loss."}
    )
    normbt_decay: float = field(
        default=0.99,
        metadata={"help": "EMA decay of the mean pair distance m (0: the global batch mean)."},
    )
    normbt_eps: float = field(
        default=1e-6, metadata={"help": "ε in w = m/(d+ε); only guards identical pooled states."}
    )
    normbt_clip: float | None = field(
        default=None, metadata={"help": "Upper bound on the pair weight w (None: no clipping)."}
    )
    normbt_renormalize: bool = field(
        default=False, metadata={"help": "Rescale the weights of each batch to mean 1."}
    )
    normbt_layer: int = field(
        default=-1,
        metadata={
            "help": "hidden_states index that defines d (-1: the state the score head reads)."
        },
    )
    normbt_sync: bool = field(
        default=True, metadata={"help": "All-reduce the batch-mean distance across ranks."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.normbt_decay < 1.0:
            raise ValueError(f"`normbt_decay` must be in [0, 1), got {self.normbt_decay}")
        if self.normbt_eps < 0:
            raise ValueError(f"`normbt_eps` must be >= 0, got {self.normbt_eps}")
        if self.normbt_clip is not None and not self.normbt_clip > 0:
            raise ValueError(f"`normbt_clip` must be None or > 0, got {self.normbt_clip}")


def _pad_token_id(model: torch.nn.Module) -> int | None:
    cfg = getattr(model, "config", None)
    if cfg is None:
        return None
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return getattr(text_cfg, "pad_token_id", None)


class NormBTRewardTrainer(RewardTrainer):
    """`trl.RewardTrainer` with the NormBT loss; logs distance and weight quantiles.

    Logged (besides TRL's metrics): `normbt/mean_distance` (m), `normbt/distance_p{10,50,90}`,
    `normbt/weight_p{10,50,90}`. The EMA state is saved to `normbt_state.pt` in each checkpoint
    and restored on `train(resume_from_checkpoint=...)`.
    """

    args: NormBTConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, NormBTConfig):
            raise TypeError(f"`args` must be a NormBTConfig, got {type(self.args).__name__}")
        self.normbt_state = NormBTState(self.args.normbt_decay, sync=self.args.normbt_sync).to(
            self.accelerator.device
        )

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mode = "train" if self.model.training else "eval"
        args = self.args

        # Same forward as RewardTrainer, asking for the hidden states that define d.
        inputs["use_cache"] = False
        model_inputs = {k: v for k, v in inputs.items() if k != "margin"}
        outputs = model(**model_inputs, output_hidden_states=True)
        rewards_chosen, rewards_rejected = torch.chunk(outputs.logits.squeeze(-1), chunks=2)
        margin = inputs.get("margin")

        # Pooled states: (2B, T, H) -> (2B, H) at the last non-pad token, chosen then rejected.
        hidden = outputs.hidden_states[args.normbt_layer]
        pooled = last_token_pool(hidden, inputs["input_ids"], _pad_token_id(self.model))
        h_chosen, h_rejected = torch.chunk(pooled, chunks=2)

        if args.normbt_enabled:
            self.normbt_state.train(mode == "train")
            loss, weights = normbt_loss(
                rewards_chosen,
                rewards_rejected,
                h_chosen,
                h_rejected,
                state=self.normbt_state,
                margin=margin,
                eps=args.normbt_eps,
                clip=args.normbt_clip,
                renormalize=args.normbt_renormalize,
            )
            distance = pair_distance(h_chosen.detach(), h_rejected.detach())
        else:
            loss = bt_loss(rewards_chosen, rewards_rejected, margin)
            distance = pair_distance(h_chosen.detach(), h_rejected.detach())
            weights = torch.ones_like(distance)

        if args.center_rewards_coefficient is not None:
            loss += args.center_rewards_coefficient * torch.mean(
                (rewards_chosen + rewards_rejected) ** 2
            )

        if mode == "train":
            num_tokens = (
                self.accelerator.gather_for_metrics(inputs["attention_mask"].sum()).sum().item()
            )
            self._total_train_tokens += num_tokens // self._tp_size
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]

        with torch.no_grad():
            all_rewards = self.accelerator.gather(outputs.logits)
            self._metrics[mode]["min_reward"].append(all_rewards.min().item())
            self._metrics[mode]["mean_reward"].append(all_rewards.mean().item())
            self._metrics[mode]["max_reward"].append(all_rewards.max().item())
            accuracy = (rewards_chosen > rewards_rejected).float().mean()
            accuracy = self.accelerator.gather_for_metrics(accuracy).mean().item()
            self._metrics[mode]["accuracy"].append(accuracy)
            mean_margin = (rewards_chosen - rewards_rejected).mean()
            mean_margin = self.accelerator.gather_for_metrics(mean_margin).mean()
            self._metrics[mode]["margin"].append(mean_margin.item())

            qs = torch.tensor([0.1, 0.5, 0.9], device=distance.device)
            all_d = self.accelerator.gather_for_metrics(distance.float())
            all_w = self.accelerator.gather_for_metrics(weights.detach().float())
            for name, vals in (("distance", all_d), ("weight", all_w)):
                for q, v in zip((10, 50, 90), torch.quantile(vals, qs).tolist()):
                    self._metrics[mode][f"normbt/{name}_p{q}"].append(v)
            if args.normbt_enabled:
                m = float(self.normbt_state.mean_distance)
                self._metrics[mode]["normbt/mean_distance"].append(m)

        return (loss, outputs) if return_outputs else loss

    # EMA state travels with the checkpoint (beside the RNG state Trainer already saves).
    def _save_rng_state(self, output_dir: str) -> None:
        super()._save_rng_state(output_dir)
        if self.args.should_save:
            os.makedirs(output_dir, exist_ok=True)
            torch.save(self.normbt_state.state_dict(), os.path.join(output_dir, STATE_FILE))

    def _load_rng_state(self, checkpoint: str | None) -> None:
        super()._load_rng_state(checkpoint)
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, STATE_FILE)
        if os.path.isfile(path):
            sd = torch.load(path, map_location=self.accelerator.device, weights_only=True)
            self.normbt_state.load_state_dict(sd)
