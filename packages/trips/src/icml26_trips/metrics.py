"""Metrics for schedules and rewards: sliced Wasserstein, PSNR and SSIM (torchmetrics).

PSNR / SSIM come from ``torchmetrics.functional`` (not hand-written): it is torch-native (the
reward stays on the sampler's device and dtype) and only adds ``lightning-utilities`` on top of
torch, where scikit-image would add scipy, networkx, imageio, tifffile and pillow and a
round trip through numpy.
"""

from __future__ import annotations

import torch
from torchmetrics.functional.image import (
    peak_signal_noise_ratio,
    structural_similarity_index_measure,
)


def sliced_wasserstein(
    x: torch.Tensor,
    y: torch.Tensor,
    n_projections: int = 256,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Sliced 2-Wasserstein distance between two equal-size samples ``(n, d)``.

    ``SW_2(x, y) = sqrt(E_theta W_2^2(theta^T x, theta^T y))`` with ``theta`` uniform on the
    sphere; each 1-D ``W_2`` is the mean squared difference of sorted projections.
    """
    if x.ndim != 2 or y.ndim != 2 or x.shape != y.shape:
        raise ValueError(
            f"x and y must be (n, d) of equal shape, got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    theta = torch.randn(x.shape[1], n_projections, generator=generator, dtype=x.dtype)
    theta = theta / theta.norm(dim=0, keepdim=True)
    px = torch.sort(x @ theta, dim=0).values
    py = torch.sort(y.to(x) @ theta, dim=0).values
    return ((px - py) ** 2).mean().sqrt()


def psnr(x: torch.Tensor, target: torch.Tensor, data_range: float = 1.0) -> torch.Tensor:
    """Per-image PSNR in dB, images ``(B, C, H, W)`` -> ``(B,)`` (torchmetrics)."""
    if x.shape != target.shape or x.ndim != 4:
        raise ValueError(
            f"x and target must be (B, C, H, W) of equal shape, got {tuple(x.shape)}, {tuple(target.shape)}"
        )
    return peak_signal_noise_ratio(
        x, target, data_range=data_range, reduction="none", dim=(1, 2, 3)
    )


def ssim(
    x: torch.Tensor, target: torch.Tensor, data_range: float = 1.0, kernel_size: int = 7
) -> torch.Tensor:
    """Per-image SSIM, images ``(B, C, H, W)`` -> ``(B,)`` (torchmetrics, Gaussian window)."""
    if x.shape != target.shape or x.ndim != 4:
        raise ValueError(
            f"x and target must be (B, C, H, W) of equal shape, got {tuple(x.shape)}, {tuple(target.shape)}"
        )
    out = structural_similarity_index_measure(
        x, target, data_range=data_range, kernel_size=kernel_size, reduction="none"
    )
    assert isinstance(out, torch.Tensor)
    return out
