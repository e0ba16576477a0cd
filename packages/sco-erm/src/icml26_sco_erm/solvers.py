"""ERM (exact, with a duality-gap certificate), projected GD in JAX, and a learner that generalizes.

The empirical objective of the instance f(x; V, xi) = a g_V(x) + alpha <xi, x> + lam/2 ||x||^2:

    Phi(x) = (a/m) sum_i max{theta, max_{w in V_i} <w, x>} + alpha <xi_bar, x> + lam/2 ||x||^2,
    minimised over the unit ball B.

* ``erm_exact``: epigraph QP in (x, t) solved by scipy SLSQP with cutting planes (only the pieces
  that become active are ever added); optimality is certified by a duality gap (``duality_gap``).
* ``erm_smoothed``: a second, independent solver: FISTA in JAX on the log-sum-exp smoothing of
  each max at temperature tau; its softmax weights give its own dual certificate.
* ``projected_gd``: full-batch projected subgradient descent x_{t+1} = Proj_B(x_t - eta grad Phi),
  jitted (lax.scan); bad eta is caught eagerly or, when traced, by checkify.
* ``sgd_learner``: one pass of projected SGD with averaging, step 1/sqrt(m): the algorithm whose
  excess risk is O(1/sqrt(m)) on *every* instance, i.e. learning is possible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify
from scipy.optimize import lsq_linear, minimize

from .instances import FeldmanInstance, Sample


# ------------------------------------------------------------------------------ dual certificate
@dataclass(frozen=True)
class Certificate:
    """Phi(x) - D(pi) >= Phi(x) - min Phi >= lam/2 ||x - x*||^2 (D(pi): a Lagrangian lower bound)."""

    value: float  # Phi(x)
    lower_bound: float  # D(pi) <= min_B Phi
    gap: float  # value - lower_bound >= 0
    distance_bound: float  # sqrt(2 gap / lam) >= ||x - x*|| (inf when lam = 0)


def _h(u: np.ndarray, lam: float) -> float:
    """min_{||x|| <= 1} <u, x> + lam/2 ||x||^2 (closed form)."""
    nu = float(np.linalg.norm(u))
    if lam > 0 and nu <= lam:
        return -(nu**2) / (2 * lam)
    return -nu + lam / 2


def lower_bound(inst: FeldmanInstance, S: Sample, pi0: np.ndarray, pis: list[np.ndarray]) -> float:
    """D(pi) = (a/m) sum_i pi_i0 theta + min_B <u, x> + lam/2 ||x||^2,  u = (a/m) sum pi_iw w + alpha xi_bar.

    pi0 (m,) are the weights on the constant piece theta, pis[i] (N,) those on the codewords of V_i
    (zero outside V_i); each pi_i0 + sum_w pi_iw must be 1. Any such pi gives D(pi) <= min Phi.
    """
    m = S.m
    P = np.stack(pis)  # (m, N)
    if np.any(P[~S.masks] != 0) or np.any(P < 0) or np.any(pi0 < 0):
        raise ValueError("pi must be non-negative and supported on each V_i")
    if not np.allclose(P.sum(1) + pi0, 1.0, rtol=1e-12, atol=0.0):
        raise ValueError("each pi_i must sum to 1")
    u = (inst.a / m) * (P.sum(0) @ inst.W) + inst.alpha * S.xi.mean(0)  # (d,)
    return float((inst.a / m) * inst.theta * pi0.sum() + _h(u, inst.lam))


def duality_gap(
    inst: FeldmanInstance,
    S: Sample,
    x: np.ndarray,
    active_tols: tuple[float, ...] = (1e-10, 1e-8, 1e-6, 1e-4),
) -> Certificate:
    """Certify x: dual weights on the pieces active at x (within a tolerance) fitted by NNLS to the
    stationarity condition 0 = (a/m) sum_i E_{pi_i}[w] + alpha xi_bar + (lam + mu) x, mu >= 0,
    then the gap Phi(x) - D(pi). Zero gap <=> x is an ERM (KKT). Every pi gives a valid bound,
    so the smallest gap over the tolerances is returned.
    """
    x = inst._check_x(x)
    S = inst._check_sample(S)
    certs = [_gap_at_tol(inst, S, x, tol) for tol in active_tols]
    return min(certs, key=lambda c: c.gap)


def _gap_at_tol(inst: FeldmanInstance, S: Sample, x: np.ndarray, active_tol: float) -> Certificate:
    m, a = S.m, inst.a
    s = inst.W @ x  # (N,)
    gi = inst.g(x, S)  # (m,)
    cols, owner, rows_const = [], [], []
    for i in range(m):
        idx = np.flatnonzero(S.masks[i] & (s >= gi[i] - active_tol))
        for j in idx:
            cols.append((a / m) * inst.W[j])
            owner.append((i, j))
        rows_const.append(gi[i] - inst.theta <= active_tol)
    n_w = len(cols)
    # unknowns: codeword weights (n_w), constant-piece weights (m), mu (1)
    d = inst.d
    rho = 1e3  # weight of the simplex rows
    A = np.zeros((d + m, n_w + m + 1))
    if n_w:
        A[:d, :n_w] = np.array(cols).T
    if np.linalg.norm(x) >= 1.0 - active_tol:  # the ball's multiplier mu only on the sphere
        A[:d, -1] = x
    for c, (i, _) in enumerate(owner):
        A[d + i, c] = rho
    for i in range(m):
        A[d + i, n_w + i] = rho if rows_const[i] else 0.0
    b = np.concatenate([-(inst.alpha * S.xi.mean(0) + inst.lam * x), rho * np.ones(m)])
    sol = lsq_linear(A, b, bounds=(0.0, np.inf), method="bvls", tol=1e-14)
    z = sol.x
    z[n_w : n_w + m][~np.array(rows_const)] = 0.0  # inactive constant pieces (zero columns)
    P = np.zeros((m, inst.N))
    for c, (i, j) in enumerate(owner):
        P[i, j] = z[c]
    pi0 = z[n_w : n_w + m].copy()
    tot = P.sum(1) + pi0
    for i in range(m):  # renormalise onto the simplex (any simplex point gives a valid bound)
        if tot[i] <= 0:
            pi0[i] = 1.0 if rows_const[i] else 0.0
            if not rows_const[i]:
                P[i, owner[[o[0] for o in owner].index(i)][1]] = 1.0
        else:
            P[i] /= tot[i]
            pi0[i] /= tot[i]
    lb = lower_bound(inst, S, pi0, list(P))
    val = inst.empirical_risk(x, S)
    gap = max(val - lb, 0.0)
    dist = math.sqrt(2 * gap / inst.lam) if inst.lam > 0 else math.inf
    return Certificate(value=val, lower_bound=lb, gap=gap, distance_bound=dist)


# ------------------------------------------------------------------------------ exact ERM (scipy)
@dataclass(frozen=True)
class ERMResult:
    x: np.ndarray  # (d,) the ERM
    certificate: Certificate
    unique: bool  # lam > 0: Phi is lam-strongly convex, so its minimiser is unique
    n_cuts: int  # codeword pieces the cutting-plane loop added
    rounds: int


def erm_exact(
    inst: FeldmanInstance, S: Sample, *, tol: float = 1e-10, max_rounds: int = 60
) -> ERMResult:
    """min_B Phi by SLSQP on the epigraph form, adding violated pieces t_i >= <w, x> as cuts.

    min_{x, t}  (a/m) sum_i t_i + alpha <xi_bar, x> + lam/2 ||x||^2
    s.t.        t_i >= theta,  t_i >= <w, x> (w in V_i, added when violated),  ||x||^2 <= 1.
    """
    S = inst._check_sample(S)
    m, d, a = S.m, inst.d, inst.a
    c = inst.alpha * S.xi.mean(0)  # (d,)
    cuts: list[tuple[int, int]] = []

    def fun(z: np.ndarray) -> float:
        x, t = z[:d], z[d:]
        return float((a / m) * t.sum() + c @ x + 0.5 * inst.lam * x @ x)

    def jac(z: np.ndarray) -> np.ndarray:
        x = z[:d]
        return np.concatenate([c + inst.lam * x, np.full(m, a / m)])

    z = np.concatenate([np.zeros(d), np.full(m, inst.theta)])
    Jt = np.concatenate([np.zeros((m, d)), np.eye(m)], axis=1)  # d t_i / d z
    rounds = 0
    for _ in range(max_rounds):
        rounds += 1
        ci = np.array([i for i, _ in cuts], dtype=np.int64)
        Wc = inst.W[np.array([j for _, j in cuts], dtype=np.int64)] if cuts else np.zeros((0, d))
        Jc = np.zeros((len(cuts), d + m))
        Jc[:, :d] = -Wc
        Jc[np.arange(len(cuts)), d + ci] = 1.0
        cons = [
            {"type": "ineq", "fun": lambda z: z[d:] - inst.theta, "jac": lambda z: Jt},
            {
                "type": "ineq",
                "fun": lambda z: np.atleast_1d(1.0 - z[:d] @ z[:d]),
                "jac": lambda z: np.concatenate([-2 * z[:d], np.zeros(m)])[None, :],
            },
        ]
        if cuts:
            cons.append(
                {
                    "type": "ineq",
                    "fun": lambda z, Wc=Wc, ci=ci: z[d + ci] - Wc @ z[:d],
                    "jac": lambda z, Jc=Jc: Jc,
                }
            )
        res = minimize(
            fun,
            z,
            jac=jac,
            constraints=cons,
            method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 2000},
        )
        z = res.x
        z[:d] /= max(1.0, float(np.linalg.norm(z[:d])))  # SLSQP may overshoot the ball by 1e-12
        # the cutting plane: pieces of V_i above (or within 1e-6 of) the epigraph variable t_i
        x, t = z[:d], z[d:]
        viol = np.where(S.masks, (inst.W @ x)[None, :] - t[:, None], -np.inf)  # (m, N)
        if viol.max() <= tol:
            break
        have = set(cuts)
        for i in range(m):
            order = np.argsort(viol[i])[::-1][:16]
            cuts += [(i, int(j)) for j in order if viol[i, j] > -1e-6 and (i, int(j)) not in have]
    x = z[:d]
    cert = duality_gap(inst, S, x)
    return ERMResult(x=x, certificate=cert, unique=inst.lam > 0, n_cuts=len(cuts), rounds=rounds)


# ------------------------------------------------------------------------------ JAX kernels
def _proj_ball(x: jax.Array, radius: jax.Array | float) -> jax.Array:
    return x * jnp.minimum(1.0, radius / jnp.maximum(jnp.linalg.norm(x), 1e-300))


def _subgrad(x, W, masks, xi_bar, theta, a, alpha, lam):
    """A subgradient of Phi at x: (a/m) sum_i w_{j_i}[active] + alpha xi_bar + lam x, (d,)."""
    s = W @ x  # (N,)
    masked = jnp.where(masks, s[None, :], -jnp.inf)  # (m, N)
    j = jnp.argmax(masked, axis=1)  # (m,)
    active = jnp.take_along_axis(masked, j[:, None], axis=1)[:, 0] > theta  # (m,)
    gw = jnp.where(active[:, None], W[j], 0.0)  # (m, d)
    return a * gw.mean(0) + alpha * xi_bar + lam * x


def _gd_kernel(W, masks, xi_bar, x0, eta, radius, theta, a, alpha, lam, T: int):
    checkify.check(eta > 0, "eta (step size) must be > 0, got {e}", e=eta)
    checkify.check(jnp.isfinite(eta), "eta (step size) must be finite, got {e}", e=eta)
    checkify.check(radius > 0, "radius must be > 0, got {r}", r=radius)

    def step(x, _):
        x = _proj_ball(x - eta * _subgrad(x, W, masks, xi_bar, theta, a, alpha, lam), radius)
        return x, x

    xT, xs = jax.lax.scan(step, x0, None, length=T)
    return xT, xs.mean(0)


_gd_checked = jax.jit(checkify.checkify(_gd_kernel), static_argnames=("T",))


def _concrete_float(v: object) -> float | None:
    """float(v) if v is concrete, None if it is a JAX tracer (validated at run time instead)."""
    try:
        return float(v)  # type: ignore[arg-type]
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def _raise(err: checkify.Error, traced: bool) -> None:
    if not traced:
        err.throw()
        return
    try:
        checkify.check_error(err)
    except ValueError as e:  # plain jax.jit: the run-time check cannot be staged
        raise ValueError(
            "eta/radius are traced under jax.jit, so they are validated at run time: wrap the "
            "jitted function in jax.experimental.checkify.checkify(...) (then err.throw()), "
            "or pass eta as a Python float"
        ) from e


def projected_gd(
    inst: FeldmanInstance,
    S: Sample,
    eta: float,
    T: int,
    *,
    radius: float = 1.0,
    x0: np.ndarray | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Full-batch projected subgradient descent on Phi: x_{t+1} = Proj_{radius B}(x_t - eta g_t).

    Returns (x_T, mean of x_1..x_T). Deterministic subgradient: the first maximising piece.
    eta may be traced (jax.jit over eta, vmap over step sizes); it is then checked by checkify.
    """
    S = inst._check_sample(S)
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T (horizon) must be a positive integer, got {T!r}")
    e, r = _concrete_float(eta), _concrete_float(radius)
    for name, v in (("eta (step size)", e), ("radius", r)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v}")
    x0 = np.zeros(inst.d) if x0 is None else inst._check_x(np.asarray(x0), "x0")
    err, out = _gd_checked(
        jnp.asarray(inst.W),
        jnp.asarray(S.masks),
        jnp.asarray(S.xi.mean(0)),
        jnp.asarray(x0),
        jnp.asarray(eta, dtype=jnp.result_type(float)),
        jnp.asarray(radius, dtype=jnp.result_type(float)),
        inst.theta,
        inst.a,
        inst.alpha,
        inst.lam,
        T=int(T),
    )
    _raise(err, traced=e is None or r is None)
    return out


# ------------------------------------------------------------------------------ smoothed ERM (JAX)
@jax.jit
def _smoothed_value(x, W, masks, xi_bar, theta, a, alpha, lam, tau):
    s = W @ x  # (N,)
    z = jnp.where(masks, s[None, :] / tau, -jnp.inf)  # (m, N)
    z = jnp.concatenate([jnp.full((masks.shape[0], 1), theta / tau), z], axis=1)  # (m, N + 1)
    lse = tau * jax.scipy.special.logsumexp(z, axis=1)  # (m,)
    return a * lse.mean() + alpha * xi_bar @ x + 0.5 * lam * x @ x


def _fista_kernel(W, masks, xi_bar, theta, a, alpha, lam, tau, iters: int):
    L = a / tau + lam  # the Hessian of tau * LSE(Wx / tau) is <= max ||w||^2 / tau = 1 / tau
    grad = jax.grad(_smoothed_value)

    def step(carry, _):
        x, y, t = carry
        x_new = _proj_ball(y - grad(y, W, masks, xi_bar, theta, a, alpha, lam, tau) / L, 1.0)
        t_new = (1 + jnp.sqrt(1 + 4 * t * t)) / 2
        y_new = x_new + ((t - 1) / t_new) * (x_new - x)
        return (x_new, y_new, t_new), None

    x0 = jnp.zeros(W.shape[1])
    (x, _, _), _ = jax.lax.scan(step, (x0, x0, jnp.asarray(1.0)), None, length=iters)
    return x


_fista = jax.jit(_fista_kernel, static_argnames=("iters",))


def _x64():  # jax.enable_x64 (jax >= 0.6) or jax.experimental.enable_x64 (older)
    ctx = getattr(jax, "enable_x64", None)
    if ctx is not None:
        return ctx(True)
    from jax.experimental import enable_x64  # type: ignore[attr-defined]

    return enable_x64()


def erm_smoothed(
    inst: FeldmanInstance, S: Sample, *, tau: float = 1e-4, iters: int = 20000
) -> tuple[np.ndarray, Certificate]:
    """A second ERM solver: FISTA on Phi_tau (each max replaced by tau * logsumexp(. / tau)).

    0 <= Phi_tau - Phi <= a tau log(max_i |V_i| + 1), so x_tau is an ERM up to that much. Its
    certificate uses the softmax weights at x_tau as the dual pi (no active-set guess).
    """
    S = inst._check_sample(S)
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau (smoothing temperature) must be > 0, got {tau}")
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 1:
        raise ValueError(f"iters must be a positive integer, got {iters!r}")
    xi_bar = S.xi.mean(0)
    consts = (inst.theta, inst.a, inst.alpha, inst.lam, float(tau))
    with _x64():  # a certification tool: float64 so that its gap is not float32 round-off
        args = (
            jnp.asarray(inst.W, dtype=jnp.float64),
            jnp.asarray(S.masks),
            jnp.asarray(xi_bar, dtype=jnp.float64),
        )
        x = np.array(_fista(*args, *consts, iters=int(iters)), dtype=np.float64)
    x /= max(1.0, float(np.linalg.norm(x)))
    # dual weights: softmax over {theta} u V_i at x
    s = inst.W @ x
    z = np.where(S.masks, s[None, :] / tau, -np.inf)
    z0 = np.full((S.m, 1), inst.theta / tau)
    zz = np.concatenate([z0, z], axis=1)
    zz -= zz.max(1, keepdims=True)
    w = np.exp(zz)
    w /= w.sum(1, keepdims=True)
    lb = lower_bound(inst, S, w[:, 0], list(w[:, 1:]))
    val = inst.empirical_risk(x, S)
    gap = max(val - lb, 0.0)
    dist = math.sqrt(2 * gap / inst.lam) if inst.lam > 0 else math.inf
    return x, Certificate(value=val, lower_bound=lb, gap=gap, distance_bound=dist)


# ------------------------------------------------------------------------------ the learner
def sgd_learner(inst: FeldmanInstance, S: Sample, *, eta: float | None = None) -> np.ndarray:
    """One pass of projected SGD over the sample, averaged: x_bar = (1/m) sum_t x_t.

    x_{t+1} = Proj_B(x_t - eta grad f(x_t; z_t)), eta = 1/sqrt(m) by default. For any convex
    1-Lipschitz f on B started at the population minimiser 0, online-to-batch conversion gives
    E F(x_bar) - F* <= ||x_0 - x*||^2 / (2 eta m) + eta / 2 = 1 / (2 sqrt(m)), dimension-free:
    learning is possible on every instance of this family (x_bar averages x_0 .. x_{m-1}).
    """
    S = inst._check_sample(S)
    m = S.m
    step = 1.0 / math.sqrt(m) if eta is None else float(eta)
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"eta (step size) must be a finite number > 0, got {eta}")
    x = np.zeros(inst.d)
    total = np.zeros(inst.d)
    for i in range(m):
        total += x
        one = Sample(masks=S.masks[i : i + 1], xi=S.xi[i : i + 1])
        x = x - step * inst.subgradients(x, one)[0]
        x /= max(1.0, float(np.linalg.norm(x)))
    return total / m
