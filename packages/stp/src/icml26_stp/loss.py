"""Semantic Tube Prediction (STP) loss: the hidden-state trajectory of a message is a line.

Huang, LeCun & Balestriero, "Semantic Tube Prediction: Beating LLM Data Efficiency with JEPA"
(arXiv 2602.22617). Semantics follow the official `stp.py` (galilai-group/llm-jepa,
`RepresentationTrainer` with `--linear=random_span`); this is a reimplementation, no code copied.

Notation. A sample holds a user message at token positions [u0, u1) and an assistant message
at [a0, a1) (u1 <= a0; chat-template tokens in between). The displacement of a message is
h[end - 1] - h[start - 1] (the official `find_start_end` convention (i-1, i+L-1)), so the
state just before each message is its anchor. The two messages are concatenated into one
virtual trajectory of n = (u1 - u0) + (a1 - a0) steps, bridging the template tokens: offset
k in [0, n] is the state

    x(k) = h[u0 - 1 + k]            if k <  n_user
    x(k) = h[a0 - 1 + k - n_user]   if k >= n_user   (k = n_user is the assistant anchor)

and the displacement D(k, l) from k to l sums the pieces on each side, skipping the bridge.
A span 0 <= s < t <= n, t - s < n, splits the trajectory into before = D(0, s),
patch = D(s, t) and after = D(t, n) (telescoping: before + patch + after = D(0, n)). Then

    L_STP = 1 - sum_j w_j cos(before_j + after_j, patch_j) / sum_j w_j

which is 0 exactly when the outside displacement is positively collinear with the patch
(a straight trajectory gives 0 for every span). The training loss is
gamma * L_NTP + lambda * L_STP from one forward pass (see `icml26_stp.trl`).

`stp_loss` gathers 6 rows per sample (vectorised); `stp_loss_ref` is the per-sample loop
with the official branch structure. Spans are drawn on the CPU with the official sequence
of `torch.randint` calls, so a generator seeded like the official one draws the same spans.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "LENGTH_ADJUSTMENTS",
    "SAMPLERS",
    "LinearPredictor",
    "curvature_loss",
    "sample_span",
    "sample_spans",
    "span_decompose",
    "span_weight",
    "stp_loss",
    "stp_loss_ref",
    "two_view_loss",
]

Sampler = Literal["default", "uniform", "draw_both"]
SAMPLERS: tuple[str, ...] = ("default", "uniform", "draw_both")
LENGTH_ADJUSTMENTS: tuple[str | None, ...] = (None, "cosine_like", "jaccard_like")


# ----------------------------------------------------------------------------- spans
def sample_span(
    n: int,
    *,
    generator: torch.Generator | None = None,
    mode: str = "default",
    max_length: int | None = None,
) -> tuple[int, int]:
    """Draw one span (s, t), 0 <= s < t <= n, t - s < n, over a trajectory of n steps.

    Modes (official `get_s_t`):
      - "default": s ~ U{0..n-1}, then t ~ U{s+1..min(n, s+max_length)} redrawn while
        t - s = n (only s = 0 can hit it);
      - "uniform": (s, t) uniform over the n(n+1)/2 pairs s < t, redrawn while t - s = n;
      - "draw_both": a ~ U{0..n-1}, b ~ U{1..n}, (s, t) = (min, max), t clipped to
        s + max_length, redrawn until s < t and t - s < n.
    `max_length` (>= 1) bounds t - s in "default" and "draw_both" (official
    `--random_span_max_length`; unused by "uniform", as upstream).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"`n` must be an int >= 2 (a span needs a rest), got {n!r}")
    if mode not in SAMPLERS:
        raise ValueError(f"`mode` must be one of {SAMPLERS}, got {mode!r}")
    if max_length is not None and (isinstance(max_length, bool) or max_length < 1):
        raise ValueError(f"`max_length` must be None or an int >= 1, got {max_length!r}")
    g = generator
    if g is not None and g.device.type != "cpu":
        raise ValueError(f"`generator` must be a CPU torch.Generator, got {g.device}")
    if mode == "draw_both":
        while True:
            p1 = int(torch.randint(0, n, (1,), generator=g))
            p2 = int(torch.randint(1, n + 1, (1,), generator=g))
            s, t = min(p1, p2), max(p1, p2)
            if max_length is not None and t - s > max_length:
                t = s + max_length
            if s < t and t - s < n:
                return s, t
    if mode == "uniform":
        total = n * (n + 1) // 2
        a = 2 * n + 1
        while True:
            r = int(torch.randint(total, (1,), generator=g, dtype=torch.long))
            # r enumerates pairs row by row: s-th row starts at s(2n - s + 1)/2 and has n - s.
            s = math.floor((a - math.sqrt(a * a - 8 * r)) / 2)
            while s * (2 * n - s + 1) // 2 > r:  # float guard (exact for n < 2**24)
                s -= 1
            while (s + 1) * (2 * n - s) // 2 <= r:
                s += 1
            t = s + 1 + (r - s * (2 * n - s + 1) // 2)
            if t - s < n:
                return s, t
    s = int(torch.randint(0, n, (), generator=g))
    hi = n + 1 if max_length is None else min(n + 1, s + 1 + max_length)
    while True:
        t = int(torch.randint(s + 1, hi, (), generator=g))
        if t - s < n:
            return s, t


def _check_spans(spans: Tensor, seq_len: int, batch: int, name: str = "spans") -> list[list[int]]:
    if not isinstance(spans, Tensor) or spans.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"`{name}` must be an integer tensor of shape (B, 2, 2)")
    if spans.shape != (batch, 2, 2):
        raise ValueError(
            f"`{name}` must have shape (B, 2, 2) = ({batch}, 2, 2) "
            f"(user [start, end), assistant [start, end)), got {tuple(spans.shape)}"
        )
    rows: list[list[int]] = spans.reshape(batch, 4).tolist()
    for i, (u0, u1, a0, a1) in enumerate(rows):
        if not 1 <= u0 < u1 <= a0 < a1 <= seq_len:
            raise ValueError(
                f"`{name}`[{i}] = user [{u0}, {u1}), assistant [{a0}, {a1}) must satisfy "
                f"1 <= user_start < user_end <= assistant_start < assistant_end <= T = "
                f"{seq_len}: both messages non-empty, in order, inside the sequence, and the "
                "user message preceded by one token (its anchor state h[start - 1])"
            )
    return rows


def sample_spans(
    spans: Tensor,
    *,
    generator: torch.Generator | None = None,
    mode: str = "default",
    max_length: int | None = None,
    times: int = 1,
) -> Tensor:
    """Offsets (B * times, 2) of one span per sample and repeat, row j = sample j // times.

    `spans` (B, 2, 2) as in `stp_loss`; draws in the official order (sample-major).
    """
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"`times` must be an int >= 1, got {times!r}")
    if not isinstance(spans, Tensor) or spans.dim() != 3:
        raise ValueError("`spans` must be an integer tensor of shape (B, 2, 2)")
    if spans.shape[0] == 0:
        raise ValueError("`spans` has batch size 0: there is no sample to draw a span for")
    rows = spans.reshape(spans.shape[0], -1).tolist()
    out = []
    for j in range(len(rows) * times):
        u0, u1, a0, a1 = rows[j // times]
        n = (u1 - u0) + (a1 - a0)
        out.append(sample_span(n, generator=generator, mode=mode, max_length=max_length))
    return torch.tensor(out, dtype=torch.long).reshape(-1, 2)


def span_weight(n: Tensor, length: Tensor, length_adjustment: str | None) -> Tensor:
    """Official `get_weights`: w = 1, 2rp/(r^2 + p^2) ("cosine_like") or 1 - |r-p|/(r+p)
    ("jaccard_like"), with p = t - s the patch length and r = n - p the rest."""
    p = length.to(torch.float64)
    r = n.to(torch.float64) - p
    if length_adjustment is None:
        return torch.ones_like(p)
    if length_adjustment == "cosine_like":
        return 2.0 * r * p / (r * r + p * p)
    if length_adjustment == "jaccard_like":
        return 1.0 - (r - p).abs() / (r + p)
    raise ValueError(
        f"`length_adjustment` must be one of {LENGTH_ADJUSTMENTS}, got {length_adjustment!r}"
    )


# ------------------------------------------------------------------------ fast path
def span_decompose(hidden: Tensor, spans: Tensor, offsets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(before, patch, after), each (N, H), for N = len(offsets) spans; vectorised gathers.

    hidden (B, T, H); spans (B, 2, 2) [[u0, u1], [a0, a1]]; offsets (N, 2) rows (s, t), with
    N = B * times and row j belonging to sample j // times. Inputs are trusted (see stp_loss).
    """
    B, _, _ = hidden.shape
    times = offsets.shape[0] // B
    sp = spans.to(hidden.device).repeat_interleave(times, dim=0)  # (N, 2, 2)
    off = offsets.to(hidden.device)
    u0, u1, a0, a1 = sp[:, 0, 0], sp[:, 0, 1], sp[:, 1, 0], sp[:, 1, 1]  # (N,)
    nu = u1 - u0
    s, t = off[:, 0], off[:, 1]

    def pos(k: Tensor) -> Tensor:  # hidden row of virtual state x(k)
        return torch.where(k < nu, u0 - 1 + k, a0 - 1 + k - nu)

    rows = torch.stack([u0 - 1, u1 - 1, a0 - 1, a1 - 1, pos(s), pos(t)], dim=1)  # (N, 6)
    b = torch.arange(B, device=hidden.device).repeat_interleave(times)  # (N,)
    x = hidden[b[:, None], rows]  # (N, 6, H)
    hu0, hu1, ha0, ha1, hs, ht = x.unbind(1)  # each (N, H)
    bridge = hu1 - ha0  # (N, H): added when a piece crosses the template tokens

    def disp(k: Tensor, hk: Tensor, l_: Tensor, hl: Tensor) -> Tensor:  # D(k, l), k <= l
        cross = ((k < nu) & (l_ >= nu)).to(hidden.dtype)[:, None]  # (N, 1)
        return (hl - hk) + cross * bridge

    zero = torch.zeros_like(s)
    n = nu + (a1 - a0)
    before = disp(zero, hu0, s, hs)
    patch = disp(s, hs, t, ht)
    after = disp(t, ht, n, ha1)
    return before, patch, after


def stp_loss(
    hidden: Tensor,
    spans: Tensor,
    *,
    generator: torch.Generator | None = None,
    length_adjustment: str | None = None,
    mode: str = "default",
    max_length: int | None = None,
    times: int = 1,
    offsets: Tensor | None = None,
    predictor: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """L_STP = 1 - sum_j w_j cos(before_j + after_j, patch_j) / sum_j w_j (scalar).

    Args:
        hidden: (B, T, H) hidden states of one forward pass (official: the last layer).
        spans: (B, 2, 2) long, [[user_start, user_end], [asst_start, asst_end]] half-open
            token ranges (`icml26_stp.message_spans` computes them).
        generator: CPU generator for the span draws (None: torch's default generator).
        length_adjustment: None, "cosine_like" or "jaccard_like" (`span_weight`).
        mode, max_length: the span sampler (`sample_span`).
        times: spans drawn per sample (official `--random_span_times`).
        offsets: (B * times, 2) explicit (s, t) per span instead of sampling.
        predictor: optional map applied to before + after (official `--linear_predictor`).

    The gathered rows are upcast to at least float32 (official: the model dtype).
    """
    if not isinstance(hidden, Tensor) or hidden.dim() != 3:
        shape = tuple(hidden.shape) if isinstance(hidden, Tensor) else type(hidden).__name__
        raise ValueError(f"`hidden` must have shape (B, T, H) with a batch dimension, got {shape}")
    if not hidden.is_floating_point():
        raise TypeError(f"`hidden` must be a floating tensor, got {hidden.dtype}")
    B, T, _ = hidden.shape
    if B == 0:
        raise ValueError(
            f"`hidden` has batch size 0 (shape {tuple(hidden.shape)}): L_STP is a mean over "
            "samples and needs at least one; skip empty batches before calling stp_loss"
        )
    rows = _check_spans(spans, T, B)
    if length_adjustment not in LENGTH_ADJUSTMENTS:
        raise ValueError(
            f"`length_adjustment` must be one of {LENGTH_ADJUSTMENTS}, got {length_adjustment!r}"
        )
    ns = [(u1 - u0) + (a1 - a0) for u0, u1, a0, a1 in rows]
    if offsets is None:
        offsets = sample_spans(
            spans, generator=generator, mode=mode, max_length=max_length, times=times
        )
    else:
        if offsets.dim() != 2 or offsets.shape[1] != 2 or offsets.shape[0] % B:
            raise ValueError(
                f"`offsets` must have shape (B * times, 2), got {tuple(offsets.shape)}"
            )
        times = offsets.shape[0] // B
        for j, (s, t) in enumerate(offsets.tolist()):
            n = ns[j // times]
            if not (0 <= s < t <= n and t - s < n):
                raise ValueError(
                    f"`offsets`[{j}] = ({s}, {t}) needs 0 <= s < t <= n = {n}, t-s < n"
                )
    dtype = torch.promote_types(hidden.dtype, torch.float32)
    before, patch, after = span_decompose(hidden.to(dtype), spans, offsets)
    if not (torch.isfinite(before).all() and torch.isfinite(patch).all()):
        raise ValueError("`hidden` has non-finite values at the span boundary states")
    ctx = before + after  # (N, H)
    if predictor is not None:
        ctx = predictor(ctx)
    cos = F.cosine_similarity(ctx, patch, dim=-1)  # (N,)
    n_t = torch.tensor(ns, dtype=torch.long).repeat_interleave(times)
    w = span_weight(n_t, offsets[:, 1] - offsets[:, 0], length_adjustment)
    w = w.to(device=cos.device, dtype=cos.dtype)
    return (1.0 - (cos * w).sum() / w.sum()).to(hidden.dtype)


# ------------------------------------------------------------------------- reference
def stp_loss_ref(
    hidden: Tensor,
    spans: Tensor,
    offsets: Tensor,
    *,
    length_adjustment: str | None = None,
) -> Tensor:
    """Per-sample loop with the official `get_embeddings` branches; the oracle for stp_loss."""
    B = hidden.shape[0]
    times = offsets.shape[0] // B
    cos, ws = [], []
    for j, (s, t) in enumerate(offsets.tolist()):
        h = hidden[j // times]
        u0, u1, a0, a1 = spans[j // times].reshape(4).tolist()
        nu, n = u1 - u0, (u1 - u0) + (a1 - a0)
        ps = u0 + s if s < nu else a0 + s - nu  # first patch token
        pe = u0 + t if t < nu else a0 + t - nu  # one past the last patch token
        if ps >= a0:  # patch inside the assistant message
            before = h[u1 - 1] - h[u0 - 1] + h[ps - 1] - h[a0 - 1]
            patch = h[pe - 1] - h[ps - 1]
            after = h[a1 - 1] - h[pe - 1]
        elif pe <= u1:  # patch inside the user message
            before = h[ps - 1] - h[u0 - 1]
            patch = h[pe - 1] - h[ps - 1]
            after = h[u1 - 1] - h[pe - 1] + h[a1 - 1] - h[a0 - 1]
        else:  # patch crosses the template bridge
            before = h[ps - 1] - h[u0 - 1]
            patch = h[u1 - 1] - h[ps - 1] + h[pe - 1] - h[a0 - 1]
            after = h[a1 - 1] - h[pe - 1]
        cos.append(F.cosine_similarity(before + after, patch, dim=0))
        p, r = t - s, n - (t - s)
        if length_adjustment == "cosine_like":
            ws.append(2.0 * r * p / (r * r + p * p))
        elif length_adjustment == "jaccard_like":
            ws.append(1.0 - abs(r - p) / (r + p))
        else:
            ws.append(1.0)
    c = torch.stack(cos)
    w = torch.tensor(ws, dtype=c.dtype)
    return 1.0 - (c * w).sum() / w.sum()


# -------------------------------------------------------------------------- ablations
def curvature_loss(hidden: Tensor, spans: Tensor) -> Tensor:
    """Official `--linear=curvature` ablation: mean turning angle of consecutive increments.

    Per sample: (sum of acos cos(dh_{i-1}, dh_i) over both messages) / (number of angles),
    increments dh_i = h[i] - h[i-1] inside each message including its anchor step; a
    sample with no angle contributes 0; averaged over the batch. Straight lines give 0.
    """
    if not isinstance(hidden, Tensor) or hidden.dim() != 3:
        raise ValueError("`hidden` must have shape (B, T, H)")
    B, T, _ = hidden.shape
    if B == 0:
        raise ValueError("`hidden` has batch size 0: the curvature is a mean over samples")
    rows = _check_spans(spans, T, B)
    out = []
    for i, (u0, u1, a0, a1) in enumerate(rows):
        angles = []
        for lo, hi in ((u0, u1), (a0, a1)):
            d = hidden[i, lo - 1 : hi].diff(dim=0)  # (L, H) increments, anchor step first
            if d.shape[0] > 1:
                c = F.cosine_similarity(d[:-1], d[1:], dim=-1).clamp(-1.0, 1.0)
                angles.append(torch.acos(c))
        out.append(torch.cat(angles).mean() if angles else hidden.new_zeros(()))
    return torch.stack(out).mean()


def two_view_loss(
    user_embedding: Tensor,
    assistant_embedding: Tensor,
    predictor: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """LLM-JEPA (the predecessor): 1 - mean cos(Pred(Enc(user)), Enc(assistant)).

    The embeddings (B, H) are last-token states of *separate* forward passes over the
    user-only and assistant-only views: two extra forwards per step, which STP removes.
    """
    if user_embedding.shape != assistant_embedding.shape or user_embedding.dim() != 2:
        raise ValueError(
            "`user_embedding` and `assistant_embedding` must both be (B, H), got "
            f"{tuple(user_embedding.shape)} and {tuple(assistant_embedding.shape)}"
        )
    if predictor is not None:
        user_embedding = predictor(user_embedding)
    return 1.0 - F.cosine_similarity(user_embedding, assistant_embedding, dim=-1).mean()


class LinearPredictor(torch.nn.Module):
    """Official `--linear_predictor`: a learned linear map (Xavier-uniform, no bias)
    applied to before + after; pass it as `stp_loss(..., predictor=...)`."""

    def __init__(self, dim: int, out_dim: int | None = None, *, bias: bool = False) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(dim, out_dim or dim, bias=bias)
        torch.nn.init.xavier_uniform_(self.proj.weight, gain=1.0)
        if bias:
            torch.nn.init.zeros_(self.proj.bias)

    def forward(self, x: Tensor) -> Tensor:  # (N, dim) -> (N, out_dim)
        return self.proj(x)
