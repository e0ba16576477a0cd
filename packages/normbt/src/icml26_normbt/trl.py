"""TRL integration: `NormBTRewardTrainer`, a `trl.RewardTrainer` whose loss is NormBT.

Install with the `[trl]` extra. Everything TRL's RewardTrainer does is kept (dataset
preparation, `DataCollatorForPreference`, margins, `center_rewards_coefficient`, metrics,
`predict()` outputs): `compute_loss` calls TRL's own `compute_loss` and reweights its per-pair
terms. The pooled representation that defines d is read by a forward pre-hook on the reward
head (`score` for decoder models, `classifier` for BERT-style encoders), so no hidden states are
requested and none leave `compute_loss`. With `normbt_enabled=False` the loss is TRL's.

    from icml26_normbt.trl import NormBTConfig, NormBTRewardTrainer
    args = NormBTConfig(output_dir="rm", normbt_decay=0.99)
    trainer = NormBTRewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)

The running mean m is folded in once per optimizer step (a `TrainerCallback`), so gradient
accumulation gives every micro-batch of a step the same m, and saved to `normbt_state.pt` in
each checkpoint folder; `train(resume_from_checkpoint=...)` restores it.
"""

from __future__ import annotations

import os
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from trl import RewardConfig, RewardTrainer

from .head import capture_head_input, find_reward_head, pooled_head_input
from .loss import NormBTState, _check_bool, _check_float, normbt_loss, pair_distance

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
        metadata={"help": "EMA decay of the mean pair distance m (0: the last step's mean)."},
    )
    normbt_eps: float = field(
        default=0.05,
        metadata={"help": "ε in w = m/(d+ε·m), relative to m: w ≤ 1/ε (0: m/d exactly)."},
    )
    normbt_clip: float | None = field(
        default=None, metadata={"help": "Upper bound on the pair weight w (None: no clipping)."}
    )
    normbt_renormalize: bool = field(
        default=False, metadata={"help": "Rescale the weights of each batch to mean 1."}
    )
    normbt_fixed_m: float | None = field(
        default=None,
        metadata={"help": "A fixed m instead of the EMA (1.0: w = 1/(d+ε), an ablation)."},
    )
    normbt_head: str | None = field(
        default=None,
        metadata={
            "help": "Dotted name of the reward head whose input defines d (None: `score`, "
            "`classifier` or `v_head`, found automatically)."
        },
    )
    normbt_sync: bool = field(
        default=True, metadata={"help": "All-reduce the batch-mean distance across ranks."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bool("normbt_enabled", self.normbt_enabled)
        _check_float("normbt_decay", self.normbt_decay, hi=1.0)
        _check_float("normbt_eps", self.normbt_eps)
        if self.normbt_clip is not None:
            _check_float("normbt_clip", self.normbt_clip, lo_open=True)
        if self.normbt_fixed_m is not None:
            _check_float("normbt_fixed_m", self.normbt_fixed_m, lo_open=True)
        _check_bool("normbt_renormalize", self.normbt_renormalize)
        _check_bool("normbt_sync", self.normbt_sync)
        if self.normbt_head is not None and not isinstance(self.normbt_head, str):
            raise TypeError(f"`normbt_head` must be a str or None, got {self.normbt_head!r}")


def _pad_token_id(model: torch.nn.Module) -> int | None:
    cfg = getattr(model, "config", None)
    if cfg is None:
        return None
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return getattr(text_cfg, "pad_token_id", None)


class _NormBTCallback(TrainerCallback):
    """Folds each optimizer step into m; writes m into every checkpoint folder."""

    def __init__(self, trainer: NormBTRewardTrainer) -> None:
        self.state = trainer.normbt_state

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.state.step()

    def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if args.should_save:
            folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            os.makedirs(folder, exist_ok=True)
            torch.save(self.state.state_dict(), os.path.join(folder, STATE_FILE))


class NormBTRewardTrainer(RewardTrainer):
    """`trl.RewardTrainer` with the NormBT loss; logs distance and weight quantiles.

    Logged (besides TRL's metrics): `normbt/bt_loss` (the unweighted BT loss of the same batch,
    for comparison with `loss`), `normbt/mean_distance` (the m each batch was weighted with: on step 1 the batch's
    own mean, afterwards the EMA as it stood before the step), `normbt/distance_p{10,50,90}`,
    `normbt/weight_p{10,50,90}`. The EMA state is saved to `normbt_state.pt` in each checkpoint
    and restored on `train(resume_from_checkpoint=...)`.
    """

    args: NormBTConfig
    _tag_names = ["trl", "reward-trainer", "normbt"]  # noqa: RUF012 (TRL's own convention)
    _paper = {  # noqa: RUF012
        "title": "When Distance Distracts: Representation Distance Bias in BT-Loss for Reward "
        "Models",
        "id": "2512.06343",
        "citation": textwrap.dedent("""\
            @article{xie2025normbt,
                title   = {{When Distance Distracts: Representation Distance Bias in BT-Loss for Reward Models}},
                author  = {Xie, T. and Bai, A. and Ban, Y. and Hong, Y. and Li, H. and Hsieh, C.-J.},
                journal = {arXiv preprint arXiv:2512.06343},
                year    = 2025
            }"""),
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, NormBTConfig):
            raise TypeError(f"`args` must be a NormBTConfig, got {type(self.args).__name__}")
        self.normbt_state = NormBTState(
            self.args.normbt_decay, sync=self.args.normbt_sync, auto_step=False
        ).to(self.accelerator.device)
        try:
            self._head: torch.nn.Module | None = find_reward_head(
                self.accelerator.unwrap_model(self.model), self.args.normbt_head
            )
        except ValueError as err:
            if self.args.normbt_enabled:
                raise ValueError(f"`normbt_head`: {err}") from err
            warnings.warn(f"NormBT disabled and {err}; distances are not logged", stacklevel=2)
            self._head = None
        self.add_callback(_NormBTCallback(self))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self._head is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        mode = "train" if self.model.training else "eval"
        args = self.args
        with capture_head_input(self._head) as captured:
            loss, outputs = super().compute_loss(
                model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
            )
        # (2B, H): the representation the head read, chosen rows then rejected
        pooled = pooled_head_input(captured, inputs["input_ids"], _pad_token_id(self.model))
        h_chosen, h_rejected = torch.chunk(pooled, chunks=2)
        rewards_chosen, rewards_rejected = torch.chunk(outputs.logits.squeeze(-1), chunks=2)
        margin = inputs.get("margin")
        diff = rewards_chosen - rewards_rejected - (0.0 if margin is None else margin)
        bt_plain = -F.logsigmoid(diff.detach()).mean()  # unweighted BT, for the log

        if args.normbt_enabled:
            self.normbt_state.train(mode == "train")  # eval never moves m
            state = args.normbt_fixed_m if args.normbt_fixed_m is not None else self.normbt_state
            loss, weights = normbt_loss(
                rewards_chosen,
                rewards_rejected,
                h_chosen,
                h_rejected,
                state=state,
                margin=margin,
                eps=args.normbt_eps,
                clip=args.normbt_clip,
                renormalize=args.normbt_renormalize,
            )
            if args.center_rewards_coefficient is not None:  # as TRL adds it
                loss = loss + args.center_rewards_coefficient * torch.mean(
                    (rewards_chosen + rewards_rejected) ** 2
                )
        distance = pair_distance(h_chosen, h_rejected)  # (B,)
        if not args.normbt_enabled:
            weights = torch.ones_like(distance)

        with torch.no_grad():
            gather = self.accelerator.gather_for_metrics
            self._metrics[mode]["normbt/bt_loss"].append(gather(bt_plain).mean().item())
            qs = torch.tensor([0.1, 0.5, 0.9], device=distance.device)
            all_d = gather(distance.float())
            all_w = gather(weights.detach().float())
            for name, vals in (("distance", all_d), ("weight", all_w)):
                finite = vals[torch.isfinite(vals)]
                if finite.numel():
                    for q, v in zip((10, 50, 90), torch.quantile(finite, qs).tolist()):
                        self._metrics[mode][f"normbt/{name}_p{q}"].append(v)
            if args.normbt_enabled:  # the m this batch was weighted with (step 1: its mean)
                if args.normbt_fixed_m is not None:
                    m = float(args.normbt_fixed_m)
                else:
                    assert self.normbt_state.last_m is not None  # set by normbt_loss's observe
                    m = float(self.normbt_state.last_m)
                self._metrics[mode]["normbt/mean_distance"].append(m)

        return (loss, outputs) if return_outputs else loss

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any):
        """`Trainer.train`, restoring m from `normbt_state.pt` when resuming from a checkpoint."""
        ckpt = resume_from_checkpoint
        if isinstance(ckpt, bool):
            ckpt = get_last_checkpoint(self.args.output_dir) if ckpt else None
        if ckpt is not None:
            path = os.path.join(ckpt, STATE_FILE)
            if os.path.isfile(path):
                sd = torch.load(path, map_location=self.accelerator.device, weights_only=True)
                self.normbt_state.load_state_dict(sd)
            else:
                warnings.warn(
                    f"{path} not found: NormBT's running mean m restarts from the next batch",
                    stacklevel=2,
                )
        return super().train(resume_from_checkpoint, *args, **kwargs)
