"""The paper's claims as one paired experiment (CPU): normalization, noisy totals, joint and per-agent frequency predictions against the no-information policies.

Neoh, Peters & Teh, "Online Fair Division with Additional Information" (arXiv 2505.24503, ICML
2026) is a theory paper: **no code, no experiments, no data set**. Its claims are theorems,
read from the abstract (the method sections could not be read; see the README):

1. with normalization information (the totals v_i(M)) an online algorithm is PROP1 for every n,
   stronger than without information, where strong impossibilities hold;
2. with noisy totals the guarantee degrades gracefully (here: (1-eps)/(1+eps)-PROP1);
3. with frequency predictions a meta-algorithm lifts offline share-based guarantees online,
   matching the offline bounds (joint reading: exactly; noisy: alpha (1-eps)/(1+eps));
4. the per-agent reading of the predictions (here: (1/n)-MMS, MMSThresholdGreedy).

This recipe runs every arm of the package on one shared instance set, paired per instance:

A. PROP1 / EF1 block: random instances (uniform, correlated, heavy-tailed, bivalued values;
   n = 2, 3, 5, 10 agents; m = 50, 200 goods; 25 seeds per cell: 800 instances) plus the
   cap-overshoot family (n = 4 ... 10) and 56 seeded perturbations of it. Arms: Greedy,
   RoundRobin, Random (no information); CappedGreedy with exact totals; CappedGreedy(slack=eps)
   and (slack=0) with totals off by +-eps at the band's ends, eps = 0.1, 0.2, 0.3, 0.5;
   PlanAndMatch(round_robin) with the exact (shuffled) joint multiset and with +-eps noise, and
   round_robin offline on the same multiset (the offline bound PlanAndMatch must match).
B. MMS block (exact MMS by MILP): n = 2 with m = 12 and n = 3 with m = 9, the four value
   kinds, 25 seeds (200 instances). Arms: Greedy, RoundRobin, CappedGreedy (exact totals),
   MMSThresholdGreedy (exact per-agent multisets), PlanAndMatch(mms_bag_filling) and
   PlanAndMatch(max_mms_ratio) with the exact joint multiset, and both offline.

Evidence, paired per instance (ours - baseline, per-instance ratio in [0, 1]): CappedGreedy -
RoundRobin / Greedy in PROP1 (random and constructed instances separately); CappedGreedy
(slack=eps) - (slack=0) in PROP1 per eps; PlanAndMatch - offline (0 = the bound is matched) and
PlanAndMatch - Greedy in EF1 / MMS; MMSThresholdGreedy - Greedy in MMS. The worst-case facts
(CappedGreedy PROP1 on every instance, the noisy arm above (1-eps)/(1+eps), MMSThresholdGreedy
above 1/n, PlanAndMatch's bundles = the offline plan's) are in ``results.checks``.

Known (abstract): the information models, the notions, "PROP1 for normalization", the lift of
offline share guarantees, graceful degradation. Reconstructions ([recon]): every algorithm and
bound (the package's, derived here), the instance families, n, m, eps grid and seed counts (the
paper has no experiments), noise at the band's ends (the worst case of the +-eps band).

``--dataset PATH`` runs on a local .jsonl of instances, one per line in fairpyx's valuation
schema: ``{"name": str, "block": "prop1" | "mms", "family": str, "valuations": {agent: {item:
value}}, "order": [item, ...]}`` (the default generates the instances above and writes them in
this schema first, so both go through the same loader; 13 MB for the default set).
``--smoke``: 16 + 3 + 8 instances of 6-8 goods (about 2 s).

Cost (CPU only; measured, two default runs on the shared 2-core dev machine, 2026-12-08, with
identical results): 118 and 138 CPU-s (about 0.04 CPU-hours; 5.7 and 7.6 min wall at nice 10
under load), most of it the MMS block's MILPs. Measured then: CappedGreedy PROP1 on all 1063 instances; CappedGreedy - RoundRobin PROP1
+0.033 [+0.029, +0.036] on the 800 random instances; PlanAndMatch - offline exactly 0 (EF1 and
MMS); the numbers per claim are in the README's "The paper's experiment".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

PAPER: dict[str, Any] = {
    "arxiv": "2505.24503",
    "kinds": ["uniform", "correlated", "heavy_tailed", "bivalued"],  # [recon]
    "ns": [2, 3, 5, 10],  # [recon]
    "ms": [50, 200],  # [recon]
    "seeds": 25,  # [recon]: per (kind, n, m) cell
    "overshoot_ns": [4, 5, 6, 7, 8, 9, 10],  # the cap-overshoot family
    "overshoot_perturbed": 56,  # [recon]
    "eps": [0.1, 0.2, 0.3, 0.5],  # [recon]
    "mms_cells": [[2, 12], [3, 9]],  # [recon]: (n, m) with exact MMS by MILP
    "mms_seeds": 25,  # [recon]
    "noise": "extreme",  # totals / predictions at the ends of the +-eps band
    "claims": {
        "normalization": "PROP1 for every n (CappedGreedy)",
        "noisy_totals": "(1-eps)/(1+eps)-PROP1 (CappedGreedy(slack=eps))",
        "joint_prediction": "offline guarantee transfers exactly (PlanAndMatch)",
        "per_agent_prediction": "(1/n)-MMS (MMSThresholdGreedy)",
    },
}
SMOKE: dict[str, Any] = {
    "kinds": PAPER["kinds"],
    "ns": [2, 3],
    "ms": [8],
    "seeds": 2,
    "overshoot_ns": [4],
    "overshoot_perturbed": 2,
    "eps": [0.2],
    "mms_cells": [[2, 6], [3, 6]],
    "mms_seeds": 1,
}
NOTIONS = ("prop1", "ef1", "mms")  # mms: only in the MMS block (None elsewhere)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--dataset",
        default=None,
        help="local .jsonl of instances in fairpyx's valuation schema (default: generate the "
        "paper-sized synthetic set and write it beside --out)",
    )
    p.add_argument(
        "--seeds", type=int, default=PAPER["seeds"], help="random instances per (kind, n, m) cell"
    )
    p.add_argument(
        "--eps", type=float, nargs="+", default=PAPER["eps"], help="noise levels of the noisy arms"
    )
    p.add_argument(
        "--mms-seeds", type=int, default=PAPER["mms_seeds"], help="instances per MMS (kind, n, m)"
    )
    p.add_argument(
        "--allocations",
        action="store_true",
        help="store every arm's owner vector per instance (always on with --smoke)",
    )
    p.add_argument("--out", default="paper_online-fair.json", help="output JSON path")
    p.add_argument("--smoke", action="store_true", help="tiny instances, seconds, offline")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


# ----------------------------------------------------------------------------- instances
def generate(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """The synthetic instance set as jsonl rows (fairpyx valuation schema), seeded."""
    import icml26_online_fair as of
    import numpy as np

    rows: list[dict[str, Any]] = []

    def row(name, block, family, inst):
        v, order = inst.values, inst.order
        agents = [f"a{i}" for i in range(v.shape[0])]
        items = [f"g{g}" for g in range(v.shape[1])]
        vals = {a: {it: float(v[i, g]) for g, it in enumerate(items)} for i, a in enumerate(agents)}
        rows.append(
            {
                "name": name,
                "block": block,
                "family": family,
                "valuations": vals,
                "order": [items[g] for g in order],
            }
        )

    for kind in cfg["kinds"]:
        for n in cfg["ns"]:
            for m in cfg["ms"]:
                for s in range(cfg["seeds"]):
                    inst = of.random_instance(n, m, kind, np.random.default_rng([n, m, s, 11]))
                    row(f"{kind}-n{n}-m{m}-s{s}", "prop1", f"random:{kind}", inst)
    for n in cfg["overshoot_ns"]:
        row(f"overshoot-n{n}", "prop1", "constructed", of.overshoot_instance(n))
    rng = np.random.default_rng(7)
    lo, hi = min(cfg["overshoot_ns"]), max(cfg["overshoot_ns"])
    for k in range(cfg["overshoot_perturbed"]):  # the perturbation reproduce.py's headline uses
        n = int(rng.integers(lo, hi + 1))
        base = of.overshoot_instance(n, delta=float(rng.uniform(0.002, 0.05)))
        v = base.values.copy()
        v[n - 1, :-1] *= rng.uniform(0.9, 1.0, base.m - 1)
        v[n - 1, -1] = 1.0 - v[n - 1, :-1].sum()
        inst = of.OnlineInstance(v[rng.permutation(n)], rng.permutation(base.m))
        row(f"overshoot-perturbed-{k}", "prop1", "constructed", inst)
    for kind in cfg["kinds"]:
        for n, m in cfg["mms_cells"]:
            for s in range(cfg["mms_seeds"]):
                inst = of.random_instance(n, m, kind, np.random.default_rng([n, m, s, 23]))
                row(f"mms-{kind}-n{n}-m{m}-s{s}", "mms", f"random:{kind}", inst)
    return rows


def load_instances(path: str) -> list[tuple[dict[str, Any], Any]]:
    """(row, OnlineInstance) for every line of a .jsonl in the schema of the module docstring."""
    import icml26_online_fair as of

    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"--dataset: no such file {path!r}")
    out = []
    for k, line in enumerate(p.read_text().splitlines()):
        if not line.strip():
            continue
        r = json.loads(line)
        missing = {"name", "valuations"} - set(r)
        if missing:
            raise SystemExit(f"--dataset: line {k + 1} lacks {sorted(missing)}")
        r.setdefault("block", "prop1")
        r.setdefault("family", "dataset")
        if r["block"] not in ("prop1", "mms"):
            raise SystemExit(f"--dataset: line {k + 1}: block must be 'prop1' or 'mms'")
        inst = of.OnlineInstance(r["valuations"])
        if r.get("order") is not None:
            pos = {it: g for g, it in enumerate(inst.items)}
            inst = inst.with_order([pos[it] for it in r["order"]])
        out.append((r, inst))
    if not out:
        raise SystemExit(f"--dataset: {path!r} holds no instance")
    return out


# ----------------------------------------------------------------------------- arms
def arms(block: str, eps_grid: list[float]) -> list[tuple[str, Any, str, float]]:
    """(label, policy factory(idx), information, eps) of every arm of a block."""
    import icml26_online_fair as of

    out: list[tuple[str, Any, str, float]] = [
        ("none: Greedy", lambda i: of.GreedyPolicy(), "none", 0.0),
        ("none: RoundRobin", lambda i: of.RoundRobinPolicy(), "none", 0.0),
        ("none: Random", lambda i: of.RandomPolicy(i), "none", 0.0),
        ("totals: CappedGreedy", lambda i: of.CappedGreedy(), "totals", 0.0),
    ]
    if block == "prop1":
        for e in eps_grid:
            out += [
                (f"totals ±{e}: CappedGreedy(slack=ε)", lambda i: of.CappedGreedy(), "totals", e),
                (
                    f"totals ±{e}: CappedGreedy(slack=0)",
                    lambda i: of.CappedGreedy(slack=0.0),
                    "totals",
                    e,
                ),
            ]
        out.append(
            (
                "joint: PlanAndMatch(round_robin)",
                lambda i: of.PlanAndMatch(of.round_robin),
                "joint",
                0.0,
            )
        )
        for e in eps_grid:
            out.append(
                (
                    f"joint ±{e}: PlanAndMatch(round_robin)",
                    lambda i: of.PlanAndMatch(of.round_robin),
                    "joint",
                    e,
                )
            )
    else:
        out += [
            ("per-agent: MMSThresholdGreedy", lambda i: of.MMSThresholdGreedy(), "per_agent", 0.0),
            (
                "joint: PlanAndMatch(mms_bag_filling)",
                lambda i: of.PlanAndMatch(of.mms_bag_filling),
                "joint",
                0.0,
            ),
            (
                "joint: PlanAndMatch(max_mms_ratio)",
                lambda i: of.PlanAndMatch(of.max_mms_ratio),
                "joint",
                0.0,
            ),
        ]
    return out


OFFLINE = {"prop1": ["round_robin"], "mms": ["mms_bag_filling", "max_mms_ratio"]}


def information(kind: str, eps: float, inst: Any, idx: int) -> Any:
    """The arm's side information for instance ``idx`` (noise seeded by idx and eps)."""
    import icml26_online_fair as of
    import numpy as np

    rng = np.random.default_rng([idx, round(eps * 1000), 5])
    if kind == "none":
        return None
    if kind == "totals":
        if eps == 0:
            return of.NormalizationInfo.exact(inst)
        return of.NormalizationInfo.noisy(inst, eps, rng, PAPER["noise"])
    if kind == "per_agent":
        return of.FrequencyPrediction.exact(inst, "per_agent", rng)
    if eps == 0:
        return of.FrequencyPrediction.exact(inst, "joint", np.random.default_rng([idx, 0, 5]))
    return of.FrequencyPrediction.noisy(inst, eps, "joint", rng, PAPER["noise"])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    import icml26_online_fair as of
    import numpy as np
    from icml26_kernels.evidence import comparison, evidence, headroom, pin_threads

    threads = pin_threads(1)
    cfg = {k: PAPER[k] for k in SMOKE}
    cfg.update(seeds=args.seeds, eps=list(args.eps), mms_seeds=args.mms_seeds)
    for e in args.eps:
        if not 0.0 < e < 1.0:
            raise SystemExit(f"--eps: every noise level must be in (0, 1), got {e}")
    for name in ("seeds", "mms_seeds"):
        if getattr(args, name) < 0:
            raise SystemExit(f"--{name.replace('_', '-')}: must be >= 0")
    if args.smoke:
        cfg.update(SMOKE)
        args.eps = cfg["eps"]
        args.allocations = True
    out = Path(args.out)
    t0 = time.time()
    data = args.dataset
    if data is None:
        data = str(out.with_suffix(".instances.jsonl"))
        Path(data).write_text("".join(json.dumps(r) + "\n" for r in generate(cfg)))
    loaded = load_instances(data)
    log(f"{len(loaded)} instances from {data}")

    inst_meta, res_arms = [], {}
    mms_cache: dict[int, Any] = {}
    for idx, (r, inst) in enumerate(loaded):
        inst_meta.append(
            {
                "name": r["name"],
                "block": r["block"],
                "family": r["family"],
                "n": inst.n,
                "m": inst.m,
            }
        )
        notions = NOTIONS[:2] if r["block"] == "prop1" else NOTIONS
        if r["block"] == "mms":
            mms_cache[idx] = of.mms_values(inst.values)
        for label, make, kind, e in arms(r["block"], args.eps):
            info = information(kind, e, inst, idx)
            pol = make(idx)
            alloc = of.divide_online(pol, inst, info)
            a = res_arms.setdefault(
                label, {"information": kind, "eps": e, "index": [], "ratios": {}, "owner": []}
            )
            a["index"].append(idx)
            for nt in NOTIONS:
                val = (
                    None
                    if nt not in notions
                    else of.mms_ratio(inst.values, alloc.owner, mms_cache[idx])
                    if nt == "mms"
                    else of.approx_ratio(inst.values, alloc.owner, nt)
                )
                a["ratios"].setdefault(nt, []).append(None if val is None else float(val))
            if isinstance(pol, of.PlanAndMatch):
                a.setdefault("max_distance", []).append(pol.max_distance)
            if args.allocations:
                a["owner"].append([int(x) for x in alloc.owner])
                if isinstance(info, of.NormalizationInfo):
                    a.setdefault("totals", []).append([float(t) for t in info.totals])
        # the offline reference: the same algorithm on the exact joint multiset PlanAndMatch sees
        pred = information("joint", 0.0, inst, idx)
        for name in OFFLINE[r["block"]]:
            owner = getattr(of, name)(np.array(pred.values))
            a = res_arms.setdefault(
                f"offline: {name}",
                {"information": "full", "eps": 0.0, "index": [], "ratios": {}, "owner": []},
            )
            a["index"].append(idx)
            for nt in NOTIONS:
                val = (
                    None
                    if nt not in notions
                    else of.mms_ratio(pred.values, owner, mms_cache[idx])
                    if nt == "mms"
                    else of.approx_ratio(pred.values, owner, nt)
                )
                a["ratios"].setdefault(nt, []).append(None if val is None else float(val))
            if args.allocations:
                a["owner"].append([int(x) for x in owner])
        if not args.quiet and (idx + 1) % 100 == 0:
            log(f"  {idx + 1}/{len(loaded)} instances, {time.time() - t0:.0f}s")
    if not args.allocations:
        for a in res_arms.values():
            a.pop("owner")

    fam = [m["family"] for m in inst_meta]

    def vec(label: str, notion: str, keep) -> tuple[np.ndarray, list[int]]:
        a = res_arms[label]
        got = zip(a["index"], a["ratios"][notion])
        pairs = [(i, x) for i, x in got if keep(i) and x is not None]
        return np.array([x for _, x in pairs]), [i for i, _ in pairs]

    comps = []
    summary: dict[str, Any] = {}
    for label, a in res_arms.items():
        summary[label] = {}
        for nt, xs in a["ratios"].items():
            x = np.asarray([v for v in xs if v is not None])
            if x.size == 0:
                continue
            summary[label][nt] = {
                "mean": float(x.mean()),
                "min": float(x.min()),
                "violations": int((x < 1 - 1e-9).sum()),
                "n": int(x.size),
            }

    def paired(name, notion, ours, base, keep, stat, target=None, tsrc=None, room=None, note=None):
        xo, io = vec(ours, notion, keep)
        xb, ib = vec(base, notion, keep)
        if io != ib or xo.size < 2:
            return
        hr = room if room is not None else headroom(1.0, float(xb.mean()), f"ratio 1 minus {base}")
        comps.append(
            comparison(
                name,
                stat,
                (xo - xb).tolist(),
                target=target,
                target_source=tsrc or "theorem: a guarantee, no number to match on these instances",
                headroom=hr,
                headroom_note=note,
                unit="ratio",
                higher_is_better=True,
            )
        )

    is_random = lambda i: fam[i].startswith("random") and inst_meta[i]["block"] == "prop1"
    is_constr = lambda i: fam[i] == "constructed"
    is_ds = lambda i: inst_meta[i]["block"] == "prop1" and fam[i] == "dataset"
    for base in ("none: RoundRobin", "none: Greedy"):
        for tag, keep in (("random", is_random), ("constructed", is_constr), ("dataset", is_ds)):
            paired(
                f"normalization ({tag}): PROP1, CappedGreedy (exact totals) - {base[6:]}",
                "prop1",
                "totals: CappedGreedy",
                base,
                keep,
                "PROP1 ratio per instance, paired (same instance and order)",
            )
    prop1_block = lambda i: inst_meta[i]["block"] == "prop1"
    for e in args.eps:
        paired(
            f"noisy totals ±{e}: PROP1, CappedGreedy(slack=ε) - CappedGreedy(slack=0)",
            "prop1",
            f"totals ±{e}: CappedGreedy(slack=ε)",
            f"totals ±{e}: CappedGreedy(slack=0)",
            prop1_block,
            "PROP1 ratio per instance, same noisy totals for both arms, paired",
        )
    paired(
        "joint prediction: EF1, PlanAndMatch(round_robin) - offline round_robin",
        "ef1",
        "joint: PlanAndMatch(round_robin)",
        "offline: round_robin",
        prop1_block,
        "EF1 ratio per instance, paired; 0 = the offline guarantee is matched exactly",
        tsrc="claim: the lift matches the offline bound (difference exactly 0, no effect size)",
        note="the claim is equality with the offline algorithm: there is no headroom above it",
    )
    paired(
        "joint prediction: EF1, PlanAndMatch(round_robin) - Greedy (no information)",
        "ef1",
        "joint: PlanAndMatch(round_robin)",
        "none: Greedy",
        prop1_block,
        "EF1 ratio per instance, paired",
    )
    mms_block = lambda i: inst_meta[i]["block"] == "mms"
    for off in OFFLINE["mms"]:
        paired(
            f"joint prediction: MMS, PlanAndMatch({off}) - offline {off}",
            "mms",
            f"joint: PlanAndMatch({off})",
            f"offline: {off}",
            mms_block,
            "MMS ratio per instance, paired; 0 = the offline guarantee is matched exactly",
            tsrc="claim: the lift matches the offline bound (difference exactly 0, no effect size)",
            note="the claim is equality with the offline algorithm: there is no headroom above it",
        )
    for ours in ("joint: PlanAndMatch(max_mms_ratio)", "per-agent: MMSThresholdGreedy"):
        paired(
            f"{ours.split(':')[0]} prediction: MMS, {ours.split(': ')[1]} - Greedy",
            "mms",
            ours,
            "none: Greedy",
            mms_block,
            "MMS ratio per instance, paired",
        )

    # worst-case facts the theorems state (recomputed by the test from the owner vectors)
    checks: dict[str, Any] = {}
    x, _ = vec("totals: CappedGreedy", "prop1", lambda i: True)
    checks["capped_greedy_prop1_everywhere"] = bool(x.min() >= 1 - 1e-9)
    for e in args.eps:
        bound = (1 - e) / (1 + e)
        x, _ = vec(f"totals ±{e}: CappedGreedy(slack=ε)", "prop1", lambda i: True)
        checks[f"noisy_totals_{e}"] = {
            "bound": bound,
            "min_prop1": float(x.min()),
            "holds": bool(x.min() >= bound - 1e-9),
        }
        if f"joint ±{e}: PlanAndMatch(round_robin)" in res_arms:
            a = res_arms[f"joint ±{e}: PlanAndMatch(round_robin)"]
            d = np.asarray(a["max_distance"])
            ef = np.asarray(a["ratios"]["ef1"])
            cert = (1 - e) / (1 + d)
            checks[f"noisy_joint_{e}"] = {
                "min_ef1": float(ef.min()),
                "max_distance": float(d.max()),
                "certificate_holds": bool(np.all(ef >= np.minimum(1.0, cert) - 1e-9)),
            }
    if "per-agent: MMSThresholdGreedy" in res_arms:
        a = res_arms["per-agent: MMSThresholdGreedy"]
        ns = np.array([inst_meta[i]["n"] for i in a["index"]])
        r = np.asarray(a["ratios"]["mms"], dtype=float)
        checks["mms_threshold_one_over_n"] = {
            "min_ratio_times_n": float((r * ns).min()),
            "holds": bool(np.all(r >= 1.0 / ns - 1e-9)),
        }
    for off in ("round_robin", *OFFLINE["mms"]):
        lab = f"joint: PlanAndMatch({off})"
        if lab in res_arms:
            nt = "ef1" if off == "round_robin" else "mms"
            xo, io = vec(lab, nt, lambda i: True)
            xb, ib = vec(f"offline: {off}", nt, lambda i: True)
            checks[f"plan_and_match_{off}_matches_offline"] = bool(
                io == ib and np.allclose(xo, xb, rtol=0, atol=1e-9)
            )
    wall = time.time() - t0
    doc = {
        "recipe": "online-fair",
        "paper": PAPER,
        "config": {**vars(args), "cfg": cfg, "dataset": data, "instances": len(loaded)},
        "smoke": bool(args.smoke),
        "hardware": {"device": "cpu", "torch": None, "threads": threads, "wall_s": wall},
        "results": {
            "instances": inst_meta,
            "arms": res_arms,
            "summary": summary,
            "checks": checks,
        },
        "evidence": evidence(comparisons=comps, tuning=[]),
    }
    out.write_text(json.dumps(doc, indent=1, default=str))
    for c in comps:
        log(
            f"  {c['name']}: {c['diff']:+.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}] n={c['n']}"
        )
    log(f"checks: {json.dumps(checks)}")
    log(f"wrote {out} ({wall:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
