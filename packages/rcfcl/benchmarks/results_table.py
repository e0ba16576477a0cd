"""Print the README's results tables from benchmarks/results_quick.json (or the file given).

python benchmarks/results_table.py [benchmarks/results_quick.json]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

NAMES = {
    "fedavg": "FedAvg",
    "fedavg_gr": "FedAvg + generative replay",
    "feddrift": "FedDrift-style clustering",
    "rcfcl": "**RC-FCL [recon]**",
    "rcfcl-no-detection": "RC-FCL − detection (m = 0, w = 1)",
    "rcfcl-no-carry": "RC-FCL − carried magnitude",
    "rcfcl-no-weights": "RC-FCL − sample weights",
    "rcfcl-no-kd": "RC-FCL − calibrated distillation",
    "rcfcl-no-drift-aggregation": "RC-FCL − drift-aware aggregation (β = 0)",
    "ceiling": "ceiling: FedAvg + GR, no drifting client",
    "oracle": "oracle: FedAvg + GR, drifted clients dropped",
}
DETECTS = {"rcfcl", "rcfcl-no-carry", "rcfcl-no-weights", "rcfcl-no-kd", "feddrift"}
DETECTS |= {"rcfcl-no-drift-aggregation"}


def _pm(v: list[float], scale: float = 100.0) -> str:
    m, h = v
    return f"{scale * m:.1f} ± {scale * h:.1f}" if not math.isnan(h) else f"{scale * m:.1f}"


def _num(v: float, fmt: str) -> str:
    return "—" if math.isnan(v) else format(v, fmt)


def _diff(p: dict) -> str:
    lo, hi = p["ci95"]
    return f"{100 * p['mean']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]".replace("-", "−")


def table(res: dict) -> str:
    head = (
        "| arm | lr: grid → chosen (validation) | λ₀: grid → chosen (validation) "
        "| final accuracy (%) | forgetting (%) "
        "| detection F1 | delay (rounds) | RC-FCL − arm (pts, paired, 95% CI) |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for arm, cfg in res["chosen"].items():
        s, tu = res["summary"][arm], res["tuning"][arm]
        f1 = _num(s["f1"][0], ".2f") if arm in DETECTS else "—"
        delay = _num(s["delay"][0], ".2f") if arm in DETECTS else "—"
        diff = "—" if arm == "rcfcl" else _diff(res["paired"][arm])
        grid = ", ".join(f"{g:g}" for g in tu["grid"])
        lr = f"{{{grid}}} → {cfg['lr']:g}" + ("" if tu["bracketed"] else " (edge)")
        kd = "—"
        if "kd" in tu:  # tuned jointly with lr: each lambda_0 at its own best lr
            kd = ", ".join(f"{k:g}" for k in tu["kd"]["grid"])
            kd = f"{{{kd}}} → {tu['kd']['chosen_kd']:g}"
        elif "kd" in cfg:
            kd = f"{cfg['kd']:g} (fixed)"
        rows.append(
            f"| {NAMES[arm]} | {lr} | {kd} | {_pm(s['accuracy'])} | "
            f"{100 * s['forgetting'][0]:.1f} | {f1} | {delay} | {diff} |"
        )
    return "\n".join(rows)


def headroom(h: dict) -> str:
    rows = [
        "| paired difference (pts) | mean [95% CI] | paired SD | MDE (80% power) | n |",
        "|---|---|---|---|---|",
    ]
    for key, name in (
        ("ceiling_minus_fedavg_gr", "ceiling − (FedAvg + GR): what the drift costs"),
        ("oracle_minus_fedavg_gr", "oracle − (FedAvg + GR): perfect detection, drop"),
        ("rcfcl_minus_fedavg_gr", "**RC-FCL − (FedAvg + GR)**"),
        ("rcfcl_no_detection_minus_fedavg_gr", "RC-FCL − detection − (FedAvg + GR)"),
    ):
        p = h[key]
        rows.append(
            f"| {name} | {_diff(p)} | {100 * p['sd']:.1f} | {100 * p['mde']:.1f} | {p['n']} |"
        )
    rows.append(f"\nshare of the drift's cost recovered by RC-FCL: {h['recovered_fraction']:.2f}")
    return "\n".join(rows)


def task_end(t: dict) -> str:
    s = t["summary"]
    return (
        f"task_end reading, {len(t['seeds'])} seeds, headline lrs: ceiling "
        f"{_pm(s['ceiling']['accuracy'])}, FedAvg + GR {_pm(s['fedavg_gr']['accuracy'])}, "
        f"RC-FCL {_pm(s['rcfcl']['accuracy'])} (F1 {s['rcfcl']['f1'][0]:.2f}); "
        f"ceiling − GR {_diff(t['ceiling_minus_fedavg_gr'])}, "
        f"RC-FCL − GR {_diff(t['rcfcl_minus_fedavg_gr'])}"
    )


def kd_profile(res: dict) -> str:
    """Validation accuracy (%) at every (lambda_0, lr) of the arms that tune lambda_0."""
    out = []
    for arm, tu in res["tuning"].items():
        if "kd" not in tu:
            continue
        for k, by_lr in tu["kd"]["val_accuracy_by_lr"].items():
            cells = ", ".join(f"lr {float(lr):g}: {100 * v:.1f}" for lr, v in by_lr.items())
            out.append(f"  {NAMES[arm]}, λ₀ {float(k):g}: {cells}")
    return "\n".join(out)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results_quick.json"
    d = json.loads(path.read_text())
    digits = {k: d[k] for k in ("chosen", "tuning", "summary")}
    digits["paired"] = d["paired_rcfcl_minus"]
    print("digits:\n" + table(digits) + "\n\nheadroom:\n" + headroom(d["headroom"]))
    prof = kd_profile(digits)
    if prof:
        print("\nvalidation accuracy (%) by lambda_0 and lr:\n" + prof)
    print("\n" + task_end(d["task_end"]))
    diag = path.with_name(path.stem + "_diagnostic.json")
    if diag.is_file():  # reproduce.py --quick --arms ... --out <this file>
        g = json.loads(diag.read_text())
        print(f"\ndiagnostic arms ({diag.name}), paired vs FedAvg + GR:")
        for arm, p in g["paired_minus_fedavg_gr"].items():
            s, tu = g["summary"][arm], g["tuning"][arm]
            print(
                f"  {NAMES[arm]}: lr {tu['chosen_lr']:g} (grid {tu['grid']}), acc "
                f"{_pm(s['accuracy'])}, F1 {s['f1'][0]:.2f}, − (FedAvg + GR) {_diff(p)}, "
                f"MDE {100 * p['mde']:.1f}"
            )
    if d.get("sea"):
        print("\nriver SEA:\n" + table(d["sea"]) + "\n\n" + headroom(d["sea"]["headroom"]))


if __name__ == "__main__":
    main()
