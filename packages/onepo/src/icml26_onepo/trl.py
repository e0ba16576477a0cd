"""TRL integration: `OnePOGRPOTrainer`, a `trl.GRPOTrainer` with teacher injection and the OnePO loss.

Install with the `[trl]` extra. The dataset is TRL's own format (a ``prompt`` column, standard
or conversational) plus a teacher column (``teacher`` by default: the teacher completion as a
string, or an assistant message list), and the reward functions are TRL's. Three methods of
GRPOTrainer change (``_generate_and_score_completions`` for the DAPO filter below), everything else (generation, vLLM, reward functions, advantages, logging)
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

OnePO.sh's DAPO recipe is on by default, as in the official script:

- ``onepo_filter_groups`` (dynamic sampling, ``filter_groups.metric=acc``,
  ``max_num_gen_batches=20``): after teacher injection and scoring, prompt groups whose metric
  is constant are dropped and another generation batch is drawn until G groups are kept (then
  ValueError, as verl). Deviation: the refill prompts are drawn uniformly (seeded) from the
  train dataset, not the next dataloader batch;
- ``onepo_overlong_penalty`` (``overlong_buffer`` 4000 of 8000 tokens, factor 0.6): TRL's
  ``get_soft_overlong_punishment`` joins the reward functions with weight 0.6, so students and
  teachers get ``min(−(L − (L_max − L_buf)) / L_buf · 0.6, 0)``; the ``acc`` filter metric is
  the user's rewards without it. The buffer defaults to half of ``max_completion_length``.

``onepo_teacher_api_url`` asks an OpenAI-compatible endpoint (`icml26_onepo.OpenAITeacher`)
for the prompts whose teacher cell is empty.

    from icml26_onepo.trl import OnePOConfig, OnePOGRPOTrainer
    args = OnePOConfig(output_dir="out", num_generations=8)   # official clip 0.2/0.28, c=10
    trainer = OnePOGRPOTrainer(model=model_id, reward_funcs=reward, args=args, train_dataset=ds)

Relies on GRPOTrainer internals of TRL 1.16 (``_generate`` returning its 8-tuple,
``_calculate_rewards``, ``_compute_loss``, ``_generate_and_score_completions``; checked at
import); single process only (Teacher Retirement decides per
group and TRL may split a group across ranks).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from trl import GRPOConfig, GRPOTrainer

from .groups import RetirementController, dapo_keep_groups, inject_teacher
from .loss import onepo_per_token_loss
from .teacher import OpenAITeacher

__all__ = ["OnePOConfig", "OnePOGRPOTrainer", "soft_overlong_punishment"]

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
    onepo_teacher_api_url: str | None = field(
        default=None,
        metadata={
            "help": "OpenAI-compatible endpoint asked for the teacher of a prompt whose teacher "
            "cell is empty (OnePO.sh TEACHER_API_URL; None: cached teachers only)."
        },
    )
    onepo_teacher_model: str = field(
        default="gpt-5.4", metadata={"help": "Teacher model name (OnePO.sh TEACHER_MODEL)."}
    )
    onepo_teacher_max_tokens: int = field(default=8192, metadata={"help": "Teacher max_tokens."})
    onepo_teacher_timeout: float = field(
        default=180.0, metadata={"help": "Seconds per teacher request (OnePO.sh: 180)."}
    )
    onepo_teacher_max_retries: int = field(
        default=3, metadata={"help": "Attempts per teacher request (OnePO.sh: 3)."}
    )
    onepo_teacher_max_concurrency: int = field(
        default=64, metadata={"help": "Concurrent teacher requests (OnePO.sh: 64)."}
    )
    onepo_filter_groups: bool = field(
        default=True,
        metadata={
            "help": "DAPO dynamic sampling (OnePO.sh filter_groups.enable=True): drop prompt groups "
            "whose filter metric is constant and regenerate until the generation batch is full."
        },
    )
    onepo_filter_groups_metric: str = field(
        default="acc",
        metadata={
            "help": "'acc': weighted sum of the user's reward functions (before the overlong "
            "penalty, OnePO.sh's metric); 'reward': total reward incl. the penalty (verl's "
            "seq_final_reward); or the name of one reward function."
        },
    )
    onepo_max_num_gen_batches: int = field(
        default=20,
        metadata={"help": "Most generation batches per step (OnePO.sh: 20; <= 0: unlimited)."},
    )
    onepo_overlong_penalty: bool = field(
        default=True,
        metadata={
            "help": "DAPO soft overlong punishment added to the reward "
            "(OnePO.sh overlong_buffer.enable=True)."
        },
    )
    onepo_overlong_buffer_len: int | None = field(
        default=None,
        metadata={
            "help": "Overlong buffer in tokens (OnePO.sh: 4000 of 8000; None: half of "
            "max_completion_length, the same ratio)."
        },
    )
    onepo_overlong_penalty_factor: float = field(
        default=0.6, metadata={"help": "Overlong penalty factor (OnePO.sh: 0.6)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.onepo_floor < 1.0:
            raise ValueError(f"`onepo_floor` must be in (0, 1), got {self.onepo_floor}")
        if self.delta is not None and not self.delta > 1.0:
            raise ValueError(f"`delta` (dual-clip c) must be > 1 or None, got {self.delta}")
        if not (
            math.isfinite(self.onepo_overlong_penalty_factor)
            and self.onepo_overlong_penalty_factor >= 0
        ):
            raise ValueError(
                "`onepo_overlong_penalty_factor` must be finite and >= 0, got "
                f"{self.onepo_overlong_penalty_factor}"
            )
        if self.onepo_overlong_penalty:
            buf = self.overlong_buffer_len()
            if not 0 < buf <= int(self.max_completion_length or 0):
                raise ValueError(
                    f"`onepo_overlong_buffer_len` must be in (0, max_completion_length="
                    f"{self.max_completion_length}], got {buf}"
                )

    def overlong_buffer_len(self) -> int:
        """The overlong buffer in tokens: the set value, or half of ``max_completion_length``."""
        if self.onepo_overlong_buffer_len is not None:
            return int(self.onepo_overlong_buffer_len)
        return max(int(self.max_completion_length or 0) // 2, 1)


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


def soft_overlong_punishment(max_completion_len: int, buffer_len: int) -> Any:
    """DAPO's soft overlong punishment as a TRL reward function (``completion_ids`` → list).

    ``trl.rewards.get_soft_overlong_punishment`` where the installed TRL has it (it returns
    ``(L_max − L_buf − L) / L_buf`` inside the buffer, 0 before it); else the same law from
    `icml26_onepo.overlong_penalty` with factor 1. The trainer weights it by
    ``onepo_overlong_penalty_factor``, so the reward gains verl's
    ``min(−(L − (L_max − L_buf)) / L_buf · factor, 0)``.
    """
    try:
        from trl.rewards import get_soft_overlong_punishment
    except ImportError:  # an older TRL: the package's utility, same law
        from .groups import overlong_penalty

        def soft_overlong_punishment_reward(completion_ids: list, **kwargs: Any) -> list[float]:
            lengths = torch.tensor([len(ids) for ids in completion_ids])
            pen = overlong_penalty(
                lengths, max_completion_len, buffer_length=buffer_len, penalty_factor=1.0
            )
            return [float(x) for x in pen]

        return soft_overlong_punishment_reward
    return get_soft_overlong_punishment(max_completion_len, buffer_len)


# Keys of GRPOTrainer's generation batch that `_concat_groups` knows how to join, with the side
# and value they are padded with (None: the tokenizer's pad id).
_LEFT_PADDED = {"prompt_ids": None, "prompt_mask": 0}
_RIGHT_PADDED = {
    "completion_ids": None,
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "importance_sampling_ratio": 0.0,
    "tool_mask": 1,
    "teacher_mask": False,
}


def _pad_cat(parts: list[torch.Tensor], value: float | int | bool, left: bool) -> torch.Tensor:
    """Concatenate ``(B_i, T_i)`` tensors along rows, padding columns to ``max T_i``."""
    if parts[0].dim() == 1:
        return torch.cat(parts)
    width = max(p.shape[1] for p in parts)
    out = []
    for p in parts:
        extra = width - p.shape[1]
        if extra:
            pad = p.new_full((p.shape[0], extra), value)
            p = torch.cat([pad, p] if left else [p, pad], dim=1)
        out.append(p)
    return torch.cat(out)


class OnePOGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` running One-stage Policy Optimization.

    Logged besides TRL's metrics: ``onepo/retirement_rate``, ``onepo/teacher_replaced``,
    ``onepo/teacher_candidates``, ``onepo/teacher_enabled`` per generation batch, and the loss
    metrics ``onepo/rescaled_token_fraction``, ``onepo/teacher_token_fraction``,
    ``onepo/clipfrac``.
    """

    args: OnePOConfig

    def __init__(
        self, model: Any, reward_funcs: Any = None, args: Any = None, *rest: Any, **kwargs: Any
    ) -> None:
        if not isinstance(args, OnePOConfig):
            raise TypeError(f"`args` must be a OnePOConfig, got {type(args).__name__}")
        funcs = list(reward_funcs) if isinstance(reward_funcs, list) else [reward_funcs]
        self._onepo_n_user_funcs = len(funcs)
        if args.onepo_overlong_penalty:
            # DAPO overlong shaping as one more reward function weighted by the penalty factor
            # (verl adds it to the score; `acc` stays unpenalised, see the filter metric)
            args = copy.copy(args)
            weights = args.reward_weights or [1.0] * len(funcs)
            if len(weights) != len(funcs):
                raise ValueError(
                    f"`reward_weights` has {len(weights)} entries for {len(funcs)} reward functions"
                )
            args.reward_weights = [*weights, float(args.onepo_overlong_penalty_factor)]
            funcs.append(
                soft_overlong_punishment(
                    int(args.max_completion_length), args.overlong_buffer_len()
                )
            )
            procs = kwargs.get("reward_processing_classes")
            if isinstance(procs, list):
                kwargs["reward_processing_classes"] = [*procs, None]
        super().__init__(model, funcs, args, *rest, **kwargs)
        a = self.args
        names = list(self.reward_func_names)[: self._onepo_n_user_funcs]
        if a.onepo_filter_groups_metric not in ("acc", "reward", *names):
            raise ValueError(
                f"`onepo_filter_groups_metric` must be 'acc', 'reward' or a reward function name "
                f"{names}, got {a.onepo_filter_groups_metric!r}"
            )
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
        self._onepo_last_rewards: torch.Tensor | None = None
        self.onepo_teacher_client: OpenAITeacher | None = None
        if a.onepo_teacher_api_url:
            self.onepo_teacher_client = OpenAITeacher(
                a.onepo_teacher_api_url,
                a.onepo_teacher_model,
                max_tokens=a.onepo_teacher_max_tokens,
                timeout=a.onepo_teacher_timeout,
                max_retries=a.onepo_teacher_max_retries,
                max_concurrency=a.onepo_teacher_max_concurrency,
            )

    # ------------------------------------------------------------------ DAPO dynamic sampling
    def _filter_metric(self, per_func: torch.Tensor) -> torch.Tensor:
        """``(B, F)`` per-function rewards → ``(B,)`` the DAPO filter metric."""
        metric = self.args.onepo_filter_groups_metric
        weights = self.reward_weights.to(per_func.device)
        if metric == "reward":
            return (per_func * weights).nansum(dim=1)
        if metric == "acc":
            k = self._onepo_n_user_funcs
            return (per_func[:, :k] * weights[:k]).nansum(dim=1)
        return per_func[:, list(self.reward_func_names).index(metric)]

    def _refill_inputs(self, n_groups: int, attempt: int) -> list[dict[str, Any]]:
        """``n_groups`` fresh prompt groups for another generation batch (seeded, uniform)."""
        ds = self.train_dataset
        if ds is None or not hasattr(ds, "__len__"):
            raise NotImplementedError(
                "onepo_filter_groups regenerates from a map-style train_dataset; set "
                "onepo_filter_groups=False for an IterableDataset"
            )
        n = int(self.num_generations)  # type: ignore[arg-type]
        rng = np.random.default_rng([int(self.args.seed), int(self.state.global_step), attempt])
        idx = rng.choice(len(ds), n_groups, replace=len(ds) < n_groups)
        return [dict(ds[int(i)]) for i in idx for _ in range(n)]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """One generation batch, or with ``onepo_filter_groups`` DAPO dynamic sampling.

        DAPO (verl's ``filter_groups``, as OnePO.sh runs it): after teacher injection and
        scoring, keep only prompt groups whose filter metric is not constant; while fewer than
        the batch's G groups are kept, generate another batch (at most
        ``onepo_max_num_gen_batches``, then ValueError as verl); keep the first G groups.
        """
        training = self.model is not None and self.model.training
        if not (training and self.args.onepo_filter_groups):
            return self._onepo_generate_and_score(inputs)
        n = int(self.num_generations)  # type: ignore[arg-type]
        n_groups = len(inputs) // n
        kept: list[dict[str, Any]] = []
        n_kept = 0
        attempt = 0
        batch = inputs
        while True:
            attempt += 1
            out = self._onepo_generate_and_score(batch)
            per_func = self._onepo_last_rewards
            assert per_func is not None
            keep_g = dapo_keep_groups(self._filter_metric(per_func).cpu(), n)  # (G,)
            rows = keep_g.repeat_interleave(n).nonzero().flatten()  # (kept rows,)
            if len(rows):
                kept.append(self._select_rows(out, rows))
                n_kept += int(keep_g.sum())
            self._metrics["train"]["onepo/filter_kept_fraction"].append(
                float(keep_g.float().mean())
            )
            if n_kept >= n_groups:
                break
            cap = self.args.onepo_max_num_gen_batches
            if cap > 0 and attempt >= cap:
                raise ValueError(
                    f"DAPO filter: {attempt} generation batches >= onepo_max_num_gen_batches="
                    f"{cap} kept only {n_kept} of {n_groups} prompt groups with a non-constant "
                    f"{self.args.onepo_filter_groups_metric!r}; the data may be too hard or too "
                    "easy (onepo_max_num_gen_batches=0 retries without limit)"
                )
            batch = self._refill_inputs(n_groups, attempt)
        self._metrics["train"]["onepo/num_gen_batches"].append(float(attempt))
        merged = self._concat_groups(kept)
        return self._select_rows(merged, torch.arange(n_groups * n))

    def _select_rows(self, out: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
        res: dict[str, Any] = {}
        for k, v in out.items():
            if k == "num_items_in_batch":
                continue
            if k not in _LEFT_PADDED and k not in _RIGHT_PADDED and k != "advantages":
                raise NotImplementedError(
                    f"onepo_filter_groups cannot select rows of the generation-batch key {k!r} "
                    "(multimodal inputs); set onepo_filter_groups=False"
                )
            res[k] = v[rows.to(v.device)]
        mask = res["completion_mask"]
        if "tool_mask" in res:
            mask = mask * res["tool_mask"]
        res["num_items_in_batch"] = mask.sum()  # single process: TRL's gathered token count
        return res

    def _concat_groups(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        pad_id = self._tokenizer.pad_token_id
        res: dict[str, Any] = {}
        for k in parts[0]:
            if k == "num_items_in_batch":
                continue
            vals = [p[k] for p in parts]
            if k == "advantages":
                res[k] = torch.cat(vals)
                continue
            left = k in _LEFT_PADDED
            value = (_LEFT_PADDED if left else _RIGHT_PADDED)[k]
            res[k] = _pad_cat(vals, pad_id if value is None else value, left)
        return res

    # ------------------------------------------------------------------ rollout hook
    def _onepo_generate_and_score(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
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
            self._onepo_last_rewards = cached
            return cached
        out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._onepo_last_rewards = out  # (B, F): the DAPO filter reads its metric here
        return out

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
        client = self.onepo_teacher_client
        if column not in inputs[0] and client is None:
            raise KeyError(
                f"OnePO needs the teacher column {column!r} in the dataset (onepo_teacher_column)"
                " or an online teacher (onepo_teacher_api_url)"
            )
        starts = list(range(0, len(prompts), n))
        texts = [_teacher_text(inputs[s].get(column)) for s in starts]
        if client is not None:  # the official order: the cached teacher first, else online
            ask = [g for g, t in enumerate(texts) if t is None]
            online = client.generate_many([inputs[starts[g]]["prompt"] for g in ask])
            for g, t in zip(ask, online, strict=True):
                texts[g] = t if t and t.strip() else None
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
