"""Bilevel search: hypergradients against closed forms and finite differences, replay, plans."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from icml26_cka_upcycling import (
    BilevelUpcycler,
    GumbelMask,
    ReservoirBuffer,
    UpcyclePlan,
    apply_plan,
    find_moe_layers,
    hypergradient,
    upcycle_ffn,
)
from torch import nn

D = torch.float64


# ----------------------------------------------------------------------------- quadratic toy
def _toy(h=2.0, seed=0):
    """L_in(w, α) = h/2 ‖w - Bα‖²  (w*(α) = Bα),  L_val(w, α) = ½‖w - t‖² + ½ αᵀCα."""
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(5, 3, generator=g, dtype=D)
    t = torch.randn(5, generator=g, dtype=D)
    C = torch.diag(torch.tensor([0.5, 1.0, 2.0], dtype=D))
    w = torch.randn(5, generator=g, dtype=D, requires_grad=True)
    a = torch.randn(3, generator=g, dtype=D, requires_grad=True)

    def L_in():
        return 0.5 * h * (w - B @ a).square().sum()

    def L_val_at(wv, av):
        return 0.5 * (wv - t).square().sum() + 0.5 * av @ C @ av

    def L_val():
        return L_val_at(w, a)

    def closed_form(av):  # the true hypergradient d/dα L_val(w*(α), α)
        return B.T @ (B @ av - t) + C @ av

    return w, a, B, L_in, L_val, L_val_at, closed_form


def _central_diff(f, a, step=1e-5):
    out = torch.zeros_like(a)
    for i in range(a.numel()):
        e = torch.zeros_like(a)
        e[i] = step
        out[i] = (f(a + e) - f(a - e)) / (2 * step)
    return out


def test_finite_difference_hypergradient_equals_closed_form_when_one_step_solves_the_inner_problem():
    h = 2.0
    w, a, B, L_in, L_val, L_val_at, closed = _toy(h)
    w0 = w.detach().clone()
    g = hypergradient(L_in, L_val, [w], [a], mode="finite_difference", xi=1 / h, eps=1e-3)[0]
    brute = _central_diff(lambda av: L_val_at(B @ av, av), a.detach())  # brute force through w*(α)
    truth = closed(a.detach())
    assert torch.allclose(brute, truth, rtol=1e-8)
    assert torch.allclose(g, truth, rtol=1e-8)
    assert torch.equal(w.detach(), w0)  # weights restored


def test_finite_difference_hypergradient_is_the_unrolled_derivative_for_any_step():
    h, xi = 2.0, 0.1
    w, a, B, L_in, L_val, L_val_at, _ = _toy(h)
    w0 = w.detach().clone()
    g = hypergradient(L_in, L_val, [w], [a], mode="finite_difference", xi=xi, eps=1e-3)[0]
    unrolled = _central_diff(lambda av: L_val_at(w0 - xi * h * (w0 - B @ av), av), a.detach())
    assert torch.allclose(g, unrolled, rtol=1e-7)


def test_first_order_hypergradient_is_the_partial_derivative_and_misses_the_inner_response():
    w, a, _, L_in, L_val, L_val_at, closed = _toy()
    g = hypergradient(L_in, L_val, [w], [a], mode="first_order")[0]
    fd = _central_diff(lambda av: L_val_at(w.detach(), av), a.detach())
    assert torch.allclose(g, fd, rtol=1e-8)
    assert (g - closed(a.detach())).abs().max() > 0.1  # first order ignores dw*/dα


def test_hypergradient_through_the_mask_matches_finite_differences():
    """Soft Gumbel mask, fixed noise: d L_val / dα through the presence-weighted softmax."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6, dtype=D), _moe(6), nn.Linear(6, 3, dtype=D))
    layer = model[1]
    layer.grow([0, 1, 2], provisional=True, freeze_source=False)
    with torch.no_grad():
        layer.w1[3:].normal_(0, 0.5)
    mask = GumbelMask(3, tau=0.8, hard=False).to(D)
    with torch.no_grad():
        mask.logits.normal_()
    noise = mask.sample_noise(torch.Generator().manual_seed(1)).to(D)
    x = torch.randn(16, 4, dtype=D)
    y = torch.randint(0, 3, (16,))

    def val():
        layer.presence = mask(noise)
        return F.cross_entropy(model(x), y)

    g = hypergradient(val, val, list(model.parameters()), [mask.logits], mode="first_order")[0]

    def f(logits):
        with torch.no_grad():
            old = mask.logits.clone()
            mask.logits.copy_(logits)
            out = val()
            mask.logits.copy_(old)
        return out

    fd = _central_diff(lambda v: f(v.view(3, 2)), mask.logits.detach().flatten(), 1e-6).view_as(g)
    assert g.abs().max() > 1e-4
    assert torch.allclose(g, fd, rtol=1e-6, atol=1e-10)


# ----------------------------------------------------------------------------- replay
def test_reservoir_keeps_every_item_with_equal_probability():
    stream, cap, runs = 50, 10, 2000
    counts = np.zeros(stream)
    for seed in range(runs):
        buf = ReservoirBuffer(cap, seed=seed)
        for i in range(0, stream, 7):  # uneven batches
            xs = torch.arange(i, min(i + 7, stream))
            buf.add(xs, xs * 2)
        assert len(buf) == cap and buf.seen == stream
        kept = torch.stack([it[0] for it in buf.items]).numpy()
        counts[kept] += 1
    p = cap / stream
    chi2 = ((counts - runs * p) ** 2 / (runs * p * (1 - p))).sum()
    assert chi2 < 90.6  # 0.999 quantile of chi-square(49) is 85.4; the items are slightly dependent
    x, y = buf.sample(4)
    assert x.shape == (4,) and torch.equal(y, 2 * x)


def test_reservoir_keeps_the_next_item_with_probability_capacity_over_seen():
    """Algorithm R: item t (1-based) replaces a slot w.p. capacity/t. With capacity 1 the second
    item is kept half of the time (an off-by-one, randrange(seen), would keep it always)."""
    runs = 4000
    kept = 0
    for seed in range(runs):
        buf = ReservoirBuffer(1, seed=seed)
        buf.add(torch.tensor([0, 1]))
        kept += int(buf.items[0][0]) == 1
    assert abs(kept / runs - 0.5) < 4 * (0.25 / runs) ** 0.5  # 4 sigma


# ----------------------------------------------------------------------------- upcycler
def _moe(d, S=3):
    ffn = nn.Sequential(nn.Linear(d, 8, bias=False, dtype=D), nn.GELU(), nn.Linear(8, d, dtype=D))
    return upcycle_ffn(
        ffn, S, top_k=2, router_init="orthogonal", generator=torch.Generator().manual_seed(0)
    )


def _net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(4, 6, dtype=D),
        _moe(6),
        nn.Linear(6, 6, dtype=D),
        _moe(6),
        nn.Linear(6, 3, dtype=D),
    )


def _loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def _batch(seed, n=32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g, dtype=D), torch.randint(0, 3, (n,), generator=g)


def test_begin_task_is_function_preserving_and_end_search_applies_the_mask():
    model = _net()
    x, _ = _batch(0)
    y0 = model(x)
    up = BilevelUpcycler(model, _loss, cka_layers=["3"], lambda_param=0.0)
    n = up.begin_task()
    assert n == 6
    assert torch.allclose(model(x), y0, rtol=1e-13)  # presence 1 everywhere, copies split the mass
    assert all(
        layer.frozen[:3].all() for layer in find_moe_layers(model).values()
    )  # frozen for the search
    with torch.no_grad():
        up.mask.logits[:, 1] = torch.tensor([5.0, -5, -5, -5, -5, 5])
    plan = up.end_search()
    assert plan.grow == {"1": [0], "3": [2]}
    l1, l3 = model[1], model[3]
    assert l1.copies_per_slot() == [2, 1, 1] and l3.copies_per_slot() == [1, 1, 2]
    assert l1.frozen.tolist() == [
        True,
        False,
        False,
        False,
    ]  # kept source frozen, others trainable again
    assert l3.frozen.tolist() == [False, False, True, False]
    assert plan.added_params == 2 * l1.expert_params()
    assert torch.allclose(model(x), y0, rtol=1e-13)


def test_cka_regularizer_is_zero_drift_at_the_start_of_a_task():
    model = _net()
    up = BilevelUpcycler(model, _loss, cka_layers=["1", "3"], lambda_replay=0.0, lambda_cka=1.0)
    up.snapshot_teacher()
    replay = _batch(1)
    assert abs(up.regularizer(replay).item()) < 1e-12
    with torch.no_grad():
        model[0].weight.add_(torch.randn_like(model[0].weight))
    assert up.regularizer(replay).item() > 1e-3


def test_cka_regularizer_gradient_reaches_the_model():
    """The drift term trains the student: its gradient equals the finite difference of its value.

    (A regulariser whose student features are detached has the same value and a zero gradient.)
    """
    model = _net()
    up = BilevelUpcycler(model, _loss, cka_layers=["1", "3"], lambda_replay=0.0, lambda_cka=1.0)
    up.snapshot_teacher()
    replay = _batch(1)
    w = model[0].weight
    with torch.no_grad():
        w.add_(0.3 * torch.randn(w.shape, generator=torch.Generator().manual_seed(2), dtype=D))
    (g,) = torch.autograd.grad(up.regularizer(replay), w)
    v = torch.randn(w.shape, generator=torch.Generator().manual_seed(3), dtype=D)
    eps = 1e-6
    with torch.no_grad():
        w.add_(eps * v)
        plus = up.regularizer(replay).item()
        w.sub_(2 * eps * v)
        minus = up.regularizer(replay).item()
        w.add_(eps * v)
    fd = (plus - minus) / (2 * eps)
    assert abs(fd) > 1e-6  # the drift moves with the student's weights
    assert (g * v).sum().item() == pytest.approx(fd, rel=1e-5)


@pytest.mark.parametrize("mode", ["first_order", "finite_difference"])
def test_parameter_cost_drives_growth_to_zero(mode):
    model = _net()
    up = BilevelUpcycler(
        model, _loss, cka_layers=["3"], lambda_param=5.0, outer_lr=0.5, hypergradient=mode
    )
    up.begin_task()
    opt = torch.optim.SGD(up.trainable(), lr=0.05)
    for s in range(6):
        info = up.search_step(_batch(s), _batch(100 + s), _batch(200 + s), opt)
    assert info["p_grow_mean"] < 0.2
    plan = up.end_search()
    assert plan.num_grown() == 0 and plan.added_params == 0
    assert all(layer.copies_per_slot() == [1, 1, 1] for layer in find_moe_layers(model).values())


def test_search_trains_only_provisional_copies_and_shared_weights():
    model = _net()
    before = model[1].w1.detach().clone()
    up = BilevelUpcycler(model, _loss, cka_layers=["3"], lambda_param=0.0)
    up.begin_task()
    opt = torch.optim.SGD(up.trainable(), lr=0.1)
    for s in range(3):
        up.search_step(_batch(s), _batch(100 + s), None, opt)
    assert torch.equal(model[1].w1[:3], before)  # existing copies frozen during the search
    assert not torch.equal(model[1].w1[3:], before)


def test_apply_plan():
    model, x = _net(), _batch(0)[0]
    y0 = model(x)
    added = apply_plan(model, UpcyclePlan(grow={"1": [1, 2], "3": []}))
    assert model[1].copies_per_slot() == [1, 2, 2]
    assert added == 2 * model[1].expert_params()
    assert torch.allclose(model(x), y0, rtol=1e-13)
    with pytest.raises(ValueError, match="plan names layers"):
        apply_plan(model, UpcyclePlan(grow={"2": [0]}))


def test_bad_input():
    model = _net()
    with pytest.raises(ValueError, match="no UpcycledMoE"):
        BilevelUpcycler(nn.Linear(2, 2), _loss)
    with pytest.raises(ValueError, match="cka_layers"):
        BilevelUpcycler(model, _loss, cka_layers=["nope"])
    with pytest.raises(ValueError, match="layers names"):
        BilevelUpcycler(model, _loss, layers=["0"])
    with pytest.raises(ValueError, match="hypergradient"):
        BilevelUpcycler(model, _loss, hypergradient="implicit")
    with pytest.raises(ValueError, match="lambda_param"):
        BilevelUpcycler(model, _loss, lambda_param=-1.0)
    with pytest.raises(ValueError, match="mode"):
        hypergradient(lambda: 0, lambda: 0, [], [], mode="second")
    with pytest.raises(ValueError, match="capacity"):
        ReservoirBuffer(0)
    with pytest.raises(ValueError, match="empty"):
        ReservoirBuffer(2).sample(1)
    up = BilevelUpcycler(model, _loss)
    with pytest.raises(RuntimeError, match="before begin_task"):
        up.end_search()


@pytest.mark.parametrize("inner_presence", ["sampled", "all"])
def test_inner_presence_decides_which_candidates_train(inner_presence):
    """ "sampled": a candidate drawn absent gets no inner update (its weights are its sampling
    history); "all": every candidate trains on every inner step, whatever the draw."""
    model = _net()
    up = BilevelUpcycler(
        model,
        _loss,
        cka_layers=["3"],
        lambda_param=0.0,
        outer_lr=1e-6,
        inner_presence=inner_presence,
    )
    up.begin_task()
    with torch.no_grad():  # candidate 0 is drawn absent, the others present, almost surely
        up.mask.logits[:, 1] = 50.0
        up.mask.logits[0, 1] = -50.0
    before = model[1].w1.detach().clone()
    opt = torch.optim.SGD(up.trainable(), lr=0.1)
    up.search_step(_batch(0), _batch(100), None, opt)
    moved = [not torch.equal(model[1].w1[p], before[p]) for p in range(3, 6)]
    assert moved[1] and moved[2]
    assert moved[0] == (inner_presence == "all")


def test_uniform_inner_presence_is_half_and_independent_of_the_mask():
    """ "uniform": each candidate present in an inner step w.p. 1/2, whatever α says (here α
    says "never grow"): over 200 steps every candidate trains on about half of them."""
    torch.manual_seed(0)
    model = _net()
    up = BilevelUpcycler(model, _loss, lambda_param=0.0, inner_presence="uniform")
    n = up.begin_task()
    with torch.no_grad():
        up.mask.logits[:, 1] = -50.0  # p_grow = 0: "sampled" would never draw a candidate
    seen = torch.zeros(n)
    for _ in range(200):
        up.sample_presence()
        seen += torch.cat([lay.presence for lay in up.layers.values()])  # type: ignore[misc]
    up._set_presence(None)
    # Binomial(200, 1/2): mean 100, sd 7.1; [65, 135] is a 5-sd band per candidate
    assert ((seen > 65) & (seen < 135)).all(), seen
    assert len(set(seen.tolist())) > 1  # independent draws, not one shared coin


def test_inner_presence_is_checked():
    with pytest.raises(ValueError, match="inner_presence"):
        BilevelUpcycler(_net(), _loss, inner_presence="some")
    # the other modes' candidate-training rule is tested above; "uniform" is accepted
    BilevelUpcycler(_net(), _loss, inner_presence="uniform")
    # the default trains every candidate in the inner step (issue 47: "sampled" has no signal)
    assert BilevelUpcycler(_net(), _loss).inner_presence == "all"


def test_plan_records_how_often_each_candidate_was_drawn():
    model = _net()
    up = BilevelUpcycler(model, _loss, lambda_param=0.0, outer_lr=1e-6)
    n = up.begin_task()
    with torch.no_grad():
        up.mask.logits[:, 1] = torch.where(torch.arange(n) % 2 == 0, 50.0, -50.0)
    opt = torch.optim.SGD(up.trainable(), lr=0.01)
    for s in range(3):
        up.search_step(_batch(s), _batch(100 + s), None, opt)
    plan = up.end_search()
    drawn = [v for lay in plan.drawn.values() for v in lay]
    assert drawn == [1.0 if i % 2 == 0 else 0.0 for i in range(n)]
    assert [len(v) for v in plan.drawn.values()] == [len(v) for v in plan.p_grow.values()]


# ----------------------------------------------------------------------------- teacher cache
def _cached_setup():
    model = _net()
    up = BilevelUpcycler(model, _loss, cka_layers=["1", "3"], lambda_replay=0.5, lambda_cka=1.0)
    buf = ReservoirBuffer(20, seed=0)
    buf.add(*_batch(7, n=40))
    up.snapshot_teacher()
    up.cache_teacher(buf, batch_size=6)  # chunks of 6: the cache is stitched from 4 forwards
    w = model[0].weight
    with torch.no_grad():  # the student drifts away from the teacher
        w.add_(0.3 * torch.randn(w.shape, generator=torch.Generator().manual_seed(2), dtype=D))
    return model, up, buf, w


def test_sample_with_index_returns_the_items_at_those_positions():
    buf = ReservoirBuffer(10, seed=3)
    buf.add(*_batch(0, n=25))
    (x, y), idx = buf.sample(4, return_index=True)
    xs, ys = buf.stacked()
    assert torch.equal(x, xs[idx]) and torch.equal(y, ys[idx])  # copies, not arithmetic
    # the same RNG stream as sample(n): the index does not change which items are drawn
    a, b = ReservoirBuffer(10, seed=3), ReservoirBuffer(10, seed=3)
    a.add(*_batch(0, n=25))
    b.add(*_batch(0, n=25))
    assert torch.equal(a.sample(4)[0], b.sample(4, return_index=True)[0][0])


def test_cached_teacher_features_give_the_regularizer_and_its_gradient_of_a_teacher_forward():
    """H^old read from the cache (indexed by buffer position) equals a teacher forward on the
    same replay batch: value and gradient agree to fp64 rounding (different GEMM shapes)."""
    _, up, buf, w = _cached_setup()
    replay, idx = buf.sample(8, return_index=True)
    direct = up.regularizer(replay)
    (g_direct,) = torch.autograd.grad(direct, w)
    cached = up.regularizer(replay, idx)
    (g_cached,) = torch.autograd.grad(cached, w)
    assert direct.item() > 1e-3  # the drift term is not trivially zero
    eps = torch.finfo(D).eps
    assert abs(cached.item() - direct.item()) <= 64 * eps * abs(direct.item())
    assert torch.allclose(g_cached, g_direct, rtol=64 * eps, atol=64 * eps * g_direct.abs().max())
    # a wrong index (other items' features) changes the value: the index is what is read
    wrong = up.regularizer(replay, torch.roll(idx, 1))
    assert abs(wrong.item() - direct.item()) > 1e-6


def test_teacher_cache_is_invalidated_and_misuse_is_named():
    _, up, buf, _ = _cached_setup()
    replay, idx = buf.sample(8, return_index=True)
    buf.add(*_batch(9, n=1))  # the buffer changed: the cached rows may be other items now
    with pytest.raises(ValueError, match="buffer changed"):
        up.regularizer(replay, idx)
    up.cache_teacher(buf)
    up.regularizer(replay, idx)  # fine again
    with pytest.raises(ValueError, match=r"replay_index must lie in \[0, 20\)"):
        up.regularizer(replay, idx + 20)
    up.snapshot_teacher()  # a new teacher: the old features are stale
    with pytest.raises(ValueError, match="call cache_teacher"):
        up.regularizer(replay, idx)
    up.end_task()
    with pytest.raises(RuntimeError, match="needs a teacher"):
        up.cache_teacher(buf)
    with pytest.raises(ValueError, match="batch_size"):
        up.snapshot_teacher() or up.cache_teacher(buf, batch_size=0)
    up.cache_teacher(buf)
    with pytest.raises(ValueError, match="shape"):  # an index for fewer items than the batch
        up.regularizer(replay, idx[:4])


def test_apply_plan_router_growth_adds_routed_experts():
    """growth="router": one new slot (router column) per planned slot, a replica of it; with a
    large bias offset the function is unchanged (the new slot is never selected), with offset 0
    the replica competes at once; sources frozen; added = the new parameters."""
    x, _ = _batch(0)
    for offset, exact in [(1e4, True), (0.0, False)]:
        model = _net()
        with torch.no_grad():
            for layer in find_moe_layers(model).values():
                layer.router.normal_()  # distinct router columns: the top k is not a tie
                layer.w1.normal_(0, 0.5)  # distinct experts (upcycled ones are all equal)
        y0 = model(x)
        layer = find_moe_layers(model)["1"]
        n_before = sum(p.numel() for p in model.parameters())
        added = apply_plan(
            model, UpcyclePlan(grow={"1": [2, 0]}), growth="router", bias_offset=offset
        )
        assert (
            layer.num_experts == 5
            and added == sum(p.numel() for p in model.parameters()) - n_before
        )
        assert torch.equal(layer.router[:, 3], layer.router[:, 2])  # copies
        assert torch.equal(layer.router[:, 4], layer.router[:, 0])
        assert layer.frozen[layer.slot_of == 2].all() and not layer.frozen[layer.slot_of == 3].any()
        same = torch.allclose(model(x), y0, rtol=1e-12, atol=1e-12)
        assert same == exact
    with pytest.raises(ValueError, match="growth"):
        apply_plan(_net(), UpcyclePlan(grow={}), growth="slots")
