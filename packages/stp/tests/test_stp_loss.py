"""STP loss: brute force from the definition, identities, official sampler stream, gradients."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from icml26_stp import (
    LinearPredictor,
    curvature_loss,
    sample_span,
    sample_spans,
    span_decompose,
    stp_loss,
    stp_loss_ref,
    two_view_loss,
)


def brute_parts(h, u0, u1, a0, a1, s, t):
    """Definition: the n increments inside the two messages (anchor step included, template
    tokens skipped); before/patch/after are sums of increments [0,s), [s,t), [t,n)."""
    inc = [h[k] - h[k - 1] for k in range(u0, u1)] + [h[k] - h[k - 1] for k in range(a0, a1)]
    zero = torch.zeros_like(h[0])
    return sum(inc[:s], zero), sum(inc[s:t], zero), sum(inc[t:], zero)


def brute_loss(hidden, spans, offsets, adj=None):
    times = offsets.shape[0] // hidden.shape[0]
    cs, ws = [], []
    for j, (s, t) in enumerate(offsets.tolist()):
        u0, u1, a0, a1 = spans[j // times].reshape(4).tolist()
        b, p, a = brute_parts(hidden[j // times], u0, u1, a0, a1, s, t)
        n = u1 - u0 + a1 - a0
        pl, r = t - s, n - (t - s)
        cs.append((b + a) @ p / ((b + a).norm() * p.norm()))
        ws.append(
            {None: 1.0, "cosine_like": 2 * r * pl / (r * r + pl * pl)}.get(adj, 1 - abs(r - pl) / n)
        )
    c = torch.stack(cs)
    w = torch.tensor(ws, dtype=c.dtype)
    return 1 - (c * w).sum() / w.sum()


def all_offsets(n):
    return [(s, t) for s in range(n) for t in range(s + 1, n + 1) if t - s < n]


SPANS = [(2, 5, 8, 12), (1, 4, 4, 6), (3, 4, 6, 7)]  # gap of template tokens, no gap, 1-token msgs


@pytest.mark.parametrize("u0,u1,a0,a1", SPANS)
@pytest.mark.parametrize("adj", [None, "cosine_like", "jaccard_like"])
def test_vectorised_equals_loop_and_brute_force_over_all_spans(u0, u1, a0, a1, adj):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, 13, 5, generator=g, dtype=torch.float64)
    spans = torch.tensor([[[u0, u1], [a0, a1]]])
    n = u1 - u0 + a1 - a0
    offs = torch.tensor(all_offsets(n))
    for s, t in offs.tolist():  # the parts, one span at a time
        one = torch.tensor([[s, t]])
        got = span_decompose(hidden, spans, one)
        want = brute_parts(hidden[0], u0, u1, a0, a1, s, t)
        for x, y in zip(got, want):
            torch.testing.assert_close(x[0], y)
    # all spans of the sample at once (as `times` repeats of one sample)
    fast = stp_loss(hidden, spans, offsets=offs, length_adjustment=adj)
    torch.testing.assert_close(fast, brute_loss(hidden, spans, offs, adj))
    torch.testing.assert_close(fast, stp_loss_ref(hidden, spans, offs, length_adjustment=adj))


def test_batch_of_different_spans_matches_brute_force():
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(3, 13, 6, generator=g, dtype=torch.float64)
    spans = torch.tensor([[[u0, u1], [a0, a1]] for u0, u1, a0, a1 in SPANS])
    offs = sample_spans(spans, generator=torch.Generator().manual_seed(3), times=4)
    assert offs.shape == (12, 2)
    got = stp_loss(hidden, spans, offsets=offs)
    torch.testing.assert_close(got, brute_loss(hidden, spans, offs))


def test_telescoping_and_collinear_trajectory_is_zero_for_every_span():
    T, H = 14, 7
    a, v = torch.randn(H, dtype=torch.float64), torch.randn(H, dtype=torch.float64)
    line = (a + torch.arange(T, dtype=torch.float64)[:, None] * v)[None]  # (1, T, H)
    noise = torch.randn(1, T, H, dtype=torch.float64)
    spans = torch.tensor([[[2, 6], [9, 13]]])
    offs = torch.tensor(all_offsets(8))
    b, p, af = span_decompose(noise, spans, offs)
    total = (noise[0, 5] - noise[0, 1]) + (noise[0, 12] - noise[0, 8])
    torch.testing.assert_close(b + p + af, total.expand_as(b))
    # template tokens 6, 7 may leave the line (8 is the assistant anchor): only the
    # in-message increments (anchor steps included) matter
    line[0, 6:8] += 10 * torch.randn(2, H, dtype=torch.float64)
    loss = stp_loss(line, spans, offsets=offs)
    assert abs(float(loss)) < 1e-12
    assert float(stp_loss(noise, spans, offsets=offs)) > 0.05


def test_scale_and_translation_invariance():
    g = torch.Generator().manual_seed(2)
    h = torch.randn(2, 12, 9, generator=g, dtype=torch.float64)
    spans = torch.tensor([[[1, 5], [7, 11]], [[2, 3], [3, 12]]])
    offs = sample_spans(spans, generator=torch.Generator().manual_seed(0), times=5)
    base = stp_loss(h, spans, offsets=offs)
    torch.testing.assert_close(stp_loss(3.7 * h, spans, offsets=offs), base)
    torch.testing.assert_close(
        stp_loss(h + torch.randn(9, dtype=torch.float64), spans, offsets=offs), base
    )


def test_random_walk_gives_one_and_iid_states_do_not():
    g = torch.Generator().manual_seed(4)
    B, T, H = 64, 40, 1024
    spans = torch.tensor([[[1, 20], [22, 40]]] * B)
    walk = torch.randn(B, T, H, generator=g, dtype=torch.float64).cumsum(1)
    rw = float(stp_loss(walk, spans, generator=torch.Generator().manual_seed(0), times=4))
    assert abs(rw - 1.0) < 0.02  # disjoint increments: cos has mean 0, sd 1/sqrt(H)
    iid = torch.randn(B, T, H, generator=g, dtype=torch.float64)
    li = float(stp_loss(iid, spans, generator=torch.Generator().manual_seed(0), times=4))
    assert li > 1.3  # shared boundary states make the cosine negative


# ------------------------------------------------------------------------- sampler
def official_get_s_t(n, g, mode, max_length=-1):
    """Hand transcription of the official sampler's sequence of randint calls."""
    if mode == "draw_both":
        while True:
            p1 = torch.randint(0, n, (1,), generator=g)
            p2 = torch.randint(1, n + 1, (1,), generator=g)
            s, t = torch.min(p1, p2), torch.max(p1, p2)
            if max_length >= 0 and t - s > max_length:
                t = s + max_length
            if s < t and t - s < n:
                return int(s), int(t)
    if mode == "uniform":
        total = n * (n + 1) // 2
        while True:
            r = torch.randint(total, (1,), generator=g, dtype=torch.long)
            c = 2 * n + 1
            s = torch.floor((c - torch.sqrt(c**2 - 8 * r.float())) / 2).long()
            t = s + 1 + (r - s * (2 * n - s + 1) // 2)
            if t - s < n:
                return int(s), int(t)
    s = torch.randint(0, n, (), generator=g)
    hi = n + 1 if max_length < 0 else min(n + 1, s + 1 + max_length)
    while True:
        t = torch.randint(s + 1, hi, (), generator=g)
        if t - s < n:
            return int(s), int(t)


@pytest.mark.parametrize("mode", ["default", "uniform", "draw_both"])
@pytest.mark.parametrize("max_length", [None, 3])
def test_sampler_draws_the_official_stream(mode, max_length):
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    for n in [2, 3, 5, 9, 30]:
        for _ in range(50):
            ml = -1 if max_length is None or mode == "uniform" else max_length
            want = official_get_s_t(n, g2, mode, ml)
            got = sample_span(n, generator=g1, mode=mode, max_length=max_length)
            assert got == want


def exact_pmf(n, mode):
    pairs = all_offsets(n)
    if mode == "uniform":
        return {p: 1 / len(pairs) for p in pairs}
    if mode == "default":  # s ~ U{0..n-1}; t ~ U{s+1..n} conditioned on t - s < n
        return {(s, t): (1 / n) / (n - s - (s == 0)) for s, t in pairs}
    raw = Counter()  # draw_both: enumerate the two picks, then condition on acceptance
    for p1 in range(n):
        for p2 in range(1, n + 1):
            s, t = min(p1, p2), max(p1, p2)
            if s < t and t - s < n:
                raw[(s, t)] += 1
    z = sum(raw.values())
    return {p: raw[p] / z for p in pairs}


@pytest.mark.parametrize("mode", ["default", "uniform", "draw_both"])
def test_sampler_pmf_matches_exact_enumeration(mode):
    n, draws = 5, 20000
    g = torch.Generator().manual_seed(11)
    counts = Counter(sample_span(n, generator=g, mode=mode) for _ in range(draws))
    pmf = exact_pmf(n, mode)
    assert set(counts) <= set(pmf) and abs(sum(pmf.values()) - 1) < 1e-12
    chi2 = sum((counts[p] - draws * q) ** 2 / (draws * q) for p, q in pmf.items())
    dof = len(pmf) - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof)  # ~5 sd above the chi2 mean


def test_uniform_index_to_pair_is_a_bijection():
    # every r in [0, n(n+1)/2) maps to a distinct pair with s < t <= n
    for n in [2, 3, 7, 64, 500]:
        seen = set()
        c = 2 * n + 1
        for r in range(n * (n + 1) // 2):
            s = math.floor((c - math.sqrt(c * c - 8 * r)) / 2)
            t = s + 1 + (r - s * (2 * n - s + 1) // 2)
            assert 0 <= s < t <= n
            seen.add((s, t))
        assert len(seen) == n * (n + 1) // 2


def test_max_length_bounds_the_patch():
    g = torch.Generator().manual_seed(0)
    for mode in ["default", "draw_both"]:
        assert all(
            sample_span(20, generator=g, mode=mode, max_length=3)[1]
            - sample_span(20, generator=g, mode=mode, max_length=3)[0]
            <= 20
            for _ in range(10)
        )
        for _ in range(200):
            s, t = sample_span(20, generator=g, mode=mode, max_length=3)
            assert 1 <= t - s <= 3


# ------------------------------------------------------------------------ gradients
def test_gradient_matches_finite_differences_float64():
    g = torch.Generator().manual_seed(5)
    h = torch.randn(2, 10, 4, generator=g, dtype=torch.float64, requires_grad=True)
    spans = torch.tensor([[[1, 4], [6, 9]], [[2, 5], [5, 10]]])
    offs = torch.tensor([[1, 4], [0, 2], [2, 6], [3, 7]])
    for adj in [None, "cosine_like"]:
        assert torch.autograd.gradcheck(
            lambda x: stp_loss(x, spans, offsets=offs, length_adjustment=adj), (h,)
        )
    # only the 6 boundary rows per span receive gradient; template tokens get none
    stp_loss(h, spans, offsets=offs).backward()
    assert h.grad is not None and torch.all(h.grad[0, 4] == 0)  # template token (5 is the anchor)


def test_predictor_times_and_dtype():
    g = torch.Generator().manual_seed(6)
    h = torch.randn(2, 10, 4, generator=g)
    spans = torch.tensor([[[1, 4], [6, 9]], [[2, 5], [5, 10]]])
    offs = torch.tensor([[1, 4], [0, 2], [2, 6], [3, 7]])
    lin = LinearPredictor(4)
    b, p, a = span_decompose(h.double(), spans, offs)
    want = 1 - F.cosine_similarity(lin.double()(b + a), p, dim=-1).mean()
    got = stp_loss(h.double(), spans, offsets=offs, predictor=lin.double())
    torch.testing.assert_close(got, want)
    half = stp_loss(h.bfloat16(), spans, offsets=offs)
    assert half.dtype == torch.bfloat16  # computed in float32, returned in the input dtype
    torch.testing.assert_close(half.float(), stp_loss(h, spans, offsets=offs), rtol=0.05, atol=0.02)


# ------------------------------------------------------------------------ ablations
def test_curvature_zero_on_a_line_and_right_angles_give_half_pi():
    T, H = 10, 3
    line = (torch.arange(T, dtype=torch.float64)[:, None] * torch.ones(H, dtype=torch.float64))[
        None
    ]
    spans = torch.tensor([[[1, 4], [6, 9]]])
    assert float(curvature_loss(line, spans)) == pytest.approx(0.0, abs=1e-6)
    zig = torch.zeros(1, T, 2, dtype=torch.float64)
    for k in range(1, T):  # alternate x and y steps: every turn is 90 degrees
        zig[0, k] = zig[0, k - 1] + (
            torch.tensor([1.0, 0.0]) if k % 2 else torch.tensor([0.0, 1.0])
        )
    assert float(curvature_loss(zig, spans)) == pytest.approx(math.pi / 2)


def test_two_view_loss_is_one_minus_mean_cosine():
    u, a = torch.randn(5, 8), torch.randn(5, 8)
    want = 1 - (F.normalize(u, dim=-1) * F.normalize(a, dim=-1)).sum(-1).mean()
    torch.testing.assert_close(two_view_loss(u, a), want)
    torch.testing.assert_close(two_view_loss(a, a), torch.tensor(0.0), atol=1e-6, rtol=0)


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "spans,match",
    [
        ([[[0, 3], [5, 8]]], "anchor"),  # no token before the user message
        ([[[2, 2], [5, 8]]], "non-empty"),  # empty user message
        ([[[2, 4], [5, 5]]], "non-empty"),  # empty assistant message
        ([[[2, 6], [5, 8]]], "in order"),  # overlapping messages
        ([[[2, 4], [5, 13]]], "inside the sequence"),  # past T
    ],
)
def test_bad_spans_are_named(spans, match):
    h = torch.randn(1, 12, 4)
    with pytest.raises(ValueError, match="spans"):
        stp_loss(h, torch.tensor(spans))
    with pytest.raises(ValueError, match=match):
        stp_loss(h, torch.tensor(spans))


def test_bad_inputs_raise_clear_errors():
    h = torch.randn(1, 12, 4)
    spans = torch.tensor([[[2, 4], [6, 9]]])
    with pytest.raises(ValueError, match="batch dimension"):
        stp_loss(h[0], spans)
    with pytest.raises(ValueError, match=r"spans.*shape"):
        stp_loss(h, spans[0])
    with pytest.raises(TypeError, match="spans"):
        stp_loss(h, spans.float())
    bad = h.clone()
    bad[0, 5] = float("nan")
    with pytest.raises(ValueError, match="hidden.*non-finite"):
        stp_loss(bad, spans, offsets=torch.tensor([[1, 3]]))
    with pytest.raises(ValueError, match="length_adjustment"):
        stp_loss(h, spans, length_adjustment="cosine")
    with pytest.raises(ValueError, match="offsets"):
        stp_loss(h, spans, offsets=torch.tensor([[0, 5]]))  # t - s = n
    with pytest.raises(ValueError, match="`n`"):
        sample_span(1)
    with pytest.raises(ValueError, match="mode"):
        sample_span(5, mode="gaussian")
    with pytest.raises(ValueError, match="max_length"):
        sample_span(5, max_length=0)
    with pytest.raises(ValueError, match="times"):
        sample_spans(spans, times=0)


def test_empty_batch_is_a_clear_error():
    empty_h, empty_spans = torch.zeros(0, 12, 4), torch.zeros(0, 2, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="`hidden` has batch size 0"):
        stp_loss(empty_h, empty_spans)
    with pytest.raises(ValueError, match="`spans` has batch size 0"):
        sample_spans(empty_spans)
    with pytest.raises(ValueError, match="`hidden` has batch size 0"):
        curvature_loss(empty_h, empty_spans)
