import math

import pytest
import torch
from icml26_trips import psnr, sliced_wasserstein, ssim


def test_sliced_wasserstein_identity_and_translation():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 4, generator=g, dtype=torch.float64)
    assert float(sliced_wasserstein(x, x)) == 0.0
    shift = torch.tensor([3.0, 0, 0, 0], dtype=torch.float64)
    # W2 of a translation along theta is |theta . c|; E[theta_1^2] = 1/d on the sphere
    sw = sliced_wasserstein(x, x + shift, 4000, generator=torch.Generator().manual_seed(1))
    assert abs(float(sw) - 3.0 / math.sqrt(4)) < 0.05 * 1.5


def test_psnr_ssim_closed_forms():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 1, 16, 16, generator=g)
    noisy = (x + 0.1 * torch.randn(x.shape, generator=g)).clamp(0, 1)
    mse = ((noisy - x) ** 2).mean((1, 2, 3))
    torch.testing.assert_close(psnr(noisy, x), 10 * torch.log10(1 / mse))
    torch.testing.assert_close(ssim(x, x), torch.ones(2))
    assert bool((ssim(noisy, x) < 0.99).all())
    with pytest.raises(ValueError, match="x and target"):
        psnr(x, x[:, :, :8])
