"""Reproduce the paper's claims at small scale (2-core CPU); prints one JSON line on stdout.

Three experiments, every draw seeded (rerunning gives the same numbers):

  A. Feldman level, d = 6m, certified code of relative distance 1/4: the frequency (over samples)
     that an ERM with excess population risk 1/4 exists (an unseen codeword), beside its exact
     probability 1 - (1 - 2^-m)^N, and the paired excess risk of one-pass SGD (the learner that
     generalizes) on the same samples.
  B. Unique ERM, certified. The paper's perturbation could not be read, so this runs the [recon]
     control alpha <xi, x> + lam/2 ||x||^2 (lam = m^-1.5, alpha = 1/2), which cannot reach a
     cap deeply (its noise direction is independent of which codewords are unseen; a tail sample
     can graze one: 1 of 400 at m = 8 in the full mode, excess <= 0.032), and an
     oracle ceiling (noise aimed at an unseen codeword after seeing S; not an SCO distribution)
     that shows the certificate does detect overfitting when the ERM sits in a cap. For every
     sample the strongly convex ERM is solved and certified (duality gap -> ball of radius
     sqrt(2 gap / lam) around x*); "overfits" means the whole ball lies in {F - F* >= 0.1}.
     Wilson 95% intervals against the paper's 1/2; the best correlation of -xi_bar with an unseen
     codeword (the structural reason) beside sqrt(2 ln(N_u + 1) / d).
  C. Projected full-batch GD in float64 on the same [recon] instance, eta T on the paper's window
     [sqrt(m), m^1.5] at m = 8, 10, 12, 14: c_m = min over the window of the mean generalization
     gap F(x_T) - F_S(x_T) divided by sqrt(eta T / m^1.5), with a bootstrap interval, and the
     exponent of c_m in m (0 for a uniform constant c, as the paper's bound needs).

    python benchmarks/reproduce.py --quick      # < 2 minutes on 2 cores
    python benchmarks/reproduce.py              # more draws, more GD samples (~1100 CPU-s)
    python benchmarks/reproduce.py --part B --m 14   # the full mode in parts (A, B per m; C
        # whole) into benchmarks/reproduce_parts/, resumable; reproduce.json once all 11 are there
    python benchmarks/reproduce.py --row-from benchmarks/reproduce_quick.json   # the row, no rerun

Intervals come from icml26_kernels.evidence (Wilson with the exact normal quantile, exact t);
the row's ``evidence`` holds one comparison per proportion the claim prints (Wilson, with
``interval=``, ``n=``, ``sd=`` the Bernoulli SD): A per m against its closed form (the reference,
no ceiling), B's [recon] control per m and pooled against the paper's 1/2 with the oracle arm's
rate as its measured ceiling.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="fewer draws (< 2 min, 2 cores)")
    ap.add_argument("--row-from", type=Path, help="print the row rebuilt from a stored JSON")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the JSON here, the GD figure beside it as <stem>_gd.png "
        "(default: benchmarks/reproduce[_quick].json)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument(
        "--part",
        choices=PARTS,
        help="full mode in parts: run one experiment (A and B per m, see --m; C whole, its "
        "bootstrap runs over every m) into <out stem>_parts/<part>_<m>.json; once every part "
        "is there the full JSON is assembled from them (the same numbers as one unsplit run)",
    )
    ap.add_argument(
        "--m", type=int, action="append", help="with --part A or B: only this m (repeatable)"
    )
    return ap


PARTS = ("A", "B", "C")
MS = [6, 8, 10, 12, 14]  # A and B
MS_C = [8, 10, 12, 14]


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import icml26_sco_erm as sco
import jax
import numpy as np

HERE = Path(__file__).resolve().parent


def _kernels_module(name: str):
    """icml26_kernels.<name> (the dev group installs icml26-kernels from the workspace)."""
    return importlib.import_module(f"icml26_kernels.{name}")


_ev = _kernels_module("evidence")


QUIET = False  # --quiet: no progress lines


def log(*a: object) -> None:
    if not QUIET:
        print(*a, file=sys.stderr, flush=True)


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of k/n (icml26_kernels.evidence)."""
    _, lo, hi = _ev.wilson(k, n)
    return lo, hi


def mean_ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its exact 95% t-interval (icml26_kernels.evidence)."""
    m, lo, hi = _ev.t_interval(np.asarray(x, dtype=float))
    return m, (hi - lo) / 2


def code_for(m: int) -> tuple[np.ndarray, int, int]:
    d, k = sco.paper_dimension(m), sco.code_dimension(m)
    _, C, dist = sco.good_code(d, k, np.random.default_rng(1000 + m))
    return C, k, dist


# ----------------------------------------------------------------------------- A: Feldman level
def experiment_a(ms: list[int], draws: int, sgd_draws: int) -> list[dict]:
    out = []
    for m in ms:
        C, k, dist = code_for(m)
        inst = sco.FeldmanInstance.from_code(C)
        rng = np.random.default_rng(m)
        hit, sgd_excess, erm_excess = 0, [], []
        for r in range(draws):
            S = inst.sample(m, rng)
            unseen = inst.unseen(S)
            if r < sgd_draws:  # the learner on the first sgd_draws samples (paired with the ERM)
                sgd_excess.append(inst.excess_risk(sco.sgd_learner(inst, S)))
            if unseen.size:
                hit += 1
                w0 = inst.W[unseen[0]]
                assert inst.empirical_risk(w0, S) == inst.theta  # an ERM (the floor theta)
                erm_excess.append(inst.excess_risk(w0))
        lo, hi = wilson(hit, draws)
        sgd_m, sgd_ci = mean_ci(np.array(sgd_excess))
        row = {
            "m": m,
            "n": draws,
            "hits": hit,
            "d": sco.paper_dimension(m),
            "k": k,
            "N": 2**k,
            "distance": dist,
            "p_overfit_erm": hit / draws,
            "ci95": [lo, hi],
            "p_exact": sco.overfit_erm_probability(m, 2**k),
            "exact_in_ci95": bool(lo <= sco.overfit_erm_probability(m, 2**k) <= hi),
            "erm_excess": float(np.mean(erm_excess)) if erm_excess else float("nan"),
            "sgd_excess": sgd_m,
            "sgd_excess_ci95": sgd_ci,
            "sgd_bound": 1 / (2 * math.sqrt(m)),
        }
        log(
            f"A m={m:2d} d={6 * m:3d} k={k:2d} dist={dist:2d}  P(overfitting ERM)={hit / draws:.3f} "
            f"[{lo:.3f},{hi:.3f}] exact={row['p_exact']:.3f}  ERM excess={row['erm_excess']:.3f}  "
            f"SGD excess={sgd_m:.4f}+-{sgd_ci:.4f}"
        )
        out.append(row)
    return out


# ----------------------------------------------------------------------------- B: unique ERM
def _unseen_corr(inst: sco.FeldmanInstance, S: sco.Sample) -> tuple[float, float] | None:
    """max_{u unseen} <w_u, -xi_bar / ||xi_bar||> and the Gaussian scale sqrt(2 ln N_u / d)."""
    unseen = inst.unseen(S)
    if not unseen.size:
        return None
    v = -S.xi.mean(0)
    v /= np.linalg.norm(v)
    return float((inst.W[unseen] @ v).max()), math.sqrt(2 * math.log(unseen.size + 1) / inst.d)


def certify_erm(inst: sco.FeldmanInstance, S: sco.Sample, c: float) -> dict:
    """Solve the strongly convex ERM, certify it, and classify the certified ball around x*.

    ||x_hat - x*|| <= r = sqrt(2 gap / lam) (duality gap + lam-strong convexity) and F is
    1-Lipschitz on B, so F(x*) - F* lies in [e - r, e + r], e = F(x_hat) - F*: the ball lies in
    {F - F* >= c} iff e - r >= c ("certified overfit"), in {F - F* < c} iff e + r < c.
    """
    res = sco.erm_exact(inst, S)
    r = res.certificate.distance_bound
    e = inst.excess_risk(res.x)
    unseen = inst.unseen(S)
    cap = float((inst.W[unseen] @ res.x).max()) + r if unseen.size else -math.inf
    return {
        "gap": res.certificate.gap,
        "radius": r,
        "excess": e,
        "overfit": e - r >= c,
        "not_overfit": e + r < c,
        "in_unseen_cap": cap - 2 * r > inst.theta,  # certified: <w_u, x*> > theta for some unseen u
    }


def experiment_b(ms: list[int], draws: int, alpha: float, c: float) -> list[dict]:
    """Certified unique ERM, [recon] noise alpha <xi, x> (and an oracle ceiling), lam = m^-1.5."""
    out = []
    for m in ms:
        C, _k, _ = code_for(m)
        inst = sco.FeldmanInstance.from_code(C, alpha=alpha, lam=sco.paper_lambda(m))
        rng = np.random.default_rng(10_000 + m)
        rows: dict[str, list[dict]] = {"recon": [], "oracle": []}
        corr, corr_pred = [], []
        n_unseen = 0  # samples with an unseen codeword (where the oracle can aim)
        for _ in range(draws):
            S = inst.sample(m, rng)
            rows["recon"].append(certify_erm(inst, S, c))
            cc = _unseen_corr(inst, S)
            if cc is not None:
                corr.append(cc[0])
                corr_pred.append(cc[1])
            # oracle ceiling (not an SCO distribution: the noise is chosen after seeing S):
            # xi_i = -w_u for an unseen u pulls the ERM into u's cap; no unseen u -> no noise.
            unseen = inst.unseen(S)
            n_unseen += bool(unseen.size)
            xi = -np.tile(inst.W[unseen[0]], (m, 1)) if unseen.size else np.zeros_like(S.xi)
            rows["oracle"].append(certify_erm(inst, sco.Sample(masks=S.masks, xi=xi), c))
        row: dict = {
            "m": m,
            "d": sco.paper_dimension(m),
            "N": inst.N,
            "p_unseen_exists": n_unseen / draws,
            "alpha": alpha,
            "lam": sco.paper_lambda(m),
            "c": c,
        }
        for arm, rr in rows.items():
            k_over = sum(x["overfit"] for x in rr)
            k_not = sum(x["not_overfit"] for x in rr)
            k_cap = sum(x["in_unseen_cap"] for x in rr)
            ex = np.array([x["excess"] for x in rr])
            row[arm] = {
                "n": len(rr),
                "p_certified_overfit": k_over / len(rr),
                "ci95": list(wilson(k_over, len(rr))),
                "p_certified_not_overfit": k_not / len(rr),
                "ci95_not_overfit": list(wilson(k_not, len(rr))),
                "p_certified_in_unseen_cap": k_cap / len(rr),
                "excess_mean": float(ex.mean()),
                "excess_max": float(ex.max()),
                "max_certificate_gap": float(max(x["gap"] for x in rr)),
                "max_radius": float(max(x["radius"] for x in rr)),
            }
        row["recon"]["noise_unseen_corr_mean"] = float(np.mean(corr)) if corr else float("nan")
        row["recon"]["noise_unseen_corr_max"] = float(np.max(corr)) if corr else float("nan")
        row["recon"]["corr_scale_sqrt_2lnNu_over_d"] = (
            float(np.mean(corr_pred)) if corr_pred else float("nan")
        )
        rc, orc = row["recon"], row["oracle"]
        log(
            f"B m={m:2d} N={inst.N:5d} recon: P(certified F-F*>={c})={rc['p_certified_overfit']:.2f} "
            f"{np.round(rc['ci95'], 3).tolist()} not={rc['p_certified_not_overfit']:.2f} "
            f"excess={rc['excess_mean']:.4f} max gap={rc['max_certificate_gap']:.1e} "
            f"corr={rc['noise_unseen_corr_mean']:.3f} (max {rc['noise_unseen_corr_max']:.3f})"
            f" | oracle: {orc['p_certified_overfit']:.2f} {np.round(orc['ci95'], 3).tolist()} "
            f"excess={orc['excess_mean']:.3f}"
        )
        out.append(row)
    return out


# ----------------------------------------------------------------------------- C: GD
def fit_slope(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def experiment_c(ms: list[int], seeds: int, T: int, alpha: float, points: int) -> dict:
    """Projected full-batch GD in float64 on the [recon] instance of B (lam = m^-1.5), eta T over
    the paper's window [sqrt(m), m^1.5]: c_m = min over the window of gap / sqrt(eta T / m^1.5)."""
    rng = np.random.default_rng(0)
    out: dict = {"T": T, "alpha": alpha, "lam": "m^-1.5", "curves": []}
    for m in ms:
        C, _, _ = code_for(m)
        inst = sco.FeldmanInstance.from_code(C, alpha=alpha, lam=sco.paper_lambda(m))
        eta_t = np.logspace(math.log10(math.sqrt(m)), math.log10(m**1.5), points)  # eta * T
        gaps = np.zeros((seeds, points))
        for s in range(seeds):
            S = inst.sample(m, np.random.default_rng(20_000 + 100 * m + s))
            for j, et in enumerate(eta_t):
                xT, _ = sco.projected_gd(inst, S, float(et / T), T)
                x = np.asarray(xT, dtype=np.float64)
                gaps[s, j] = inst.population_risk(x) - inst.empirical_risk(x, S)
        bound = np.sqrt(eta_t / m**1.5)  # the paper's rate, constant 1
        ratio = gaps.mean(0) / bound
        boot = []
        for _ in range(500):  # bootstrap over the paired samples
            b = gaps[rng.integers(0, seeds, seeds)].mean(0)
            boot.append((b / bound).min())
        entry = {
            "m": m,
            "N": inst.N,
            "eta_T": eta_t.tolist(),
            "eta_T_over_m15": (eta_t / m**1.5).tolist(),
            "gap_mean": gaps.mean(0).tolist(),
            "gap_sd": gaps.std(0, ddof=1).tolist(),
            "paper_rate": bound.tolist(),
            "upper_eta_T_over_m": [sco.gd_upper_bound(e, 1, m) for e in eta_t],
            "c_m": float(ratio.min()),
            "c_m_ci95": np.percentile(boot, [2.5, 97.5]).tolist(),
            "gap_at_m15": float(gaps.mean(0)[-1]),
            "slope_window": fit_slope(eta_t, gaps.mean(0)),
        }
        log(
            f"C m={m:2d}  c_m = min gap/sqrt(eta T/m^1.5) = {entry['c_m']:.3f} "
            f"{np.round(entry['c_m_ci95'], 3).tolist()}  gap at eta T = m^1.5: "
            f"{entry['gap_at_m15']:.3f} (paper: Omega(1))  slope {entry['slope_window']:.2f}"
        )
        out["curves"].append(entry)
    cs = [c["c_m"] for c in out["curves"]]
    out["c_all_m"] = float(min(cs))
    # c_m ~ C m^beta: beta = 0 would be the paper's uniform constant
    out["c_m_exponent"] = fit_slope(np.array(ms, dtype=float), np.array(cs))
    return out


def plot(gd: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed: no plot")
        return False
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for c in gd["curves"]:
        x = np.array(c["eta_T_over_m15"])
        ax.loglog(x, c["gap_mean"], "o-", ms=3, label=f"GD gap, m={c['m']} (measured)")
    ax.loglog(x, c["paper_rate"], "k--", lw=1, label="sqrt(eta T / m^1.5) (paper, constant 1)")
    ax.set_xlabel("eta T / m^1.5")
    ax.set_ylabel("F(x_T) - F_S(x_T)")
    ax.set_title("GD gap on the [recon] alpha <xi, x> instance (not the paper's)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main() -> None:
    global QUIET
    args = _parser().parse_args()
    QUIET = args.quiet
    if args.row_from:
        print(json.dumps(summarise(json.loads(args.row_from.read_text())), ensure_ascii=False))
        return
    threads = _ev.pin_threads(2)  # the run's 2 cores: BLAS/OpenMP (XLA keeps its own pool)
    jax.config.update("jax_enable_x64", True)  # GD trajectories in float64
    t0 = time.time()
    ms = MS
    c_over = 0.1  # "overfits": certified F(x*) - F* >= c_over (Feldman's level is 1/4)
    if args.quick:
        draws_a, sgd_a, draws_b = 200, 30, 100
        ms_c, seeds_c, points = MS_C, 8, 6
    else:
        draws_a, sgd_a, draws_b = 1000, 200, 400
        ms_c, seeds_c, points = MS_C, 30, 10
    name = "reproduce_quick" if args.quick else "reproduce"
    out = args.out or HERE / f"{name}.json"
    runs = {
        "A": lambda m: experiment_a([m], draws_a, sgd_a)[0],
        "B": lambda m: experiment_b([m], draws_b, alpha=0.5, c=c_over)[0],
        "C": lambda _m: experiment_c(ms_c, seeds_c, T=200, alpha=0.5, points=points),
    }
    if args.part or args.m:
        _run_part(args, out, runs, threads)
        return
    feld = experiment_a(ms, draws_a, sgd_a)
    log(f"[A done at {time.time() - t0:.1f}s]")
    uniq = experiment_b(ms, draws_b, alpha=0.5, c=c_over)
    log(f"[B done at {time.time() - t0:.1f}s]")
    gd = experiment_c(ms_c, seeds_c, T=200, alpha=0.5, points=points)
    log(f"[C done at {time.time() - t0:.1f}s]")
    seconds = round(time.time() - t0, 1)
    _write_run(args.quick, out, seconds, threads, feld, uniq, gd, {})


def _part_units() -> list[str]:
    return [f"{p}_{m}" for p in "AB" for m in MS] + ["C"]


def _run_part(args, out: Path, runs: dict, threads: dict) -> None:
    """One part of the full run into <out stem>_parts/; assemble the JSON once all are there."""
    if args.quick:
        raise SystemExit("--part: the quick mode runs whole (it is short); drop --quick")
    if not args.part:
        raise SystemExit("--m needs --part A or --part B")
    if args.part == "C" and args.m:
        raise SystemExit("--m: part C runs every m at once (its bootstrap spans them)")
    bad = sorted(set(args.m or []) - set(MS))
    if bad:
        raise SystemExit(f"--m must be among {MS}, got {bad}")
    folder = out.with_name(f"{out.stem}_parts")
    folder.mkdir(exist_ok=True)
    for m in [None] if args.part == "C" else (args.m or MS):
        unit = "C" if m is None else f"{args.part}_{m}"
        t, c = time.time(), time.process_time()
        load = [round(v, 1) for v in os.getloadavg()]  # a loaded machine inflates the wall
        result = runs[args.part](m)
        rec = {
            "unit": unit,
            "result": result,
            "seconds": round(time.time() - t, 1),
            "cpu_seconds": round(time.process_time() - c, 1),
            "threads": threads,
            "measured": time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)),
            "load_avg_at_start": load,
        }
        (folder / f"{unit}.json").write_text(json.dumps(rec, indent=1) + "\n")
        log(f"[part {unit}: {rec['seconds']} s wall, {rec['cpu_seconds']} CPU-s -> {folder}]")
    have = {u: folder / f"{u}.json" for u in _part_units() if (folder / f"{u}.json").is_file()}
    missing = [u for u in _part_units() if u not in have]
    if missing:
        log(f"[parts still to run: {', '.join(missing)}]")
        return
    recs = {u: json.loads(p.read_text()) for u, p in have.items()}
    feld = [recs[f"A_{m}"]["result"] for m in MS]
    uniq = [recs[f"B_{m}"]["result"] for m in MS]
    parts = {u: {k: r[k] for k in ("seconds", "cpu_seconds", "measured")} for u, r in recs.items()}
    seconds = round(sum(p["seconds"] for p in parts.values()), 1)
    extra = {"cpu_seconds": round(sum(p["cpu_seconds"] for p in parts.values()), 1)}
    extra["parts"] = parts
    _write_run(False, out, seconds, recs["C"]["threads"], feld, uniq, recs["C"]["result"], extra)


def _write_run(quick: bool, out: Path, seconds, threads, feld, uniq, gd, extra: dict) -> None:
    png = out.with_name(f"{out.stem}_gd.png")
    plotted = plot(gd, png)
    full = {
        "quick": quick,
        "seconds": seconds,
        **extra,
        "threads": threads,
        "feldman": feld,
        "unique_erm": uniq,
        "unique_erm_status": (
            "not tested: the paper's construction could not be read; the [recon] control "
            "alpha<xi,x> cannot work (its noise direction is independent of the unseen "
            "codewords, best correlation -> sqrt(2 ln N_u / d) -> 0.18 < 1/2)"
        ),
        "gd": gd,
        "plot": png.name if plotted else None,
    }
    summary = summarise(full)
    full = {"summary": {k: v for k, v in summary.items() if k != "evidence"}, **full}
    full["evidence"] = summary["evidence"]
    out.write_text(json.dumps(full, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(summary, ensure_ascii=False))


# ------------------------------------------------------------------ the row, from the JSON

QUICK_DRAWS_A, FULL_DRAWS_A = 200, 1000  # experiment A's samples per m (main's settings)


def _proportion(name: str, statistic: str, k: int, n: int, **kw) -> dict:
    """A proportion k/n as a comparison: its Wilson 95% interval, n, the Bernoulli SD."""
    p, lo, hi = _ev.wilson(k, n)
    return _ev.comparison(
        name, statistic, interval=(p, lo, hi), n=n, sd=math.sqrt(p * (1 - p)), **kw
    )


def summarise(full: dict) -> dict:
    """The row (claim, evidence) from a run's JSON; every interval from icml26_kernels.evidence.

    Runs written before the row was rebuilt here (issue 61) lack A's ``n`` / ``hits``: they
    come from the run's mode (``summary.claim`` names its samples per m) and its frequency.
    """
    feld, uniq, gd = full["feldman"], full["unique_erm"], full["gd"]
    quick = full.get("quick", "200 samples per m" in full.get("summary", {}).get("claim", ""))
    default_n = QUICK_DRAWS_A if quick else FULL_DRAWS_A
    comps = []
    rows_a = []
    for r in feld:
        n = int(r.get("n", default_n))
        k = int(r.get("hits", round(r["p_overfit_erm"] * n)))
        c = _proportion(
            f"A m={r['m']}: P(an ERM with excess 1/4 exists)",
            f"frequency over {n} samples of an unseen codeword (an ERM with excess 1/4), "
            "Wilson 95% interval",
            k,
            n,
            target=None,
            target_source=(
                "Feldman-level existence; the reference is the closed form "
                f"1-(1-2^-m)^(2^k) = {r['p_exact']:.4f}, not a paper effect size"
            ),
            headroom_note=(
                "a closed form is the reference (the MC frequency estimates it); "
                "a probability has no measured ceiling here"
            ),
        )
        c["closed_form"] = r["p_exact"]
        c["closed_form_in_ci95"] = bool(c["ci95"][0] <= r["p_exact"] <= c["ci95"][1])
        comps.append(c)
        rows_a.append((r, c))
    draws_a = rows_a[0][0].get("n", default_n)
    k_b = n_b = 0
    k_o = n_o = 0
    for r in uniq:
        rc, orc = r["recon"], r["oracle"]
        kr = round(rc["p_certified_overfit"] * rc["n"])
        ko = round(orc["p_certified_overfit"] * orc["n"])
        k_b, n_b, k_o, n_o = k_b + kr, n_b + rc["n"], k_o + ko, n_o + orc["n"]
        comps.append(
            _proportion(
                f"B m={r['m']}: P(certified overfit), [recon] control",
                f"certified F(x*) - F* >= {r['c']} over {rc['n']} samples, Wilson 95% interval",
                kr,
                rc["n"],
                target=0.5,
                target_source="paper: P(the unique ERM overfits) >= 1/2 (its perturbation)",
                headroom=_ev.headroom(
                    orc["p_certified_overfit"],
                    rc["p_certified_overfit"],
                    "oracle arm: noise aimed at an unseen codeword after seeing S "
                    "(not an SCO distribution), certified overfit rate",
                ),
            )
        )
    p_o = k_o / n_o
    pooled = _proportion(
        f"B pooled m={uniq[0]['m']}..{uniq[-1]['m']}: P(certified overfit), [recon] control",
        f"certified overfit over all {n_b} samples, Wilson 95% interval",
        k_b,
        n_b,
        target=0.5,
        target_source="paper: P(the unique ERM overfits) >= 1/2 (its perturbation)",
        headroom=_ev.headroom(
            p_o, k_b / n_b, "oracle arm pooled over m (noise aimed at an unseen codeword)"
        ),
    )
    comps.append(pooled)
    worst_r, worst_c = min(rows_a, key=lambda rc: rc[0]["p_overfit_erm"])
    in_ci = all(c["closed_form_in_ci95"] for _, c in rows_a)
    outside = [r["m"] for r, c in rows_a if not c["closed_form_in_ci95"]]
    in_ci_txt = f"{in_ci}" + (f" (outside at m={', '.join(map(str, outside))})" if outside else "")
    rec_hi = max(wilson(round(r["recon"]["p_certified_overfit"] * r["recon"]["n"]),
                        r["recon"]["n"])[1] for r in uniq)  # fmt: skip
    orc_lo = min(
        wilson(round(r["oracle"]["p_certified_overfit"] * r["oracle"]["n"]), r["oracle"]["n"])[0]
        for r in uniq
    )
    corr = max(r["recon"]["noise_unseen_corr_max"] for r in uniq)
    if corr < 0.5:  # no sample's noise direction reached an unseen cap (<w_u, x> > 1/2)
        corr_txt = f"best corr of -xi_bar with an unseen codeword <= {corr:.2f} < 1/2"
    else:  # a tail sample did: say how often the certified ERM sat in an unseen cap
        k_cap = sum(round(r["recon"]["p_certified_in_unseen_cap"] * r["recon"]["n"]) for r in uniq)
        corr_mean = max(r["recon"]["noise_unseen_corr_mean"] for r in uniq)
        corr_txt = (
            f"best corr of -xi_bar with an unseen codeword: mean <= {corr_mean:.2f} per m, max "
            f"{corr:.2f}; certified inside an unseen cap in {k_cap}/{n_b} samples"
        )
    ms = [r["m"] for r in feld]
    wlo, whi = worst_c["ci95"]
    plo, phi = pooled["ci95"]
    verdict = "unresolved: no overfitting seen" if not pooled["resolved"] else "resolved"
    claim = (
        f"d=6m, m={ms[0]}..{ms[-1]}: an ERM with excess 1/4 exists w.p. >= "
        f"{worst_r['p_overfit_erm']:.3f} [{wlo:.3f}, {whi:.3f}] at m={worst_r['m']} (MC, "
        f"{draws_a} samples per m, 95% Wilson; exact 1-(1-2^-m)^(2^k) inside every interval: "
        f"{in_ci_txt}). Unique-ERM overfitting: NOT TESTED, the paper's perturbation is "
        "unknown; the "
        f"[recon] control alpha<xi,x> cannot work ({corr_txt}): certified overfit {k_b}/{n_b} = "
        f"{pooled['diff']:.3f} "
        f"[{plo:.3f}, {phi:.3f}] ({verdict}; paper 1/2), Wilson upper <= {rec_hi:.3f} per m; "
        f"oracle ceiling (noise aimed at an unseen codeword) certified >= {orc_lo:.2f} per m. "
        f"GD on the recon: min_m c_m = {gd['c_all_m']:.3f}, c_m ~ m^{gd['c_m_exponent']:.2f} "
        "(no uniform c)"
    )
    return {
        "package": "sco-erm",
        "claim": claim,
        "paper": (
            "P(unique ERM overfits) >= 1/2 at d = 6m, excess Theta(1); "
            "GD gap Omega(sqrt(eta T / m^1.5))"
        ),
        "ours": (
            f"P(an overfitting ERM exists) >= {worst_r['p_overfit_erm']:.3f} "
            f"[{wlo:.3f}, {whi:.3f}] at m={worst_r['m']} (Feldman level, not the unique ERM)"
        ),
        "baseline": f"exact {worst_r['p_exact']:.3f} (closed form, not a peer method)",
        "ratio": None,
        "seconds": full.get("seconds", full.get("summary", {}).get("seconds")),
        "evidence": _ev.evidence(comps),
    }


if __name__ == "__main__":
    main()
