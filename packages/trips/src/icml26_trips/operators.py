"""Linear measurement operators ``y = A x + n`` with exact adjoints and regularised inverses.

Every operator maps a batch ``x`` of shape ``(B, *in_shape)`` to ``(B, *out_shape)`` and has

* ``forward(x)``  : ``A x``
* ``adjoint(y)``  : ``A^T y`` (exact: ``<A x, y> = <x, A^T y>``, checked in the tests)
* ``pinv(y, eta)``: ``A^+_eta y = (A^T A + eta I)^{-1} A^T y``, the regularised pseudo-inverse of
  the TriPS / FlowDPS data-consistency loss; closed form where one exists, otherwise conjugate
  gradients on the normal equations.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


class LinearOperator:
    """Base class; subclasses set ``in_shape`` and implement ``_forward`` / ``_adjoint``."""

    in_shape: tuple[int, ...]
    cg_iters: int = 50

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check(x, "x", self.in_shape)
        return self._forward(x)

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        self._check(y, "y", self.out_shape)
        return self._adjoint(y)

    __call__ = forward

    @property
    def out_shape(self) -> tuple[int, ...]:
        probe = torch.zeros((1, *self.in_shape), dtype=torch.float64)
        return tuple(self._forward(probe).shape[1:])

    def pinv(self, y: torch.Tensor, eta: float) -> torch.Tensor:
        """``(A^T A + eta I)^{-1} A^T y`` by conjugate gradients (``cg_iters`` steps)."""
        self._check(y, "y", self.out_shape)
        if eta < 0:
            raise ValueError(f"eta must be >= 0, got {eta}")
        b = self._adjoint(y)
        dims = tuple(range(1, b.ndim))
        x = torch.zeros_like(b)
        r = b.clone()
        p = r.clone()
        rs = (r * r).sum(dims, keepdim=True)
        for _ in range(self.cg_iters):
            ap = self._adjoint(self._forward(p)) + eta * p
            alpha = rs / (p * ap).sum(dims, keepdim=True).clamp_min(1e-30)
            x = x + alpha * p
            r = r - alpha * ap
            rs_new = (r * r).sum(dims, keepdim=True)
            p = r + rs_new / rs.clamp_min(1e-30) * p
            rs = rs_new
        return x

    def _forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, *in_shape) -> (B, *out_shape)
        raise NotImplementedError(f"{type(self).__name__} must implement _forward(x): A x")

    def _adjoint(self, y: torch.Tensor) -> torch.Tensor:  # (B, *out_shape) -> (B, *in_shape)
        raise NotImplementedError(f"{type(self).__name__} must implement _adjoint(y): Aᵀ y")

    def _check(self, t: torch.Tensor, name: str, shape: tuple[int, ...]) -> None:
        if tuple(t.shape[1:]) != tuple(shape):
            raise ValueError(
                f"{type(self).__name__}: {name} must have shape (B, {', '.join(map(str, shape))}), "
                f"got {tuple(t.shape)}"
            )


class MatrixOperator(LinearOperator):
    """A dense matrix ``A`` of shape ``(m, d)`` acting on vectors ``(B, d) -> (B, m)``."""

    def __init__(self, matrix: torch.Tensor):
        if matrix.ndim != 2:
            raise ValueError(f"matrix must be 2-D (m, d), got shape {tuple(matrix.shape)}")
        self.matrix = matrix
        self.in_shape = (matrix.shape[1],)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.matrix.shape[0],)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.matrix.to(x).T

    def _adjoint(self, y: torch.Tensor) -> torch.Tensor:
        return y @ self.matrix.to(y)

    def pinv(self, y: torch.Tensor, eta: float) -> torch.Tensor:
        self._check(y, "y", self.out_shape)
        a = self.matrix.to(y)
        gram = a @ a.T + eta * torch.eye(a.shape[0], dtype=y.dtype, device=y.device)  # (m, m)
        return torch.linalg.solve(gram, y.T).T @ a  # A^T (A A^T + eta I)^{-1} y


class Inpainting(LinearOperator):
    """Keep the pixels where ``mask`` is 1: ``A x = mask * x`` (zeros elsewhere; ``A = A^T``)."""

    def __init__(self, mask: torch.Tensor):
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("mask must contain only 0 and 1")
        self.mask = mask
        self.in_shape = tuple(mask.shape)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.in_shape

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask.to(x)

    def _adjoint(self, y: torch.Tensor) -> torch.Tensor:
        return y * self.mask.to(y)  # a diagonal 0/1 matrix is its own transpose

    def pinv(self, y: torch.Tensor, eta: float) -> torch.Tensor:
        self._check(y, "y", self.out_shape)
        return y * self.mask.to(y) / (1.0 + eta)


class SuperResolution(LinearOperator):
    """Average-pool downsampling by ``factor``: ``(B, C, H, W) -> (B, C, H/f, W/f)``.

    ``A A^T = I / f^2``, so ``A^+_eta y = A^T y / (1/f^2 + eta)``.
    """

    def __init__(self, factor: int, in_shape: tuple[int, int, int]):
        if factor < 1:
            raise ValueError(f"factor must be >= 1, got {factor}")
        if len(in_shape) != 3 or in_shape[1] % factor or in_shape[2] % factor:
            raise ValueError(
                f"in_shape must be (C, H, W) with H, W divisible by factor={factor}, got {in_shape}"
            )
        self.factor = factor
        self.in_shape = tuple(in_shape)

    @property
    def out_shape(self) -> tuple[int, ...]:
        c, h, w = self.in_shape
        return (c, h // self.factor, w // self.factor)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, self.factor)

    def _adjoint(self, y: torch.Tensor) -> torch.Tensor:
        f = self.factor
        return y.repeat_interleave(f, -2).repeat_interleave(f, -1) / (f * f)

    def pinv(self, y: torch.Tensor, eta: float) -> torch.Tensor:
        self._check(y, "y", self.out_shape)
        return self._adjoint(y) / (1.0 / self.factor**2 + eta)


class Blur(LinearOperator):
    """Per-channel 2-D convolution with ``kernel`` ``(k, k)``, odd ``k``, zero padding ("same").

    The adjoint is the transposed convolution with the same kernel; ``pinv`` uses conjugate
    gradients.
    """

    def __init__(self, kernel: torch.Tensor, in_shape: tuple[int, int, int]):
        if kernel.ndim != 2 or kernel.shape[0] != kernel.shape[1] or kernel.shape[0] % 2 == 0:
            raise ValueError(f"kernel must be square (k, k) with odd k, got {tuple(kernel.shape)}")
        if len(in_shape) != 3:
            raise ValueError(f"in_shape must be (C, H, W), got {in_shape}")
        self.kernel = kernel
        self.in_shape = tuple(in_shape)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.in_shape

    def _weight(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        return self.kernel.to(x).expand(c, 1, *self.kernel.shape)  # (C, 1, k, k)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.kernel.shape[0] // 2
        return F.conv2d(x, self._weight(x), padding=pad, groups=x.shape[1])

    def _adjoint(self, y: torch.Tensor) -> torch.Tensor:
        pad = self.kernel.shape[0] // 2
        return F.conv_transpose2d(y, self._weight(y), padding=pad, groups=y.shape[1])


def gaussian_kernel(size: int, sigma: float, dtype=torch.float64) -> torch.Tensor:
    """Normalised isotropic Gaussian ``(size, size)`` (the paper's deblur uses sigma = 3)."""
    if size < 1 or size % 2 == 0 or sigma <= 0:
        raise ValueError(f"size must be odd >= 1 and sigma > 0, got size={size}, sigma={sigma}")
    r = torch.arange(size, dtype=dtype) - size // 2
    g = torch.exp(-(r**2) / (2 * sigma**2))
    k = g[:, None] * g[None, :]
    return k / k.sum()


def motion_kernel(
    size: int, intensity: float = 0.5, generator: torch.Generator | None = None, dtype=torch.float64
) -> torch.Tensor:
    """A random camera-shake kernel ``(size, size)`` (reconstruction of the usual benchmark).

    A random walk whose heading changes by ``N(0, (pi * intensity)^2 / 4)`` per step is
    rasterised with bilinear splatting and normalised. The paper uses 61 x 61, intensity 0.5
    (the ``motionblur`` package); this is a reimplementation, not that generator.
    """
    if size < 3 or size % 2 == 0 or not 0 <= intensity <= 1:
        raise ValueError(f"size must be odd >= 3 and intensity in [0, 1], got {size}, {intensity}")
    steps = 4 * size
    dtheta = torch.randn(steps, generator=generator, dtype=dtype) * (math.pi * intensity / 2)
    theta = torch.cumsum(dtheta, 0) + 2 * math.pi * torch.rand(1, generator=generator, dtype=dtype)
    step = (size / 2) / steps
    pts = torch.cumsum(torch.stack([torch.cos(theta), torch.sin(theta)], -1) * step, 0)
    pts = pts - pts.mean(0) + size // 2
    pts = pts.clamp(0, size - 1.001)
    k = torch.zeros(size, size, dtype=dtype)
    i0, j0 = pts[:, 0].floor().long(), pts[:, 1].floor().long()
    fi, fj = pts[:, 0] - i0, pts[:, 1] - j0
    for di, wi in ((0, 1 - fi), (1, fi)):
        for dj, wj in ((0, 1 - fj), (1, fj)):
            k.index_put_((i0 + di, j0 + dj), wi * wj, accumulate=True)
    return k / k.sum()
