"""The README's results tables, generated from reproduce.py's JSON.

    python benchmarks/table.py                 # print the tables of reproduce_quick.json
    python benchmarks/table.py FILE            # ... of another JSON
    python benchmarks/table.py --write         # rewrite the README's generated blocks

The README holds one generated block per JSON, between ``<!-- table:NAME -->`` and
``<!-- /table:NAME -->``: ``quick`` (``reproduce_quick.json``), ``full`` (``reproduce.json``),
``signal`` (``search_signal.json``) and ``planted`` (``planted_depth.json``);
``tests/test_readme.py`` checks that they match the committed JSON.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproduce import mde_from_interval

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
BLOCKS = {
    "quick": HERE / "reproduce_quick.json",
    "full": HERE / "reproduce.json",
    "signal": HERE / "search_signal.json",
    "planted": HERE / "planted_depth.json",
}
NAMES = {
    "split": "Split-Digits (task-IL, 5 tasks)",
    "permuted": "Permuted-Digits (domain-IL, 4 tasks)",
}


def pct(iv: list[float]) -> str:
    m, lo, hi = (100 * v for v in iv)
    return f"{m:.1f} [{lo:.1f}, {hi:.1f}]"


def pts(iv: list[float]) -> str:
    m, lo, hi = iv
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def mde(iv: list[float], n: int) -> str:
    """Minimum detectable paired effect (80% power, 5% two-sided, icml26_kernels.evidence.mde)
    at the paired SD the t-interval's half-width t_{0.975, n-1} SD/√n implies."""
    return f"{mde_from_interval(iv, n):.1f}"


def grown_per_block(plans: list[list[dict]], layers: int) -> str:
    """Slots grown, summed over tasks and seeds, per block (input to output)."""
    counts = [0] * layers
    for seed_plans in plans:
        for plan in seed_plans:
            for name, slots in plan.items():
                counts[int(name.split(".")[1])] += len(slots)
    return "/".join(str(c) for c in counts)


def render(data: dict) -> str:
    n = len(data["seeds"])
    layers = data["config"]["layers"]
    out = []
    for seq, res in data["summary"].items():
        out.append(f"**{NAMES.get(seq, seq)}** (mean [95% t-interval] over {n} seeds)\n")
        out.append(
            "| arm | lr | average accuracy % | forgetting % | BWT % | added params | grown per block |"
        )
        out.append("|---|---|---|---|---|---|---|")
        for arm, r in res["arms"].items():
            ap = r["added_params"]
            grown = grown_per_block(r["plans"], layers) if ap[0] > 0 else "-"
            out.append(
                f"| {arm} | {data['lr'][seq][arm]:g} | {pct(r['average_accuracy'])} | "
                f"{pct(r['forgetting'])} | {pct(r['bwt'])} | {ap[0]:,.0f} | {grown} |"
            )
        out.append("")
        out.append("| claim | paper (TRACE) | ours | MDE (pts) |")
        out.append("|---|---|---|---|")
        out.append(
            f"| forgetting reduction vs SeqFT | 80% | {100 * res['forgetting_reduction_vs_seqft']:.0f}% | |"
        )
        out.append(
            f"| added params / full upcycling | 40% | {100 * res['added_params_fraction_of_full']:.0f}% | |"
        )
        for key, label, paper in [
            ("acc_selective_minus_full_pts", "selective − full", "> 0"),
            ("acc_selective_minus_replay_pts", "selective − replay", "n/a"),
            ("acc_selective_minus_random_pts", "selective − random growth of equal size", "n/a"),
        ]:
            if key in res:
                iv = res[key]
                out.append(
                    f"| avg accuracy, {label} (pts, paired) | {paper} | {pts(iv)} | {mde(iv, n)} |"
                )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


SIGNAL_ROWS = {
    "all": '`"all"` (default: every candidate trains in the inner step)',
    "sampled": '`"sampled"` (inner step under the hard draw, GDAS-style)',
    "diagnostic": "no search: `diagnostic_plan` (drift × sensitivity, 2 slots per task)",
}


def render_signal(data: dict) -> str:
    n = len(data["seeds"])
    out = [
        f"Split-Digits, {n} paired seeds ({data['seeds'][0]}–{data['seeds'][-1]}), lr 3e-3, "
        f"the constants of `reproduce.py`; {data['seconds']:.0f} s wall.\n",
        "| plan | corr(p_grow, drawn) | slots grown per task | grown per block | "
        "plan − random of equal size, avg acc (pts, 95% t-interval) | MDE (pts) |",
        "|---|---|---|---|---|---|",
    ]
    for mode in ("all", "sampled", "diagnostic"):
        r = data["modes"][mode]
        corr = f"{r['corr_mean']:+.2f}" if "corr_mean" in r else "n/a"
        per_task = (
            sum(sum(c) for c in r["grown_per_task"]) / sum(len(c) for c in r["grown_per_task"])
            if "grown_per_task" in r
            else sum(len(v) for p in r["plans"] for t in p for v in t.values())
            / sum(len(p) for p in r["plans"])
        )
        grown = grown_per_block(r["plans"], data["config"]["layers"]) if "plans" in r else "?"
        out.append(
            f"| {SIGNAL_ROWS[mode]} | {corr} | {per_task:.1f} | {grown} | "
            f"{pts(r['selective_minus_random_pts'])} | {r['mde_pts']:.1f} |"
        )
    return "\n".join(out) + "\n"


PLANTED_ROWS = {
    "bilevel_all": ('bilevel, `"all"`', "0.02"),
    "bilevel_sampled": ('bilevel, `"sampled"`', "0.02"),
    "bilevel_all_lp": ('bilevel, `"all"` (variant)', "0.8"),
    "bilevel_sampled_lp": ('bilevel, `"sampled"` (variant)', "0.8"),
    "bilevel_uniform": ('bilevel, `"uniform"` (variant)', "0.02"),
    "bilevel_uniform_lp": ('bilevel, `"uniform"` (variant)', "1.6"),
    "diagnostic": ("`diagnostic_plan`, budget 1", "n/a"),
}


def render_planted(data: dict) -> str:
    sm, n = data["summary"], len(data["seeds"])

    def iv(d: dict) -> str:
        return f"{d['mean']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}] ({d['mde']:.4f})"

    h = sm["headroom"]
    out = [
        f"{n} paired seeds ({data['seeds'][0]}–{data['seeds'][-1]}); loss unit: the no-growth "
        f"new-task MSE; total = new + old test loss (lower is better); {data['cpu_seconds']:.0f} "
        "CPU-s.\n",
        "| growth | none | block 0 | block 1 | block 2 (oracle) | all three |",
        "|---|---|---|---|---|---|",
        "| total loss | "
        + " | ".join(
            f"{h[k]['total_mean']:.4f}" for k in ("none", "grow_0", "grow_1", "grow_2", "grow_all")
        )
        + " |",
        "",
        f"Oracle − block 0: {iv(sm['oracle_minus_grow_0'])}; oracle − block 1: "
        f"{iv(sm['oracle_minus_grow_1'])} (mean [95% t-interval] (MDE)).\n",
        "| plan | λ_p | seeds growing only the deep block | deep share of growth | "
        "total − random of equal size (MDE) | total − oracle (MDE) |",
        "|---|---|---|---|---|---|",
    ]
    for key, (label, lp) in PLANTED_ROWS.items():
        r = sm["methods"][key]
        out.append(
            f"| {label} | {lp} | {round(n * r['frac_seeds_only_deep'])}/{n} | "
            f"{r['deep_mass']:.2f} | {iv(r['minus_random'])} | {iv(r['minus_oracle'])} |"
        )
    return "\n".join(out) + "\n"


RENDER = {"quick": render, "full": render, "signal": render_signal, "planted": render_planted}


def block(name: str) -> str:
    return RENDER[name](json.loads(BLOCKS[name].read_text()))


def write() -> None:
    text = README.read_text()
    for name in BLOCKS:
        pat = re.compile(rf"(<!-- table:{name} -->\n).*?(<!-- /table:{name} -->)", re.S)
        if not pat.search(text):
            raise SystemExit(f"README.md has no <!-- table:{name} --> block")
        text = pat.sub(lambda m: m.group(1) + block(name) + m.group(2), text)  # noqa: B023
    README.write_text(text)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        path = sys.argv[1] if len(sys.argv) > 1 else str(BLOCKS["quick"])
        print(render(json.loads(Path(path).read_text())))
