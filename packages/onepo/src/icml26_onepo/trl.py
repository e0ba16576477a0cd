"""TRL integration: `OnePOGRPOTrainer`, a `trl.GRPOTrainer` with teacher injection and the OnePO loss.

Install with the `[trl]` extra. The dataset is TRL's own format (a ``prompt`` column, standard
or conversational) plus a teacher column (``teacher`` by default: the teacher completion as a
string, or an assistant message list), and the reward functions are TRL's. Two methods of
GRPOTrainer change, everything else (generation, vLLM, reward functions, advantages, logging)
is TRL's:

- ``_generate`` (TRL's rollout hook): after the students are sampled, the teacher completion of
  each prompt group is tokenized, scored by the same reward functions and, by Teacher
  Retirement, replaces a random member of its group only if it strictly beats every student.
  The rewards used for the decision are handed to TRL's advantage computation, so nothing is
  scored twice and the teacher row's reward is exactly the one that won.
- ``_compute_loss``: TRL's token log-probs, then `onepo_per_token_loss` (teacher tokens with
  p_old < floor get the SFT-like, absolutely clipped objective; all other tokens dual-clip PPO),
  aggregated as the configured ``loss_type``. With no teacher token it equals GRPOTrainer's
  loss for ``loss_type`` in {dapo, bnpo, grpo, dr_grpo} and ``delta`` = the dual-clip c.

    from icml26_onepo.trl import OnePOConfig, OnePOGRPOTrainer
    args = OnePOConfig(output_dir="out", num_generations=8)   # official clip 0.2/0.28, c=10
    trainer = OnePOGRPOTrainer(model=model_id, reward_funcs=reward, args=args, train_dataset=ds)

Relies on GRPOTrainer internals of TRL 1.16 (``_generate`` returning its 8-tuple,
``_calculate_rewards``, ``_compute_loss``); single process only (Teacher Retirement decides per
group and TRL may split a group across ranks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from .groups import RetirementController, inject_teacher
from .loss import onepo_per_token_loss

__all__ = ["OnePOConfig", "OnePOGRPOTrainer"]

SUPPORTED_LOSS_TYPES = ("dapo", "bnpo", "grpo", "dr_grpo")

# The private GRPOTrainer methods this module overrides or calls, with the parameters it relies
# on (TRL 1.16). Checked at import: a TRL whose internals moved fails here, naming the method,
# instead of training with a silently different rollout or loss.
TRL_INTERNALS = {
    "_generate": ("self", "prompts"),
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_compute_loss": ("self", "model", "inputs"),
    "_generate_and_score_completions": ("self", "inputs"),
}
GENERATE_ARITY = 8  # TRL 1.16's _generate returns an 8-tuple (ids, masks, logprobs, images, ...)


def check_trl_internals(trainer_cls: type = GRPOTrainer) -> None:
    """Raise ImportError naming each private GRPOTrainer method whose signature differs."""
    import inspect

    import trl

    bad = []
    for name, want in TRL_INTERNALS.items():
        fn = getattr(trainer_cls, name, None)
        if fn is None:
            bad.append(f"{name} (missing)")
            continue
        have = tuple(inspect.signature(fn).parameters)
        if have[: len(want)] != want or any(
            p.default is inspect.Parameter.empty
            for p in list(inspect.signature(fn).parameters.values())[len(want) :]
        ):
            bad.append(f"{name}{have} (expected {want})")
    if bad:
        raise ImportError(
            f"icml26_onepo.trl overrides private GRPOTrainer methods of TRL 1.16; the installed "
            f"TRL {trl.__version__} differs: {'; '.join(bad)}. Install trl==1.16.* or update "
            "OnePOGRPOTrainer."
        )


check_trl_internals()


@dataclass
class OnePOConfig(GRPOConfig):
    """`trl.GRPOConfig` with OnePO's defaults (clip 0.2 / 0.28, dual-clip c = ``delta`` = 10,
    token-mean ``dapo`` aggregation, no KL) and the OnePO options."""

    epsilon_high: float | None = field(
        default=0.28, metadata={"help": "Upper clip ε_high (OnePO.sh: 0.28, DAPO clip-higher)."}
    )
    delta: float | None = field(
        default=10.0,
        metadata={"help": "Dual-clip bound c for negative advantages (OnePO.sh clip_ratio_c=10)."},
    )
    onepo_floor: float = field(
        default=0.1, metadata={"help": "Probability floor f of Adaptive Objective Evolution."}
    )
    onepo_teacher_column: str = field(
        default="teacher", metadata={"help": "Dataset column holding the teacher completion."}
    )
    onepo_teacher_enabled: bool = field(
        default=True, metadata={"help": "Inject teacher completions (False: plain GRPO rollouts)."}
    )
    onepo_seed: int | None = field(
        default=None,
        metadata={
            "help": "Seed of the replacement draws, seeded seed+global_step (None: args.seed)."
        },
    )
    onepo_max_teacher_steps: int = field(
        default=-1, metadata={"help": "Stop injecting after this step (-1: never)."}
    )
    onepo_plateau_window: int = field(
        default=-1, metadata={"help": "Retirement-plateau window for a global stop (-1: off)."}
    )
    onepo_plateau_tolerance: float = field(
        default=0.01, metadata={"help": "Max spread of retirement rates inside the window."}
    )
    onepo_plateau_min_retirement_rate: float = field(
        default=0.9, metadata={"help": "Min retirement rate of every step in the window."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.onepo_floor < 1.0:
            raise ValueError(f"`onepo_floor` must be in (0, 1), got {self.onepo_floor}")
        if self.delta is not None and not self.delta > 1.0:
            raise ValueError(f"`delta` (dual-clip c) must be > 1 or None, got {self.delta}")


def _teacher_text(value: Any) -> str | None:
    """A teacher cell: a string, or a message list whose last message is the teacher turn."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        content = value[-1].get("content")
        return content if isinstance(content, str) and content.strip() else None
    raise TypeError(
        f"teacher column values must be str or a message list, got {type(value).__name__}"
    )


class OnePOGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` running One-stage Policy Optimization.

    Logged besides TRL's metrics: ``onepo/retirement_rate``, ``onepo/teacher_replaced``,
    ``onepo/teacher_candidates``, ``onepo/teacher_enabled`` per generation batch, and the loss
    metrics ``onepo/rescaled_token_fraction``, ``onepo/teacher_token_fraction``,
    ``onepo/clipfrac``.
    """

    args: OnePOConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, OnePOConfig):
            raise TypeError(f"`args` must be a OnePOConfig, got {type(self.args).__name__}")
        a = self.args
        unsupported = {
            "loss_type": self.loss_type not in SUPPORTED_LOSS_TYPES,
            "importance_sampling_level": self.importance_sampling_level != "token",
            "top_entropy_quantile": self.top_entropy_quantile < 1.0,
            "off_policy_mask_threshold": self.off_policy_mask_threshold is not None,
            "entropy_coef": bool(getattr(self, "_entropy_bonus_enabled", False)),
            "use_liger_kernel": bool(getattr(a, "use_liger_kernel", False)),
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise ValueError(
                f"OnePOGRPOTrainer does not support {bad} (loss_type must be one of "
                f"{SUPPORTED_LOSS_TYPES}, token-level importance sampling, no entropy mask/bonus)"
            )
        if self.accelerator.num_processes > 1:
            raise NotImplementedError(
                "OnePOGRPOTrainer runs on one process: Teacher Retirement decides per prompt "
                "group and TRL may split a group across ranks"
            )
        self.onepo_controller = RetirementController(
            max_teacher_steps=a.onepo_max_teacher_steps,
            plateau_window=a.onepo_plateau_window,
            plateau_tolerance=a.onepo_plateau_tolerance,
            plateau_min_retirement_rate=a.onepo_plateau_min_retirement_rate,
        )
        self._onepo_inputs: list[dict[str, Any]] | None = None
        self._onepo_teacher_rows: list[bool] | None = None
        self._onepo_rewards: torch.Tensor | None = None

    # ------------------------------------------------------------------ rollout hook
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._onepo_inputs = inputs
        self._onepo_teacher_rows = None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._onepo_inputs = None
            self._onepo_rewards = None
        rows = self._onepo_teacher_rows or [False] * output["completion_mask"].shape[0]
        is_teacher = torch.tensor(rows, dtype=torch.bool, device=output["completion_mask"].device)
        output["teacher_mask"] = output["completion_mask"].bool() & is_teacher[:, None]  # (B, C)
        return output

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # type: ignore[no-untyped-def]
        cached = self._onepo_rewards
        if cached is not None and cached.shape[0] == len(prompts):
            self._onepo_rewards = None
            return cached
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _generate(self, prompts: list):  # type: ignore[no-untyped-def]
        out = super()._generate(prompts)
        if not isinstance(out, tuple) or len(out) != GENERATE_ARITY:
            raise RuntimeError(
                f"GRPOTrainer._generate returned {type(out).__name__} of length "
                f"{len(out) if isinstance(out, tuple) else '?'}; OnePO expects TRL 1.16's "
                f"{GENERATE_ARITY}-tuple (prompt_ids, completion_ids, tool_mask, completions, "
                "logprobs, extra, images, tool_images)"
            )
        inputs = self._onepo_inputs
        training = self.model is not None and self.model.training
        if not training or inputs is None or not self.args.onepo_teacher_enabled:
            return out
        step = int(self.state.global_step)
        mode = "train"
        if not self.onepo_controller.teacher_enabled(step):
            self._metrics[mode]["onepo/teacher_enabled"].append(0.0)
            return out
        (
            prompt_ids,
            completion_ids,
            tool_mask,
            completions,
            logprobs,
            extra,
            images,
            tool_images,
        ) = out
        n = int(self.num_generations)  # type: ignore[arg-type]  # set for training
        column = self.args.onepo_teacher_column
        if column not in inputs[0]:
            raise KeyError(
                f"OnePO needs the teacher column {column!r} in the dataset (onepo_teacher_column)"
            )
        starts = list(range(0, len(prompts), n))
        texts = [_teacher_text(inputs[s][column]) for s in starts]
        cand = [g for g, t in enumerate(texts) if t is not None]

        weights = self.reward_weights.to(self.accelerator.device)
        student_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids
        )  # (B, F)
        student = (student_per_func * weights).nansum(dim=1)  # (B,)
        conversational = isinstance(prompts[0], list)
        max_len = int(self.max_completion_length)  # type: ignore[arg-type]
        t_ids: list[list[int]] = []
        t_comps: list[Any] = []
        for g in cand:
            ids = self._tokenizer.encode(texts[g], add_special_tokens=False)[:max_len]
            if len(ids) < max_len:
                ids = [*ids, self.eos_token_ids[0]]
            t_ids.append(ids)
            text = self._tokenizer.decode(ids, skip_special_tokens=True)
            t_comps.append([{"role": "assistant", "content": text}] if conversational else text)
        teacher_reward: list[float | None] = [None] * len(starts)
        teacher_per_func = None
        if cand:
            rows = [starts[g] for g in cand]
            teacher_per_func = super()._calculate_rewards(
                [inputs[r] for r in rows], [prompts[r] for r in rows], t_comps, t_ids
            )  # (G', F)
            scores = (teacher_per_func * weights).nansum(dim=1)
            for k, g in enumerate(cand):
                teacher_reward[g] = float(scores[k])
        seed = self.args.onepo_seed if self.args.onepo_seed is not None else self.args.seed
        res = inject_teacher(student.cpu(), teacher_reward, n, seed=seed + step)

        per_func = student_per_func.clone()
        completion_ids = list(completion_ids)
        completions = list(completions)
        logprobs = None if logprobs is None else list(logprobs)
        tool_mask = None if tool_mask is None else list(tool_mask)
        for k, g in enumerate(cand):
            row = res.rows[g]
            if row < 0:
                continue
            assert teacher_per_func is not None
            completion_ids[row] = t_ids[k]
            completions[row] = t_comps[k]
            per_func[row] = teacher_per_func[k]
            if (
                logprobs is not None
            ):  # the sampler never scored the teacher: NaN is TRL's "unscored"
                logprobs[row] = [math.nan] * len(t_ids[k])
            if tool_mask is not None:
                tool_mask[row] = [1] * len(t_ids[k])
        self._onepo_rewards = per_func
        self._onepo_teacher_rows = res.teacher_rows.tolist()
        self.onepo_controller.observe(res.retired, res.candidates)
        self._metrics[mode]["onepo/teacher_enabled"].append(1.0)
        self._metrics[mode]["onepo/teacher_candidates"].append(float(res.candidates))
        self._metrics[mode]["onepo/teacher_replaced"].append(float(res.replaced))
        self._metrics[mode]["onepo/retirement_rate"].append(res.retirement_rate)
        return (
            prompt_ids,
            completion_ids,
            tool_mask,
            completions,
            logprobs,
            extra,
            images,
            tool_images,
        )

    # ------------------------------------------------------------------ loss
    def _compute_loss(self, model, inputs):  # type: ignore[no-untyped-def]
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        logits_to_keep = completion_ids.size(1)
        mask = (
            completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        )

        per_token_logps, entropies, _ = self._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            compute_entropy=True,
            pixel_values=inputs.get("pixel_values"),
            image_grid_thw=inputs.get("image_grid_thw"),
            num_images=inputs.get("num_images"),
            pixel_attention_mask=inputs.get("pixel_attention_mask"),
            spatial_shapes=inputs.get("spatial_shapes"),
            num_tiles=inputs.get("num_tiles"),
            image_sizes=inputs.get("image_sizes"),
            token_type_ids=inputs.get("token_type_ids"),
            mm_token_type_ids=inputs.get("mm_token_type_ids"),
            image_position_ids=inputs.get("image_position_ids"),
        )  # (B, C)
        advantages = inputs["advantages"]
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1)
        advantages = advantages.expand_as(per_token_logps)  # (B, C)
        old = inputs.get("old_per_token_logps")
        old = per_token_logps.detach() if old is None else old
        teacher = inputs.get("teacher_mask")
        teacher = (
            torch.zeros_like(mask, dtype=torch.bool)
            if teacher is None
            else teacher.bool() & mask.bool()
        )

        tok = onepo_per_token_loss(
            old,
            per_token_logps,
            advantages,
            mask,
            teacher,
            floor=self.args.onepo_floor,
            clip_low=self.epsilon_low,
            clip_high=self.epsilon_high,
            clip_c=self.args.delta if self.args.delta is not None else math.inf,
            validate=False,
        )
        per_token_loss = tok.loss
        if self.use_vllm and self.vllm_importance_sampling_correction:
            per_token_loss = per_token_loss * inputs["importance_sampling_ratio"]
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            per_token_kl = torch.exp(ref - per_token_logps) - (ref - per_token_logps) - 1
            if self.args.use_bias_correction_kl:
                per_token_kl = per_token_kl * tok.ratio
            per_token_loss = per_token_loss + self.beta * per_token_kl

        mode = "train" if self.model.training else "eval"
        accumulation = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        if self.loss_type == "grpo":
            loss = (
                (per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
            ).mean() / accumulation
        elif self.loss_type == "bnpo":
            loss = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0) / accumulation
        elif self.loss_type == "dr_grpo":
            denom = per_token_loss.size(0) * self.max_completion_length
            loss = (per_token_loss * mask).sum() / denom / accumulation
        else:  # dapo: token mean over the whole generation batch (verl's token-mean)
            normalizer = (
                inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
            )
            if mode == "train":
                normalizer = (
                    normalizer
                    * self.current_gradient_accumulation_steps
                    / self.args.steps_per_generation
                )
            loss = (per_token_loss * mask).sum() / normalizer

        with torch.no_grad():
            m = mask.bool()
            n_tok = m.sum().clamp(min=1).float()
            self._metrics[mode]["entropy"].append(float((entropies * m).sum() / n_tok))
            if self.beta != 0.0:
                self._metrics[mode]["kl"].append(float((per_token_kl * m).sum() / n_tok))
            self._metrics[mode]["onepo/clipfrac"].append(float((tok.clipped & m).sum() / n_tok))
            self._metrics[mode]["onepo/rescaled_token_fraction"].append(
                float(tok.rescaled.sum() / n_tok)
            )
            self._metrics[mode]["onepo/teacher_token_fraction"].append(float(teacher.sum() / n_tok))
        return loss
