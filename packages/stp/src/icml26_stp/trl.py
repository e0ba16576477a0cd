"""TRL integration: `STPSFTTrainer`, a `trl.SFTTrainer` whose loss is gamma*NTP + lambda*STP.

Install with the `[trl]` extra. The NTP term is `SFTTrainer.compute_loss` itself (called via
`super()`, so TRL's fused LM head, loss types, gradient-accumulation normalisation and metrics
are kept); the STP term reads the hidden states of that same forward through a hook on the
decoder backbone: no extra forward, and the states are never returned to predict/metrics.

Conversational datasets (a "messages" column) are tokenized with `tokenize_messages`, which
adds the `stp_spans` column and an assistant-only label mask (the official NTP target).

    from icml26_stp.trl import STPConfig, STPSFTTrainer
    args = STPConfig(output_dir="out", stp_lambda=0.02)
    trainer = STPSFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from trl import SFTConfig, SFTTrainer

from .loss import LENGTH_ADJUSTMENTS, SAMPLERS, stp_loss
from .spans import tokenize_messages

__all__ = ["STPConfig", "STPSFTTrainer"]


@dataclass
class STPConfig(SFTConfig):
    """`trl.SFTConfig` plus the STP options (official `stp.py` flags in brackets)."""

    stp_lambda: float = field(
        default=0.02, metadata={"help": "Weight of L_STP [--lbd]; 0.02 in the paper's run_stp."}
    )
    stp_gamma: float = field(default=1.0, metadata={"help": "Weight of L_NTP [--gamma]."})
    stp_lambda_warmup: bool = field(
        default=False, metadata={"help": "Ramp lambda linearly from stp_min_lambda [--lbd_warmup]."}
    )
    stp_min_lambda: float = field(default=0.0, metadata={"help": "Start of the ramp [--min_lbd]."})
    stp_layer: int = field(
        default=-1,
        metadata={"help": "hidden_states index of the trajectory [--random_span_layer]."},
    )
    stp_times: int = field(default=1, metadata={"help": "Spans per sample [--random_span_times]."})
    stp_sampler: str = field(default="default", metadata={"help": "default | uniform | draw_both."})
    stp_max_length: int | None = field(
        default=None, metadata={"help": "Max span length [--random_span_max_length]."}
    )
    stp_length_adjustment: str | None = field(
        default=None, metadata={"help": "None | cosine_like | jaccard_like [--length_adjustment]."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stp_lambda < 0 or self.stp_gamma < 0 or self.stp_min_lambda < 0:
            raise ValueError("`stp_lambda`, `stp_gamma` and `stp_min_lambda` must be >= 0")
        if self.stp_sampler not in SAMPLERS:
            raise ValueError(f"`stp_sampler` must be one of {SAMPLERS}, got {self.stp_sampler!r}")
        if self.stp_length_adjustment not in LENGTH_ADJUSTMENTS:
            raise ValueError(
                f"`stp_length_adjustment` must be one of {LENGTH_ADJUSTMENTS}, "
                f"got {self.stp_length_adjustment!r}"
            )
        if self.stp_times < 1:
            raise ValueError(f"`stp_times` must be >= 1, got {self.stp_times}")
        if self.packing or self.padding_free:
            raise ValueError(
                "STP needs one conversation per row: set packing=False, padding_free=False"
            )


class _SpanCollator:
    """Wraps TRL's collator: stacks the per-example `stp_spans` into a (B, 2, 2) tensor."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        spans = [ex.pop("stp_spans") for ex in examples] if "stp_spans" in examples[0] else None
        batch = dict(self.inner(examples))
        if spans is not None:
            batch["stp_spans"] = torch.tensor(spans, dtype=torch.long).reshape(-1, 2, 2)
        return batch


def _first(output: Any) -> torch.Tensor:
    x = getattr(output, "last_hidden_state", None)
    if x is None:
        x = output[0] if isinstance(output, (tuple, list)) else output
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"cannot read hidden states from a {type(output).__name__}")
    return x


def _trajectory_module(model: torch.nn.Module, layer: int) -> torch.nn.Module:
    """The module whose output is `hidden_states[layer]` of an HF decoder: -1 is the
    backbone (final norm applied, as `output_hidden_states` reports it), 0 the embeddings,
    i the i-th decoder layer. Hooking it avoids `output_hidden_states`, so no tuple of
    states is built or handed to predict/metrics."""
    dec = _backbone(model)
    layers = getattr(dec, "layers", None)
    if layer == -1:
        return dec
    if not isinstance(layers, torch.nn.ModuleList):
        raise ValueError(f"`stp_layer`={layer} needs a backbone with a `layers` ModuleList")
    k = layer if layer >= 0 else len(layers) + 1 + layer
    if not 0 <= k <= len(layers):
        raise ValueError(f"`stp_layer` must be in [-{len(layers) + 1}, {len(layers)}], got {layer}")
    if k == 0:
        get_emb = getattr(dec, "get_input_embeddings", None)
        emb = get_emb() if callable(get_emb) else None
        if not isinstance(emb, torch.nn.Module):
            raise ValueError("`stp_layer`=0 needs get_input_embeddings() on the backbone")
        return emb
    if k == len(layers):
        return dec
    return layers[k - 1]


def _backbone(model: torch.nn.Module) -> torch.nn.Module:
    get = getattr(model, "get_decoder", None)
    dec = get() if callable(get) else None
    if isinstance(dec, torch.nn.Module):
        return dec
    base = getattr(model, "base_model", None)
    if isinstance(base, torch.nn.Module) and base is not model:
        return base
    raise TypeError(f"cannot find the decoder backbone of {type(model).__name__} (get_decoder)")


# The private SFTTrainer API STPSFTTrainer overrides (tested with TRL 1.16; the `[trl]` extra
# allows trl>=1.0,<2). A TRL that renames them would silently skip the overrides.
_PREPARE_DATASET_PARAMS = (
    "self",
    "dataset",
    "processing_class",
    "args",
    "packing",
    "formatting_func",
    "dataset_name",
)


def _check_trl_api() -> None:
    """Raise a clear error when TRL's private `_prepare_dataset` / `_set_signature_columns_if_needed`
    (which `STPSFTTrainer` overrides) are missing or have another signature."""
    import inspect

    import trl

    version = getattr(trl, "__version__", "?")
    prep = getattr(SFTTrainer, "_prepare_dataset", None)
    params = tuple(inspect.signature(prep).parameters) if callable(prep) else None
    if params != _PREPARE_DATASET_PARAMS:
        raise RuntimeError(
            f"STPSFTTrainer needs trl.SFTTrainer._prepare_dataset{_PREPARE_DATASET_PARAMS} "
            f"(TRL 1.x); trl {version} has {params}: install a TRL in the tested range "
            "(`pip install 'icml26-stp[trl]'`, trl>=1.0,<2)"
        )
    if not callable(getattr(SFTTrainer, "_set_signature_columns_if_needed", None)):
        raise RuntimeError(
            f"STPSFTTrainer needs trl.SFTTrainer._set_signature_columns_if_needed (TRL 1.x); "
            f"trl {version} has none: install trl>=1.0,<2"
        )


class STPSFTTrainer(SFTTrainer):
    """`trl.SFTTrainer` adding lambda * L_STP; logs `stp_loss`, `ntp_loss`, `stp_lambda`."""

    args: STPConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _check_trl_api()
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, STPConfig):
            raise TypeError(f"`args` must be an STPConfig, got {type(self.args).__name__}")
        self.data_collator = _SpanCollator(self.data_collator)
        # one span stream per rank, seeded as upstream (`seed + 3 * rank`), so DDP ranks
        # draw different spans (upstream's generator lives on the device; ours on the CPU)
        rank = int(getattr(self.args, "process_index", 0))
        self._stp_generator = torch.Generator().manual_seed(self.args.seed + 3 * rank)

    # ---- data: conversational rows get input_ids, stp_spans and the assistant label mask
    def _prepare_dataset(
        self, dataset, processing_class, args, packing, formatting_func, dataset_name
    ):  # type: ignore[no-untyped-def]
        cols = getattr(dataset, "column_names", None) or []
        if "messages" in cols and "input_ids" not in cols:
            tok = getattr(processing_class, "tokenizer", processing_class)
            max_len = args.max_length

            def fn(ex: dict[str, Any]) -> dict[str, Any]:
                out = tokenize_messages(tok, ex["messages"])
                if max_len is not None and out["stp_spans"][1][1] > max_len:
                    raise ValueError(
                        f"a conversation is {len(out['input_ids'])} tokens and its assistant "
                        f"message ends past `max_length`={max_len}: raise max_length or filter it"
                    )
                return out

            dataset = dataset.map(fn, remove_columns=["messages"])
        return super()._prepare_dataset(
            dataset, processing_class, args, packing, formatting_func, dataset_name
        )

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        if self._signature_columns is not None and "stp_spans" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "stp_spans"]

    def current_stp_lambda(self) -> float:
        a = self.args
        if not a.stp_lambda_warmup:
            return a.stp_lambda
        frac = self.state.global_step / max(self.state.max_steps - 1, 1)
        return a.stp_min_lambda + (a.stp_lambda - a.stp_min_lambda) * min(frac, 1.0)

    def _ga_steps_left_to_loss(self, num_items_in_batch: Any, training: bool) -> int:
        """Accumulation steps the loss must divide by itself: `Trainer.training_step` divides the
        loss by them unless it counts as already scaled (`loss_is_scaled_for_ga`, by default:
        normalised by `num_items_in_batch`); in that case a per-micro-batch mean must do it."""
        if not training:
            return 1
        scaled = getattr(self, "loss_is_scaled_for_ga", None)
        if scaled is None:
            scaled = (
                bool(getattr(self, "model_accepts_loss_kwargs", False))
                and num_items_in_batch is not None
            ) or getattr(self, "compute_loss_func", None) is not None
        return int(self.current_gradient_accumulation_steps) if scaled else 1

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def,override]
        a = self.args
        spans = inputs.pop("stp_spans", None)
        if spans is None:
            raise ValueError(
                "batch has no `stp_spans`: pass a conversational dataset ('messages') or add "
                "the column with icml26_stp.tokenize_messages"
            )
        captured: list[torch.Tensor] = []

        def hook(_m: torch.nn.Module, _args: Any, output: Any) -> None:
            if not captured:  # the first forward is the loss forward
                captured.append(output[0] if isinstance(output, tuple) else _first(output))

        handle = _trajectory_module(self.accelerator.unwrap_model(model), a.stp_layer)
        handle = handle.register_forward_hook(hook)
        try:
            result = super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )
        finally:
            handle.remove()
        ntp, outputs = result if return_outputs else (result, None)
        if not captured:
            raise RuntimeError("the decoder hook saw no forward; cannot read hidden states")
        hidden = captured.pop()  # (B, T, H), this forward's graph
        stp = stp_loss(
            hidden,
            spans,
            generator=self._stp_generator,
            length_adjustment=a.stp_length_adjustment,
            mode=a.stp_sampler,
            max_length=a.stp_max_length,
            times=a.stp_times,
        )
        lbd = self.current_stp_lambda()
        steps = self._ga_steps_left_to_loss(num_items_in_batch, self.model.training)
        # NTP is TRL's loss, already scaled for accumulation; STP is a per-micro-batch mean,
        # so it is averaged over the accumulation steps here when the Trainer will not do it.
        loss = a.stp_gamma * ntp + lbd * stp / steps
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["stp_loss"].append(
            self.accelerator.gather_for_metrics(stp.detach()).mean().item()
        )
        # TRL's NTP with `num_items_in_batch` is this micro-batch's token sum over the tokens of
        # all `steps` micro-batches; times `steps`, its mean over the logging window is the mean
        # NTP of the accumulated batch, the same number at any accumulation setting.
        self._metrics[mode]["ntp_loss"].append(
            self.accelerator.gather_for_metrics(ntp.detach() * steps).mean().item()
        )
        self._metrics[mode]["stp_lambda"].append(lbd)
        return (loss, outputs) if return_outputs else loss
