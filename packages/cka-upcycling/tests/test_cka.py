"""CKA: identities, invariances, Gram vs feature form, a closed form, unbiasedness, bad input."""

import numpy as np
import pytest
import torch
from icml26_cka_upcycling import (
    MinibatchCKA,
    cka_loss,
    gram_linear,
    gram_rbf,
    hsic,
    kernel_cka,
    linear_cka,
    rbf_cka,
)

D = torch.float64


def _xy(n=64, p=7, q=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, p, generator=g, dtype=D)
    Y = X[:, :q] @ torch.randn(q, q, generator=g, dtype=D) + 0.5 * torch.randn(
        n, q, generator=g, dtype=D
    )
    return X, Y


def _orth(p, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(p, p, generator=g, dtype=D))[0]


@pytest.mark.parametrize("debiased", [False, True])
def test_self_similarity_is_one(debiased):
    X, _ = _xy()
    assert linear_cka(X, X, debiased=debiased).item() == pytest.approx(1.0, rel=1e-12)
    assert rbf_cka(X, X, debiased=debiased).item() == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("debiased", [False, True])
def test_invariant_to_orthogonal_and_isotropic_scaling_not_to_general_linear(debiased):
    X, Y = _xy()
    ref = linear_cka(X, Y, debiased=debiased).item()
    Q = _orth(X.shape[1])
    assert linear_cka(3.7 * X @ Q, Y, debiased=debiased).item() == pytest.approx(ref, rel=1e-10)
    assert linear_cka(X, 0.2 * Y @ _orth(Y.shape[1], 2), debiased=debiased).item() == pytest.approx(
        ref, rel=1e-10
    )
    assert rbf_cka(3.7 * X @ Q, Y).item() == pytest.approx(rbf_cka(X, Y).item(), rel=1e-10)
    A = torch.diag(torch.linspace(0.1, 5.0, X.shape[1], dtype=D))  # anisotropic: CKA must change
    assert abs(linear_cka(X @ A, Y, debiased=debiased).item() - ref) > 1e-3


@pytest.mark.parametrize("debiased", [False, True])
def test_feature_form_equals_gram_form(debiased):
    X, Y = _xy(n=40)
    feat = linear_cka(X, Y, debiased=debiased)
    gram = kernel_cka(gram_linear(X), gram_linear(Y), debiased=debiased)
    assert feat.item() == pytest.approx(gram.item(), rel=1e-12)


def test_one_dimensional_linear_cka_is_squared_correlation():
    X, Y = _xy(n=50, p=1, q=1)
    rho = np.corrcoef(X[:, 0].numpy(), Y[:, 0].numpy())[0, 1]
    assert linear_cka(X, Y).item() == pytest.approx(rho**2, rel=1e-12)


def test_rbf_kernel_matches_brute_force():
    X, _ = _xy(n=12, p=3, q=3)
    d2 = np.array([[np.sum((a - b) ** 2) for b in X.numpy()] for a in X.numpy()])
    K = np.exp(-d2 / (2 * 0.8**2 * np.median(d2)))
    assert np.allclose(gram_rbf(X, threshold=0.8).numpy(), K, rtol=1e-12, atol=0)


def test_biased_hsic_matches_centering_matrix_formula():
    X, Y = _xy(n=9)
    K, L = gram_linear(X), gram_linear(Y)
    H = torch.eye(9, dtype=D) - 1 / 9
    assert hsic(K, L).item() == pytest.approx((torch.trace(K @ H @ L @ H) / 64).item(), rel=1e-12)


def test_debiased_hsic_is_unbiased_on_a_known_population_value():
    # x = y ~ N(0, 1), linear kernel: population HSIC = Var(x)^2 = 1. The biased estimator has
    # mean E[chi2_{n-1}^2] / (n-1)^2 = (n+1)/(n-1) = 1.4 at n = 6; the U-statistic has mean 1.
    g = torch.Generator().manual_seed(0)
    n, draws = 6, 6000
    u, b = [], []
    for _ in range(draws):
        x = torch.randn(n, 1, generator=g, dtype=D)
        K = gram_linear(x)
        u.append(hsic(K, K, debiased=True).item())
        b.append(hsic(K, K).item())
    u, b = np.array(u), np.array(b)
    se = u.std() / np.sqrt(draws)
    assert abs(u.mean() - 1.0) < 4 * se
    assert abs(b.mean() - 1.4) < 4 * b.std() / np.sqrt(draws)
    assert abs(b.mean() - 1.0) > 10 * se  # the test separates the two estimators


def test_debiased_cka_of_independent_features_is_near_zero_biased_is_not():
    # population CKA of independent x, y is 0; biased CKA on n = 10 rows of 20 features is far above
    g = torch.Generator().manual_seed(3)
    deb, bia = [], []
    for _ in range(200):
        X = torch.randn(10, 20, generator=g, dtype=D)
        Y = torch.randn(10, 20, generator=g, dtype=D)
        deb.append(linear_cka(X, Y, debiased=True).item())
        bia.append(linear_cka(X, Y).item())
    assert abs(np.mean(deb)) < 4 * np.std(deb) / np.sqrt(200)
    assert np.mean(bia) > 0.5


def test_minibatch_cka_converges_to_population_and_keeps_identities():
    g = torch.Generator().manual_seed(5)
    m_ind, m_rot, per_batch = MinibatchCKA(), MinibatchCKA(), []
    Q = _orth(20)
    for _ in range(100):
        X = torch.randn(10, 20, generator=g, dtype=D)
        Y = torch.randn(10, 20, generator=g, dtype=D)
        m_ind.update(X, Y)
        m_rot.update(X, 2 * X @ Q)
        per_batch.append(linear_cka(X, Y).item())
    assert abs(m_ind.compute()) < 0.02  # independent: population CKA 0
    assert np.mean(per_batch) > 0.5  # averaging biased per-batch CKAs does not converge
    assert m_rot.compute() == pytest.approx(1.0, rel=1e-12)
    X, Y = _xy(n=32)
    one = MinibatchCKA()
    one.update(X, Y)
    assert one.compute() == pytest.approx(linear_cka(X, Y, debiased=True).item(), rel=1e-12)
    rb = MinibatchCKA(kernel="rbf")
    rb.update(X, X)
    assert rb.compute() == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("debiased", [False, True])
def test_cka_loss_gradient_matches_finite_differences(debiased):
    X, Y = _xy(n=12, p=4, q=3)
    X.requires_grad_(True)
    Y.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: cka_loss(a, b, debiased=debiased), (X, Y))
    assert cka_loss(X, Y, debiased=debiased).item() == pytest.approx(
        1 - linear_cka(X, Y, debiased=debiased).item(), rel=1e-12
    )
    # scale invariance: tiny features (variance 1e-12) give the same loss
    assert cka_loss(1e-6 * X, Y, debiased=debiased).item() == pytest.approx(
        cka_loss(X, Y, debiased=debiased).item(), rel=1e-9
    )


def test_cka_loss_flattens_tokens():
    X, Y = _xy(n=24, p=4, q=4)
    assert cka_loss(X.view(2, 12, 4), Y.view(2, 12, 4)).item() == pytest.approx(
        cka_loss(X, Y).item(), rel=1e-12
    )


def test_bad_input_is_rejected_with_the_argument_named():
    X, Y = _xy(n=8)
    with pytest.raises(ValueError, match="at least 2 samples"):
        linear_cka(X[:1], Y[:1])
    with pytest.raises(ValueError, match="at least 4 samples"):
        linear_cka(X[:3], Y[:3], debiased=True)
    with pytest.raises(ValueError, match="same number of samples"):
        linear_cka(X, Y[:5])
    with pytest.raises(ValueError, match="X must be a 2-D"):
        linear_cka(X[:, 0], Y)
    with pytest.raises(ValueError, match="zero variance"):
        linear_cka(torch.ones(8, 3, dtype=D), Y)
    with pytest.raises(ValueError, match="K and L must have the same shape"):
        kernel_cka(gram_linear(X), gram_linear(Y[:5]))
    with pytest.raises(ValueError, match="threshold"):
        gram_rbf(X, threshold=0.0)
    with pytest.raises(ValueError, match="kernel"):
        MinibatchCKA(kernel="poly")
    with pytest.raises(ValueError, match="before any update"):
        MinibatchCKA().compute()
    const = torch.ones(8, 3, dtype=D, requires_grad=True)
    loss = cka_loss(const, Y)  # the training loss never NaNs, nor its gradient
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(const.grad).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_features_do_not_overflow(dtype):
    """LLM-scale activations (scale 10, n = 512) in fp16: ‖XᵀX‖² overflows without an upcast."""
    g = torch.Generator().manual_seed(0)
    X = 10 * torch.randn(512, 16, generator=g)
    Y = X + 5 * torch.randn(512, 16, generator=g)
    ref = linear_cka(X.double(), Y.double()).item()
    half = linear_cka(X.to(dtype), Y.to(dtype))
    assert torch.isfinite(half) and half.dtype == torch.float32
    # the inputs were rounded to `dtype`: agreement to a few of its epsilons
    assert half.item() == pytest.approx(ref, rel=16 * torch.finfo(dtype).eps)
    loss = cka_loss(X.to(dtype), Y.to(dtype))
    assert torch.isfinite(loss) and loss.item() == pytest.approx(1 - ref, rel=1e-1, abs=0.05)


def test_nan_features_are_named():
    X = torch.randn(8, 3, dtype=torch.float64)
    Y = X.clone()
    Y[2, 1] = float("nan")
    with pytest.raises(ValueError, match="Y contains NaN"):
        linear_cka(X, Y)
    with pytest.raises(ValueError, match="Y contains NaN"):
        cka_loss(X, Y)
