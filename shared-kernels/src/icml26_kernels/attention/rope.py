"""Rotary position embedding (RoPE): tables, apply, inverse-apply; torch reference + Triton kernel.

RoPE rotates each pair of coordinates (x₁ᵢ, x₂ᵢ), i < r/2, of a head by the angle p·θᵢ::

    x₁ᵢ' = x₁ᵢ cos(pθᵢ) − x₂ᵢ sin(pθᵢ)
    x₂ᵢ' = x₂ᵢ cos(pθᵢ) + x₁ᵢ sin(pθᵢ),        θᵢ = base^(−2i/r)

so R(p)ᵀR(p') = R(p' − p) and ⟨R(p_q)q, R(p_k)k⟩ = ⟨R(p_q − p_k)q, k⟩: the identity
LazyAttention uses to move the positional correction from the cached keys to the query.

Supported variants (:class:`RopeConfig`):

- layout: ``interleaved=False`` pairs (i, i + r/2) (GPT-NeoX / HF Llama ``rotate_half``);
  ``interleaved=True`` pairs (2i, 2i + 1) (GPT-J / Meta's original Llama);
- partial rotation: ``rotary_dim = r < head_dim`` rotates the first r dims, the rest pass through;
- llama3 ``rope_scaling`` (:class:`Llama3Scaling`): θᵢ divided by ``factor`` for long
  wavelengths, kept for short ones, smoothly interpolated in between;
- any other static scaling through explicit frequencies ``RopeConfig(inv_freq=...)`` (e.g. a
  ``transformers`` model's ``rotary_emb.inv_freq``: linear, yarn, ...).

Numerics: angles p·θᵢ are formed in float64 (an fp32 angle loses ~p·6e-8 rad), cos/sin and the
rotation itself in float32 (float64 for float64 inputs), the result cast back to the input dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..backend import select_backend, triton_installed

if triton_installed():  # installed and importable (a broken triton counts as absent)
    import triton
    import triton.language as tl
else:  # pragma: no cover - the [torch] extra has no triton
    triton = None

__all__ = [
    "Llama3Scaling",
    "RopeConfig",
    "apply_rope",
    "apply_rope_ref",
    "rope_cos_sin",
    "rope_inv_freq",
    "rope_table",
    "rotate_pairs",
]


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama-3.1 ``rope_scaling`` (HF ``rope_type="llama3"``); defaults are Llama-3.1's."""

    factor: float = 8.0  # long wavelengths are stretched by this factor
    low_freq_factor: float = 1.0  # wavelengths above original_max / low_freq_factor are scaled
    high_freq_factor: float = 4.0  # wavelengths below original_max / high_freq_factor are kept
    original_max_position_embeddings: int = 8192  # pre-training context length

    def __post_init__(self) -> None:
        if not self.factor > 0:
            raise ValueError(f"Llama3Scaling.factor must be > 0; got {self.factor}")
        if not self.high_freq_factor > self.low_freq_factor > 0:
            raise ValueError(
                "Llama3Scaling needs high_freq_factor > low_freq_factor > 0; got "
                f"{self.high_freq_factor}, {self.low_freq_factor}"
            )
        if self.original_max_position_embeddings <= 0:
            raise ValueError("Llama3Scaling.original_max_position_embeddings must be > 0")


@dataclass(frozen=True)
class RopeConfig:
    """Which RoPE a model uses. ``rotary_dim=None`` means the whole head is rotated."""

    head_dim: int
    rotary_dim: int | None = None  # r: rotated dims (even, <= head_dim); the rest pass through
    base: float = 10000.0  # θ base ("rope_theta")
    llama3: Llama3Scaling | None = None  # llama3-style rope_scaling, None = plain RoPE
    interleaved: bool = False  # pairs (2i, 2i+1) instead of (i, i + r/2)
    # explicit θᵢ (r/2 values), e.g. a model's own rotary ``inv_freq`` (linear, yarn, llama3, ...
    # scaling already applied); when given, ``base`` and ``llama3`` are not used
    inv_freq: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.head_dim, int) or self.head_dim <= 0:
            raise ValueError(f"head_dim must be a positive int; got {self.head_dim!r}")
        r = self.rot_dim
        if not isinstance(r, int) or r <= 0 or r % 2 or r > self.head_dim:
            raise ValueError(
                f"rotary_dim must be an even int in [2, head_dim={self.head_dim}]; got {self.rotary_dim!r}"
            )
        if not self.base > 0:
            raise ValueError(f"base must be > 0; got {self.base}")
        if self.inv_freq is not None:
            if len(self.inv_freq) != r // 2 or not all(
                math.isfinite(f) and f > 0 for f in self.inv_freq
            ):
                raise ValueError(
                    f"inv_freq must hold rotary_dim/2 = {r // 2} positive finite values; "
                    f"got {len(self.inv_freq)}"
                )
            if self.llama3 is not None:
                raise ValueError("give either inv_freq or llama3 scaling, not both")

    @property
    def rot_dim(self) -> int:
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    @property
    def half(self) -> int:
        return self.rot_dim // 2

    def pair_indices(self) -> tuple[list[int], list[int]]:
        """(first, second) coordinate of each rotated pair."""
        h = self.half
        if self.interleaved:
            return [2 * i for i in range(h)], [2 * i + 1 for i in range(h)]
        return list(range(h)), [i + h for i in range(h)]


def rope_inv_freq(cfg: RopeConfig) -> torch.Tensor:
    """θᵢ, i < r/2, in float64 (llama3 scaling applied when configured). Shape ``(r/2,)``."""
    if cfg.inv_freq is not None:
        return torch.tensor(cfg.inv_freq, dtype=torch.float64)
    r = cfg.rot_dim
    inv = cfg.base ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    s = cfg.llama3
    if s is None:
        return inv
    wavelen = 2 * math.pi / inv
    low_wl = s.original_max_position_embeddings / s.low_freq_factor  # longer: divide by factor
    high_wl = s.original_max_position_embeddings / s.high_freq_factor  # shorter: keep
    smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    mid = (1 - smooth) * inv / s.factor + smooth * inv
    out = torch.where(wavelen > low_wl, inv / s.factor, inv)
    return torch.where((wavelen >= high_wl) & (wavelen <= low_wl), mid, out)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def rope_cos_sin(
    positions: torch.Tensor, cfg: RopeConfig, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(pθᵢ), sin(pθᵢ) for integer ``positions`` (any shape, may be negative).

    Returns two tensors of shape ``(*positions.shape, r/2)`` in ``dtype`` (angles in float64).
    """
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"positions must be an integer tensor; got {positions.dtype}")
    ang = positions.to(torch.float64)[..., None] * rope_inv_freq(cfg).to(positions.device)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rope_table(
    cfg: RopeConfig, n_positions: int, *, dtype: torch.dtype = torch.float32, device: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin cache for positions ``0 .. n_positions-1``, each ``(n_positions, r/2)``, contiguous.

    The Triton kernels index this table by position (or by a block's offset Δ), as a serving
    engine's ``cos_sin_cache``; build it once and pass it to every call.
    """
    if n_positions < 1:
        raise ValueError(f"n_positions must be >= 1; got {n_positions}")
    pos = torch.arange(n_positions, device=device)
    cos, sin = rope_cos_sin(pos, cfg, _compute_dtype(dtype))
    return cos.contiguous(), sin.contiguous()


def rotate_pairs(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cfg: RopeConfig, *, inverse: bool = False
) -> torch.Tensor:
    """Rotate the RoPE pairs of ``x`` (``(..., head_dim)``) by precomputed cos/sin (``(..., r/2)``,
    broadcastable). ``inverse=True`` rotates by the negative angle. Math in fp32 (fp64 for fp64)."""
    if x.shape[-1] != cfg.head_dim:
        raise ValueError(f"x.shape[-1] must equal head_dim={cfg.head_dim}; got {x.shape[-1]}")
    cd = _compute_dtype(x.dtype)
    xc = x.to(cd)
    c, s = cos.to(cd), sin.to(cd)
    if inverse:
        s = -s
    h, r = cfg.half, cfg.rot_dim
    if cfg.interleaved:  # pairs (2i, 2i + 1): a (..., r/2, 2) view
        x1, x2 = xc[..., 0:r:2], xc[..., 1:r:2]
        rot = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    else:  # pairs (i, i + r/2): two contiguous halves
        x1, x2 = xc[..., :h], xc[..., h:r]
        rot = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    if r < x.shape[-1]:
        rest = xc[..., r:].expand(*rot.shape[:-1], x.shape[-1] - r)
        rot = torch.cat([rot, rest], dim=-1)
    return rot.to(x.dtype)


def apply_rope_ref(
    x: torch.Tensor, positions: torch.Tensor, cfg: RopeConfig, *, inverse: bool = False
) -> torch.Tensor:
    """Reference: ``R(±p) x`` for ``x`` of shape ``(*lead, T, H, D)`` and ``positions`` ``(*lead, T)``
    (broadcastable). ``inverse=True`` applies R(−p) = R(p)ᵀ."""
    if x.dim() < 3:
        raise ValueError(f"x must have shape (..., T, H, D); got {tuple(x.shape)}")
    cos, sin = rope_cos_sin(positions, cfg, _compute_dtype(x.dtype))
    return rotate_pairs(x, cos[..., None, :], sin[..., None, :], cfg, inverse=inverse)


if triton is not None:

    @triton.jit
    def _rope_kernel(
        X,  # (N, H, D) input, rows of tokens
        OUT,  # (N, H, D) output
        POS,  # (N,) int64 positions
        COS,  # (P, HALF) cos table, row = position
        SIN,  # (P, HALF) sin table
        stride_xn,
        stride_xh,
        stride_on,
        stride_oh,
        H,
        HALF,
        D,
        SIGN,  # +1 forward, -1 inverse
        INTERLEAVED: tl.constexpr,
        H_PAD: tl.constexpr,
        HALF_PAD: tl.constexpr,
        PASS_PAD: tl.constexpr,
        HAS_PASS: tl.constexpr,
    ):
        n = tl.program_id(0)
        pos = tl.load(POS + n)
        i = tl.arange(0, HALF_PAD)
        h = tl.arange(0, H_PAD)
        mi = i < HALF
        m2 = (h[:, None] < H) & mi[None, :]
        c = tl.load(COS + pos * HALF + i, mask=mi, other=1.0)
        s = tl.load(SIN + pos * HALF + i, mask=mi, other=0.0) * SIGN
        if INTERLEAVED:
            d1 = 2 * i
            d2 = 2 * i + 1
        else:
            d1 = i
            d2 = i + HALF
        xrow = X + n * stride_xn + h[:, None] * stride_xh
        orow = OUT + n * stride_on + h[:, None] * stride_oh
        x1 = tl.load(xrow + d1[None, :], mask=m2, other=0.0)
        x2 = tl.load(xrow + d2[None, :], mask=m2, other=0.0)
        x1c = x1.to(c.dtype)
        x2c = x2.to(c.dtype)
        o1 = x1c * c[None, :] - x2c * s[None, :]
        o2 = x2c * c[None, :] + x1c * s[None, :]
        tl.store(orow + d1[None, :], o1.to(x1.dtype), mask=m2)
        tl.store(orow + d2[None, :], o2.to(x1.dtype), mask=m2)
        if HAS_PASS:
            dp = 2 * HALF + tl.arange(0, PASS_PAD)
            mp = (h[:, None] < H) & (dp[None, :] < D)
            xp = tl.load(xrow + dp[None, :], mask=mp, other=0.0)
            tl.store(orow + dp[None, :], xp, mask=mp)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    cfg: RopeConfig,
    *,
    inverse: bool = False,
    table: tuple[torch.Tensor, torch.Tensor] | None = None,
    prefer: str | None = None,
) -> torch.Tensor:
    """``R(±p) x`` for ``x`` ``(*lead, T, H, D)``, ``positions`` ``(*lead, T)`` (non-negative ints).

    Dispatches through :func:`icml26_kernels.backend.select_backend`: the Triton kernel (compiled
    or interpreted) reads cos/sin from ``table`` (see :func:`rope_table`; built on the fly when
    None); the torch path is :func:`apply_rope_ref`.
    """
    if x.dim() < 3:
        raise ValueError(f"x must have shape (..., T, H, D); got {tuple(x.shape)}")
    if x.shape[-1] != cfg.head_dim:
        raise ValueError(f"x.shape[-1] must equal head_dim={cfg.head_dim}; got {x.shape[-1]}")
    choice = select_backend(x.device, prefer=prefer)
    if not choice.uses_triton:
        return apply_rope_ref(x, positions, cfg, inverse=inverse)
    pos = torch.broadcast_to(positions, x.shape[:-2]).reshape(-1).to(torch.int64).contiguous()
    if pos.numel() and int(pos.min()) < 0:
        raise ValueError("positions must be >= 0 for the Triton path (it indexes a cos/sin table)")
    n_pos = int(pos.max()) + 1 if pos.numel() else 1
    if table is None:
        table = rope_table(cfg, n_pos, dtype=x.dtype, device=x.device)
    cos, sin = table
    if cos.shape[0] < n_pos or cos.shape[-1] != cfg.half:
        raise ValueError(
            f"table must cover positions < {n_pos} with {cfg.half} frequencies; got {tuple(cos.shape)}"
        )
    H, D = x.shape[-2], x.shape[-1]
    xf = x.reshape(-1, H, D)
    if xf.stride(-1) != 1:
        xf = xf.contiguous()
    out = torch.empty_like(xf)
    n_pass = D - cfg.rot_dim
    _rope_kernel[(xf.shape[0],)](
        xf, out, pos, cos, sin,
        xf.stride(0), xf.stride(1), out.stride(0), out.stride(1),
        H, cfg.half, D, -1.0 if inverse else 1.0,
        INTERLEAVED=cfg.interleaved,
        H_PAD=_next_pow2(H), HALF_PAD=_next_pow2(cfg.half),
        PASS_PAD=_next_pow2(max(n_pass, 1)), HAS_PASS=n_pass > 0,
    )  # fmt: skip
    return out.reshape(x.shape)
