"""The three TriPS schedules: templates (TriPS-T) and Bernstein polynomials (TriPS-G).

TriPS (Bang, Mun, Seo, Hong, Chun, ICML 2026) schedules, per sampling step ``i = 0..N-1``,
a data-consistency scale ``beta_i`` (decreasing), a classifier-free-guidance scale
``lambda_i`` (increasing) and a stochasticity ``eta_i`` (decreasing). With ``u = i / (N - 1)``:

* templates (Sec. TriPS-T, official ``TriPS_T_code/sd3_sampler_total.py`` and
  ``TriPS_G/build_init_schedules.py``) warp ``u`` by ``phi_lin(u) = u``,
  ``phi_exp(u, a) = (e^{a u} - 1) / (e^a - 1)`` or ``phi_log(u, a) = log(1 + a u) / log(1 + a)``
  and interpolate ``start + (end - start) phi(u)``. The official *names* map to warps per
  component (``TEMPLATE_WARPS``), and not literally for DC and stochasticity::

      component  "linear"  "exponential"      "logarithm"
      cfg        u         phi_exp(u, 6)      phi_log(u, 6)
      dc         u         phi_log(u, 6)      phi_exp(u, 6)
      eta        u         phi_log(u, 50)     phi_exp(u, 15)   (the "late drop")

* Bernstein schedules (Sec. TriPS-G) are ``s(u) = lo + (hi - lo) sum_k c_k B_{k,n}(u)`` with
  ``B_{k,n}(u) = C(n, k) u^k (1 - u)^{n-k}`` and coefficients ``c_k in (0, 1)``; because the
  basis is a partition of unity the curve stays inside ``[lo, hi]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

Shape = Literal["linear", "exponential", "logarithm"]
SHAPES: tuple[str, ...] = ("linear", "exponential", "logarithm")

# Official name -> (warp, strength) per component: the branches of the TriPS-T sampling loop
# (``SD3FlowDPS.sample``; ``build_init_schedules.py`` notes "by the sampler's own naming,
# dc='logarithm' uses phi_exp while cfg='logarithm' uses phi_log"). For DC and eta the name
# describes the schedule's curve, not the warp: a DC "logarithm" stays high and falls late, an
# eta "logarithm" stays near 1 and drops late.
TEMPLATE_WARPS: dict[str, dict[str, tuple[str, float]]] = {
    "cfg": {"linear": ("linear", 0.0), "exponential": ("exp", 6.0), "logarithm": ("log", 6.0)},
    "dc": {"linear": ("linear", 0.0), "exponential": ("log", 6.0), "logarithm": ("exp", 6.0)},
    "eta": {"linear": ("linear", 0.0), "exponential": ("log", 50.0), "logarithm": ("exp", 15.0)},
}

# The confirmed TriPS-T configurations (official ``build_init_schedules.py::CONFIGS``, the
# schedules TriPS-G starts from): (dataset, task) -> template arguments. CFG always 1 -> 6,
# eta 1 -> 0, stochasticity weight 1.
OFFICIAL_TEMPLATES: dict[tuple[str, str], dict] = {
    ("DIV2K", "sr_bicubic"): dict(dc="linear", cfg="logarithm", sto="logarithm", dc_range=(300.0, 100.0)),
    ("DIV2K", "deblur_gauss"): dict(dc="linear", cfg="logarithm", sto="logarithm", dc_range=(300.0, 200.0)),
    ("DIV2K", "deblur_motion"): dict(dc="linear", cfg="exponential", sto="linear", dc_range=(350.0, 150.0)),
    ("FFHQ", "sr_bicubic"): dict(dc="linear", cfg="logarithm", sto="logarithm", dc_range=(250.0, 50.0)),
    ("FFHQ", "deblur_gauss"): dict(dc="logarithm", cfg="logarithm", sto="logarithm", dc_range=(200.0, 100.0)),
    ("FFHQ", "deblur_motion"): dict(dc="linear", cfg="exponential", sto="linear", dc_range=(350.0, 150.0)),
}  # fmt: skip


def phi_exp(u: torch.Tensor, alpha: float) -> torch.Tensor:
    """``(e^{alpha u} - 1) / (e^alpha - 1)``: slow start, fast finish; ``phi(0)=0, phi(1)=1``."""
    return torch.expm1(alpha * u) / math.expm1(alpha)


def phi_log(u: torch.Tensor, alpha: float) -> torch.Tensor:
    """``log(1 + alpha u) / log(1 + alpha)``: fast start, slow finish; ``phi(0)=0, phi(1)=1``."""
    return torch.log1p(alpha * u) / math.log1p(alpha)


def warp(u: torch.Tensor, shape: str, alpha: float = 6.0) -> torch.Tensor:
    """Monotone map of ``[0, 1]`` onto itself by its *mathematical* shape: ``"linear"`` ``u``,
    ``"exponential"`` ``phi_exp(u, alpha)``, ``"logarithm"`` ``phi_log(u, alpha)``.

    This is not the official template naming for DC and eta: use ``component_template`` or
    ``make_template`` for the official names (``TEMPLATE_WARPS``).
    """
    if shape == "linear":
        return u
    if shape == "exponential":
        return phi_exp(u, alpha)
    if shape == "logarithm":
        return phi_log(u, alpha)
    raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")


def template(
    shape: str, start: float, end: float, nfe: int, alpha: float = 6.0, *, dtype=torch.float64
) -> torch.Tensor:
    """``start + (end - start) * phi(i / (nfe - 1))`` for ``i = 0..nfe-1``; shape ``(nfe,)``.

    ``shape`` names the warp literally (see ``warp``); official template names per component
    are resolved by ``component_template``.
    """
    _check_nfe(nfe)
    u = torch.linspace(0.0, 1.0, nfe, dtype=dtype) if nfe > 1 else torch.zeros(1, dtype=dtype)
    return start + (end - start) * warp(u, shape, alpha)


def component_template(
    component: str, name: str, start: float, end: float, nfe: int, *, dtype=torch.float64
) -> torch.Tensor:
    """One TriPS-T schedule by its *official* name: ``start + (end - start) phi(u)``, ``(nfe,)``.

    ``component`` is ``"cfg"``, ``"dc"`` or ``"eta"``; ``name`` one of ``SHAPES``; the warp and
    its strength come from ``TEMPLATE_WARPS`` (e.g. ``("dc", "logarithm")`` is
    ``phi_exp(u, 6)`` and ``("eta", "logarithm")`` is ``expm1(15 u) / expm1(15)``).
    """
    if component not in TEMPLATE_WARPS:
        raise ValueError(f"component must be one of {tuple(TEMPLATE_WARPS)}, got {component!r}")
    if name not in SHAPES:
        raise ValueError(f"{component} shape must be one of {SHAPES}, got {name!r}")
    kind, alpha = TEMPLATE_WARPS[component][name]
    literal = {"linear": "linear", "exp": "exponential", "log": "logarithm"}[kind]
    return template(literal, start, end, nfe, alpha, dtype=dtype)


@dataclass(frozen=True)
class ScheduleBounds:
    """Box each schedule lives in (the official TriPS-G ranges, SD3.5-M latents)."""

    cfg: tuple[float, float] = (1.0, 8.0)  # lambda: 1 = conditional only, 8 = strong CFG
    dc: tuple[float, float] = (10.0, 400.0)  # beta: step length of the DC descent (latent scale)
    eta: tuple[float, float] = (0.0, 1.0)  # eta: 0 = deterministic, 1 = fresh noise

    def __post_init__(self) -> None:
        for name in ("cfg", "dc", "eta"):
            lo, hi = getattr(self, name)
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"bounds.{name} must be finite with lo < hi, got {(lo, hi)}")
        if self.eta[0] < 0.0 or self.eta[1] > 1.0:
            raise ValueError(f"bounds.eta must lie in [0, 1], got {self.eta}")
        if self.dc[0] < 0.0:
            raise ValueError(f"bounds.dc must be non-negative, got {self.dc}")


@dataclass(frozen=True)
class TriadicSchedule:
    """Per-step CFG ``lambda_i``, DC ``beta_i`` and stochasticity ``eta_i``.

    Each field has shape ``(nfe,)`` (one schedule) or ``(nfe, B)`` (one schedule per batch
    element, used to roll out a GRPO group in one batched call).
    """

    cfg: torch.Tensor
    dc: torch.Tensor
    eta: torch.Tensor

    def __post_init__(self) -> None:
        shapes = {tuple(t.shape) for t in (self.cfg, self.dc, self.eta)}
        if len(shapes) != 1:
            raise ValueError(
                "schedule.cfg, schedule.dc and schedule.eta must share one shape, got "
                f"{[tuple(t.shape) for t in (self.cfg, self.dc, self.eta)]}"
            )
        if self.cfg.ndim not in (1, 2) or self.cfg.shape[0] < 1:
            raise ValueError(
                f"schedule arrays must have shape (nfe,) or (nfe, B), got {self.cfg.shape}"
            )
        for name in ("cfg", "dc", "eta"):
            if not bool(torch.isfinite(getattr(self, name)).all()):
                raise ValueError(f"schedule.{name} has non-finite entries")
        if bool((self.eta < 0).any()) or bool((self.eta > 1).any()):
            raise ValueError(
                "schedule.eta must lie in [0, 1] (sqrt(1 - eta^2) is the signal weight)"
            )
        if bool((self.dc < 0).any()):
            raise ValueError("schedule.dc must be non-negative")

    @property
    def nfe(self) -> int:
        return int(self.cfg.shape[0])

    @staticmethod
    def constant(
        nfe: int, *, cfg: float = 1.0, dc: float = 0.0, eta: float = 0.0
    ) -> TriadicSchedule:
        """The fixed-schedule baseline (DPS / FlowDPS practice): one value per component."""
        _check_nfe(nfe)
        full = lambda v: torch.full((nfe,), float(v), dtype=torch.float64)
        return TriadicSchedule(full(cfg), full(dc), full(eta))

    def check_bounds(self, bounds: ScheduleBounds) -> None:
        """Raise if any entry leaves ``bounds`` (relative slack 1e-9)."""
        for name in ("cfg", "dc", "eta"):
            lo, hi = getattr(bounds, name)
            t = getattr(self, name)
            slack = 1e-9 * max(1.0, abs(hi - lo))
            if bool((t < lo - slack).any()) or bool((t > hi + slack).any()):
                raise ValueError(
                    f"schedule.{name} leaves bounds [{lo}, {hi}]: "
                    f"min {float(t.min()):.4g}, max {float(t.max()):.4g}"
                )


def make_template(
    *,
    dc: str = "linear",
    cfg: str = "logarithm",
    sto: str = "logarithm",
    dc_range: tuple[float, float] = (300.0, 100.0),
    cfg_range: tuple[float, float] = (1.0, 6.0),
    eta_range: tuple[float, float] = (1.0, 0.0),
    nfe: int = 28,
    sto_weight: float = 1.0,
) -> TriadicSchedule:
    """A TriPS-T schedule: DC ``dc_range[0] -> dc_range[1]``, CFG ``1 -> 6``, eta ``1 -> 0``.

    ``dc``, ``cfg`` and ``sto`` are the *official* template names, resolved per component by
    ``TEMPLATE_WARPS`` (DC "logarithm" is ``phi_exp(u, 6)``, eta "logarithm" is
    ``expm1(15 u) / expm1(15)``, eta "exponential" is ``phi_log(u, 50)``). Defaults are the
    official DIV2K SR x8 configuration (``OFFICIAL_TEMPLATES[("DIV2K", "sr_bicubic")]``: DC
    linear 300 -> 100, CFG "logarithm", stochasticity "logarithm"). ``sto_weight`` multiplies
    eta in the "logarithm" branch only, then eta is capped at 1 (official
    ``stochasticity_weight``).
    """
    for arg, shape in (("dc", dc), ("cfg", cfg), ("sto", sto)):
        if shape not in SHAPES:
            raise ValueError(f"{arg} must be one of {SHAPES}, got {shape!r}")
    if not (math.isfinite(sto_weight) and sto_weight >= 0):
        raise ValueError(f"sto_weight must be finite and >= 0, got {sto_weight}")
    eta = component_template("eta", sto, *eta_range, nfe)
    if sto == "logarithm":
        eta = (eta * sto_weight).clamp(max=1.0)
    return TriadicSchedule(
        cfg=component_template("cfg", cfg, *cfg_range, nfe),
        dc=component_template("dc", dc, *dc_range, nfe),
        eta=eta,
    )


def official_template(dataset: str, task: str, nfe: int = 28) -> TriadicSchedule:
    """The confirmed TriPS-T schedule ``OFFICIAL_TEMPLATES[(dataset, task)]``.

    ``dataset`` in ``{"DIV2K", "FFHQ"}``, ``task`` in ``{"sr_bicubic", "deblur_gauss",
    "deblur_motion"}`` (official names); the schedules of the official
    ``init_load_file_fin/*.npz`` that TriPS-G starts from.
    """
    key = (dataset, task)
    if key not in OFFICIAL_TEMPLATES:
        raise ValueError(
            f"(dataset, task) must be one of {sorted(OFFICIAL_TEMPLATES)}, got {key!r}"
        )
    return make_template(**OFFICIAL_TEMPLATES[key], nfe=nfe)


# --------------------------------------------------------------------------- Bernstein curves


def bernstein_basis(degree: int, u: torch.Tensor) -> torch.Tensor:
    """``B[j, k] = C(n, k) u_j^k (1 - u_j)^{n-k}``; shape ``(len(u), degree + 1)``."""
    if degree < 0:
        raise ValueError(f"degree must be >= 0, got {degree}")
    k = torch.arange(degree + 1, dtype=u.dtype, device=u.device)
    log_binom = (
        torch.lgamma(torch.tensor(degree + 1.0, dtype=u.dtype))
        - torch.lgamma(k + 1)
        - torch.lgamma(degree - k + 1)
    ).to(u.device)
    u = u[:, None]
    # u^k (1-u)^(n-k) via pow (exact 0^0 = 1 at the endpoints)
    return torch.exp(log_binom) * u.pow(k) * (1 - u).pow(degree - k)


def bernstein_curve(coeffs: torch.Tensor, lo: float, hi: float, nfe: int) -> torch.Tensor:
    """``lo + (hi - lo) * B(u) @ c``; coeffs ``(..., n + 1)`` in ``[0, 1]`` -> ``(nfe, ...)``."""
    _check_nfe(nfe)
    u = torch.linspace(0.0, 1.0, nfe, dtype=coeffs.dtype, device=coeffs.device)
    basis = bernstein_basis(coeffs.shape[-1] - 1, u)  # (nfe, n+1)
    curve = torch.einsum("tk,...k->t...", basis, coeffs)  # (nfe, ...)
    return lo + (hi - lo) * curve


def bernstein_schedule(
    coeffs: torch.Tensor, bounds: ScheduleBounds = ScheduleBounds(), nfe: int = 28
) -> TriadicSchedule:
    """A TriPS-G schedule from coefficients ``(..., 3, n + 1)`` ordered (cfg, dc, eta).

    Leading batch dimensions become the trailing ``B`` of the per-step arrays.
    """
    if coeffs.ndim < 2 or coeffs.shape[-2] != 3:
        raise ValueError(f"coeffs must have shape (..., 3, degree + 1), got {tuple(coeffs.shape)}")
    if bool((coeffs < 0).any()) or bool((coeffs > 1).any()):
        raise ValueError("coeffs must lie in [0, 1]")
    c = coeffs.reshape(-1, 3, coeffs.shape[-1]) if coeffs.ndim > 2 else coeffs
    names = ("cfg", "dc", "eta")
    curves = []
    for j, name in enumerate(names):
        lo, hi = getattr(bounds, name)
        curves.append(bernstein_curve(c[..., j, :], lo, hi, nfe))
    return TriadicSchedule(*curves)  # each (nfe,) or (nfe, B)


def fit_bernstein(
    values: torch.Tensor, lo: float, hi: float, degree: int = 25, *, iters: int = 500
) -> torch.Tensor:
    """Least-squares Bernstein fit of a schedule, coefficients kept in ``(0, 1)``.

    Minimises ``|| lo + (hi - lo) B c - values ||^2`` over ``c = sigmoid(theta)`` with L-BFGS,
    as the official code initialises TriPS-G from a TriPS-T template. Returns ``(degree + 1,)``.
    """
    values = values.detach().to(torch.float64)
    if values.ndim != 1:
        raise ValueError(f"values must be 1-D (nfe,), got {tuple(values.shape)}")
    nfe = values.shape[0]
    target = ((values - lo) / (hi - lo)).clamp(1e-4, 1 - 1e-4)
    u = torch.linspace(0.0, 1.0, nfe, dtype=torch.float64)
    basis = bernstein_basis(degree, u)
    # start from the target sampled at the Greville abscissae k/n (the Bernstein quasi-interpolant)
    grev = np.linspace(0.0, 1.0, degree + 1)
    init = torch.from_numpy(np.interp(grev, u.numpy(), target.numpy()))
    theta = torch.logit(init.clamp(1e-4, 1 - 1e-4)).requires_grad_(True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=iters,
        tolerance_grad=1e-12,
        tolerance_change=1e-14,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = ((basis @ torch.sigmoid(theta) - target) ** 2).mean()
        loss.backward()
        return loss

    opt.step(closure)
    return torch.sigmoid(theta).detach()


def fit_schedule(
    schedule: TriadicSchedule, bounds: ScheduleBounds = ScheduleBounds(), degree: int = 25
) -> torch.Tensor:
    """Bernstein coefficients ``(3, degree + 1)`` (cfg, dc, eta) fitting a 1-D ``schedule``."""
    if schedule.cfg.ndim != 1:
        raise ValueError("fit_schedule takes a single schedule (arrays of shape (nfe,))")
    rows = []
    for name in ("cfg", "dc", "eta"):
        lo, hi = getattr(bounds, name)
        rows.append(fit_bernstein(getattr(schedule, name), lo, hi, degree))
    return torch.stack(rows)


def _check_nfe(nfe: int) -> None:
    if not isinstance(nfe, int) or isinstance(nfe, bool) or nfe < 1:
        raise ValueError(f"nfe must be an integer >= 1, got {nfe!r}")
