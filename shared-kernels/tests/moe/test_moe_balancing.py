import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from icml26_kernels.moe import (  # noqa: E402
    aux_free_bias_update,
    expert_load,
    load_imbalance,
    router_z_loss,
    switch_aux_loss,
    topk_router,
)


def test_expert_load_is_bincount_per_group():
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 7, (3, 10, 2), generator=gen)
    load = expert_load(idx, 7)
    assert load.shape == (3, 7)
    for g in range(3):
        assert torch.equal(load[g], torch.bincount(idx[g].reshape(-1), minlength=7))
    assert load_imbalance(torch.tensor([2, 2, 2, 2])).item() == 1.0
    assert load_imbalance(torch.tensor([8, 0, 0, 0])).item() == 4.0


def test_bias_update_direction_and_constant_sum():
    bias = torch.tensor([[0.3, -0.1, 0.0, 0.5]])
    load = torch.tensor([[10, 1, 5, 4]])  # mean 5: expert 0 over, 1 and 3 under, 2 at the mean
    new = aux_free_bias_update(bias, load, 0.1)
    # s = [-1, 1, 0, 1], mean(s) = 0.25 -> Δ = 0.1·[-1.25, 0.75, -0.25, 0.75]
    torch.testing.assert_close(new - bias, 0.1 * torch.tensor([[-1.25, 0.75, -0.25, 0.75]]))
    torch.testing.assert_close(new.sum(), bias.sum())


def test_aux_free_balancing_reduces_imbalance_on_a_skewed_router(device):
    H, N, D, E, k = 2, 64, 16, 16, 2
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(H, D, E, generator=gen).to(device)
    w[:, 0, :3] += 2.0  # with x[..., 0] = 3 below, experts 0..2 get +6 on their logits
    bias = torch.zeros(H, E, device=device)
    total0 = float(bias.sum())
    imbalance = []
    for _ in range(40):
        x = torch.randn(H, N, D, generator=gen)
        x[..., 0] = 3.0
        idx, _ = topk_router(x.to(device), w, bias, k=k)
        load = expert_load(idx, E)
        imbalance.append(load_imbalance(load).mean().item())
        bias = aux_free_bias_update(bias, load, 0.25)
        assert abs(float(bias.sum()) - total0) < 1e-4
    assert imbalance[0] > 3.0
    assert sum(imbalance[-5:]) / 5 < 0.5 * imbalance[0]


def test_switch_aux_loss_closed_forms():
    # uniform router, perfectly balanced assignment -> exactly 1
    N, E = 8, 4
    idx = torch.arange(N)[:, None] % E
    assert switch_aux_loss(torch.zeros(N, E), idx).item() == pytest.approx(1.0)
    # brute force on random logits
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(6, 5, generator=gen, dtype=torch.double)
    idx = torch.topk(logits, 2).indices
    f = [sum(int(e == j) for e in idx.reshape(-1).tolist()) / 12 for j in range(5)]
    p = torch.softmax(logits, -1).mean(0).tolist()
    assert switch_aux_loss(logits, idx).item() == pytest.approx(
        5 * sum(a * b for a, b in zip(f, p))
    )
    # gradient flows to logits through P_e only
    lg = logits.clone().requires_grad_()
    switch_aux_loss(lg, idx).backward()
    assert lg.grad.abs().sum() > 0


def test_router_z_loss_closed_form():
    assert router_z_loss(torch.zeros(3, 8)).item() == pytest.approx(math.log(8) ** 2)
    x = torch.tensor([[0.0, math.log(3.0)]])  # logsumexp = log 4
    assert router_z_loss(x).item() == pytest.approx(math.log(4.0) ** 2)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="load must have the bias's shape"):
        aux_free_bias_update(torch.zeros(2, 4), torch.zeros(4), 0.1)
    with pytest.raises(ValueError, match="rate must be"):
        aux_free_bias_update(torch.zeros(4), torch.zeros(4), -1.0)
    with pytest.raises(ValueError, match="num_experts"):
        expert_load(torch.zeros(2, 2, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="indices must lie"):
        expert_load(torch.full((2, 2), 5), 3)
    with pytest.raises(ValueError, match="logits must be"):
        switch_aux_loss(torch.zeros(3, 4), torch.zeros(2, 1, dtype=torch.long))
