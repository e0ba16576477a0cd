import math

import pytest
import torch
from icml26_trips import (
    ScheduleBounds,
    TriadicSchedule,
    bernstein_basis,
    bernstein_curve,
    bernstein_schedule,
    fit_bernstein,
    fit_schedule,
    make_template,
    phi_exp,
    phi_log,
    template,
)

SHAPES = ("linear", "exponential", "logarithm")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("start,end", [(1.0, 6.0), (300.0, 100.0), (1.0, 0.0)])
def test_template_endpoints_and_monotone(shape, start, end):
    t = template(shape, start, end, 28)
    assert t.shape == (28,)
    torch.testing.assert_close(t[[0, -1]], torch.tensor([start, end], dtype=t.dtype))
    steps = torch.diff(t) * math.copysign(1.0, end - start)
    assert bool((steps > 0).all())


def test_warps_closed_form_and_curvature():
    u = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    torch.testing.assert_close(
        phi_exp(u, 6.0)[1], torch.tensor((math.exp(3) - 1) / (math.exp(6) - 1), dtype=torch.float64)
    )
    torch.testing.assert_close(
        phi_log(u, 6.0)[1], torch.tensor(math.log(4) / math.log(7), dtype=torch.float64)
    )
    # exponential lags the line, logarithm leads it
    assert phi_exp(u, 6.0)[1] < 0.5 < phi_log(u, 6.0)[1]


def test_make_template_triadic_trend_default_is_official_div2k_sr():
    s = make_template()  # DC linear 300 -> 100, CFG log 1 -> 6, eta log 1 -> 0
    assert s.nfe == 28
    assert bool((torch.diff(s.dc) < 0).all()) and bool((torch.diff(s.eta) < 0).all())
    assert bool((torch.diff(s.cfg) > 0).all())
    torch.testing.assert_close(s.dc[[0, -1]], torch.tensor([300.0, 100.0], dtype=torch.float64))
    # official: eta "logarithm" is the expm1 late drop of strength 15 (tests/test_official.py)
    u = 1 / 27
    torch.testing.assert_close(
        s.eta[1], torch.tensor(1 - math.expm1(15 * u) / math.expm1(15), dtype=torch.float64)
    )


@pytest.mark.parametrize("degree", [0, 1, 5, 25])
def test_bernstein_partition_of_unity_and_binomial(degree):
    u = torch.linspace(0, 1, 33, dtype=torch.float64)
    b = bernstein_basis(degree, u)
    torch.testing.assert_close(b.sum(1), torch.ones(33, dtype=torch.float64))
    k = min(2, degree)
    expected = math.comb(degree, k) * u**k * (1 - u) ** (degree - k)
    torch.testing.assert_close(b[:, k], expected)


def test_bernstein_schedule_within_bounds_and_endpoints():
    g = torch.Generator().manual_seed(0)
    coeffs = torch.rand(16, 3, 26, generator=g, dtype=torch.float64)
    bounds = ScheduleBounds()
    s = bernstein_schedule(coeffs, bounds, 28)
    assert s.cfg.shape == (28, 16)
    s.check_bounds(bounds)
    # B(0) picks c_0 and B(1) picks c_n
    torch.testing.assert_close(s.dc[0], 10 + 390 * coeffs[:, 1, 0])
    torch.testing.assert_close(s.eta[-1], coeffs[:, 2, -1])


@pytest.mark.parametrize("shape", SHAPES)
def test_fit_reproduces_templates(shape):
    s = make_template(dc=shape, cfg=shape, sto="linear", dc_range=(300, 100))
    bounds = ScheduleBounds()
    coeffs = fit_schedule(s, bounds)
    refit = bernstein_schedule(coeffs, bounds, 28)
    for name in ("cfg", "dc", "eta"):
        lo, hi = getattr(bounds, name)
        err = (getattr(refit, name) - getattr(s, name)).abs().max() / (hi - lo)
        assert err < 0.01, (name, float(err))


def test_fit_bernstein_exact_for_polynomials():
    # a degree-3 polynomial is represented exactly by degree-25 Bernstein coefficients
    u = torch.linspace(0, 1, 28, dtype=torch.float64)
    values = 2 + 3 * (0.2 + 0.5 * u - 0.3 * u**3)
    c = fit_bernstein(values, 2.0, 5.0, degree=25)
    torch.testing.assert_close(bernstein_curve(c, 2.0, 5.0, 28), values, rtol=0, atol=3e-4 * 1e-2)


def test_bad_schedules_raise():
    with pytest.raises(ValueError, match="nfe"):
        TriadicSchedule.constant(0)
    with pytest.raises(ValueError, match="share one shape"):
        TriadicSchedule(torch.ones(3), torch.ones(4), torch.zeros(3))
    with pytest.raises(ValueError, match="eta"):
        TriadicSchedule.constant(4, eta=1.5)
    with pytest.raises(ValueError, match="dc"):
        TriadicSchedule.constant(4, dc=-1.0)
    with pytest.raises(ValueError, match="non-finite"):
        TriadicSchedule(torch.tensor([1.0, float("nan")]), torch.zeros(2), torch.zeros(2))
    with pytest.raises(ValueError, match="leaves bounds"):
        TriadicSchedule.constant(4, cfg=9.0).check_bounds(ScheduleBounds())
    with pytest.raises(ValueError, match="sto"):
        make_template(sto="cubic")
    with pytest.raises(ValueError, match="coeffs"):
        bernstein_schedule(torch.full((3, 5), 1.5))
    with pytest.raises(ValueError, match="bounds.cfg"):
        ScheduleBounds(cfg=(3.0, 1.0))
