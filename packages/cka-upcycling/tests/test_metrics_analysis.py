"""CL metrics on a hand-built matrix; sharpness and Hessian trace on quadratics; CKA drift."""

import pytest
import torch
from icml26_cka_upcycling import cka_drift, cl_metrics, hessian_trace, rho_sharpness
from torch import nn

R = [
    [0.90, 0.10, 0.20],
    [0.70, 0.80, 0.15],
    [0.60, 0.75, 0.95],
]


def test_cl_metrics_on_a_hand_built_matrix():
    m = cl_metrics(R, baseline=[0.1, 0.05, 0.1])
    assert m["average_accuracy"] == pytest.approx((0.60 + 0.75 + 0.95) / 3)
    assert m["bwt"] == pytest.approx(((0.60 - 0.90) + (0.75 - 0.80)) / 2)
    # task 0: max(0.90, 0.70) - 0.60 = 0.30; task 1: 0.80 - 0.75 = 0.05
    assert m["forgetting"] == pytest.approx((0.30 + 0.05) / 2)
    assert m["average_incremental_accuracy"] == pytest.approx((0.90 + 0.75 + 2.30 / 3) / 3)
    assert m["fwt"] == pytest.approx(((0.10 - 0.05) + (0.15 - 0.10)) / 2)


def test_forgetting_uses_the_best_earlier_accuracy_not_the_diagonal():
    # accuracy on task 0 rises after task 1 (backward transfer), then drops: F > -BWT
    m = cl_metrics([[0.5, 0.0, 0.0], [0.9, 0.8, 0.0], [0.6, 0.8, 0.7]])
    assert m["forgetting"] == pytest.approx(((0.9 - 0.6) + 0.0) / 2)
    assert m["bwt"] == pytest.approx(((0.6 - 0.5) + 0.0) / 2)


def test_cl_metrics_bad_input():
    with pytest.raises(ValueError, match="square"):
        cl_metrics([[1.0, 2.0]])
    with pytest.raises(ValueError, match="finite"):
        cl_metrics([[float("nan"), 0.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match="baseline"):
        cl_metrics(R, baseline=[0.1])


class _Quad(nn.Module):
    def __init__(self, A, w):
        super().__init__()
        self.A = A
        self.w = nn.Parameter(w)

    def loss(self):
        return 0.5 * self.w @ self.A @ self.w


def test_rho_sharpness_closed_form_on_a_quadratic():
    g = torch.Generator().manual_seed(0)
    M = torch.randn(4, 4, generator=g, dtype=torch.float64)
    A = M @ M.T + torch.eye(4, dtype=torch.float64)
    w = torch.randn(4, generator=g, dtype=torch.float64)
    q = _Quad(A, w.clone())
    rho = 0.3
    gr = A @ w
    u = gr / gr.norm()
    expect = rho * u @ A @ w + 0.5 * rho**2 * u @ A @ u
    assert rho_sharpness(q, lambda m: m.loss(), rho) == pytest.approx(expect.item(), rel=1e-10)
    assert torch.equal(q.w.detach(), w)  # restored


def test_hutchinson_trace_exact_for_diagonal_and_unbiased_otherwise():
    diag = torch.tensor([1.0, 2.0, 3.0, 10.0], dtype=torch.float64)
    q = _Quad(torch.diag(diag), torch.ones(4, dtype=torch.float64))
    assert hessian_trace(q, lambda m: m.loss(), 3) == pytest.approx(16.0, rel=1e-12)
    g = torch.Generator().manual_seed(1)
    M = torch.randn(6, 6, generator=g, dtype=torch.float64)
    A = M @ M.T
    q = _Quad(A, torch.ones(6, dtype=torch.float64))
    est = hessian_trace(q, lambda m: m.loss(), 4000, generator=torch.Generator().manual_seed(2))
    off = A - torch.diag(A.diag())
    se = (
        (2 * off.square().sum() / 4000).sqrt().item()
    )  # Var(zᵀAz) = 2 Σ_{i≠j} A_ij² for Rademacher z
    assert abs(est - torch.trace(A).item()) < 4 * se


def test_cka_drift_is_zero_for_the_same_model_and_grows_with_a_perturbation():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    other = nn.Sequential(*[m for m in net])  # same modules
    batches = [torch.randn(32, 5) for _ in range(3)]
    assert all(abs(v) < 1e-6 for v in cka_drift(net, other, batches, ["1", "3"]).values())
    import copy

    moved = copy.deepcopy(net)
    with torch.no_grad():
        moved[2].weight.add_(0.5 * torch.randn_like(moved[2].weight))
    d = cka_drift(net, moved, batches, ["1", "3"])
    assert d["1"] < 1e-6 and d["3"] > 1e-3  # only layers after the change drift
    with pytest.raises(ValueError, match="layers names"):
        cka_drift(net, moved, batches, ["9"])


# ----------------------------------------------------------------------------- diagnostic growth
from icml26_cka_upcycling import (  # noqa: E402
    UpcycledMoE,
    diagnostic_plan,
    expert_sensitivity,
    find_moe_layers,
)


class _TwoMoE(nn.Module):
    """h -> h + 0·A(h) -> h + B(h) -> head: layer A cannot matter for any task, B can."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = UpcycledMoE(6, 3, 2, 8, init_std=0.3)
        self.b = UpcycledMoE(6, 3, 2, 8, init_std=0.3)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        h = x + 0.0 * self.a(x)
        return self.head(h + self.b(h))


def _cls_loss(model, batch):
    x, y = batch
    return nn.functional.cross_entropy(model(x), y)


def _cls_batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g)) for _ in range(n)
    ]


def test_expert_sensitivity_is_zero_where_the_task_cannot_act_and_ignores_freezing():
    model = _TwoMoE()
    model.b.frozen[1] = True
    s = expert_sensitivity(model, _cls_loss, _cls_batches(2, 1))
    assert s["a"] == [0.0, 0.0, 0.0] and all(v > 0 for v in s["b"])
    assert model.b.frozen.tolist() == [False, True, False]  # restored
    model.b.frozen[1] = False
    assert expert_sensitivity(model, _cls_loss, _cls_batches(2, 1))["b"] == pytest.approx(s["b"])
    # the definition: ||sum_b dL/dtheta_e|| / ||theta_e||, by hand for slot 2 of layer b
    gs = [
        torch.autograd.grad(_cls_loss(model, b), [model.b.w1, model.b.w2])
        for b in _cls_batches(2, 1)
    ]
    g1, g2 = gs[0][0] + gs[1][0], gs[0][1] + gs[1][1]
    num = (g1[2].pow(2).sum() + g2[2].pow(2).sum()).sqrt()
    den = (model.b.w1[2].pow(2).sum() + model.b.w2[2].pow(2).sum()).sqrt()
    assert s["b"][2] == pytest.approx(float((num / den).detach()), rel=1e-5)


def test_diagnostic_plan_grows_only_where_drift_and_sensitivity_are():
    model = _TwoMoE()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    plan = diagnostic_plan(
        model, _cls_loss, _cls_batches(5, 2), _cls_batches(2, 3), budget=2, lr=1e-2
    )
    assert plan.grow["a"] == [] and len(plan.grow["b"]) == 2
    assert max(plan.p_grow["b"]) == pytest.approx(1.0) and plan.p_grow["a"] == [0.0] * 3
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # untouched
    assert [lay.copies_per_slot() for lay in find_moe_layers(model).values()] == [[1] * 3] * 2
    with pytest.raises(ValueError, match="budget"):
        diagnostic_plan(model, _cls_loss, _cls_batches(1, 2), _cls_batches(1, 3), budget=7)


def test_diagnostic_plan_weights_sensitivity_by_layer_drift(monkeypatch):
    """Both layers live; a planted drift (deep layer b drifts, a does not) must move the whole
    budget to b, whatever the sensitivities: the score is drift x sensitivity."""
    import icml26_cka_upcycling.analysis as an

    class _Live(_TwoMoE):
        def forward(self, x):
            h = x + self.a(x)
            return self.head(h + self.b(h))

    model = _Live()
    for drift, layer in (({"a": 1e-6, "b": 0.5}, "b"), ({"a": 0.5, "b": 1e-6}, "a")):
        monkeypatch.setattr(an, "cka_drift", lambda *a, d=drift, **k: dict(d))
        plan = diagnostic_plan(model, _cls_loss, _cls_batches(2, 2), _cls_batches(1, 3), budget=3)
        assert len(plan.grow[layer]) == 3, (drift, plan.grow)


def test_diagnostic_plan_ranks_slots_by_the_product_of_drift_and_sensitivity(monkeypatch):
    """Planted drifts and sensitivities: the plan is the top of drift_l x s_le, not of either
    factor alone (equal drifts: the sensitivity decides; a tripled drift overturns a larger
    sensitivity in the other layer)."""
    import icml26_cka_upcycling.analysis as an

    sens = {"a": [0.1, 0.9, 0.2], "b": [0.3, 0.1, 0.5]}
    monkeypatch.setattr(
        an, "expert_sensitivity", lambda *a, **k: {n: list(v) for n, v in sens.items()}
    )
    model = _TwoMoE()
    for drift, budget, want in [
        ({"a": 1.0, "b": 1.0}, 2, {"a": [1], "b": [2]}),  # 0.9 and 0.5 lead
        ({"a": 1.0, "b": 3.0}, 1, {"a": [], "b": [2]}),  # 3 x 0.5 = 1.5 > 1 x 0.9
        ({"a": 1.0, "b": 3.0}, 3, {"a": [1], "b": [0, 2]}),  # 1.5, 0.9, 0.9 (b0 = 3 x 0.3)
    ]:
        monkeypatch.setattr(an, "cka_drift", lambda *a, d=drift, **k: dict(d))
        plan = diagnostic_plan(
            model, _cls_loss, _cls_batches(1, 2), _cls_batches(1, 3), budget=budget
        )
        assert plan.grow == want, (drift, budget, plan.grow)
