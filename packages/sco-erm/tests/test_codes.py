import itertools
import math

import icml26_sco_erm as sco
import numpy as np
import pytest
from icml26_sco_erm.codes import rank_gf2


@pytest.mark.parametrize("seed", range(5))
def test_min_distance_matches_pairwise_bruteforce(seed):
    _G, C = sco.random_linear_code(16, 6, np.random.default_rng(seed))
    assert C.shape == (64, 16)
    assert len({tuple(c) for c in C}) == 64  # full rank: 2^k distinct codewords
    assert sco.min_distance(C) == sco.min_distance_bruteforce(C)


def test_codewords_are_all_linear_combinations():
    G = np.array([[1, 0, 1, 1], [0, 1, 1, 0]], dtype=np.uint8)
    expect = {tuple((a * G[0] + b * G[1]) % 2) for a, b in itertools.product((0, 1), repeat=2)}
    assert {tuple(c) for c in sco.codewords(G)} == expect


def test_rank_gf2_against_xor_dependence():
    G = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=np.uint8)  # row3 = row1 xor row2
    assert rank_gf2(G) == 2
    assert rank_gf2(np.eye(5, dtype=np.uint8)) == 5


def test_good_code_certificate_bounds_inner_products(code8):
    C, dist = code8
    assert dist >= 12 and dist == sco.min_distance_bruteforce(C)
    W = sco.codeword_vectors(C)
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, rtol=1e-12)
    gram = W @ W.T
    np.fill_diagonal(gram, -np.inf)
    # <w, w'> = 1 - 2 dist / d, brute force over all pairs
    assert gram.max() == pytest.approx(1 - 2 * dist / 48, rel=1e-12)
    assert gram.max() <= 0.5


def test_gv_rate_and_code_dimension():
    assert sco.gv_rate(0.25) == pytest.approx(1 - (0.25 * 2 + 0.75 * math.log2(4 / 3)), rel=1e-12)
    assert 0.188 < sco.gv_rate() < 0.189
    # d = 6m gives k ~ 1.13 m > m: more codewords than a sample of size m can see
    for m in (8, 12, 20, 40):
        assert sco.code_dimension(m) > m


def test_bad_code_arguments_raise():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="k .* <= d"):
        sco.random_linear_code(4, 5, rng)
    with pytest.raises(ValueError, match="exhaustive"):
        sco.random_linear_code(200, 21, rng)
    with pytest.raises(ValueError, match="d \\(code length\\)"):
        sco.random_linear_code(0, 1, rng)
    with pytest.raises(ValueError, match="Gilbert-Varshamov"):
        sco.good_code(30, 10, rng)  # rate 1/3 > 0.189
    with pytest.raises(ValueError, match="full-rank"):
        sco.min_distance(np.zeros((4, 6), dtype=np.uint8))
