"""RoPE: brute force against 2x2 rotation matrices, group identities, Triton == reference."""

import math

import pytest
import torch
from icml26_kernels.attention import (
    Llama3Scaling,
    RopeConfig,
    apply_rope,
    apply_rope_ref,
    rope_inv_freq,
    rope_table,
)
from icml26_kernels.backend import select_backend

LLAMA3 = Llama3Scaling(
    factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64
)
VARIANTS = {
    "neox": RopeConfig(head_dim=8),
    "interleaved": RopeConfig(head_dim=8, interleaved=True),
    "partial": RopeConfig(head_dim=12, rotary_dim=8, base=500.0),
    "partial-interleaved-llama3": RopeConfig(
        head_dim=12, rotary_dim=4, interleaved=True, llama3=LLAMA3
    ),
    "llama3": RopeConfig(head_dim=16, llama3=LLAMA3),
}


def scalar_inv_freq(cfg: RopeConfig) -> list[float]:
    """Independent scalar transcription of θᵢ (and the Llama-3.1 rule for rope_scaling)."""
    r = cfg.rot_dim
    out = []
    for i in range(r // 2):
        theta = 1.0 / cfg.base ** (2 * i / r)
        s = cfg.llama3
        if s is not None:
            wl = 2 * math.pi / theta
            if wl < s.original_max_position_embeddings / s.high_freq_factor:
                pass
            elif wl > s.original_max_position_embeddings / s.low_freq_factor:
                theta = theta / s.factor
            else:
                sm = (s.original_max_position_embeddings / wl - s.low_freq_factor) / (
                    s.high_freq_factor - s.low_freq_factor
                )
                theta = (1 - sm) * theta / s.factor + sm * theta
        out.append(theta)
    return out


def brute_rope(x: torch.Tensor, pos: int, cfg: RopeConfig) -> torch.Tensor:
    """Rotate one head vector with explicit 2x2 matrices."""
    y = x.clone()
    first, second = cfg.pair_indices()
    for i, th in enumerate(scalar_inv_freq(cfg)):
        a, b = first[i], second[i]
        c, s = math.cos(pos * th), math.sin(pos * th)
        y[a] = c * x[a] - s * x[b]
        y[b] = s * x[a] + c * x[b]
    return y


@pytest.mark.parametrize("name", list(VARIANTS))
def test_attention_rope_matches_rotation_matrices(name):
    cfg = VARIANTS[name]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 5, 2, cfg.head_dim, dtype=torch.float64, generator=g)
    pos = torch.tensor([[0, 1, 7, 200, 3001]])
    got = apply_rope_ref(x, pos, cfg)
    for t in range(5):
        for h in range(2):
            want = brute_rope(x[0, t, h], int(pos[0, t]), cfg)
            torch.testing.assert_close(got[0, t, h], want, rtol=0, atol=1e-12)
    # pass-through dims are untouched
    torch.testing.assert_close(got[..., cfg.rot_dim :], x[..., cfg.rot_dim :], rtol=0, atol=0)


def test_attention_rope_llama3_frequencies():
    cfg = RopeConfig(head_dim=64, llama3=LLAMA3)
    got = rope_inv_freq(cfg)
    torch.testing.assert_close(
        got, torch.tensor(scalar_inv_freq(cfg), dtype=torch.float64), rtol=1e-14, atol=0
    )
    plain = rope_inv_freq(RopeConfig(head_dim=64))
    wl = 2 * math.pi / plain
    assert torch.equal(got[wl < 16], plain[wl < 16])  # high frequencies kept
    torch.testing.assert_close(got[wl > 64], plain[wl > 64] / 8)  # low frequencies divided
    assert bool((wl > 64).any()) and bool((wl < 16).any())


@pytest.mark.parametrize("name", list(VARIANTS))
def test_attention_rope_group_identities(name):
    cfg = VARIANTS[name]
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 6, 3, cfg.head_dim, dtype=torch.float64, generator=g)
    k = torch.randn(1, 6, 3, cfg.head_dim, dtype=torch.float64, generator=g)
    a = torch.randint(0, 5000, (1, 6), generator=g)
    b = torch.randint(0, 5000, (1, 6), generator=g)
    # inverse
    back = apply_rope_ref(apply_rope_ref(q, a, cfg), a, cfg, inverse=True)
    torch.testing.assert_close(back, q, rtol=0, atol=1e-12)
    # composition R(a)R(b) = R(a+b)
    torch.testing.assert_close(
        apply_rope_ref(apply_rope_ref(q, a, cfg), b, cfg),
        apply_rope_ref(q, a + b, cfg),
        rtol=0,
        atol=1e-10,
    )
    # relative position: <R(a)q, R(b)k> = <R(a-b)q, k>
    lhs = (apply_rope_ref(q, a, cfg) * apply_rope_ref(k, b, cfg)).sum(-1)
    rhs = (apply_rope_ref(q, a - b, cfg) * k).sum(-1)
    torch.testing.assert_close(lhs, rhs, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["neox", "interleaved", "partial-interleaved-llama3"])
@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.float64,
        pytest.param(torch.float16, id="fp16"),
        pytest.param(torch.bfloat16, id="bf16"),
    ],
)
@pytest.mark.parametrize("inverse", [False, True])
def test_attention_rope_triton_matches_reference(name, dtype, inverse, request):
    """fp16 / bf16 rotate in fp32 and round once, as the reference does: equal up to one ulp
    (an fp32 rotation that lands near a rounding tie). bf16 under the interpreter needs the
    conftest patch: its own fp32 -> bf16 cast truncates (half the outputs one ulp off)."""
    if dtype == torch.bfloat16:
        request.getfixturevalue("bf16_interpreter")
    cfg = VARIANTS[name]
    assert select_backend("cpu").uses_triton or torch.cuda.is_available()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 3, cfg.head_dim, dtype=dtype, generator=g).to(dev)
    pos = torch.randint(0, 300, (2, 3), generator=g).to(dev)
    got = apply_rope(x, pos, cfg, inverse=inverse, prefer="triton")
    want = apply_rope_ref(x, pos, cfg, inverse=inverse)
    if dtype in (torch.float16, torch.bfloat16):
        ulp = torch.finfo(dtype).eps  # relative spacing at 1; |x| < 8 here
        torch.testing.assert_close(got.float(), want.float(), rtol=ulp, atol=ulp / 64)
        assert (got != want).float().mean() < 0.05  # a flip is rare, not systematic
        return
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=0, atol=tol)


def test_attention_rope_bad_inputs():
    with pytest.raises(ValueError, match="rotary_dim"):
        RopeConfig(head_dim=8, rotary_dim=3)
    with pytest.raises(ValueError, match="rotary_dim"):
        RopeConfig(head_dim=8, rotary_dim=10)
    with pytest.raises(ValueError, match="head_dim"):
        RopeConfig(head_dim=0)
    with pytest.raises(ValueError, match="high_freq_factor"):
        Llama3Scaling(low_freq_factor=4.0, high_freq_factor=1.0)
    cfg = RopeConfig(head_dim=8)
    with pytest.raises(TypeError, match="positions"):
        apply_rope_ref(torch.zeros(1, 2, 1, 8), torch.zeros(1, 2), cfg)
    with pytest.raises(ValueError, match="head_dim"):
        apply_rope(torch.zeros(1, 2, 1, 6), torch.zeros(1, 2, dtype=torch.long), cfg)
    with pytest.raises(ValueError, match="table"):
        apply_rope(
            torch.zeros(1, 2, 1, 8),
            torch.tensor([[0, 9]]),
            cfg,
            table=rope_table(cfg, 4),
            prefer="triton",
        )
