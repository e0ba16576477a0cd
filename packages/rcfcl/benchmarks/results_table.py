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
    "rcfcl-no-weights": "RC-FCL − sample weights",
    "rcfcl-no-kd": "RC-FCL − calibrated distillation",
    "rcfcl-no-drift-aggregation": "RC-FCL − drift-aware aggregation (β = 0)",
}


def _pm(v: list[float], scale: float = 100.0) -> str:
    m, h = v
    return f"{scale * m:.1f} ± {scale * h:.1f}" if not math.isnan(h) else f"{scale * m:.1f}"


def _num(v: float, fmt: str) -> str:
    return "—" if math.isnan(v) else format(v, fmt)


def table(res: dict) -> str:
    head = (
        "| arm | lr (chosen on validation) | final accuracy (%) | forgetting (%) | detection F1 "
        "| delay (rounds) | RC-FCL − arm (pts, paired) |\n|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for arm, cfg in res["chosen"].items():
        s = res["summary"][arm]
        det = (arm.startswith("rcfcl") and arm != "rcfcl-no-detection") or arm == "feddrift"
        f1 = _num(s["f1"][0], ".2f") if det else "—"
        delay = _num(s["delay"][0], ".2f") if det else "—"
        diff = "—" if arm == "rcfcl" else _pm(res["paired"][arm]).replace("-", "−")
        if diff[0].isdigit():
            diff = "+" + diff
        rows.append(
            f"| {NAMES[arm]} | {cfg['lr']:g} | {_pm(s['accuracy'])} | "
            f"{100 * s['forgetting'][0]:.1f} | {f1} | {delay} | {diff} |"
        )
    return "\n".join(rows)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results_quick.json"
    d = json.loads(path.read_text())
    digits = {
        "chosen": d["chosen"],
        "summary": d["summary"],
        "paired": d["paired_rcfcl_minus"],
    }
    print("digits:\n" + table(digits) + "\n\nriver SEA:\n" + table(d["sea"]))


if __name__ == "__main__":
    main()
