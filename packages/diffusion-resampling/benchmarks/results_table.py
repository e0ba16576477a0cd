"""Print the README results tables (markdown) from the reproduce JSON and gms.json.

``python results_table.py`` reads reproduce_quick.json (the README's run); ``--full`` reads
reproduce.json, written by a full (non --quick) run, and says so and falls back to the quick run
when no full run has been written (none is committed).
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).parent


def pm(v, f):
    return f"{v[0]:{f}} ± {v[1]:{f}}"


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
    print(
        "| method (setting tuned on held-out sets) | LL RMSE | LL bias | KL | Bures | grad var "
        "| Δ LL MSE vs diffusion | Δ KL | Δ Bures |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("diffusion", "soft", "gumbel", "ot", "multinomial"):
        e = res[name]
        gv = f"{e['grad_var']:.1f}" if "grad_var" in e else "–"
        if name == "diffusion":
            deltas = "– | – | –"
        else:
            d = e["diff_vs_diffusion"]
            deltas = f"{pm(d['ll_mse'], '.2f')} | {pm(d['kl'], '.4f')} | {pm(d['bures'], '.4f')}"
        print(
            f"| {name} ({e['setting']}) | {e['ll_rmse']:.2f} | {pm(e['ll_bias'], '.2f')} "
            f"| {pm(e['kl'], '.4f')} | {pm(e['bures'], '.4f')} | {gv} | {deltas} |"
        )
    print(f"\nverdicts (|Δ| ≤ 2 s.e. is a tie): {json.dumps(r['verdicts'])}")
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
