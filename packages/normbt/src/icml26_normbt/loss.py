"""NormBT: the Bradley-Terry loss with representation-distance normalization.

Xie et al., "When Distance Distracts: Representation Distance Bias in BT-Loss for Reward
Models" (arXiv 2512.06343). Vendorable: torch only.

For a reward head r = vᵀh + b on the pooled final-layer state h, the per-pair BT loss
ℓ_i = −log σ(Δr_i − margin_i), Δr_i = r_c,i − r_r,i, has the head gradient

    ∇_v ℓ_i = −σ(−(Δr_i − margin_i)) · (h_c,i − h_r,i),
    ‖∇_v ℓ_i‖ = σ(−(Δr_i − margin_i)) · d_i,        d_i = ‖h_c,i − h_r,i‖₂,

i.e. prediction error times representation distance. NormBT divides each pair's loss by its
distance (stop-gradient), scaled by a running mean distance m so the loss keeps its scale:

    w_i = sg( m / (d_i + ε·m) ),      L = (1/B) Σ_i w_i ℓ_i,

so the per-pair *head* gradient norm becomes m·σ(−Δr_i)·d_i/(d_i+ε·m) ≈ m·σ(−Δr_i): on the
reward head's weights the update is driven by prediction error alone. This holds for the head
only: the backbone's per-pair gradient is w_i·σ(−Δr_i)·‖∂Δr_i/∂θ‖, whose last factor is not d_i,
so over all parameters NormBT rescales but does not remove the distance effect (it can invert
it; see the README's full-parameter statistics). ε is relative to m (default 0.05: w ≤ 20).

m is a bias-corrected exponential moving average of the batch-mean distance (`NormBTState`),
all-reduced across ranks under torch.distributed; a batch is weighted with m as it stood before
that batch (the batch's own mean on the very first step), and the state folds each optimizer
step's distances in once (`observe` per micro-batch, `step` per optimizer step).

No code was released with the paper; the choices it leaves open (EMA vs batch mean, decay, ε,
clipping, renormalization to mean 1, which representation defines d) are arguments here.
"""

from __future__ import annotations

import math
import warnings

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
def _check_float(
    name: str, value: object, *, lo: float = 0.0, lo_open: bool = False, hi: float | None = None
) -> float:
    """A finite real number >= lo (> lo if lo_open) and < hi; bools and NaN are rejected."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a real number, got {type(value).__name__}")
    v = float(value)
    ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and (hi is None or v < hi)
    if not ok:
        rng = f"{'(' if lo_open else '['}{lo}, {hi if hi is not None else 'inf'})"
        raise ValueError(f"`{name}` must be a finite number in {rng}, got {value!r}")
    return v


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a bool, got {type(value).__name__}")
    return value


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
    if isinstance(margin, (int, float)) and not isinstance(margin, bool):
        if not math.isfinite(float(margin)):
            raise ValueError(f"`margin` must be finite, got {margin!r}")
        return float(margin)
    if not isinstance(margin, Tensor):
        raise TypeError(
            f"`margin` must be None, a float or a (B,) tensor, got {type(margin).__name__}"
        )
    if margin.dim() == 2 and margin.shape[1] == 1:
        margin = margin[:, 0]
    if not bool(torch.isfinite(margin.detach()).all()):
        raise ValueError("`margin` contains NaN or inf")
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

    Per micro-batch, `observe(d)` returns the m to weight that batch with and (in training mode)
    adds its distances to the pending sums of the current optimizer step; `step()` folds the
    step's global mean distance d̄ (all ranks, all micro-batches) into a bias-corrected EMA

        m_n = m_{n−1} + α_n (d̄ − m_{n−1}),   α_n = (1−β)/(1−βⁿ)    (α_1 = 1: m_1 = d̄),

    i.e. m_n = Σ_k (1−β)β^{n−k} d̄_k / (1−βⁿ), Adam's debiasing: a degenerate early step weighs
    ~1/n, not β^n. `decay=0` gives the last step's mean. With `auto_step=True` (a plain loop, no
    gradient accumulation) `normbt_loss` calls `step()` after every batch.

    The m returned by `observe` is m as it stood before the step (so every micro-batch of a step
    gets the same m, and gradient accumulation matches the large batch); before the first update
    it is the running mean of the step's distances so far (the batch mean when not accumulating).

    Safe by construction: a step whose distances contain NaN/inf is skipped with a warning (it
    never enters m), and a step whose mean distance is 0 (every pair identical) is skipped, so m
    is never 0 or non-finite after an update. In eval mode nothing is recorded.
    `last_m` holds the m the last `observe` returned (the one that batch was weighted with: on
    the first step the batch mean, though `mean_distance` is still 0 until `step()`).
    d̄ is all-reduced (sum and count) across ranks when torch.distributed is initialized and
    `sync=True`, so every rank holds the same m. m lives in buffers (`state_dict()`).
    """

    mean_distance: Tensor
    num_updates: Tensor
    pending: Tensor

    def __init__(self, decay: float = 0.99, *, sync: bool = True, auto_step: bool = True) -> None:
        super().__init__()
        self.decay = _check_float("decay", decay, hi=1.0)  # 0.99: ~100-step memory
        self.sync = _check_bool("sync", sync)  # all-reduce d̄ so every rank uses the same m
        self.auto_step = _check_bool("auto_step", auto_step)
        self.register_buffer("mean_distance", torch.zeros((), dtype=torch.float32))
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))
        # (sum of d, count) of the current optimizer step; empty between steps, not saved
        self.register_buffer("pending", torch.zeros(2, dtype=torch.float64), persistent=False)
        # the m the last `observe` returned (what that batch was weighted with), for logging;
        # None before the first call; not a buffer (nothing to checkpoint)
        self.last_m: Tensor | None = None

    def extra_repr(self) -> str:
        return f"decay={self.decay}, sync={self.sync}, auto_step={self.auto_step}"

    def _global_stats(self, d: Tensor) -> tuple[Tensor, bool]:
        """(sum, count) of d over all ranks, and whether any rank saw a non-finite distance."""
        d = d.detach()
        finite = torch.isfinite(d)
        stats = torch.stack(
            [
                torch.where(finite, d, torch.zeros_like(d)).double().sum(),
                finite.sum().double(),
                (~finite).sum().double(),
            ]
        ).to(self.pending.device)
        if self.sync and dist.is_available() and dist.is_initialized():
            dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        return stats[:2], bool(stats[2] > 0)

    @torch.no_grad()
    def observe(self, d: Tensor) -> Tensor:
        """Record a micro-batch's distances d (B,) (training mode); return the m to weight it with."""
        if not isinstance(d, Tensor) or d.dim() != 1 or d.numel() == 0:
            shape = tuple(d.shape) if isinstance(d, Tensor) else type(d).__name__
            raise ValueError(f"`d` must be a non-empty (B,) tensor of distances, got {shape}")
        stats, nonfinite = self._global_stats(d)
        if nonfinite:
            warnings.warn(
                "NormBTState: non-finite pair distances (NaN/inf hidden states); this batch is "
                "left out of the running mean m",
                RuntimeWarning,
                stacklevel=3,
            )
        elif self.training:
            self.pending += stats
        if int(self.num_updates) > 0:
            m = self.mean_distance.clone().to(d.device)
        else:
            src = self.pending if float(self.pending[1]) > 0 else stats  # no m yet: mean so far
            m = (src[0] / src[1].clamp_min(1.0)).float().to(d.device)
        self.last_m = m
        return m

    @torch.no_grad()
    def step(self) -> Tensor:
        """Fold the pending optimizer step into m (once per optimizer step); return m."""
        total, count = float(self.pending[0]), float(self.pending[1])
        self.pending.zero_()
        if count > 0 and total > 0:
            n = int(self.num_updates) + 1
            alpha = (1.0 - self.decay) / (1.0 - self.decay**n)
            batch_mean = torch.tensor(total / count, dtype=torch.float32)
            self.mean_distance.add_(
                alpha * (batch_mean.to(self.mean_distance) - self.mean_distance)
            )
            self.num_updates.add_(1)
        return self.mean_distance.clone()

    @torch.no_grad()
    def update(self, d: Tensor) -> Tensor:
        """`observe(d)` then `step()` (training mode); return the updated m (scalar, detached)."""
        m_before = self.observe(d)
        if self.training:
            self.step()
        return self.mean_distance.clone().to(d.device) if int(self.num_updates) > 0 else m_before


# --------------------------------------------------------------------------------------------
# NormBT
# --------------------------------------------------------------------------------------------
def normbt_weights(
    d: Tensor,
    m: Tensor | float,
    *,
    eps: float = 0.05,
    clip: float | None = None,
    renormalize: bool = False,
) -> Tensor:
    """w_i = m / (d_i + ε·m), optionally clipped to ≤ `clip` and rescaled to mean 1; no gradient.

    d: (B,) distances, m: scalar ≥ 0. ε is relative to m, so w ≤ 1/ε (ε = 0 gives m/d exactly;
    a zero distance then needs `clip`). m = 0 (no scale known: every pair identical) gives
    w = 1 (BT). A non-finite d_i gets w_i = 1 (BT for that pair). Clipping precedes
    renormalization.
    """
    eps = _check_float("eps", eps)
    if clip is not None:
        clip = _check_float("clip", clip, lo_open=True)
    _check_bool("renormalize", renormalize)
    if not isinstance(d, Tensor) or d.dim() != 1 or d.numel() == 0:
        shape = tuple(d.shape) if isinstance(d, Tensor) else type(d).__name__
        raise ValueError(f"`d` must be a non-empty (B,) tensor of distances, got {shape}")
    d = d.detach()
    if isinstance(m, Tensor):
        if m.numel() != 1:
            raise ValueError(f"`m` must be a scalar, got shape {tuple(m.shape)}")
        m_t = m.detach().reshape(()).to(d.device, d.dtype)
    else:
        m_t = torch.tensor(_check_float("m", m), device=d.device, dtype=d.dtype)
    if not (bool(torch.isfinite(m_t)) and float(m_t) >= 0):
        raise ValueError(f"`m` must be finite and >= 0, got {float(m_t)}")
    finite = torch.isfinite(d)
    if bool((d[finite] < 0).any()):
        raise ValueError("`d` has negative distances")
    if float(m_t) == 0.0:
        w = torch.ones_like(d)
    else:
        denom = d + eps * m_t  # (B,)
        if eps == 0.0 and bool((denom[finite] == 0).any()):
            if clip is None:
                raise ValueError(
                    "`eps`=0 with a zero distance gives an infinite weight; set eps > 0 or clip"
                )
            denom = torch.where(denom == 0, m_t / clip, denom)
        w = m_t / denom
    w = torch.where(finite, w, torch.ones_like(w))  # (B,)
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
    state: NormBTState | float | None,
    margin: Tensor | float | None = None,
    eps: float = 0.05,
    clip: float | None = None,
    renormalize: bool = False,
) -> tuple[Tensor, Tensor]:
    """NormBT loss  L = (1/B) Σ_i sg(m/(d_i+ε·m)) · (−log σ(r_c,i − r_r,i − margin_i)).

    r_chosen, r_rejected: (B,) or (B, 1) rewards. h_chosen, h_rejected: (B, H) pooled states
    the reward head consumes. state: a `NormBTState` (m from its EMA; records this batch in
    training mode and, with `auto_step`, folds it in), a float (a fixed m; `1.0` gives
    w = 1/(d+ε), the unscaled ablation), or `None` (this batch's mean distance).
    eps: relative to m (w ≤ 1/ε). clip: upper bound on w_i. renormalize: divide w by its batch
    mean (mean 1, so L has BT's scale on every batch).

    Returns (loss, weights) with weights (B,) detached.
    """
    r_c, r_r = _check_rewards(r_chosen, r_rejected)
    _check_hidden(h_chosen, h_rejected, r_c.shape[0])
    mg = _check_margin(margin, r_c)
    d = pair_distance(h_chosen.detach(), h_rejected.detach())  # (B,) float32
    m: Tensor | float
    if isinstance(state, NormBTState):
        m = state.observe(d)
        if state.training and state.auto_step:
            state.step()
    elif state is None:
        finite = torch.isfinite(d)
        m = torch.where(finite, d, torch.zeros_like(d)).sum() / finite.sum().clamp_min(1)
    elif isinstance(state, (int, float)) and not isinstance(state, bool):
        m = _check_float("state", state, lo_open=True)
    else:
        raise TypeError(
            f"`state` must be a NormBTState, a float or None, got {type(state).__name__}"
        )
    w = normbt_weights(d, m, eps=eps, clip=clip, renormalize=renormalize).to(r_c.dtype)
    per_pair = -F.logsigmoid(r_c - r_r - mg)  # (B,)
    return (w * per_pair).mean(), w
