"""Checkpoint merging over state dicts: weighted / SMA / EMA merges and the merged trajectory.

Vendorable: imports torch and safetensors only.

Notation (Extra-Merge, Zhou et al., arXiv 2605.26484, Sec. "Model merging in pre-training"):
checkpoints theta_1 .. theta_N are saved every Delta steps late in pre-training;

    weighted merge   M = sum_i w_i theta_i
    SMA (window W)   M_k = (1/W) sum_{j=k-W+1..k} theta_j
    EMA (decay b)    m_1 = theta_1,  m_k = b m_{k-1} + (1 - b) theta_k
                     i.e. w_1 = b^(N-1), w_k = (1 - b) b^(N-k) for k >= 2
                     (the recursion of torch.optim.swa_utils.get_ema_multi_avg_fn)

and the merged trajectory is M_W, M_{W+1}, ..., M_N (every `stride`-th one). Its increments are
long-baseline differences of raw checkpoints (exact identity, tested):

    M_k - M_{k-1} = (theta_k - theta_{k-W}) / W

so oscillation across the valley cancels in them while drift along it adds up. The EMA
trajectory m_1, ..., m_N (`ema_trajectory`) is the other merged trajectory Extra-Merge can read;
its increments are m_k - m_{k-1} = (1 - b)(theta_k - m_{k-1}).

Conventions
- Floating tensors are accumulated in float32 (float64 stays float64) in checkpoint order and cast
  back to the checkpoint's dtype. Integer / bool tensors (step counters, masks) are not averaged:
  the value of the LAST checkpoint is kept.
- Tied weights (two keys sharing one storage in the first checkpoint, e.g. GPT-2's wte / lm_head)
  are merged once and stay tied (the same tensor object) in the output.
- A checkpoint is a Mapping[str, Tensor] or a path to a ``.safetensors`` file. Paths are loaded one
  at a time: `weighted_merge` holds O(|theta|) (accumulator + one checkpoint) and
  `merged_trajectory` O(W |theta|), and both give the same bits as the in-memory call.
"""

from __future__ import annotations

import math
import os
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Union

import torch

StateDict = Mapping[str, torch.Tensor]
Checkpoint = Union[StateDict, str, "os.PathLike[str]"]

__all__ = [
    "ema",
    "ema_trajectory",
    "ema_weights",
    "load_checkpoint",
    "merged_trajectory",
    "save_checkpoint",
    "sma",
    "weighted_merge",
]


# ---------------------------------------------------------------------------------------------
# loading and validation
# ---------------------------------------------------------------------------------------------
def load_checkpoint(ckpt: Checkpoint, *, name: str = "checkpoint") -> dict[str, torch.Tensor]:
    """A state dict from a Mapping (returned as a dict, tensors not copied) or a .safetensors path."""
    if isinstance(ckpt, (str, os.PathLike)):
        from safetensors.torch import load_file

        path = os.fspath(ckpt)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{name}: no such checkpoint file {path!r}")
        return load_file(path, device="cpu")
    if not isinstance(ckpt, Mapping):
        raise TypeError(
            f"{name}: expected a state dict (Mapping[str, Tensor]) or a .safetensors path, "
            f"got {type(ckpt).__name__}"
        )
    for k, v in ckpt.items():
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"{name}, key {k!r}: expected a torch.Tensor, got {type(v).__name__}")
    return dict(ckpt)


def save_checkpoint(state_dict: StateDict, path: str | os.PathLike[str]) -> None:
    """Write a state dict to .safetensors; tied (aliased) tensors are written once per key."""
    from safetensors.torch import save_file

    seen: set[tuple[int, object]] = set()
    out = {}
    for k, v in state_dict.items():
        t = v.detach().cpu().contiguous()
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        out[k] = t.clone() if key in seen and t.numel() > 0 else t
        seen.add(key)
    save_file(out, os.fspath(path))


def _is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _acc_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype in (torch.float64, torch.complex128) else torch.float32


def _check_against(ref: StateDict, sd: StateDict, name: str) -> None:
    """Non-empty; same keys, shapes and float-ness as the reference; finite floating tensors.

    A floating tensor whose dtype differs from the reference's (fp32 vs bf16) warns: the merge
    still accumulates in float32 but casts to ONE checkpoint's dtype (see the callers)."""
    if len(sd) == 0:
        raise ValueError(f"{name}: empty state dict (no tensors to merge)")
    missing = [k for k in ref if k not in sd]
    extra = [k for k in sd if k not in ref]
    if missing or extra:
        raise ValueError(
            f"{name}: keys differ from checkpoint 0 (missing {missing[:5]}, unexpected {extra[:5]})"
        )
    for k, v in sd.items():
        r = ref[k]
        if v.shape != r.shape:
            raise ValueError(
                f"{name}, key {k!r}: shape {tuple(v.shape)} != {tuple(r.shape)} in checkpoint 0"
            )
        if _is_float(v) != _is_float(r):
            raise ValueError(f"{name}, key {k!r}: dtype {v.dtype} vs {r.dtype} in checkpoint 0")
        if _is_float(v) and not bool(torch.isfinite(v).all()):
            raise ValueError(f"{name}, key {k!r}: contains NaN or inf")
    mixed = [
        f"{k!r} ({v.dtype} vs {ref[k].dtype})"
        for k, v in sd.items()
        if _is_float(v) and v.dtype != ref[k].dtype
    ]
    if mixed:
        warnings.warn(
            f"{name}: floating dtypes differ from checkpoint 0 for {len(mixed)} key(s), e.g. "
            f"{', '.join(mixed[:3])}; values are accumulated in float32 and cast to checkpoint "
            f"0's dtype (extra_merge / extrapolate: to the last checkpoint's dtype). Cast all "
            f"checkpoints to one dtype to silence this.",
            UserWarning,
            stacklevel=4,
        )


def _alias_map(sd: StateDict) -> dict[str, str]:
    """key -> first key sharing its storage, offset, shape and strides (tied weights)."""
    first: dict[tuple, str] = {}
    out = {}
    for k, v in sd.items():
        if v.numel() == 0:
            out[k] = k
            continue
        sig = (
            v.device,
            v.untyped_storage().data_ptr(),
            v.storage_offset(),
            tuple(v.shape),
            v.stride(),
        )
        out[k] = first.setdefault(sig, k)
    return out


def _iter_checkpoints(
    checkpoints: Iterable[Checkpoint],
) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
    """Yield (index, validated state dict), loading paths lazily, checked against checkpoint 0."""
    ref: dict[str, torch.Tensor] | None = None
    for i, ck in enumerate(checkpoints):
        name = f"checkpoint {i}" + (
            f" ({os.fspath(ck)!r})" if isinstance(ck, (str, os.PathLike)) else ""
        )
        sd = load_checkpoint(ck, name=name)
        if ref is None:
            ref = sd
        _check_against(ref, sd, name)
        yield i, sd


# ---------------------------------------------------------------------------------------------
# merges
# ---------------------------------------------------------------------------------------------
def weighted_merge(
    checkpoints: Iterable[Checkpoint], weights: Sequence[float]
) -> dict[str, torch.Tensor]:
    """M = sum_i w_i theta_i over state dicts (weights are used as given: no normalisation).

    Streams: each checkpoint is loaded, added to the float32 accumulator and released, so a list
    of .safetensors paths needs O(|theta|) memory. Integer / bool tensors come from the last
    checkpoint; tied keys stay tied.
    """
    w = [float(x) for x in weights]
    if len(w) == 0:
        raise ValueError("weights: need at least one weight")
    if not all(math.isfinite(x) for x in w):
        raise ValueError(f"weights: must be finite, got {w}")
    acc: dict[str, torch.Tensor] = {}
    first: dict[str, torch.Tensor] = {}
    last: dict[str, torch.Tensor] = {}
    alias: dict[str, str] = {}
    n = 0
    for i, sd in _iter_checkpoints(checkpoints):
        if i >= len(w):
            raise ValueError(f"weights: {len(w)} weights for more than {len(w)} checkpoints")
        if i == 0:
            first, alias = sd, _alias_map(sd)
        for k, v in sd.items():
            if alias[k] != k:
                continue
            if _is_float(v):
                term = v.detach().to(_acc_dtype(v)) * w[i]
                if k in acc:
                    acc[k].add_(term)
                else:
                    acc[k] = term
        last = sd
        n = i + 1
    if n == 0:
        raise ValueError("checkpoints: need at least one checkpoint")
    if n != len(w):
        raise ValueError(f"weights: {len(w)} weights for {n} checkpoints")
    out: dict[str, torch.Tensor] = {}
    for k, v in first.items():
        if alias[k] != k:
            out[k] = out[alias[k]]
        elif _is_float(v):
            out[k] = acc[k].to(v.dtype)
        else:
            out[k] = last[k].detach().clone()
    return out


def sma(checkpoints: Iterable[Checkpoint]) -> dict[str, torch.Tensor]:
    """Simple moving average M = (1/N) sum_i theta_i (PMA's best merge; the Extra-Merge base)."""
    cks = list(checkpoints)
    if not cks:
        raise ValueError("checkpoints: need at least one checkpoint")
    return weighted_merge(cks, [1.0 / len(cks)] * len(cks))


def ema_weights(n: int, decay: float) -> list[float]:
    """Weights of the EMA recursion m_1 = theta_1, m_k = decay m_{k-1} + (1-decay) theta_k."""
    if n < 1:
        raise ValueError(f"n: need at least one checkpoint, got {n}")
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"decay: must lie in [0, 1), got {decay}")
    return [decay ** (n - 1)] + [(1.0 - decay) * decay ** (n - k) for k in range(2, n + 1)]


def ema(checkpoints: Iterable[Checkpoint], decay: float) -> dict[str, torch.Tensor]:
    """Exponential moving average with the recursion of `AveragedModel` + `get_ema_multi_avg_fn`."""
    cks = list(checkpoints)
    return weighted_merge(cks, ema_weights(len(cks), decay))


def ema_trajectory(
    checkpoints: Iterable[Checkpoint], decay: float, stride: int = 1, last: int | None = None
) -> list[dict[str, torch.Tensor]]:
    """The EMA trajectory [m_1, m_{1+stride}, ...] of m_1 = theta_1, m_k = b m_{k-1} + (1-b) theta_k.

    m_k equals `ema(checkpoints[:k], decay)` (same weights; the recursion rounds differently in
    float32, exactly equal in float64 up to rounding). Streams with one float32 accumulator;
    `last` keeps only the last `last` states (O(last |theta|) memory instead of O(N |theta|)).
    Its increments m_k - m_{k-1} = (1-b)(theta_k - m_{k-1}) are what Extra-Merge extrapolates
    on an EMA trajectory ("diff"), or PC1 of the states ("pc1").
    """
    if not 0.0 <= float(decay) < 1.0:
        raise ValueError(f"decay: must lie in [0, 1), got {decay}")
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride: must be a positive int, got {stride!r}")
    if last is not None and (not isinstance(last, int) or last < 1):
        raise ValueError(f"last: must be a positive int or None, got {last!r}")
    b = float(decay)
    out: deque[dict[str, torch.Tensor]] = deque(maxlen=last)
    acc: dict[str, torch.Tensor] = {}
    first: dict[str, torch.Tensor] = {}
    alias: dict[str, str] = {}
    n = 0
    for i, sd in _iter_checkpoints(checkpoints):
        if i == 0:
            first, alias = sd, _alias_map(sd)
        for k, v in sd.items():
            if alias[k] != k or not _is_float(v):
                continue
            x = v.detach().to(_acc_dtype(first[k]))
            if i == 0:
                acc[k] = x.clone()
            else:
                acc[k].mul_(b).add_(x, alpha=1.0 - b)  # m_k = b m_{k-1} + (1 - b) theta_k
        n = i + 1
        if i % stride == 0:
            state: dict[str, torch.Tensor] = {}
            for k, v in first.items():
                if alias[k] != k:
                    state[k] = state[alias[k]]
                elif _is_float(v):
                    state[k] = acc[k].to(v.dtype, copy=True)  # acc is updated in place
                else:
                    state[k] = sd[k].detach().clone()
            out.append(state)
    if n == 0:
        raise ValueError("checkpoints: need at least one checkpoint")
    return list(out)


def merged_trajectory(
    checkpoints: Iterable[Checkpoint], window: int, stride: int = 1
) -> list[dict[str, torch.Tensor]]:
    """The SMA trajectory [M_W, M_{W+stride}, ...], M_k = mean(theta_{k-W+1..k}) (1-based k).

    Streams over `checkpoints` keeping the last `window` of them (O(W |theta|) memory); each M_k
    is `sma` of its window, so it equals the in-memory merge bit for bit.
    """
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window: must be a positive int, got {window!r}")
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride: must be a positive int, got {stride!r}")
    buf: deque[dict[str, torch.Tensor]] = deque(maxlen=window)
    out: list[dict[str, torch.Tensor]] = []
    n = 0
    for i, sd in _iter_checkpoints(checkpoints):
        buf.append(sd)
        n = i + 1
        if n >= window and (n - window) % stride == 0:
            out.append(sma(buf))
    if n < window:
        raise ValueError(f"window: {window} exceeds the number of checkpoints ({n})")
    return out
