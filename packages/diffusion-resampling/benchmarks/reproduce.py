"""The official LGSSM experiment of diffres (experiments/lgssm), paired, reduced Monte Carlo size.

Model (diffres's experiments/lgssm/*.py): x_k = θ₁ x_{k-1} + N(0, 1), y_k = θ₂ x_k + N(0, 0.5),
x_0 ~ N(0, 1), θ* = (0.5, 1.0), K = 128 steps, N = 32 particles, resampling at every step,
float64. θ₂ is the observation coefficient (H), the transition variance is 1.

Metrics, each against the Kalman filter on the same data set (the official ones):
  * ll_mse : mean over a G × G grid of (θ₁, θ₂) in [0.4, 0.6] × [0.9, 1.1] of the squared error
             of the filter's log-likelihood (official: 128 × 128 grid); RMSE = sqrt(mean);
  * kl, bures: mean over k of KL / Bures–Wasserstein between the Gaussian fitted to the weighted
             particles and the Kalman filtering marginal at θ*;
  * grad_var (extra): trace of the covariance of ∇θ log p̂(y) at θ* across S filter seeds.

Design: every method is tuned on R_tune *held-out* data sets (own seeds) by ll_mse, over its
official sweep (run_lgssm.sh) extended where the optimum sat on an edge (issue 61); the chosen
setting is evaluated on R fresh data sets with the same filter seed for every method (paired).
Reported: per-method means and paired differences (diffusion − baseline) with exact 95%
t-intervals across data sets (icml26_kernels.evidence). Sweeps, the same in --quick and the
full run: diffusion a = −1, T ∈ {.125, .25, .5, 1, 2, 3} × n_steps ∈ {4, 8, 16, 32, 64}, Euler
probability-flow ODE; soft α ∈ {.5, .7, .9}; Gumbel τ ∈ {.1, .3, .5, .7, 1}; OT
ε ∈ {.1, .2, .4, .8, 1.6}; multinomial (not differentiable) for reference. The row compares
diffusion with the baseline of best held-out score (not chosen on the evaluation sets); its
``evidence`` (tuning scores at every grid point, one comparison per baseline and metric) is
rebuilt from the detailed JSON by ``--row-from``. Sizes (SIZES): --quick tunes on 8 sets (2 × 2
grid) and evaluates on 48 (2 × 2), 16 gradient seeds; the full run 16 (3 × 3), 100 (4 × 4), 50.
Not run: the official L-BFGS parameter fits, the SDE / other-integrator diffusion variants.

Compilation is counted and amortised: each method configuration is compiled once for a fixed
batch of CHUNK (hyper-parameter, data set) pairs, and the same executable serves the tuning and
the evaluation data sets (same grid size in --quick). The methods run in --workers processes
(default 2, spawned, XLA single-threaded in each); every method's numbers are computed the same
way whatever the number of workers, so the JSON does not depend on it. The JSON records the
compile and run CPU seconds of every method and the machine.

Prints progress to stderr, one JSON line on stdout, and writes reproduce_quick.json (--quick) or
reproduce.json (full) next to this file, so a quick run never overwrites the full one.
"""

from __future__ import annotations

import os

# one XLA thread per process (N = 32: the ops are too small to share), set before jax loads;
# the worker processes inherit it
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import argparse
import functools
import importlib.util
import json
import multiprocessing as mp
import pathlib
import platform
import resource
import sys
import time


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="reduced sizes (about 2 min, 2 cores)")
    ap.add_argument("--workers", type=int, default=2, help="processes (1: serial, in-process)")
    ap.add_argument(
        "--row-from",
        type=pathlib.Path,
        help="print the row rebuilt from a stored detailed JSON (no rerun)",
    )
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        default=None,
        help="write the detailed JSON here (default: benchmarks/reproduce[_quick].json)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
from icml26_diffusion_resampling import (
    LGSSMParams,
    LinearGaussianSSM,
    diffusion_resample,
    gaussian_marginal_distances,
    gumbel_softmax_resample,
    kalman_filter,
    multinomial_resample,
    ot_resample,
    particle_filter,
    soft_resample,
)

HERE = pathlib.Path(__file__).resolve().parent


def _kernels_module(name: str):
    """icml26_kernels.<name> (the dev group installs icml26-kernels from the workspace)."""
    return importlib.import_module(f"icml26_kernels.{name}")


_ev = _kernels_module("evidence")
comparison, evidence, headroom, pin_threads, tuned = (
    _ev.comparison,
    _ev.evidence,
    _ev.headroom,
    _ev.pin_threads,
    _ev.tuned,
)

MODEL = LinearGaussianSSM()
THETA_TRUE = jnp.array([0.5, 1.0])
N_PARTICLES, N_STEPS = 32, 128
CHUNK = 8  # (hyper-parameter, data set) pairs per compiled call
# diffusion n_steps: the official sweep 4..32 (in --quick too) and 64; T: official 1, 2, 3 and
# 0.125..0.5 (quick runs picked T = 1 of {1, 2, 3}, then T = 0.5 at 32 steps of {.5, 1, 2, 3}
# x {4, .., 32}: each an edge, so both grids were extended)
STEPS = (4, 8, 16, 32, 64)
T_GRID = (0.125, 0.25, 0.5, 1.0, 2.0, 3.0)
SOFT_GRID = (0.5, 0.7, 0.9)
GUMBEL_GRID = (0.1, 0.3, 0.5, 0.7, 1.0)  # official .1, .3, .5; τ = .5 was the top
OT_GRID = (0.1, 0.2, 0.4, 0.8, 1.6)  # official .4, .8, 1.6; ε = .4 was the bottom
# R_tune held-out tuning sets (grid G_tune), R evaluation sets (grid G), S gradient seeds
SIZES = {
    True: dict(R_tune=8, G_tune=2, R=48, G=2, S=16),
    False: dict(R_tune=16, G_tune=3, R=100, G=4, S=50),
}


def log(*a):
    """Progress on stderr, per arm (off with --quiet; the spawned workers read it from the env)."""
    if not os.environ.get("DR_REPRO_QUIET"):
        print(*a, file=sys.stderr, flush=True)


def lgssm(theta):
    f = lambda v: jnp.reshape(jnp.asarray(v, jnp.float64), (1, 1))
    return LGSSMParams(f(theta[0]), f(1.0), f(theta[1]), f(0.5), jnp.zeros(1), f(1.0))


def methods(quick):
    """name -> list of (label, static config, traced hyper-parameter); the same grids in
    --quick and the full run (only the data sizes differ)."""
    diff = [(f"T={T:g},steps={s}", ("diffusion", s), T) for s in STEPS for T in T_GRID]
    return {
        "diffusion": diff,
        "soft": [(f"alpha={v}", ("soft", 0), v) for v in SOFT_GRID],
        "gumbel": [(f"tau={v}", ("gumbel", 0), v) for v in GUMBEL_GRID],
        "ot": [(f"eps={v}", ("ot", 0), v) for v in OT_GRID],
        "multinomial": [("-", ("multinomial", 0), 0.0)],
    }


def make_resampler(static, hp):
    kind, steps = static
    if kind == "diffusion":
        return lambda k, lw, x: diffusion_resample(k, lw, x, a=-1.0, T=hp, n_steps=steps)
    if kind == "soft":
        return lambda k, lw, x: soft_resample(k, lw, x, alpha=hp)
    if kind == "gumbel":
        return lambda k, lw, x: gumbel_softmax_resample(k, lw, x, tau=hp)
    if kind == "ot":
        return lambda k, lw, x: ot_resample(k, lw, x, epsilon=hp, max_iterations=500)
    return multinomial_resample


def pf(static, hp, theta, ys, key):
    res = make_resampler(static, hp)
    return particle_filter(key, MODEL, lgssm(theta), ys, n_particles=N_PARTICLES, resampler=res)


def grid_of(g):
    g1, g2 = jnp.meshgrid(jnp.linspace(0.4, 0.6, g), jnp.linspace(0.9, 1.1, g), indexing="ij")
    return jnp.stack([g1.ravel(), g2.ravel()], axis=1)  # (g², 2)


@functools.cache
def data(seed, key_seed, r, g):
    """grid (g², 2), r data sets (r, K, 1) from `seed`, r filter keys (r, 2) from `key_seed`,
    and the exact Kalman log-likelihoods (r, g²); computed once per process."""
    keys = jax.random.split(jax.random.PRNGKey(seed), r)
    sets = _simulate(keys)
    grid = grid_of(g)
    return grid, sets, jax.random.split(jax.random.PRNGKey(key_seed), r), _kalman_lls(grid, sets)


@jax.jit
def _simulate(keys):
    return jax.vmap(lambda k: MODEL.simulate(k, lgssm(THETA_TRUE), N_STEPS)[1])(keys)


@jax.jit
def _kalman_lls(grid, datasets):
    kf = lambda ys: jax.vmap(lambda th: kalman_filter(lgssm(th), ys).log_likelihood)(grid)
    return jax.vmap(kf)(datasets)


class Clock:
    """Process CPU seconds (all threads), split into compilation and execution."""

    def __init__(self):
        self.compile_s = 0.0
        self.run_s = 0.0

    def compile(self, fn, *args):
        t = time.process_time()
        out = jax.jit(fn).lower(*args).compile()
        self.compile_s += time.process_time() - t
        return out

    def run(self, compiled, *args):
        t = time.process_time()
        out = jax.block_until_ready(compiled(*args))
        self.run_s += time.process_time() - t
        return out


def chunk_metrics(static, hps, grid, ys, keys, kf_lls):
    """CHUNK pairs: hps (C,), ys (C, K, 1), keys (C, 2), kf_lls (C, G²) -> 4 × (C,):
    ll_mse, ll_bias over the grid, KL and Bures of the filtering marginals at θ*."""

    def one(hp, ys, key, kf_ll):
        lls = jax.vmap(lambda th: pf(static, hp, th, ys, key).log_likelihood)(grid)
        out = pf(static, hp, THETA_TRUE, ys, key)
        kl, bw = gaussian_marginal_distances(out, kalman_filter(lgssm(THETA_TRUE), ys))
        err = lls - kf_ll
        return jnp.mean(err**2), jnp.mean(err), kl, bw

    return jax.vmap(one)(hps, ys, keys, kf_lls)


def evaluate(clock, cache, configs, data):
    """Metrics of every config on every data set: per config a dict of (R,) arrays.

    data = (grid (G², 2), datasets (R, K, 1), keys (R, 2), kf_lls (R, G²)). The (config, data
    set) pairs of one static config run in batches of CHUNK through one compiled executable,
    reused for every call with the same static config and grid size (tuning and evaluation).
    """
    grid, datasets, keys, kf_lls = data
    r = datasets.shape[0]
    out = [dict(ll_mse=[], ll_bias=[], kl=[], bures=[]) for _ in configs]
    by_static: dict = {}
    for i, (_, static, hp) in enumerate(configs):
        by_static.setdefault(static, []).extend((i, hp, j) for j in range(r))
    for static, pairs in by_static.items():
        pad = pairs + [pairs[-1]] * (-len(pairs) % CHUNK)
        for c in range(0, len(pad), CHUNK):
            part = pad[c : c + CHUNK]
            idx = np.array([j for _, _, j in part])
            args = (
                jnp.asarray([hp for _, hp, _ in part], jnp.float64),
                grid,
                datasets[idx],
                keys[idx],
                kf_lls[idx],
            )
            ck = (static, grid.shape)
            if ck not in cache:
                cache[ck] = clock.compile(lambda *a, s=static: chunk_metrics(s, *a), *args)
            vals = clock.run(cache[ck], *args)
            for q, (i, _, _) in enumerate(part[: len(pairs) - c]):
                for name, v in zip(("ll_mse", "ll_bias", "kl", "bures"), vals):
                    out[i][name].append(float(v[q]))
    return [{k: np.asarray(v) for k, v in o.items()} for o in out]


def run_method(task):
    """One method: tune on the held-out sets, evaluate the chosen setting, gradient variance.

    Runs in a worker process; returns plain Python / numpy data only.
    """
    name, quick = task
    t_wall = time.time()
    sizes = SIZES[quick]
    configs = methods(quick)[name]
    clock, cache = Clock(), {}
    res = evaluate(clock, cache, configs, data(1000, 1001, sizes["R_tune"], sizes["G_tune"]))
    scores = [float(np.mean(r["ll_mse"])) for r in res]
    best = configs[int(np.argmin(scores))]
    evaluation = data(2026, 7, sizes["R"], sizes["G"])
    ev = evaluate(clock, cache, [best], evaluation)[0]
    out = dict(
        name=name,
        setting=best[0],
        tuning={c[0]: round(v, 4) for c, v in zip(configs, scores)},
        per_set={k: v.tolist() for k, v in ev.items()},
    )
    if name != "multinomial":  # gradient variance at θ* on the first evaluation set
        _, static, hp = best
        grad_keys = jax.random.split(jax.random.PRNGKey(11), sizes["S"])
        ys0 = evaluation[1][0]
        grads = jax.vmap(
            jax.grad(lambda th, k: pf(static, hp, th, ys0, k).log_likelihood), in_axes=(None, 0)
        )
        g = np.asarray(
            clock.run(clock.compile(grads, THETA_TRUE, grad_keys), THETA_TRUE, grad_keys)
        )
        out["grad_var"] = float(np.trace(np.cov(g.T)))
        out["grad_mean"] = g.mean(0).tolist()
    if name == "diffusion":  # the exact gradient on the same data set, for reference
        kf = jax.grad(lambda th: kalman_filter(lgssm(th), evaluation[1][0]).log_likelihood)
        out["kalman_grad"] = np.asarray(kf(THETA_TRUE)).tolist()
    out["cpu_s"] = dict(compile=round(clock.compile_s, 1), run=round(clock.run_s, 1))
    out["compiles"] = len(cache) + (name != "multinomial")
    out["wall_s"] = round(time.time() - t_wall, 1)
    log(f"{name:12s} {out['wall_s']:6.1f}s wall, cpu {out['cpu_s']}, -> {best[0]}  {out['tuning']}")
    return out


def machine():
    """The machine: icml26_kernels.provenance.machine_info (imported, or loaded by path from
    shared-kernels when this env does not install icml26-kernels)."""
    try:
        from icml26_kernels.provenance import machine_info
    except ImportError:
        path = HERE.parents[2] / "shared-kernels/src/icml26_kernels/provenance.py"
        if not path.is_file():
            return dict(cpu=platform.processor() or platform.machine(), logical_cpus=os.cpu_count())
        spec = importlib.util.spec_from_file_location("_icml26_provenance", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        machine_info = mod.machine_info
    return machine_info()


def children_cpu():
    """user + sys CPU seconds of the finished worker processes."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def mean_se(v):
    v = np.asarray(v, float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v)))


def main():
    args = _parser().parse_args()
    if args.quiet:
        os.environ["DR_REPRO_QUIET"] = "1"  # inherited by the worker processes
    if args.row_from:
        print(json.dumps(row_from(args.row_from), ensure_ascii=False))
        return
    # one BLAS/OpenMP thread per process (XLA is single-threaded above); workers inherit it
    threads = pin_threads(1)
    t0, c0 = time.time(), time.process_time()
    sizes = SIZES[args.quick]
    log(
        f"tune on {sizes['R_tune']} held-out sets ({sizes['G_tune']}x{sizes['G_tune']} grid); "
        f"evaluate on {sizes['R']} ({sizes['G']}x{sizes['G']}); {args.workers} worker(s)"
    )
    names = list(methods(args.quick))
    # heaviest first, so the two workers finish together
    tasks = [(n, args.quick) for n in ("diffusion", "ot", "gumbel", "soft", "multinomial")]
    if args.workers > 1:
        pool = mp.get_context("spawn").Pool(args.workers)
        done = pool.map(run_method, tasks, chunksize=1)
        pool.close()
        pool.join()  # reaped: their CPU time is in RUSAGE_CHILDREN below
    else:
        done = [run_method(t) for t in tasks]
    by_name = {d["name"]: d for d in done}
    evals = {n: {k: np.asarray(v) for k, v in by_name[n]["per_set"].items()} for n in names}

    results, tuning, timing = {}, {}, {}
    for name in names:
        e, d = evals[name], by_name[name]
        tuning[name] = d["tuning"]
        timing[name] = dict(cpu_s=d["cpu_s"], wall_s=d["wall_s"], compiles=d["compiles"])
        results[name] = dict(
            setting=d["setting"],
            ll_rmse=float(np.sqrt(np.mean(e["ll_mse"]))),
            ll_mse=mean_se(e["ll_mse"]),
            ll_bias=mean_se(e["ll_bias"]),
            kl=mean_se(e["kl"]),
            bures=mean_se(e["bures"]),
            per_set={k: v.tolist() for k, v in e.items()},
        )
        if "grad_var" in d:
            results[name]["grad_var"] = d["grad_var"]
            results[name]["grad_mean"] = d["grad_mean"]
        if name != "diffusion":
            results[name]["diff_vs_diffusion"] = {
                m: mean_se(evals["diffusion"][m] - e[m]) for m in ("ll_mse", "kl", "bures")
            }
    results["kalman_grad"] = by_name["diffusion"]["kalman_grad"]
    for name in names:
        log(name, json.dumps({k: v for k, v in results[name].items() if k != "per_set"}))

    seconds = round(time.time() - t0, 1)
    cpu_children = sum(t["cpu_s"]["compile"] + t["cpu_s"]["run"] for t in timing.values())
    full = dict(
        package="diffusion-resampling",
        seconds=seconds,
        quick=args.quick,
        sizes=sizes,
        chunk=CHUNK,
        workers=args.workers,
        threads=threads,
        timing=dict(
            wall_s=seconds,
            cpu_s=round(time.process_time() - c0 + children_cpu(), 1),
            main_process_cpu_s=round(time.process_time() - c0, 1),
            methods_cpu_s=round(cpu_children, 1),
            compile_cpu_s=round(sum(t["cpu_s"]["compile"] for t in timing.values()), 1),
            per_method=timing,
        ),
        tuning=tuning,
        results=results,
        machine=machine(),
    )
    name = "reproduce_quick.json" if args.quick else "reproduce.json"
    out = args.out or HERE / name
    out.write_text(json.dumps(full, indent=1))  # the raw run first, then the row
    line = summarise(full)
    # the detailed JSON holds every value the row's evidence is built from (tuning scores at
    # every grid point, per-set metrics) and, beside the claim that owns its grid edges, the
    # row's evidence object (the lint reads a detailed JSON's evidence with its own claim)
    full = dict(line, **{k: v for k, v in full.items() if k not in line})
    out.write_text(json.dumps(full, indent=1, ensure_ascii=False))
    print(json.dumps(line))


# ------------------------------------------------------------------ the row, from the JSON

METRICS = {  # metric -> (label in the claim, printed decimals)
    "ll_mse": ("LL MSE", 2),
    "kl": ("KL", 4),
    "bures": ("Bures", 4),
}


def _grid_point(label: str) -> dict[str, float]:
    """'T=1,steps=8' -> {'T': 1.0, 'steps': 8.0}; 'eps=0.4' -> {'eps': 0.4}."""
    return {k: float(v) for k, v in (kv.split("=") for kv in label.split(","))}


def tuning_evidence(tuning: dict) -> list[dict]:
    """One ``tuned`` entry per hyper-parameter per arm, validation LL MSE at every grid point.

    Diffusion's grid is the product T × n_steps: each parameter's entry is the profile through
    the joint optimum (the scores over T at the chosen n_steps, and over n_steps at the chosen
    T), so its chosen value is the joint argmin.
    """
    out = []
    objective = "mean LL MSE vs Kalman on the held-out tuning sets (lower is better)"
    for arm, scores in tuning.items():
        points = {lab: _grid_point(lab) for lab in scores if lab != "-"}
        if not points:
            continue  # multinomial: nothing to tune
        best = min(points, key=lambda lab: scores[lab])
        for param in points[best]:
            rest = {k: v for k, v in points[best].items() if k != param}
            line = [lab for lab, pt in points.items() if all(pt[k] == v for k, v in rest.items())]
            line.sort(key=lambda lab: points[lab][param])
            grid = [points[lab][param] for lab in line]
            grid = [int(g) if param == "steps" else g for g in grid]
            d = tuned(
                arm,
                param,
                grid,
                [scores[lab] for lab in line],
                objective=objective,
                higher_is_better=False,
            )
            if arm == "soft" and param == "alpha" and d["chosen"] == max(grid):
                d["hard_bound"] = "alpha <= 1 (alpha = 1 is multinomial resampling)"
            out.append(d)
    return out


def summarise(full: dict) -> dict:
    """The row (claim, ours/baseline/ratio, evidence) from a run's detailed JSON.

    ours/baseline/ratio: diffusion's and the best tuned baseline's mean LL MSE on the
    evaluation sets (the statistic the paired difference tests; ratio = ours/baseline). The
    baseline compared is the one with the best held-out tuning score.
    """
    res, tuning, sizes = full["results"], full["tuning"], full["sizes"]
    baselines = ("soft", "gumbel", "ot")
    best_base = min(baselines, key=lambda b: min(tuning[b].values()))
    ev_d = {m: np.asarray(res["diffusion"]["per_set"][m]) for m in METRICS}
    comps, parts = [], []
    for b in baselines:
        ev_b = {m: np.asarray(res[b]["per_set"][m]) for m in METRICS}
        for m, (label, dec) in METRICS.items():
            c = comparison(
                f"diffusion - {b}: {label}",
                f"paired difference of the per-data-set {label} vs the Kalman filter "
                "(diffusion - baseline; negative: diffusion better)",
                ev_d[m] - ev_b[m],
                target=None,
                target_source="the paper states the direction only (its tables were not "
                "retrieved): diffusion beats soft, Gumbel and OT",
                headroom=headroom(
                    0.0, float(ev_b[m].mean()), f"{label} = 0: the exact Kalman filter"
                ),
                unit="nats^2" if m == "ll_mse" else "",
                higher_is_better=False,
            )
            comps.append(c)
            if b == best_base:
                lo, hi = c["ci95"]
                if not c["resolved"]:
                    verdict = "unresolved"
                elif hi < 0:
                    verdict = "diffusion better"
                else:
                    verdict = f"{b} better, against the paper"
                parts.append(
                    f"{label} {c['diff']:+.{dec}f} [{lo:+.{dec}f}, {hi:+.{dec}f}] ({verdict})"
                )
    tune = tuning_evidence(tuning)
    edges = [
        t
        for t in tune
        if t["hard_bound"] is None and t["chosen"] in (min(t["grid"]), max(t["grid"]))
    ]
    for t in edges:
        t["edge_note"] = (
            f"{t['arm']}.{t['param']} = {t['chosen']} is the edge of the grid {t['grid']}, "
            "extended twice in issue 61 (each time the optimum moved to the new edge; the "
            "held-out score still improves toward it); not extended again on shared cores "
            "before the deadline, so this arm is reported at its grid edge, not as tuned"
        )
    ours = float(ev_d["ll_mse"].mean())
    base = float(np.mean(res[best_base]["per_set"]["ll_mse"]))
    R = sizes["R"]
    edge_arms = {t["arm"] for t in edges}
    diff_desc = res["diffusion"]["setting"]
    if "diffusion" in edge_arms:
        diff_desc += (
            ", at a grid edge: held-out LL MSE still falls toward it, so not tuned to its optimum"
        )
        if "grad_var" in res["diffusion"]:
            diff_desc += (
                f"; gradient variance {res['diffusion']['grad_var']:.0f} vs "
                f"{best_base}'s {res[best_base].get('grad_var', float('nan')):.0f}"
            )
    base_desc = res[best_base]["setting"] + (", grid edge" if best_base in edge_arms else "")
    interior = not any(t["arm"] != "diffusion" for t in edges)
    claim = (
        f"official LGSSM (H=θ2, Q=1, float64), N=32, K=128, {R} paired data sets: diffusion "
        f"({diff_desc}) vs the best baseline on held-out sets ({best_base}, {base_desc}"
        + ("; every baseline's optimum interior" if interior else "")
        + f"); ours/baseline = mean LL MSE vs Kalman; paired diffusion - {best_base}, 95% CI: "
        + "; ".join(parts)
    )
    if edges:
        claim += "; grid edge: " + ", ".join(
            f"{t['arm']} {t['param']}={t['chosen']}" for t in edges
        )
    return {
        "package": "diffusion-resampling",
        "claim": claim,
        "paper": (
            "Sec. 5 LGSSM: diffusion resampling beats soft, Gumbel and OT resampling "
            "on loss RMSE, KL, Bures and parameter estimation (tables not retrieved)"
        ),
        "ours": round(ours, 4),
        "baseline": round(base, 4),
        "ratio": round(ours / base, 4),
        "seconds": full["seconds"],
        "evidence": evidence(comps, tune),
    }


def row_from(path: pathlib.Path) -> dict:
    """Rebuild the row from a stored detailed JSON without rerunning anything."""
    return summarise(json.loads(path.read_text()))


if __name__ == "__main__":
    main()
