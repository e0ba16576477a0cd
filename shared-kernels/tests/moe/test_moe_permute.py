import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from icml26_kernels.moe import (  # noqa: E402
    make_permutation,
    permute,
    permute_ref,
    unpermute,
    unpermute_ref,
)


def _routing(N, k, E, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(N)])


@pytest.mark.parametrize(
    ("N", "k", "E", "bs"), [(23, 3, 5, 16), (7, 2, 9, 4), (40, 1, 3, 1), (5, 4, 4, 128)]
)
def test_block_padding_layout(N, k, E, bs):
    idx = _routing(N, k, E)
    perm = make_permutation(idx, E, bs)
    counts = torch.bincount(idx.reshape(-1), minlength=E)
    assert torch.equal(perm.counts, counts)
    seg = perm.offsets[1:] - perm.offsets[:-1]
    assert torch.equal(seg, (counts + bs - 1) // bs * bs)  # each segment padded up to a block
    assert perm.num_rows == int(perm.offsets[-1]) and perm.num_rows % bs == 0
    assert perm.block_expert.shape[0] == perm.num_rows // bs
    dest = perm.dest
    assert dest.unique().numel() == N * k  # one distinct row per assignment
    for n in range(N):
        for j in range(k):
            e = int(idx[n, j])
            r = int(dest[n, j])
            assert perm.offsets[e] <= r < perm.offsets[e] + counts[e]  # packed at the segment front
            assert int(perm.block_expert[r // bs]) == e
            assert int(perm.src_token[r]) == n
    assert int((perm.src_token == -1).sum()) == perm.num_rows - N * k
    # stable: inside an expert's segment, tokens appear in increasing order
    for e in range(E):
        toks = perm.src_token[perm.offsets[e] : perm.offsets[e] + counts[e]]
        assert torch.all(toks[1:] >= toks[:-1])


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_unpermute_inverts_permute(backend):
    N, k, E, D = 21, 3, 6, 10
    idx = _routing(N, k, E, seed=1)
    perm = make_permutation(idx, E, 16)
    x = torch.randn(N, D)
    xp = permute(x, perm, backend=backend)
    assert xp.shape == (perm.num_rows, D)
    assert torch.all(xp[perm.src_token == -1] == 0)  # padding rows are zero
    torch.testing.assert_close(unpermute(xp, perm, torch.full((N, k), 1.0 / k), backend=backend), x)
    torch.testing.assert_close(unpermute(xp, perm, backend=backend), k * x)
    # the other way round: a buffer with zero padding survives unpermute∘permute per assignment
    assert torch.equal(xp[perm.dest], x[:, None, :].expand(N, k, D))


def test_triton_matches_reference_forward_and_backward():
    N, k, E, D = 19, 2, 5, 70  # D > one 64-wide column tile
    idx = _routing(N, k, E, seed=2)
    perm = make_permutation(idx, E, 8)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(N, D, generator=gen)
    g = torch.rand(N, k, generator=gen)
    w = torch.randn(perm.num_rows, D, generator=gen)  # a fixed "expert" map applied in between
    dy = torch.randn(N, D, generator=gen)
    res = []
    for be in ("triton", "torch"):
        xr, gr = x.clone().requires_grad_(), g.clone().requires_grad_()
        xp = permute(xr, perm, backend=be)
        y = unpermute(xp * w, perm, gr, backend=be)
        y2 = unpermute(xp * w, perm, backend=be)  # the no-gates path too
        ((y + 0.5 * y2) * dy).sum().backward()
        res.append((y.detach(), xr.grad, gr.grad))
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_reference_functions_are_what_permute_means():
    idx = torch.tensor([[1, 0], [1, 2]])
    perm = make_permutation(idx, 3, 2)
    # expert 0: token 0 (+1 pad); expert 1: tokens 0, 1; expert 2: token 1 (+1 pad)
    assert perm.src_token.tolist() == [0, -1, 0, 1, 1, -1]
    assert perm.dest.tolist() == [[2, 0], [3, 4]]
    x = torch.tensor([[1.0], [2.0]])
    assert permute_ref(x, perm).reshape(-1).tolist() == [1, 0, 1, 2, 2, 0]
    y = torch.arange(6.0)[:, None]
    assert unpermute_ref(y, perm, torch.tensor([[0.5, 0.5], [1.0, 2.0]])).reshape(-1).tolist() == [
        1.0,
        11.0,
    ]


def test_bad_input_raises():
    with pytest.raises(ValueError, match="indices must lie in"):
        make_permutation(torch.tensor([[0, 3]]), 3)
    with pytest.raises(ValueError, match="integer tensor"):
        make_permutation(torch.tensor([[0.0, 1.0]]), 3)
    with pytest.raises(ValueError, match=r"\(N, k\)"):
        make_permutation(torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match="block_size"):
        make_permutation(torch.tensor([[0, 1]]), 3, 0)
    perm = make_permutation(torch.tensor([[0, 1]]), 3, 4)
    with pytest.raises(ValueError, match="x must be a 2-D tensor with 1 rows"):
        permute(torch.randn(2, 4), perm, backend="torch")
    with pytest.raises(ValueError, match="gates must have shape"):
        unpermute(torch.randn(perm.num_rows, 4), perm, torch.ones(1, 3), backend="torch")


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_unpermute_with_distinct_gates_per_slot_is_the_brute_force_sum(backend):
    # distinct gates per (token, slot) and distinct rows per buffer position: a swapped slot
    # order or a gate applied to the wrong row changes the result
    N, k, E, D = 13, 3, 5, 6
    idx = _routing(N, k, E, seed=4)
    perm = make_permutation(idx, E, 4)
    gen = torch.Generator().manual_seed(5)
    y = torch.randn(perm.num_rows, D, generator=gen)
    g = torch.rand(N, k, generator=gen) + torch.arange(k) * 2.0
    out = unpermute(y, perm, g, backend=backend)
    for n in range(N):
        expect = sum(g[n, j] * y[int(perm.dest[n, j])] for j in range(k))
        torch.testing.assert_close(out[n], expect)


def test_static_capacity_reads_nothing_back_and_matches_the_exact_buffer():
    from icml26_kernels.moe import max_rows

    N, k, E, bs = 30, 3, 7, 8
    idx = _routing(N, k, E, seed=6)
    cap = max_rows(N * k, E, bs)
    assert cap == (N * k + E * (bs - 1)) // bs * bs
    # on the meta device every value is unknown: any read-back (a host sync) would raise
    meta = make_permutation(idx.to("meta"), E, bs, num_rows=cap)
    assert meta.num_rows == cap and meta.block_expert.shape == (cap // bs,)
    exact = make_permutation(idx, E, bs)
    static = make_permutation(idx, E, bs, num_rows=cap)
    assert torch.equal(static.dest, exact.dest) and torch.equal(static.offsets, exact.offsets)
    assert torch.equal(static.src_token[: exact.num_rows], exact.src_token)
    assert torch.all(static.src_token[exact.num_rows :] == -1)
    assert torch.equal(static.block_expert[: exact.num_rows // bs], exact.block_expert)
    with pytest.raises(ValueError, match="num_rows must be a multiple"):
        make_permutation(idx, E, bs, num_rows=cap - bs)
