"""Token-level denoising (the abstract's noise model): drop the tokens a benign text also has.

The abstract: unsafe target texts contain "critical tokens that make them unsafe and neutral
tokens (e.g. stop words or benign facts) that are necessary to form fluent language", and the
latter make whole-sample representations noisy. ``DRA`` denoises pooled vectors and removes the
benign component only implicitly, through the pool mean. Here each token's hidden state is
weighted by its distance from a *benign token distribution* before pooling [recon: the paper's
method section could not be read; this is the abstract's description made concrete]:

    r_1..r_R                benign reference tokens (hidden states of known-benign text, or of
                            the training pool itself when no reference is given)
    u(x) = (x - mu_R) / sigma_R                      diag-whitened on the reference (Denoiser)
    dist(x) = || u(x) - u(r_(kappa)) ||              distance to the kappa-th nearest reference
                                                     token (a density: a token is neutral if
                                                     many benign tokens look like it)
    tau = quantile_q { dist(r) : r in R }            (leave-self-out for the reference tokens)
    w(x) = 1[dist(x) > tau]   ("hard")  or  max(dist(x) - tau, 0)  ("soft")
    p_i = sum_t w(x_it) u(x_it) / sum_t w(x_it)      (0 when every token of i is neutral)
    s_i = agg_t cos(p_i, p_t)                        targets pooled the same way

With ``benign_reference=None`` the reference is the pool's own tokens: that works only while
unsafe tokens are rare in the pool (fewer than ~kappa look-alikes); an explicit benign
reference (e.g. a few hundred trusted benign samples) does not depend on the pool's mix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .attribution import _Attributor, _check_agg
from .denoise import Denoiser, cosine_scores

__all__ = ["TokenDRA", "TokenDenoiser"]


def check_token_states(samples: object, name: str) -> list[np.ndarray]:
    """A list of (T_i, D) float64 arrays (T_i >= 1, one D, finite), or a ValueError naming it."""
    if isinstance(samples, np.ndarray) and samples.ndim == 2:
        raise ValueError(
            f"{name} must be a sequence of (T_i, D) token-state arrays, one per sample; got a "
            f"single 2-D array {samples.shape} (wrap it in a list for one sample)"
        )
    if not isinstance(samples, (Sequence, np.ndarray)) or len(samples) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of (T_i, D) arrays")
    out: list[np.ndarray] = []
    for i, s in enumerate(samples):
        a = np.asarray(s, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"{name}[{i}] must be a non-empty (T, D) array; got shape {a.shape}")
        if out and a.shape[1] != out[0].shape[1]:
            raise ValueError(
                f"{name}[{i}] has dimension {a.shape[1]} but {name}[0] has {out[0].shape[1]}"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}[{i}] contains NaN or inf")
        out.append(a)
    return out


def _kth_nn_dist(x: np.ndarray, ref: np.ndarray, kappa: int, chunk: int = 2048) -> np.ndarray:
    """Distance of each row of x (n, D) to its kappa-th nearest row of ref (R, D), (n,)."""
    r2 = np.einsum("ij,ij->i", ref, ref)  # (R,)
    out = np.empty(x.shape[0])
    for lo in range(0, x.shape[0], chunk):
        xb = x[lo : lo + chunk]  # (b, D)
        d2 = np.einsum("ij,ij->i", xb, xb)[:, None] - 2.0 * xb @ ref.T + r2[None, :]  # (b, R)
        part = np.partition(d2, kappa - 1, axis=1)[:, kappa - 1]
        out[lo : lo + chunk] = np.sqrt(np.maximum(part, 0.0))
    return out


class TokenDenoiser:
    """Weight tokens by their distance from a benign token distribution, then pool [recon].

    Args:
        n_neighbors: kappa, the neighbour whose distance measures a token's benign density.
        quantile: q; tokens closer than the q-quantile of the reference tokens' own
            (leave-self-out) distances are neutral (weight 0).
        weighting: ``"hard"`` (w = 1 beyond tau) or ``"soft"`` (w = distance beyond tau).
        whiten, shrinkage: the ``Denoiser`` fitted on the reference tokens (u = whitened x).
        max_reference: at most this many reference tokens are kept (a seeded random subset),
            bounding the O(n_tokens x R) distance computation.
        seed: for that subset.

    After ``fit``: ``denoiser_``, ``reference_`` (R, D) whitened reference, ``tau_``.
    """

    def __init__(
        self,
        *,
        n_neighbors: int = 10,
        quantile: float = 0.95,
        weighting: str = "hard",
        whiten: str = "diag",
        shrinkage: float = 0.1,
        max_reference: int = 4096,
        seed: int = 0,
    ) -> None:
        if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, (int, np.integer)):
            raise TypeError(f"n_neighbors must be an int; got {type(n_neighbors).__name__}")
        if n_neighbors < 1:
            raise ValueError(f"n_neighbors must be >= 1; got {n_neighbors}")
        if not 0.0 < quantile < 1.0:
            raise ValueError(f"quantile must lie in (0, 1); got {quantile}")
        if weighting not in ("hard", "soft"):
            raise ValueError(f"weighting must be 'hard' or 'soft'; got {weighting!r}")
        if max_reference < n_neighbors + 1:
            raise ValueError(f"max_reference must exceed n_neighbors; got {max_reference}")
        self.n_neighbors, self.quantile, self.weighting = int(n_neighbors), quantile, weighting
        self.denoiser_ = Denoiser(center=True, whiten=whiten, shrinkage=shrinkage)
        self.max_reference, self.seed = max_reference, seed
        self.reference_: np.ndarray | None = None
        self.tau_: float | None = None
        self.kept_fraction_: np.ndarray | None = None  # (N,) of the last pool() call

    def fit(self, benign_tokens: object) -> TokenDenoiser:
        """``benign_tokens``: a sequence of (T_i, D) arrays or one (R, D) array of token states."""
        if isinstance(benign_tokens, np.ndarray) and benign_tokens.ndim == 2:
            ref = np.asarray(benign_tokens, dtype=np.float64)
            if not np.all(np.isfinite(ref)):
                raise ValueError("benign_reference contains NaN or inf")
        else:
            ref = np.concatenate(check_token_states(benign_tokens, "benign_reference"))
        if ref.shape[0] <= self.n_neighbors:
            raise ValueError(
                f"benign_reference has {ref.shape[0]} tokens; needs more than "
                f"n_neighbors={self.n_neighbors}"
            )
        if ref.shape[0] > self.max_reference:
            rng = np.random.default_rng(self.seed)
            ref = ref[np.sort(rng.choice(ref.shape[0], self.max_reference, replace=False))]
        u = self.denoiser_.fit(ref).transform(ref)  # (R, D)
        self.reference_ = u
        # leave-self-out: the kappa-th neighbour other than the token itself is the (kappa+1)-th
        own = _kth_nn_dist(u, u, self.n_neighbors + 1)  # (R,)
        self.tau_ = float(np.quantile(own, self.quantile))
        return self

    def weights(self, tokens: object) -> np.ndarray:
        """w(x) for each row of a (T, D) array of token states, (T,)."""
        if self.reference_ is None or self.tau_ is None:
            raise RuntimeError("TokenDenoiser.weights called before fit")
        u = self.denoiser_.transform(tokens)
        dist = _kth_nn_dist(u, self.reference_, self.n_neighbors)
        if self.weighting == "hard":
            return (dist > self.tau_).astype(np.float64)
        return np.maximum(dist - self.tau_, 0.0)

    def pool(self, samples: object, name: str = "samples") -> np.ndarray:
        """p_i = sum_t w_t u_t / sum_t w_t for each (T_i, D) sample, (N, D); 0 if all neutral."""
        if self.reference_ is None:
            raise RuntimeError("TokenDenoiser.pool called before fit")
        xs = check_token_states(samples, name)
        if xs[0].shape[1] != self.reference_.shape[1]:
            raise ValueError(
                f"{name} has dimension {xs[0].shape[1]} but the benign reference has "
                f"{self.reference_.shape[1]}"
            )
        lens = np.array([x.shape[0] for x in xs])
        allx = np.concatenate(xs)  # (sum T_i, D)
        u = self.denoiser_.transform(allx)
        w = self.weights(allx)  # (sum T_i,)
        seg = np.repeat(np.arange(len(xs)), lens)  # sample index of each token
        num = np.zeros((len(xs), u.shape[1]))
        np.add.at(num, seg, w[:, None] * u)
        den = np.bincount(seg, weights=w, minlength=len(xs))  # (N,)
        self.kept_fraction_ = np.bincount(seg, weights=(w > 0), minlength=len(xs)) / lens
        return num / np.where(den > 0, den, 1.0)[:, None]


class TokenDRA(_Attributor):
    """DRA on token states: token-level denoising against a benign reference, then cosine.

    ``fit(train_tokens, target_tokens, benign_reference=None)``: each a sequence of (T_i, D)
    token-state arrays (``extract_token_states``). ``benign_reference`` = token states of
    known-benign samples; ``None`` uses the training pool's own tokens (valid only while unsafe
    data are rare in the pool). Other arguments go to ``TokenDenoiser``; ``agg`` as in ``DRA``.

    After ``fit``: ``token_denoiser_``, ``train_pooled_`` (N, D), ``target_pooled_`` (M, D),
    ``scores_``.
    """

    def __init__(self, *, agg: str = "mean", **token_kwargs: Any) -> None:
        self.agg = _check_agg(agg)
        self.token_denoiser_ = TokenDenoiser(**token_kwargs)
        self.train_pooled_: np.ndarray | None = None
        self.target_pooled_: np.ndarray | None = None

    def fit(
        self, train_tokens: object, target_tokens: object, *, benign_reference: object = None
    ) -> TokenDRA:
        train = check_token_states(train_tokens, "train_tokens")
        target = check_token_states(target_tokens, "target_tokens")
        if target[0].shape[1] != train[0].shape[1]:
            raise ValueError(
                f"target_tokens has dimension {target[0].shape[1]} but train_tokens has "
                f"{train[0].shape[1]}"
            )
        ref = train if benign_reference is None else benign_reference
        td = self.token_denoiser_.fit(ref)
        self.target_pooled_ = td.pool(target, "target_tokens")  # (M, D)
        self.train_pooled_ = td.pool(train, "train_tokens")  # (N, D)
        self.scores_ = cosine_scores(self.train_pooled_, self.target_pooled_, self.agg)
        return self
