"""The facade under load (issue 68): throughput, p50/p99 latency, lost requests and the batch
sizes formed, against the number of concurrent loopback clients.

    python benchmarks/serve_load.py                      # -> benchmarks/serve_load.json (+ .png)
    python benchmarks/serve_load.py --quick              # fewer client counts and rounds
    python benchmarks/serve_load.py --baseline d2653a8   # also the facade before issue 68
    python benchmarks/serve_load.py --plot benchmarks/serve_load.json   # the figure only

The pipeline is the test suite's loopback one (``tests/test_skillmoe_serve.py``'s local
experts: real load/unload life cycle, answers computed in Python), so the numbers measure the
serving layer and the batching, not an LLM. The clients are ``tests/test_skillmoe_serve_load.py``'s
``fire``: one asyncio task per client, all released in the same event-loop turn, one TCP
connection and one POST each, a per-request deadline. *Lost* = no HTTP response (reset, EOF,
refused, timeout). Each setting runs ``rounds`` rounds on one server; intervals are 95%
Student-t over rounds (throughput, p50, p99) and Wilson over requests (lost fraction).
``--baseline COMMIT`` loads ``serve.py`` of that commit from git and runs the same clients
against it (default settings: max_batch 32, max_wait_ms 50).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="fewer client counts and rounds (about a minute)"
    )
    ap.add_argument("--baseline", metavar="COMMIT", help="also run serve.py of this commit")
    ap.add_argument(
        "--baseline-rounds", type=int, default=2, help="rounds per setting of the baseline run"
    )
    ap.add_argument("--timeout", type=float, default=60.0, help="per-request deadline, s")
    ap.add_argument(
        "--out",
        type=Path,
        default=HERE / "serve_load.json",
        help="the JSON to write (default: benchmarks/serve_load.json; the figure beside it)",
    )
    ap.add_argument("--plot", type=Path, metavar="JSON", help="only draw the figure of a JSON")
    ap.add_argument("--table", type=Path, metavar="JSON", help="only print the README table")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the heavy imports below

import numpy as np

PKG = HERE.parent
sys.path.insert(0, str(PKG))  # the tests package: the pipeline and the load generator

FULL = {"clients": [1, 8, 32, 100, 200, 400, 800], "rounds": 5}
QUICK = {"clients": [1, 32, 200, 400], "rounds": 2}
OVERLOAD = {"clients": [400, 800], "max_queue": 64}
BASELINE_CLIENTS = [50, 100, 200, 400]


def _legacy_make_server(commit: str):
    """``make_server`` of ``serve.py`` at ``commit`` (the http.server facade), from git."""
    rel = "packages/skillmoe/src/icml26_skillmoe/serve.py"
    src = subprocess.run(
        ["git", "show", f"{commit}:{rel}"], cwd=PKG, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "serve_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("icml26_skillmoe._serve_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "icml26_skillmoe"  # its relative imports resolve in the package
    spec.loader.exec_module(mod)
    return mod.make_server


def _stats(values: list[float]) -> dict:
    from icml26_kernels.evidence import t_interval

    if len(values) >= 2:
        m, lo, hi = t_interval(values)
        return {"mean": m, "ci95": [lo, hi], "rounds": values}
    return {"mean": values[0] if values else None, "ci95": None, "rounds": values}


def run_setting(make_server, clients: int, rounds: int, timeout: float, **kw) -> dict:
    from icml26_kernels.evidence import wilson
    from tests.test_skillmoe_serve import local_moe
    from tests.test_skillmoe_serve_load import chat_body, check_answers, fire

    moe = local_moe(Counter())
    facade = make_server(moe, port=0, **kw)
    th = threading.Thread(target=facade.serve_forever, daemon=True)
    th.start()
    host, port = facade.server_address[:2]
    url = f"http://{host}:{port}/v1/chat/completions"
    per_round = []
    try:
        check_answers([0], fire(url, [chat_body("Compute the residue of 0")], timeout=timeout))
        for r in range(rounds):
            before = len(facade.batches)
            ns = list(range(10_000 * (r + 1), 10_000 * (r + 1) + clients))
            t0 = time.perf_counter()
            outs = fire(
                url, [chat_body(f"Compute the residue of {n}") for n in ns], timeout=timeout
            )
            wall = time.perf_counter() - t0
            counts = check_answers(ns, outs)  # every 200 is its own question's right answer
            lat = sorted(o.latency_s for o in outs if o.status == 200)
            sizes = [s for s, _ in list(facade.batches)[before:]]
            retry = [int(o.headers.get("retry-after", -1)) for o in outs if o.status == 503]
            per_round.append(
                {
                    "wall_s": wall,
                    "statuses": {str(k): v for k, v in sorted(counts.items(), key=str)},
                    "lost": sum(1 for o in outs if o.lost),
                    "ok": counts.get(200, 0),
                    "throughput_rps": counts.get(200, 0) / wall,
                    "p50_s": float(np.percentile(lat, 50)) if lat else None,
                    "p99_s": float(np.percentile(lat, 99)) if lat else None,
                    "batch_sizes": sizes,
                    "retry_after_s": sorted(set(retry)),
                }
            )
            print(
                f"  clients={clients} round={r} {dict(counts)} wall={wall:.2f}s "
                f"batches={len(sizes)} max={max(sizes, default=0)}",
                flush=True,
            )
    finally:
        facade.shutdown()
        facade.server_close()
        th.join(30)
    lost = sum(x["lost"] for x in per_round)
    total = clients * rounds
    p, lo, hi = wilson(lost, total)
    return {
        "clients": clients,
        "settings": kw,
        "requests": total,
        "lost": lost,
        "lost_fraction": {"value": p, "wilson95": [lo, hi]},
        "throughput_rps": _stats([x["throughput_rps"] for x in per_round]),
        "p50_s": _stats([x["p50_s"] for x in per_round if x["p50_s"] is not None]),
        "p99_s": _stats([x["p99_s"] for x in per_round if x["p99_s"] is not None]),
        "mean_batch_size": float(np.mean([s for x in per_round for s in x["batch_sizes"]]))
        if any(x["batch_sizes"] for x in per_round)
        else None,
        "per_round": per_round,
    }


def _ci(x: dict, scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    if x["mean"] is None:
        return "-"
    m = fmt.format(x["mean"] * scale)
    if x["ci95"] is None:
        return m
    return f"{m} [{fmt.format(x['ci95'][0] * scale)}, {fmt.format(x['ci95'][1] * scale)}]"


def _sizes(r: dict) -> str:
    sizes = [s for x in r["per_round"] for s in x["batch_sizes"]]
    if not sizes:
        return "-"
    per = len(sizes) / len(r["per_round"])
    return f"{per:.1f} of mean {np.mean(sizes):.1f} (max {max(sizes)})"


def table(data: dict) -> str:
    """The README's rows, printed from the JSON (``--table``; the README test compares)."""
    out = [
        "| clients | answered (200) | 503 | lost | requests / s | p50, ms | p99, ms "
        "| batches per round, size |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def row(label: str, r: dict) -> str:
        st = Counter()
        for x in r["per_round"]:
            st.update({k: v for k, v in x["statuses"].items()})
        lost_hi = 100 * r["lost_fraction"]["wilson95"][1]
        return (
            f"| {label} | {st.get('200', 0)} / {r['requests']} | {st.get('503', 0)} "
            f"| {r['lost']} ({100 * r['lost_fraction']['value']:.1f}%, ≤ {lost_hi:.1f}%) "
            f"| {_ci(r['throughput_rps'])} | {_ci(r['p50_s'], 1000)} | {_ci(r['p99_s'], 1000)} "
            f"| {_sizes(r)} |"
        )

    for r in data.get("before", []):
        out.append(row(f"before: {r['clients']}", r))
    for r in data["after"]:
        out.append(row(f"after: {r['clients']}", r))
    for r in data["overload"]:
        out.append(row(f"after, max_queue={r['settings']['max_queue']}: {r['clients']}", r))
    return "\n".join(out)


def plot(data: dict, out: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return False
    rows = data["after"]
    xs = [r["clients"] for r in rows]
    fig, ax = plt.subplots(1, 4, figsize=(16, 3.8))

    def band(a, key, scale, label):
        m = [r[key]["mean"] * scale for r in rows]
        ci = [r[key]["ci95"] for r in rows]
        a.plot(xs, m, "o-", label=label)
        if all(c is not None for c in ci):
            a.fill_between(xs, [c[0] * scale for c in ci], [c[1] * scale for c in ci], alpha=0.25)

    band(ax[0], "throughput_rps", 1.0, "answered / s")
    ax[0].set(xscale="log", xlabel="concurrent clients", ylabel="requests / s", title="throughput")
    band(ax[1], "p50_s", 1000.0, "p50")
    band(ax[1], "p99_s", 1000.0, "p99")
    ax[1].set(xscale="log", yscale="log", xlabel="concurrent clients", ylabel="latency, ms")
    ax[1].set_title("latency of answered requests")
    ax[1].legend()
    ax[2].plot(xs, [r["mean_batch_size"] for r in rows], "o-")
    ax[2].axhline(data["server_defaults"]["max_batch"], ls=":", color="grey", label="max_batch")
    ax[2].set(xscale="log", xlabel="concurrent clients", ylabel="requests per solve")
    ax[2].set_title("mean batch size formed")
    ax[2].legend(fontsize=8)
    base = data.get("before") or []
    if base:
        ax[3].plot(
            [r["clients"] for r in base],
            [100 * r["lost_fraction"]["value"] for r in base],
            "s--",
            color="C3",
            label=f"before ({data.get('baseline_commit', '')})",
        )
    ax[3].plot(
        xs, [100 * r["lost_fraction"]["value"] for r in rows], "x-", color="C2", label="after"
    )
    ax[3].set(xscale="log", xlabel="concurrent clients", ylabel="% of requests")
    ax[3].set_title("lost (no HTTP response)")
    ax[3].legend(fontsize=8)
    fig.suptitle(
        f"skillmoe facade, loopback, {data['machine']['cpus']} CPUs "
        f"(load avg {data['machine']['loadavg_start'][0]:.1f}); 95% t-intervals over rounds"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return True


def main(argv: list[str] | None = None) -> None:
    a = _parser().parse_args(argv)
    if a.table:
        print(table(json.loads(a.table.read_text())))
        return
    if a.plot:
        plot(json.loads(a.plot.read_text()), a.plot.with_suffix(".png"))
        return
    from icml26_skillmoe import make_server

    cfg = QUICK if a.quick else FULL
    t0 = time.time()
    data: dict = {
        "what": "skillmoe facade under concurrent loopback clients (issue 68)",
        "command": "python benchmarks/serve_load.py"
        + (" --quick" if a.quick else "")
        + (f" --baseline {a.baseline}" if a.baseline else ""),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": list(os.getloadavg()),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "pipeline": "tests/test_skillmoe_serve.py local_moe (Python experts, no LLM)",
        "server_defaults": {"max_batch": 32, "max_wait_ms": 50, "max_queue": 1024},
        "client_timeout_s": a.timeout,
        "after": [],
        "overload": [],
        "before": [],
    }
    print("after: default limits")
    for c in cfg["clients"]:
        data["after"].append(run_setting(make_server, c, cfg["rounds"], a.timeout))
    print(f"over capacity: max_queue={OVERLOAD['max_queue']}")
    for c in OVERLOAD["clients"]:
        data["overload"].append(
            run_setting(make_server, c, cfg["rounds"], a.timeout, max_queue=OVERLOAD["max_queue"])
        )
    if a.baseline:
        print(f"before: serve.py at {a.baseline}")
        data["baseline_commit"] = a.baseline
        legacy = _legacy_make_server(a.baseline)
        for c in BASELINE_CLIENTS:
            data["before"].append(run_setting(legacy, c, a.baseline_rounds, a.timeout))
    data["machine"]["loadavg_end"] = list(os.getloadavg())
    data["wall_s"] = time.time() - t0
    a.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {a.out} in {data['wall_s']:.0f} s")
    plot(data, a.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
