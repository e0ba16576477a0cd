import pytest
import torch
from icml26_trips import (
    Blur,
    Inpainting,
    MatrixOperator,
    SuperResolution,
    gaussian_kernel,
    motion_kernel,
)

D = torch.float64


def operators():
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(2, 6, 6, generator=g) > 0.4).to(D)
    return {
        "matrix": MatrixOperator(torch.randn(5, 9, generator=g, dtype=D)),
        "inpaint": Inpainting(mask),
        "sr2": SuperResolution(2, (2, 6, 6)),
        "gauss": Blur(gaussian_kernel(5, 1.2), (2, 6, 6)),
        "motion": Blur(motion_kernel(7, 0.5, generator=g), (2, 6, 6)),
    }


def dense(op):
    """The operator's matrix by brute force: apply it to every basis vector."""
    n = int(torch.tensor(op.in_shape).prod())
    basis = torch.eye(n, dtype=D).reshape(n, *op.in_shape)
    return op.forward(basis).reshape(n, -1).T  # (m, n)


@pytest.mark.parametrize("name", list(operators()))
def test_adjoint_identity(name):
    op = operators()[name]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, *op.in_shape, generator=g, dtype=D)
    y = torch.randn(3, *op.out_shape, generator=g, dtype=D)
    lhs = (op.forward(x) * y).sum()
    rhs = (x * op.adjoint(y)).sum()
    torch.testing.assert_close(lhs, rhs, rtol=1e-12, atol=0)
    # and the adjoint is the transpose of the dense matrix
    a = dense(op)
    torch.testing.assert_close(op.adjoint(y).reshape(3, -1), y.reshape(3, -1) @ a)


@pytest.mark.parametrize("name", list(operators()))
@pytest.mark.parametrize("eta", [1e-3, 0.5])
def test_pinv_matches_dense_solve(name, eta):
    op = operators()[name]
    a = dense(op)
    y = torch.randn(2, *op.out_shape, generator=torch.Generator().manual_seed(2), dtype=D)
    expected = torch.linalg.solve(
        a.T @ a + eta * torch.eye(a.shape[1], dtype=D), a.T @ y.reshape(2, -1).T
    ).T
    op.cg_iters = 200
    torch.testing.assert_close(op.pinv(y, eta).reshape(2, -1), expected, rtol=1e-6, atol=1e-8)


def test_kernels_normalised():
    torch.testing.assert_close(gaussian_kernel(7, 3.0).sum(), torch.tensor(1.0, dtype=D))
    k = motion_kernel(61, 0.5, generator=torch.Generator().manual_seed(0))
    assert k.shape == (61, 61) and abs(float(k.sum()) - 1) < 1e-12 and bool((k >= 0).all())


def test_shape_mismatch_raises():
    op = SuperResolution(2, (1, 8, 8))
    with pytest.raises(ValueError, match=r"x must have shape \(B, 1, 8, 8\)"):
        op.forward(torch.zeros(1, 1, 6, 6))
    with pytest.raises(ValueError, match="y must have shape"):
        op.adjoint(torch.zeros(1, 1, 8, 8))
    with pytest.raises(ValueError, match="divisible"):
        SuperResolution(3, (1, 8, 8))
    with pytest.raises(ValueError, match="mask"):
        Inpainting(torch.full((4, 4), 0.5))
    with pytest.raises(ValueError, match="kernel"):
        Blur(torch.ones(4, 4), (1, 8, 8))
    with pytest.raises(ValueError, match="matrix"):
        MatrixOperator(torch.ones(3))
