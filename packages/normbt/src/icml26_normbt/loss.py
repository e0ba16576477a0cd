"""NormBT: the Bradley-Terry loss with representation-distance normalization.

Xie et al., "When Distance Distracts: Representation Distance Bias in BT-Loss for Reward
Models" (arXiv 2512.06343). Vendorable: torch only.

For a reward head r = vᵀh + b on the pooled final-layer state h, the per-pair BT loss
ℓ_i = −log σ(Δr_i − margin_i), Δr_i = r_c,i − r_r,i, has the head gradient

    ∇_v ℓ_i = −σ(−(Δr_i − margin_i)) · (h_c,i − h_r,i),
    ‖∇_v ℓ_i‖ = σ(−(Δr_i − margin_i)) · d_i,        d_i = ‖h_c,i − h_r,i‖₂,

i.e. prediction error times representation distance. NormBT divides each pair's loss by its
distance (stop-gradient), scaled by a running mean distance m so the loss keeps its scale:

    w_i = sg( m / (d_i + ε) ),      L = (1/B) Σ_i w_i ℓ_i,

so the per-pair head-gradient norm becomes m·σ(−Δr_i)·d_i/(d_i+ε) ≈ m·σ(−Δr_i): the update is
driven by prediction error alone. m is an exponential moving average of the batch-mean distance
(`NormBTState`), all-reduced across ranks under torch.distributed.

No code was released with the paper; the choices it leaves open (EMA vs batch mean, decay, ε,
clipping, renormalization to mean 1, which layer defines d) are arguments here. See README.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "NormBTState",
    "bt_loss",
    "last_token_pool",
    "normbt_loss",
    "normbt_weights",
    "pair_distance",
]


# --------------------------------------------------------------------------------------------
# input checks (each error names the argument and what was expected)
# --------------------------------------------------------------------------------------------
def _check_rewards(r_chosen: Tensor, r_rejected: Tensor) -> tuple[Tensor, Tensor]:
    """Accept (B,) or (B, 1) rewards; return (B,) views."""
    out = []
    for name, r in (("r_chosen", r_chosen), ("r_rejected", r_rejected)):
        if not isinstance(r, Tensor):
            raise TypeError(
                f"`{name}` must be a torch.Tensor of shape (B,), got {type(r).__name__}"
            )
        if r.dim() == 2 and r.shape[1] == 1:
            r = r[:, 0]
        if r.dim() != 1:
            raise ValueError(f"`{name}` must have shape (B,) or (B, 1), got {tuple(r.shape)}")
        if r.shape[0] == 0:
            raise ValueError(f"`{name}` is an empty batch (B=0); need at least one pair")
        if not r.is_floating_point():
            raise TypeError(f"`{name}` must be a floating-point tensor, got {r.dtype}")
        if not bool(torch.isfinite(r.detach()).all()):
            raise ValueError(f"`{name}` contains NaN or inf rewards")
        out.append(r)
    if out[0].shape != out[1].shape:
        raise ValueError(
            f"`r_chosen` and `r_rejected` must have the same shape, got "
            f"{tuple(out[0].shape)} and {tuple(out[1].shape)}"
        )
    return out[0], out[1]


def _check_margin(margin: Tensor | float | None, ref: Tensor) -> Tensor | float:
    if margin is None:
        return 0.0
    if isinstance(margin, (int, float)):
        return float(margin)
    if not isinstance(margin, Tensor):
        raise TypeError(
            f"`margin` must be None, a float or a (B,) tensor, got {type(margin).__name__}"
        )
    if margin.dim() == 2 and margin.shape[1] == 1:
        margin = margin[:, 0]
    if margin.dim() == 0:
        return margin.to(ref.dtype)
    if margin.shape != ref.shape:
        raise ValueError(
            f"`margin` must be a scalar or have shape {tuple(ref.shape)} (one per pair), "
            f"got {tuple(margin.shape)}"
        )
    return margin.to(ref.dtype)


def _check_hidden(h_chosen: Tensor, h_rejected: Tensor, batch: int | None) -> None:
    for name, h in (("h_chosen", h_chosen), ("h_rejected", h_rejected)):
        if not isinstance(h, Tensor):
            raise TypeError(
                f"`{name}` must be a torch.Tensor of shape (B, H), got {type(h).__name__}"
            )
        if h.dim() != 2:
            raise ValueError(
                f"`{name}` must have shape (B, H) with a batch dimension, got {tuple(h.shape)}"
            )
        if h.shape[0] == 0:
            raise ValueError(f"`{name}` is an empty batch (B=0); need at least one pair")
        if batch is not None and h.shape[0] != batch:
            raise ValueError(f"`{name}` has batch size {h.shape[0]}, but the rewards have {batch}")
    if h_chosen.shape != h_rejected.shape:
        raise ValueError(
            f"`h_chosen` and `h_rejected` must have the same shape, got "
            f"{tuple(h_chosen.shape)} and {tuple(h_rejected.shape)}"
        )


# --------------------------------------------------------------------------------------------
# Bradley-Terry (the baseline; identical to TRL's RewardTrainer loss)
# --------------------------------------------------------------------------------------------
def bt_loss(r_chosen: Tensor, r_rejected: Tensor, margin: Tensor | float | None = None) -> Tensor:
    """Bradley-Terry loss  L = −(1/B) Σ_i log σ(r_c,i − r_r,i − margin_i).

    r_chosen, r_rejected: (B,) or (B, 1). margin: None, a float, or (B,).
    """
    r_c, r_r = _check_rewards(r_chosen, r_rejected)
    m = _check_margin(margin, r_c)
    return -F.logsigmoid(r_c - r_r - m).mean()


# --------------------------------------------------------------------------------------------
# distances and pooling
# --------------------------------------------------------------------------------------------
def pair_distance(h_chosen: Tensor, h_rejected: Tensor) -> Tensor:
    """d_i = ‖h_c,i − h_r,i‖₂ for pooled states (B, H) -> (B,), in at least float32."""
    _check_hidden(h_chosen, h_rejected, None)
    dtype = torch.promote_types(h_chosen.dtype, torch.float32)  # bf16/fp16 states upcast
    return torch.linalg.vector_norm(h_chosen.to(dtype) - h_rejected.to(dtype), dim=-1)


def last_token_pool(hidden: Tensor, input_ids: Tensor, pad_token_id: int | None) -> Tensor:
    """Pool (B, T, H) -> (B, H) at the last non-pad token, as AutoModelForSequenceClassification.

    Matches transformers' sequence-classification pooling for left and right padding: the
    rightmost position whose id is not `pad_token_id` (position 0 when a row is all padding);
    with `pad_token_id=None` the last position is taken.
    """
    if not isinstance(hidden, Tensor) or hidden.dim() != 3:
        shape = tuple(hidden.shape) if isinstance(hidden, Tensor) else type(hidden).__name__
        raise ValueError(f"`hidden` must be a (B, T, H) tensor, got {shape}")
    if not isinstance(input_ids, Tensor) or input_ids.shape != hidden.shape[:2]:
        shape = tuple(input_ids.shape) if isinstance(input_ids, Tensor) else type(input_ids)
        raise ValueError(
            f"`input_ids` must have shape {tuple(hidden.shape[:2])} (B, T), got {shape}"
        )
    b, t = input_ids.shape
    if pad_token_id is None:
        idx = torch.full((b,), t - 1, device=hidden.device, dtype=torch.long)
    else:
        non_pad = (input_ids != pad_token_id).to(hidden.device, torch.int32)  # (B, T)
        pos = torch.arange(t, device=hidden.device, dtype=torch.int32)  # (T,)
        idx = (pos * non_pad).argmax(-1)  # (B,) rightmost non-pad position
    return hidden[torch.arange(b, device=hidden.device), idx]  # (B, H)


# --------------------------------------------------------------------------------------------
# running mean distance
# --------------------------------------------------------------------------------------------
class NormBTState(nn.Module):
    """Running estimate m of the mean pair distance (the numerator of the NormBT weight).

    In training mode every call to `update(d)` folds the batch mean into the EMA

        m ← d̄                       (first update)
        m ← β·m + (1−β)·d̄           (afterwards),   d̄ = Σ_ranks Σ_i d_i / Σ_ranks B,

    with d̄ all-reduced across ranks when torch.distributed is initialized and `sync=True`, so
    every rank holds the same m. `decay=0` gives the plain (global) batch mean. In eval mode m is
    read, not updated (the batch mean is used until a first training update has happened).
    m lives in buffers, so it is saved and restored with `state_dict()`.
    """

    mean_distance: Tensor
    num_updates: Tensor

    def __init__(self, decay: float = 0.99, *, sync: bool = True) -> None:
        super().__init__()
        if not isinstance(decay, (int, float)) or not 0.0 <= float(decay) < 1.0:
            raise ValueError(f"`decay` must be a float in [0, 1), got {decay!r}")
        self.decay = float(decay)  # 0.99: a ~100-step memory smooths batch noise in d̄
        self.sync = bool(sync)  # all-reduce d̄ so every rank uses the same m
        self.register_buffer("mean_distance", torch.zeros((), dtype=torch.float32))
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return f"decay={self.decay}, sync={self.sync}"

    def _global_batch_mean(self, d: Tensor) -> Tensor:
        stats = torch.stack(
            [d.detach().float().sum(), d.new_tensor(d.numel(), dtype=torch.float32)]
        )
        if self.sync and dist.is_available() and dist.is_initialized():
            stats = stats.to(self.mean_distance.device)
            dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        return (stats[0] / stats[1]).to(self.mean_distance.device)

    @torch.no_grad()
    def update(self, d: Tensor) -> Tensor:
        """Fold the batch distances d (B,) into m (training mode) and return m (scalar, detached)."""
        if not isinstance(d, Tensor) or d.dim() != 1 or d.numel() == 0:
            shape = tuple(d.shape) if isinstance(d, Tensor) else type(d).__name__
            raise ValueError(f"`d` must be a non-empty (B,) tensor of distances, got {shape}")
        if not self.training:
            if int(self.num_updates) == 0:
                return self._global_batch_mean(d).to(d.device)
            return self.mean_distance.clone().to(d.device)
        batch_mean = self._global_batch_mean(d)
        first = self.num_updates == 0
        ema = self.decay * self.mean_distance + (1.0 - self.decay) * batch_mean
        self.mean_distance.copy_(torch.where(first, batch_mean, ema))  # no host sync
        self.num_updates.add_(1)
        return self.mean_distance.clone().to(d.device)


# --------------------------------------------------------------------------------------------
# NormBT
# --------------------------------------------------------------------------------------------
def normbt_weights(
    d: Tensor,
    m: Tensor | float,
    *,
    eps: float = 1e-6,
    clip: float | None = None,
    renormalize: bool = False,
) -> Tensor:
    """w_i = m / (d_i + ε), optionally clipped to ≤ `clip` and rescaled to mean 1; no gradient.

    d: (B,) distances, m: scalar. Clipping happens before renormalization.
    """
    if eps < 0:
        raise ValueError(f"`eps` must be >= 0, got {eps}")
    if clip is not None and not clip > 0:
        raise ValueError(f"`clip` must be None or > 0, got {clip}")
    d = d.detach()
    m = m.detach() if isinstance(m, Tensor) else torch.tensor(float(m), device=d.device)
    w = m.to(d.dtype) / (d + eps)  # (B,)
    if clip is not None:
        w = w.clamp(max=clip)
    if renormalize:
        w = w / w.mean()
    return w


def normbt_loss(
    r_chosen: Tensor,
    r_rejected: Tensor,
    h_chosen: Tensor,
    h_rejected: Tensor,
    *,
    state: NormBTState | None,
    margin: Tensor | float | None = None,
    eps: float = 1e-6,
    clip: float | None = None,
    renormalize: bool = False,
) -> tuple[Tensor, Tensor]:
    """NormBT loss  L = (1/B) Σ_i sg(m/(d_i+ε)) · (−log σ(r_c,i − r_r,i − margin_i)).

    r_chosen, r_rejected: (B,) or (B, 1) rewards. h_chosen, h_rejected: (B, H) pooled states
    the reward head consumes (`last_token_pool`). state: a `NormBTState` holding the EMA of the
    mean distance m (updated here in training mode); `None` uses this batch's mean distance.
    eps: added to d_i (1e-6: only guards d=0). clip: upper bound on w_i (None: the formula as
    stated). renormalize: divide w by its batch mean (mean 1, so L has BT's scale on every batch).

    Returns (loss, weights) with weights (B,) detached.
    """
    r_c, r_r = _check_rewards(r_chosen, r_rejected)
    _check_hidden(h_chosen, h_rejected, r_c.shape[0])
    mg = _check_margin(margin, r_c)
    if state is not None and not isinstance(state, NormBTState):
        raise TypeError(f"`state` must be a NormBTState or None, got {type(state).__name__}")
    d = pair_distance(h_chosen.detach(), h_rejected.detach())  # (B,) float32
    m = state.update(d) if state is not None else d.mean()
    w = normbt_weights(d, m, eps=eps, clip=clip, renormalize=renormalize).to(r_c.dtype)
    per_pair = -F.logsigmoid(r_c - r_r - mg)  # (B,)
    return (w * per_pair).mean(), w
