"""Token-level denoising against a benign reference (TokenDenoiser / TokenDRA)."""

import numpy as np
import pytest
from icml26_dra import (
    DRA,
    RepSim,
    TokenDenoiser,
    TokenDRA,
    auprc,
    extract_hidden_states,
    extract_token_states,
    tokenize_pairs,
)


def token_world(seed, n=300, frac=0.02, m=10, d=32, t_len=16, vocab=60, hvocab=6, noise=0.3):
    """Samples of t_len token states from a neutral vocabulary; an unsafe sample has 2 of its
    tokens replaced by hazard-vocabulary tokens (the critical tokens among neutral ones)."""
    rng = np.random.default_rng(seed)
    neutral = rng.normal(size=(vocab, d)) + rng.normal(0, 3, d)  # shared offset
    hazard = rng.normal(size=(hvocab, d)) + neutral.mean(0)

    def sample(unsafe):
        x = neutral[rng.integers(vocab, size=t_len)] + noise * rng.normal(size=(t_len, d))
        if unsafe:
            pos = rng.choice(t_len, 2, replace=False)
            x[pos] = hazard[rng.integers(hvocab, size=2)] + noise * rng.normal(size=(2, d))
        return x  # (t_len, d)

    n_pos = max(round(frac * n), 1)
    y = np.r_[np.ones(n_pos), np.zeros(n - n_pos)]
    train = [sample(bool(v)) for v in y]
    targets = [sample(True) for _ in range(m)]
    benign_ref = [sample(False) for _ in range(100)]  # known-benign samples, not in the pool
    return train, targets, benign_ref, y


def _pooled(samples):
    return np.array([x.mean(0) for x in samples])  # (N, d) mean-pooled


def test_unsafe_not_rare_pooled_denoising_fails_explicit_benign_reference_works():
    """Half the pool unsafe: the pool mean / pool tokens are no benign reference any more."""
    train, targets, ref, y = token_world(0, frac=0.5)
    pooled = [
        auprc(DRA(whiten=w, k="all").fit(_pooled(train), _pooled(targets)).score(), y)
        for w in ("diag", "shrinkage")
    ]
    implicit = auprc(TokenDRA().fit(train, targets).score(), y)
    explicit = auprc(TokenDRA().fit(train, targets, benign_reference=ref).score(), y)
    assert max(pooled) <= 0.7, pooled  # random = 0.5
    assert implicit <= 0.7, implicit
    assert explicit >= 0.9, explicit


def test_rare_unsafe_pool_tokens_are_a_usable_reference():
    """2 % unsafe: hazard tokens have fewer than n_neighbors look-alikes in the pool."""
    train, targets, _, y = token_world(0, frac=0.02)
    tok = auprc(TokenDRA().fit(train, targets).score(), y)
    raw = auprc(RepSim().fit(_pooled(train), _pooled(targets)).score(), y)
    assert tok >= 0.5 and raw <= 0.1, (tok, raw)


def test_weights_and_pooling_match_a_brute_force_computation():
    rng = np.random.default_rng(3)
    ref = [rng.normal(size=(7, 4)) * [1.0, 2.0, 0.5, 1.0] + 1.0 for _ in range(6)]  # 42 tokens
    x = [rng.normal(size=(5, 4)) * 2.0, rng.normal(size=(3, 4)) + 4.0]
    kappa, q = 3, 0.8
    for weighting in ("hard", "soft"):
        td = TokenDenoiser(n_neighbors=kappa, quantile=q, weighting=weighting).fit(ref)
        r = np.concatenate(ref)
        mu, sd = r.mean(0), r.std(0)
        u_r = (r - mu) / sd

        def kth(v, pts, k):
            return np.sort(np.sqrt(((pts - v) ** 2).sum(1)))[k - 1]

        own = [kth(u_r[i], np.delete(u_r, i, 0), kappa) for i in range(len(u_r))]
        tau = np.quantile(own, q)
        assert td.tau_ == pytest.approx(tau, rel=1e-9)
        want = []
        for s in x:
            u = (s - mu) / sd
            dist = np.array([kth(v, u_r, kappa) for v in u])
            w = (dist > tau).astype(float) if weighting == "hard" else np.maximum(dist - tau, 0)
            want.append((w[:, None] * u).sum(0) / w.sum() if w.sum() > 0 else np.zeros(4))
        np.testing.assert_allclose(td.pool(x), np.array(want), rtol=1e-9, atol=1e-12)
    # a sample made of reference tokens only is all neutral: pooled to 0
    hard = TokenDenoiser(n_neighbors=kappa, quantile=0.99).fit(ref)
    np.testing.assert_array_equal(hard.pool([ref[0][:2]])[0], 0.0)


def test_pooled_dra_with_benign_reference_whitens_on_the_reference():
    rng = np.random.default_rng(4)
    h, t, ref = rng.normal(size=(40, 5)) + 2, rng.normal(size=(4, 5)) + 3, rng.normal(size=(30, 5))
    got = DRA(whiten="diag", k="all").fit(h, t, benign_reference=ref).score()
    mu, sd = ref.mean(0), ref.std(0)
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
    np.testing.assert_allclose(got, (unit((h - mu) / sd) @ unit((t - mu) / sd).T).mean(1))
    assert not np.allclose(got, DRA(whiten="diag", k="all").fit(h, t).score())


def test_token_states_mean_pool_to_the_pooled_hidden_states(char_tokenizer, tiny_gpt2):
    b = tokenize_pairs(char_tokenizer, ["hi there", "a b"], ["ok.", "sure, here it is"])
    toks = extract_token_states(tiny_gpt2, b)
    assert [x.shape[0] for x in toks] == b["response_mask"].sum(1).tolist()
    pooled = extract_hidden_states(tiny_gpt2, b)
    np.testing.assert_allclose(_pooled(toks), pooled, rtol=1e-5, atol=1e-6)


def test_token_bad_input_names_the_argument():
    train, targets, ref, _ = token_world(1, n=40)
    with pytest.raises(ValueError, match="train_tokens must be a sequence"):
        TokenDRA().fit(np.zeros((5, 32)), targets)
    with pytest.raises(ValueError, match=r"target_tokens\[0\] has dimension|target_tokens has"):
        TokenDRA().fit(train, [x[:, :5] for x in targets])
    bad = [x.copy() for x in train]
    bad[2][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"train_tokens\[2\] contains NaN"):
        TokenDRA().fit(bad, targets)
    with pytest.raises(ValueError, match="benign_reference has 3 tokens"):
        TokenDRA().fit(train, targets, benign_reference=[ref[0][:3]])
    with pytest.raises(ValueError, match="weighting must be"):
        TokenDenoiser(weighting="linear")
    with pytest.raises(ValueError, match="benign_reference has dimension 4"):
        DRA(k="all").fit(_pooled(train), _pooled(targets), benign_reference=np.ones((9, 4)))
