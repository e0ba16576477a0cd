"""Reproduce the paper's claims at small scale (2-core CPU); prints one JSON line on stdout.

Three experiments, every draw seeded (rerunning gives the same numbers):

  A. Feldman level, d = 6m, certified code of relative distance 1/4: the frequency (over samples)
     that an ERM with excess population risk 1/4 exists (an unseen codeword), beside its exact
     probability 1 - (1 - 2^-m)^N, and the paired excess risk of one-pass SGD (the learner that
     generalizes) on the same samples.
  B. Unique ERM ([recon] perturbation alpha <xi, x> + lam/2 ||x||^2, lam = m^-1.5): the frequency
     that the certified unique ERM overfits (excess >= 0.1), its excess risk, and the ablation
     that says why (the best correlation of the noise direction with an unseen codeword).
  C. GD generalization gap F(x_T) - F_S(x_T) against eta T / m^1.5 (log-log plot written beside
     the JSON), with the fitted slope on the paper's window sqrt(m) <= eta T <= m^1.5 and below it.

    python benchmarks/reproduce.py --quick      # < 2 minutes on 2 cores
    python benchmarks/reproduce.py              # more m, more draws
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import icml26_sco_erm as sco
import numpy as np

HERE = Path(__file__).resolve().parent


def log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, c - h), min(1.0, c + h)


def mean_ci(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(1.96 * x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def code_for(m: int) -> tuple[np.ndarray, int, int]:
    d, k = 6 * m, sco.code_dimension(m)
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
            "d": 6 * m,
            "k": k,
            "N": 2**k,
            "distance": dist,
            "p_overfit_erm": hit / draws,
            "ci95": [lo, hi],
            "p_exact": sco.overfit_erm_probability(m, 2**k),
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
def experiment_b(ms: list[int], draws: int, alphas: list[float]) -> list[dict]:
    out = []
    for m in ms:
        C, _k, _ = code_for(m)
        for alpha in alphas:
            inst = sco.FeldmanInstance.from_code(C, alpha=alpha, lam=m**-1.5)
            rng = np.random.default_rng(10_000 + m)
            excess, gaps, corr, corr_pred = [], [], [], []
            for _ in range(draws):
                S = inst.sample(m, rng)
                res = sco.erm_exact(inst, S)
                gaps.append(res.certificate.gap)
                excess.append(inst.excess_risk(res.x))
                unseen = inst.unseen(S)
                if unseen.size:
                    v = -S.xi.mean(0)
                    corr.append(float((inst.W[unseen] @ v).max() / np.linalg.norm(v)))
                    corr_pred.append(math.sqrt(2 * math.log(unseen.size + 1) / inst.d))
            ex = np.array(excess)
            row = {
                "m": m,
                "alpha": alpha,
                "lam": m**-1.5,
                "p_unique_erm_overfits": float((ex >= 0.1).mean()),
                "erm_excess": mean_ci(ex)[0],
                "erm_excess_ci95": mean_ci(ex)[1],
                "max_certificate_gap": float(np.max(gaps)),
                "noise_unseen_corr": float(np.mean(corr)) if corr else float("nan"),
                "noise_unseen_corr_pred": float(np.mean(corr_pred)) if corr_pred else float("nan"),
            }
            log(
                f"B m={m:2d} alpha={alpha:.2f} lam={m**-1.5:.4f}  P(unique ERM excess>=0.1)="
                f"{row['p_unique_erm_overfits']:.2f}  excess={row['erm_excess']:.4f}  "
                f"max gap={row['max_certificate_gap']:.1e}  corr(noise, best unseen)="
                f"{row['noise_unseen_corr']:.3f} (sqrt(2 ln N_u / d)={row['noise_unseen_corr_pred']:.3f})"
            )
            out.append(row)
    return out


# ----------------------------------------------------------------------------- C: GD
def fit_slope(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def experiment_c(ms: list[int], seeds: int, T: int, alpha: float, points: int) -> dict:
    curves = []
    for m in ms:
        C, _, _ = code_for(m)
        inst = sco.FeldmanInstance.from_code(C, alpha=alpha)
        eta_t = np.logspace(-1, math.log10(m**1.5), points)  # eta * T
        gaps = np.zeros((seeds, points))
        for s in range(seeds):
            S = inst.sample(m, np.random.default_rng(20_000 + 100 * m + s))
            for j, et in enumerate(eta_t):
                xT, _ = sco.projected_gd(inst, S, float(et / T), T)
                x = np.asarray(xT, dtype=np.float64)
                gaps[s, j] = inst.population_risk(x) - inst.empirical_risk(x, S)
        curves.append({"m": m, "eta_T": eta_t, "gaps": gaps})
    rng = np.random.default_rng(0)
    out: dict = {"T": T, "alpha": alpha, "curves": []}
    for c in curves:
        m, et, g = c["m"], c["eta_T"], c["gaps"]
        x = et / m**1.5
        win = (et >= math.sqrt(m)) & (et <= m**1.5)
        low = et < math.sqrt(m)
        slopes = {"window": [], "below": []}
        for _ in range(200):  # bootstrap over the paired seeds
            b = g[rng.integers(0, g.shape[0], g.shape[0])].mean(0)
            slopes["window"].append(fit_slope(x[win], np.maximum(b[win], 1e-12)))
            slopes["below"].append(fit_slope(x[low], np.maximum(b[low], 1e-12)))
        mean_gap = g.mean(0)
        entry = {
            "m": m,
            "eta_T": et.tolist(),
            "eta_T_over_m15": x.tolist(),
            "gap_mean": mean_gap.tolist(),
            "gap_sd": g.std(0, ddof=1).tolist(),
            "paper_lower": [sco.gd_lower_bound(e, 1, m) for e in et],
            "upper_eta_T_over_m": [sco.gd_upper_bound(e, 1, m) for e in et],
            "slope_window": fit_slope(x[win], mean_gap[win]),
            "slope_window_ci95": np.percentile(slopes["window"], [2.5, 97.5]).tolist(),
            "slope_below": fit_slope(x[low], mean_gap[low]),
            "slope_below_ci95": np.percentile(slopes["below"], [2.5, 97.5]).tolist(),
        }
        log(
            f"C m={m:2d}  slope on sqrt(m)<=eta T<=m^1.5: {entry['slope_window']:.3f} "
            f"{np.round(entry['slope_window_ci95'], 3).tolist()} (paper: 1/2);  below sqrt(m): "
            f"{entry['slope_below']:.3f} {np.round(entry['slope_below_ci95'], 3).tolist()} "
            "(eta T / m regime: 1)"
        )
        out["curves"].append(entry)
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
    ax.loglog(x, c["paper_lower"], "k--", lw=1, label="sqrt(eta T / m^1.5) (paper, constant 1)")
    ax.set_xlabel("eta T / m^1.5")
    ax.set_ylabel("F(x_T) - F_S(x_T)")
    ax.set_title("GD generalization gap ([recon] instance, alpha <xi, x> noise)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer m and draws (< 2 min, 2 cores)")
    args = ap.parse_args()
    t0 = time.time()
    if args.quick:
        ms_a, draws_a, sgd_a = [6, 8, 10, 12, 14], 200, 30
        ms_b, draws_b = [6, 8, 10, 12], 10
        ms_c, seeds_c, points = [8, 12], 6, 10
    else:
        ms_a, draws_a, sgd_a = [6, 8, 10, 12, 14, 16], 1000, 200
        ms_b, draws_b = [6, 8, 10, 12, 14], 50
        ms_c, seeds_c, points = [8, 12, 14], 20, 14
    feld = experiment_a(ms_a, draws_a, sgd_a)
    log(f"[A done at {time.time() - t0:.1f}s]")
    uniq = experiment_b(ms_b, draws_b, alphas=[0.1, 0.5])
    log(f"[B done at {time.time() - t0:.1f}s]")
    gd = experiment_c(ms_c, seeds_c, T=100, alpha=0.5, points=points)
    log(f"[C done at {time.time() - t0:.1f}s]")
    name = "reproduce_quick" if args.quick else "reproduce"
    png = HERE / f"{name}_gd.png"
    plotted = plot(gd, png)
    worst = min(feld, key=lambda r: r["p_overfit_erm"])
    p_min = worst["p_overfit_erm"]
    erm_ex = float(np.mean([r["erm_excess"] for r in feld]))
    sgd_ex = float(np.mean([r["sgd_excess"] for r in feld]))
    p_unique = max(r["p_unique_erm_overfits"] for r in uniq)
    slopes = [c["slope_window"] for c in gd["curves"]]
    summary = {
        "package": "sco-erm",
        "claim": (
            f"d=6m, m={ms_a[0]}..{ms_a[-1]}: an ERM with excess risk 1/4 exists w.p. "
            f">= {p_min:.2f} (Feldman level; its excess {erm_ex:.2f}, one-pass SGD on the same "
            f"samples {sgd_ex:.3f}). Unique-ERM overfitting NOT reproduced by the reconstructed "
            f"perturbation (P = {p_unique:.2f}); GD gap slope on the paper's window "
            f"{', '.join(f'{s:.2f}' for s in slopes)} vs 1/2 [recon instance]"
        ),
        "paper": "P(unique ERM overfits) >= 1/2 at d = 6m, excess Theta(1); GD gap Omega(sqrt(eta T / m^1.5))",
        # ours: the smallest measured P(an ERM overfits by 1/4) over m; baseline: its exact value
        "ours": round(p_min, 3),
        "baseline": round(worst["p_exact"], 3),
        "ratio": round(p_min / worst["p_exact"], 3),
        "seconds": round(time.time() - t0, 1),
    }
    full = {
        "summary": summary,
        "feldman": feld,
        "unique_erm": uniq,
        "gd": gd,
        "plot": png.name if plotted else None,
    }
    (HERE / f"{name}.json").write_text(json.dumps(full, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
