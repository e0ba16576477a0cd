"""The representation the reward head reads, captured with a forward pre-hook on the head.

d must be measured on exactly the vector h the linear reward head r = vᵀh + b consumes (that is
where ‖∇_v ℓ‖ = σ(−Δr)·d holds). Which vector that is depends on the architecture: decoder reward
models (`LlamaForSequenceClassification` and kin) apply `score` to every position's final
hidden state and pool the logits at the last non-pad token; encoder models (BERT) apply
`classifier` to the pooler output (tanh(W·h_[CLS]), then dropout); RoBERTa-style heads end in
`classifier.out_proj` after a dense+tanh layer. A pre-hook on the head sees its input in every
case, and nothing else of the model's outputs (no `output_hidden_states`) is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import Tensor, nn

from .loss import last_token_pool

__all__ = ["HEAD_NAMES", "capture_head_input", "find_reward_head", "pooled_head_input"]

# the attribute names transformers' *ForSequenceClassification models give their head
HEAD_NAMES = ("score", "classifier", "v_head")


def find_reward_head(model: nn.Module, name: str | None = None) -> nn.Module:
    """The module whose input is the pooled representation h of r = vᵀh + b.

    name: a dotted submodule path (e.g. "score", "classifier.out_proj"); None searches for the
    outermost module called one of `HEAD_NAMES` (a PEFT `ModulesToSaveWrapper` counts as the
    head) and, for RoBERTa-style heads, takes its final `out_proj` layer. Raises ValueError
    naming `name` when no head is found.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module, got {type(model).__name__}")
    if name is not None:
        try:
            return model.get_submodule(name)
        except AttributeError as err:
            raise ValueError(f"`name`: {type(model).__name__} has no submodule {name!r}") from err
    found = [(n, m) for n, m in model.named_modules() if n.rsplit(".", 1)[-1] in HEAD_NAMES]
    if not found:
        raise ValueError(
            f"`name`: cannot find the reward head of {type(model).__name__} (no submodule named "
            f"one of {HEAD_NAMES}); pass the dotted name of the linear layer that outputs the "
            "reward (NormBTConfig.normbt_head)"
        )
    _, head = min(found, key=lambda nm: nm[0].count("."))
    out_proj = getattr(head, "out_proj", None)
    return out_proj if isinstance(out_proj, nn.Module) else head


@contextmanager
def capture_head_input(head: nn.Module) -> Iterator[list[Tensor]]:
    """Within the block, every call of `head` appends its (detached) first input to the list."""
    box: list[Tensor] = []

    def hook(_module: nn.Module, args: tuple, kwargs: dict) -> None:
        x = args[0] if args else next(iter(kwargs.values()))
        box.append(x.detach())

    handle = head.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield box
    finally:
        handle.remove()


def pooled_head_input(
    captured: list[Tensor], input_ids: Tensor, pad_token_id: int | None
) -> Tensor:
    """(N, H) pooled representation from one captured head input.

    (N, T, H) (the head ran on every position, decoder models) is pooled at the last non-pad
    token as transformers pools the logits; (N, H) (encoder models: the head ran on the pooled
    output) is returned as is.
    """
    if len(captured) != 1:
        raise RuntimeError(
            f"the reward head ran {len(captured)} times in one forward pass; expected once "
            "(set NormBTConfig.normbt_head to the module applied once per sequence)"
        )
    x = captured[0]
    n = input_ids.shape[0]
    if x.dim() == 3 and x.shape[:2] == input_ids.shape:
        return last_token_pool(x, input_ids, pad_token_id)  # (N, H)
    if x.dim() == 2 and x.shape[0] == n:
        return x  # (N, H)
    raise RuntimeError(
        f"the reward head's input has shape {tuple(x.shape)}; expected (N, T, H) or (N, H) with "
        f"N={n} sequences (set NormBTConfig.normbt_head to the layer that outputs the reward)"
    )
