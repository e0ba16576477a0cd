"""Centered Kernel Alignment (CKA): linear, kernel (RBF), debiased, minibatch, and a loss.

For n examples with features X (n, p) and Y (n, q), Gram matrices K = k(X, X), L = l(Y, Y) and
the centering matrix H = I - 11ᵀ/n (Kornblith et al. 2019, "Similarity of Neural Network
Representations Revisited"):

    HSIC(K, L) = tr(K H L H) / (n - 1)²                         biased estimator
    CKA(K, L)  = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L))

With linear kernels and column-centred features this is the feature form

    CKA_lin(X, Y) = ‖Yᵀ X‖_F² / (‖Xᵀ X‖_F · ‖Yᵀ Y‖_F)           O(n p q), no n×n matrix

The debiased form replaces HSIC by the unbiased U-statistic of Song et al. (2012), with
K̃ = K - diag(K), L̃ = L - diag(L) and n >= 4:

    HSIC_u(K, L) = [ tr(K̃ L̃) + (1ᵀK̃1)(1ᵀL̃1) / ((n-1)(n-2)) - 2/(n-2) · 1ᵀ K̃ L̃ 1 ] / (n (n-3))

whose expectation is the population HSIC (for linear kernels ‖Cov(x, y)‖_F²). Minibatch CKA
(Nguyen et al. 2021, "Do Wide and Deep Networks Learn the Same Things?") averages HSIC_u over
minibatches before the ratio, so it converges to the population CKA as batches accumulate.

Everything is differentiable; :func:`cka_loss` is ``1 - CKA`` with clamped self-HSICs, so
that it stays finite during training (the paper's "CKA-regularized replay", §3 of the notes).
"""

from __future__ import annotations

import torch

__all__ = [
    "MinibatchCKA",
    "cka_loss",
    "gram_linear",
    "gram_rbf",
    "hsic",
    "kernel_cka",
    "linear_cka",
    "rbf_cka",
]


def _check_pair(X: torch.Tensor, Y: torch.Tensor, min_n: int = 2) -> None:
    for name, t in (("X", X), ("Y", Y)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 2-D tensor (n, features); got {shape}")
        if not torch.is_floating_point(t):
            raise ValueError(f"{name} must be floating point; got {t.dtype}")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X and Y must have the same number of samples (rows); got {X.shape[0]} and {Y.shape[0]}"
        )
    if X.shape[0] < min_n:
        raise ValueError(f"CKA needs at least {min_n} samples (rows of X, Y); got {X.shape[0]}")


def _check_gram(K: torch.Tensor, L: torch.Tensor, min_n: int) -> None:
    for name, t in (("K", K), ("L", L)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[0] != t.shape[1]:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a square (n, n) Gram matrix; got {shape}")
    if K.shape != L.shape:
        raise ValueError(
            f"K and L must have the same shape (same samples); got {tuple(K.shape)} and {tuple(L.shape)}"
        )
    if K.shape[0] < min_n:
        raise ValueError(f"HSIC needs at least {min_n} samples; got n={K.shape[0]}")


def _ratio(num: torch.Tensor, den_sq: torch.Tensor, what: str) -> torch.Tensor:
    if not bool(den_sq > 0):  # one host sync; the training loss is cka_loss (no check, ε)
        raise ValueError(
            f"{what}: a representation has zero variance (all rows equal, or the debiased "
            "self-HSIC is not positive); CKA is undefined"
        )
    return num / den_sq.clamp_min(torch.finfo(num.dtype).tiny).sqrt()


# ----------------------------------------------------------------------------- Gram / HSIC
def gram_linear(X: torch.Tensor) -> torch.Tensor:
    """Linear kernel K = X Xᵀ, (n, p) -> (n, n)."""
    return X @ X.T


def gram_rbf(X: torch.Tensor, threshold: float = 1.0) -> torch.Tensor:
    """RBF kernel K_ij = exp(-‖x_i - x_j‖² / (2 σ²)), σ² = threshold² · median_ij ‖x_i - x_j‖².

    The bandwidth is a fraction of the median distance, as in Kornblith et al. (2019).
    """
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0; got {threshold}")
    sq = X.pow(2).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2 * X @ X.T).clamp_min(0)  # (n, n)
    med = torch.quantile(d2.detach().flatten(), 0.5)  # the averaged median, as np.median
    if not bool(med > 0):
        raise ValueError("X: the median squared distance is 0; the RBF bandwidth is undefined")
    return torch.exp(-d2 / (2 * threshold**2 * med))


def hsic(K: torch.Tensor, L: torch.Tensor, *, debiased: bool = False) -> torch.Tensor:
    """HSIC from Gram matrices: tr(KHLH)/(n-1)² or the unbiased U-statistic HSIC_u (n >= 4)."""
    _check_gram(K, L, 4 if debiased else 2)
    n = K.shape[0]
    if not debiased:
        Kc = K - K.mean(0, keepdim=True) - K.mean(1, keepdim=True) + K.mean()  # H K H
        return (Kc * L).sum() / (n - 1) ** 2  # tr(HKH L) = tr(K H L H)
    eye = torch.eye(n, dtype=torch.bool, device=K.device)
    Kt, Lt = K.masked_fill(eye, 0), L.masked_fill(eye, 0)  # K̃, L̃
    k1, l1 = Kt.sum(1), Lt.sum(1)  # K̃1, L̃1: (n,)
    t = (Kt * Lt).sum() + k1.sum() * l1.sum() / ((n - 1) * (n - 2)) - 2 * (k1 @ l1) / (n - 2)
    return t / (n * (n - 3))


def kernel_cka(K: torch.Tensor, L: torch.Tensor, *, debiased: bool = False) -> torch.Tensor:
    """CKA from two (n, n) Gram matrices (the reference, O(n²) memory)."""
    num = hsic(K, L, debiased=debiased)
    return _ratio(num, hsic(K, K, debiased=debiased) * hsic(L, L, debiased=debiased), "kernel_cka")


def rbf_cka(
    X: torch.Tensor, Y: torch.Tensor, *, threshold: float = 1.0, debiased: bool = False
) -> torch.Tensor:
    """Kernel CKA with RBF kernels on X (n, p) and Y (n, q); see :func:`gram_rbf`."""
    _check_pair(X, Y, 4 if debiased else 2)
    return kernel_cka(gram_rbf(X, threshold), gram_rbf(Y, threshold), debiased=debiased)


# ----------------------------------------------------------------------------- feature form
def _linear_hsic_features(
    X: torch.Tensor, Y: torch.Tensor, debiased: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """HSIC(X,Y), HSIC(X,X), HSIC(Y,Y) (up to a common factor) without forming n×n matrices."""
    n = X.shape[0]
    X = X - X.mean(0, keepdim=True)
    Y = Y - Y.mean(0, keepdim=True)
    if not debiased:
        xy = (Y.T @ X).pow(2).sum()  # ‖YᵀX‖_F² = tr(K L)
        return xy, (X.T @ X).pow(2).sum(), (Y.T @ Y).pow(2).sum()

    def u_stat(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        # tr(K̃L̃) = tr(KL) - Σ_i K_ii L_ii;  1ᵀK̃1 = ‖Σ a_i‖² - Σ ‖a_i‖²;  K̃1 = A(Aᵀ1) - diag K
        da, db = A.pow(2).sum(1), B.pow(2).sum(1)  # diag(K), diag(L): (n,)
        tr = (B.T @ A).pow(2).sum() - (da * db).sum()
        sa, sb = A.sum(0), B.sum(0)
        ka, kb = A @ sa - da, B @ sb - db  # K̃1, L̃1: (n,)
        return tr + ka.sum() * kb.sum() / ((n - 1) * (n - 2)) - 2 * (ka @ kb) / (n - 2)

    return u_stat(X, Y), u_stat(X, X), u_stat(Y, Y)


def _upcast(X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp16/bf16 -> fp32: ‖XᵀX‖_F² is a fourth power of the features (LLM activations of scale
    10 with n = 512 overflow fp16's 65504); fp32 and fp64 stay as they are."""
    dtype = torch.promote_types(torch.promote_types(X.dtype, Y.dtype), torch.float32)
    return X.to(dtype), Y.to(dtype)


def _check_finite(X: torch.Tensor, Y: torch.Tensor) -> None:
    """One host sync: NaN or inf features raise naming them (not "zero variance", not NaN)."""
    for name, t in (("X", X), ("Y", Y)):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or inf values; CKA is undefined")


def linear_cka(X: torch.Tensor, Y: torch.Tensor, debiased: bool = False) -> torch.Tensor:
    """Linear CKA of X (n, p) and Y (n, q), feature form: ‖YᵀX‖_F² / (‖XᵀX‖_F ‖YᵀY‖_F).

    ``debiased=True`` uses the unbiased HSIC_u (needs n >= 4). Equal to
    ``kernel_cka(X @ X.T, Y @ Y.T, debiased=...)`` at O(n p q) cost. Half-precision inputs are
    computed in fp32 (the result is fp32); NaN or inf inputs raise.
    """
    _check_pair(X, Y, 4 if debiased else 2)
    X, Y = _upcast(X, Y)
    _check_finite(X, Y)
    xy, xx, yy = _linear_hsic_features(X, Y, debiased)
    return _ratio(xy, xx * yy, "linear_cka")


def cka_loss(
    h_old: torch.Tensor, h_new: torch.Tensor, *, debiased: bool = False, check_finite: bool = True
) -> torch.Tensor:
    """Representation-drift loss 1 - CKA_lin(h_old, h_new), differentiable in both arguments.

    Half-precision features (autocast) are computed in fp32, so ‖XᵀX‖² cannot overflow.
    ``check_finite`` (one host sync) raises on NaN/inf features instead of returning NaN.

    Inputs of shape (..., n, d) are flattened to (n', d) over all leading axes (tokens of a
    sequence model count as samples). The self-HSICs are clamped at the smallest normal float
    *before* the square root, so a degenerate (constant) batch gives a finite loss and finite
    gradients while the loss stays invariant to the features' scale (an absolute ε would not).
    """
    X = h_old.reshape(-1, h_old.shape[-1])
    Y = h_new.reshape(-1, h_new.shape[-1])
    _check_pair(X, Y, 4 if debiased else 2)
    X, Y = _upcast(X, Y)
    if check_finite:
        _check_finite(X, Y)
    xy, xx, yy = _linear_hsic_features(X, Y, debiased)
    tiny = torch.finfo(xy.dtype).tiny
    return 1 - xy / (xx.clamp_min(tiny).sqrt() * yy.clamp_min(tiny).sqrt())


class MinibatchCKA:
    """Minibatch CKA (Nguyen et al. 2021): CKA = Σ_b HSIC_u(K_b, L_b) / sqrt(Σ_b HSIC_u(K_b,K_b) Σ_b HSIC_u(L_b,L_b)).

    Linear kernel by default, ``kernel="rbf"`` for RBF; each batch needs >= 4 rows. Because
    HSIC_u is unbiased, the estimate converges to the population CKA as batches accumulate
    (a mean of biased per-batch CKAs does not).

        m = MinibatchCKA()
        for x, y in batches:        # x (b, p), y (b, q), same examples
            m.update(x, y)
        m.compute()
    """

    def __init__(self, kernel: str = "linear", threshold: float = 1.0) -> None:
        if kernel not in ("linear", "rbf"):
            raise ValueError(f"kernel must be 'linear' or 'rbf'; got {kernel!r}")
        self.kernel, self.threshold = kernel, threshold
        self.reset()

    def reset(self) -> None:
        self.xy = self.xx = self.yy = 0.0
        self.batches = 0

    @torch.no_grad()
    def update(self, X: torch.Tensor, Y: torch.Tensor) -> None:
        _check_pair(X, Y, 4)
        X, Y = X.double(), Y.double()
        if self.kernel == "linear":
            xy, xx, yy = _linear_hsic_features(X, Y, True)
        else:
            K, L = gram_rbf(X, self.threshold), gram_rbf(Y, self.threshold)
            xy, xx, yy = (
                hsic(K, L, debiased=True),
                hsic(K, K, debiased=True),
                hsic(L, L, debiased=True),
            )
        self.xy += float(xy)
        self.xx += float(xx)
        self.yy += float(yy)
        self.batches += 1

    def compute(self) -> float:
        if self.batches == 0:
            raise ValueError("MinibatchCKA.compute() called before any update()")
        if not (self.xx > 0 and self.yy > 0):
            raise ValueError(
                "MinibatchCKA: accumulated self-HSIC is not positive; CKA is undefined"
            )
        return self.xy / (self.xx * self.yy) ** 0.5
