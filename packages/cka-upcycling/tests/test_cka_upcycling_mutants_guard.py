"""Frozen copies get no gradient in *any* of their tensors (issue 67, finding 2).

``UpcycledMoE.forward`` detaches W1, W2 and the hidden bias b1 of every frozen copy. The older
test looks at W1 only; a forward that forgot to cut W2 (or b1) was caught only by the
planted-depth training test, through a side effect. Here every frozen tensor's gradient is
exactly zero after a backward pass, on both expert paths, and every trainable copy's is not.
"""

import pytest
import torch
from icml26_cka_upcycling import UpcycledMoE

D = torch.float64


def _layer(backend, hidden_bias):
    torch.manual_seed(0)
    moe = UpcycledMoE(6, 3, 2, 5, init_std=0.5, hidden_bias=hidden_bias, backend=backend).to(D)
    moe.grow([0, 1, 2], freeze_source=True)  # copies 0-2 frozen sources, 3-5 trainable
    with torch.no_grad():  # distinct copies and non-trivial copy routing, so all get traffic
        moe.w1.normal_(0, 0.5)
        moe.w2.normal_(0, 0.5)
        moe.copy_router.normal_()
        if moe.b1 is not None:
            moe.b1.normal_()
    return moe


@pytest.mark.parametrize("backend", ["dense", "torch"])
@pytest.mark.parametrize("hidden_bias", [False, True])
def test_every_frozen_tensor_gets_exactly_zero_gradient(backend, hidden_bias):
    moe = _layer(backend, hidden_bias)
    frozen = moe.frozen.clone()
    assert frozen.tolist() == [True, True, True, False, False, False]
    x = torch.randn(64, 6, generator=torch.Generator().manual_seed(1), dtype=D)
    moe(x).square().sum().backward()
    tensors = {"w1": moe.w1, "w2": moe.w2}
    if hidden_bias:
        tensors["b1"] = moe.b1
    for name, t in tensors.items():
        g = t.grad.flatten(1).abs().sum(1)  # (P,) per copy
        assert torch.all(g[frozen] == 0), f"{name}: a frozen copy got a gradient {g.tolist()}"
        assert torch.all(g[~frozen] > 0), f"{name}: a trainable copy got none {g.tolist()}"
    # the router and copy router still learn
    assert moe.router.grad.abs().sum() > 0 and moe.copy_router.grad.abs().sum() > 0
