"""Print the README results tables (markdown) from the reproduce JSON and gms.json.

``python results_table.py`` reads reproduce_quick.json (the README's run); ``--full`` reads
reproduce.json, written by a full (non --quick) run, and says so and falls back to the quick run
when no full run has been written (none is committed).
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).parent


def _t_interval():
    """icml26_kernels.evidence.t_interval (the dev group installs icml26-kernels)."""
    from icml26_kernels.evidence import t_interval

    return t_interval


def pm(v, f):
    return f"{v[0]:{f}} ± {v[1]:{f}}"


def ci(c, f):
    lo, hi = c["ci95"]
    return f"{c['diff']:+{f}} [{lo:+{f}}, {hi:+{f}}]"


def lgssm():
    name = "reproduce_quick.json"
    if "--full" in sys.argv[1:]:
        if (HERE / "reproduce.json").exists():
            name = "reproduce.json"
        else:
            print(
                "no full run: benchmarks/reproduce.json does not exist "
                "(write it with `python reproduce.py`); showing reproduce_quick.json",
                file=sys.stderr,
            )
    r = json.loads((HERE / name).read_text())
    print(f"from {name}: {json.dumps(r['sizes'])}\n")
    res = r["results"]
    cis: dict = {}  # paired 95% t-intervals of the per-set differences (runs that store them)
    if "per_set" in res["diffusion"]:
        t_interval = _t_interval()
        for name in res:
            if name in ("diffusion", "kalman_grad"):
                continue
            for label, m in (("LL MSE", "ll_mse"), ("KL", "kl"), ("Bures", "bures")):
                d = [a - b for a, b in zip(res["diffusion"]["per_set"][m], res[name]["per_set"][m])]
                mean, lo, hi = t_interval(d)
                cis.setdefault(name, {})[label] = {"diff": mean, "ci95": [lo, hi]}
    print(
        "| method (setting tuned on held-out sets) | LL RMSE | LL bias | KL | Bures | grad var "
        "| Δ LL MSE (diffusion − it) [95% CI] | Δ KL [95% CI] | Δ Bures [95% CI] |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("diffusion", "soft", "gumbel", "ot", "multinomial"):
        e = res[name]
        gv = f"{e['grad_var']:.1f}" if "grad_var" in e else "–"
        if name == "diffusion":
            deltas = "– | – | –"
        elif name in cis:  # the row's evidence: 95% t-intervals of the paired differences
            deltas = " | ".join(
                ci(cis[name][label], f)
                for label, f in (("LL MSE", ".2f"), ("KL", ".4f"), ("Bures", ".4f"))
            )
        else:
            d = e["diff_vs_diffusion"]
            deltas = f"{pm(d['ll_mse'], '.2f')} | {pm(d['kl'], '.4f')} | {pm(d['bures'], '.4f')} (± s.e.)"
        print(
            f"| {name} ({e['setting']}) | {e['ll_rmse']:.2f} | {pm(e['ll_bias'], '.2f')} "
            f"| {pm(e['kl'], '.4f')} | {pm(e['bures'], '.4f')} | {gv} | {deltas} |"
        )
    if "verdicts" in r:  # runs before issue 61
        print(f"\nverdicts (|Δ| ≤ 2 s.e. is a tie): {json.dumps(r['verdicts'])}")
    row_path = HERE / "reproduce_row.json"
    row = json.loads(row_path.read_text()) if row_path.is_file() else {}
    tuning = row.get("evidence", {}).get("tuning", []) if row.get("claim") == r.get("claim") else []
    for t in tuning:  # the row's tuning entries, when the row is this run's
        edge = " (grid edge)" if t.get("edge_note") else ""
        scores = ", ".join(f"{g}: {v:.4f}" for g, v in zip(t["grid"], t["scores"]))
        print(f"tuned {t['arm']}.{t['param']} = {t['chosen']}{edge}  [{scores}]")
    line = {k: r[k] for k in ("ours", "baseline", "ratio")}
    print(f"JSON line: {json.dumps(line)}")
    t = r.get("timing")
    if t:
        print(
            f"seconds: {r['seconds']} wall with {r.get('workers', 1)} worker(s); CPU seconds: "
            f"{t['methods_cpu_s']} in the methods ({t['compile_cpu_s']} compiling) + "
            f"{t['main_process_cpu_s']} in the main process"
        )
    else:
        print(f"seconds: {r['seconds']}")
    if "machine" in r:
        print(
            f"machine: {r['machine'].get('cpu')}, {r['machine'].get('logical_cpus')} logical CPUs"
        )


def gms():
    p = HERE / "gms.json"
    if not p.exists():
        return
    r = json.loads(p.read_text())
    res = r["results"]
    print("\n| method (setting tuned on held-out runs) | sliced W1 | Δ vs diffusion |")
    print("|---|---|---|")
    for name in ("diffusion", "soft", "gumbel", "ot", "multinomial"):
        e = res[name]
        d = "–" if name == "diffusion" else pm(e["diff_vs_diffusion"], ".4f")
        print(f"| {name} ({e['setting']}) | {pm(e['swd'], '.4f')} | {d} |")
    print(f"| two exact posterior samples (floor) | {pm(res['floor']['swd'], '.4f')} | |")
    print(f"seconds: {r['seconds']}")


if __name__ == "__main__":
    lgssm()
    gms()
