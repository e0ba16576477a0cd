"""RC-FCL: one client's local round and the in-process federated simulator.

Per round r, client k with current data (x, y) and the global (classifier f, generator G):

1. reference  R_y ~ G(z, y) for the classes learned before round r          (generative.py)
2. detection  two-sample test of phi(x_y) against phi(R_y) in the frozen global encoder's
              feature space phi -> drift flag, magnitude m_k, weights w_i  (drift.py)
3. adaptation min_f  sum_i w_i CE(f(x_i), y_i) / sum_i w_i
                   + CE(f(x_r), y_r)                     generative replay of old classes
                   + lambda(m_k) KD_T(f(x_r) || f_global(x_r)),   lambda(m) = lambda_0 (1 - m)
              and the generator is trained on local data + its own replay of old classes
4. server     theta = sum_k alpha_k theta_k, alpha_k ~ n_k exp(-beta m_k)       (aggregation.py)

m_k enters 3 and 4 only when the test flags drift (m_k = 0 otherwise): the test gates the
magnitude so that a generator that is merely imperfect does not down-weight a client.

[recon] steps 2-4 are reconstructed from the abstract; the loss, lambda(m) and the gating
are ours. ``method`` selects the baselines run in the same harness:
"fedavg" (no replay), "fedavg_gr" (FedAvg + unweighted generative replay), "rcfcl", and
"feddrift" (FedAvg + GR inside clusters of clients, a FedDrift-style multi-model baseline:
a client whose loss on every cluster model exceeds ``cluster_threshold`` starts a new cluster;
no cluster merging).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .aggregation import Params, robust_drift_average
from .drift import ClassConditionalDriftDetector
from .generative import ConditionalVAE, CVAEConfig
from .scenarios import AsyncDriftScenario

METHODS = ("fedavg", "fedavg_gr", "rcfcl", "feddrift")


@dataclass(frozen=True)
class RCFCLConfig:
    method: str = "rcfcl"  # one of METHODS
    x_dim: int = 64
    n_classes: int = 10
    hidden: int = 64  # classifier 64-64-10 MLP; phi = its hidden layer
    lr: float = 0.1  # local SGD
    local_epochs: int = 5
    batch_size: int = 32
    replay_per_class: int = 20  # generated samples per old class per round
    gen_epochs: int = 10
    gen_lr: float = 1e-2
    gen_batch_size: int = 64
    z_dim: int = 8
    # RC-FCL components (ablations switch them off one at a time)
    detect: bool = True  # test against the generator's reference (off: m_k = 0, w = 1)
    weighting: bool = True  # discriminator density-ratio sample weights
    kd: float = 1.0  # lambda_0 of the drift-calibrated distillation on replay
    kd_temperature: float = 2.0
    beta: float = 5.0  # drift-aware aggregation temperature (0: FedAvg)
    alpha: float = 0.01  # two-sample test level (0.05 over-flags: chosen on validation scenarios)
    tolerance: float = 0.5  # H0: drift magnitude <= tolerance (the generator is not perfect)
    ref_per_class: int = 60  # reference samples per class for the test
    disc_l2: float = 1.0  # ridge of the logistic discriminator
    detect_space: str = "logits"  # "logits" or "features" (hidden layer) of the global model
    weight_clip: tuple[float, float] = (0.1, 10.0)
    # a client that cannot test (no local class has a reference yet: the first round of a task)
    # keeps its last gated magnitude, so a client flagged earlier stays down-weighted in the
    # classifier's and the generator's aggregation until it is tested again [recon]
    carry_magnitude: bool = True
    cluster_threshold: float = 1.0  # feddrift only: CE loss that spawns a new cluster

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}; got {self.method!r}")
        if not (np.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"beta: expected a finite number >= 0; got {self.beta}")
        if self.lr <= 0 or self.local_epochs < 0:
            raise ValueError(f"lr, local_epochs: expected lr > 0 and epochs >= 0; got {self.lr}")
        # the detector's own checks, here so a bad config fails at construction, not in a round
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha: expected a test level in (0, 1); got {self.alpha}")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance: expected a magnitude in [0, 1); got {self.tolerance}")
        if self.x_dim < 1 or self.n_classes < 2:
            raise ValueError(
                f"x_dim, n_classes: expected x_dim >= 1 and n_classes >= 2; "
                f"got {self.x_dim}, {self.n_classes}"
            )

    @property
    def uses_replay(self) -> bool:
        return self.method != "fedavg"

    @property
    def uses_drift(self) -> bool:
        return self.method == "rcfcl"


class MLP(nn.Module):
    def __init__(self, x_dim: int, hidden: int, n_classes: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(x_dim, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.fc1(x))  # (B, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.features(x))  # (B, C)


def build_models(cfg: RCFCLConfig) -> tuple[MLP, ConditionalVAE]:
    clf = MLP(cfg.x_dim, cfg.hidden, cfg.n_classes)
    gen = ConditionalVAE(
        CVAEConfig(x_dim=cfg.x_dim, n_classes=cfg.n_classes, hidden=cfg.hidden, z_dim=cfg.z_dim)
    )
    return clf, gen


def get_params(clf: nn.Module, gen: nn.Module) -> Params:
    """Classifier then generator tensors, in state_dict order, as float32 numpy arrays."""
    return [v.detach().cpu().numpy().copy() for m in (clf, gen) for v in m.state_dict().values()]


def set_params(clf: nn.Module, gen: nn.Module, params: Params) -> None:
    n_expected = len(clf.state_dict()) + len(gen.state_dict())
    if len(params) != n_expected:
        raise ValueError(f"params: expected {n_expected} arrays; got {len(params)}")
    it = iter(params)
    for m in (clf, gen):
        m.load_state_dict({k: torch.as_tensor(np.asarray(next(it))) for k in m.state_dict()})


def init_params(cfg: RCFCLConfig, seed: int = 0) -> Params:
    torch.manual_seed(seed)
    clf, gen = build_models(cfg)
    return get_params(clf, gen)


def client_seed(seed: int, r: int, k: int) -> int:
    """One seed per (run, round, client): the Flower client and the simulator agree on it."""
    return (seed * 1_000_003 + r * 1009 + k) % (2**31 - 1)


@dataclass
class LocalResult:
    params: Params
    n: int
    magnitude: float  # m_k sent to the server (0 unless drift flagged)
    drift: bool
    p_value: float
    raw_magnitude: float  # 2 AUC - 1 averaged, before gating
    loss: float = float("nan")  # feddrift: CE of the received model on seen classes


def local_update(
    params: Params,
    x: np.ndarray,
    y: np.ndarray,
    *,
    seen_classes: list[int],
    old_classes: list[int],
    cfg: RCFCLConfig,
    seed: int,
    carried_magnitude: float = 0.0,
) -> LocalResult:
    """One client's round (steps 1-3 of the module docstring); pure given ``seed``.

    ``carried_magnitude``: the client's magnitude of its previous round; with
    ``cfg.carry_magnitude`` it is the round's m_k when the client has no class to test.
    """
    if not (np.isfinite(carried_magnitude) and 0.0 <= carried_magnitude <= 1.0):
        raise ValueError(f"carried_magnitude: expected in [0, 1]; got {carried_magnitude}")
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != cfg.x_dim or len(y) != len(x):
        raise ValueError(f"x, y: expected (n, {cfg.x_dim}) and (n,); got {x.shape}, {y.shape}")
    if len(y) == 0:
        raise ValueError("x: the client has no local data this round")
    if not np.all(np.isfinite(x)):
        raise ValueError("x: contains NaN or inf")
    for name, labels in (("y", y), ("seen_classes", seen_classes), ("old_classes", old_classes)):
        bad = [int(c) for c in np.unique(np.asarray(labels, dtype=np.int64))]
        bad = [c for c in bad if not 0 <= c < cfg.n_classes]
        if bad:
            raise ValueError(
                f"{name}: labels must be in [0, cfg.n_classes={cfg.n_classes}); got {bad}"
            )
    torch.manual_seed(seed)
    gen_rng = torch.Generator().manual_seed(seed)
    clf, gen = build_models(cfg)
    set_params(clf, gen, params)
    teacher = copy.deepcopy(clf).eval()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    # 1. generative replay of the old classes (from the received global generator)
    if cfg.uses_replay and old_classes:
        yr = torch.tensor(np.repeat(old_classes, cfg.replay_per_class), dtype=torch.long)
        xr = gen.sample(yr, generator=gen_rng).clamp(0.0, 1.0)
    else:
        yr, xr = torch.zeros(0, dtype=torch.long), torch.zeros(0, cfg.x_dim)

    # 2. local drift test against the reference of already-learned classes
    weights = torch.ones(len(y))
    magnitude, raw, drift, p_value = 0.0, 0.0, False, 1.0
    local_seen = [c for c in seen_classes if (y == c).any()]
    if cfg.uses_drift and cfg.detect and not local_seen and cfg.carry_magnitude:
        magnitude = float(carried_magnitude)  # untestable round: the last known state
    if cfg.uses_drift and cfg.detect and local_seen:
        y_ref = torch.tensor(np.repeat(local_seen, cfg.ref_per_class), dtype=torch.long)
        with torch.no_grad():
            x_ref = gen.sample(y_ref, generator=gen_rng).clamp(0.0, 1.0)
            embed = teacher if cfg.detect_space == "logits" else teacher.features
            phi_ref = embed(x_ref).double().numpy()  # (R, C) or (R, hidden)
            phi = embed(xt).double().numpy()  # (n, C) or (n, hidden)
        det = ClassConditionalDriftDetector(
            alpha=cfg.alpha,
            tolerance=cfg.tolerance,
            l2=cfg.disc_l2,
            clip=cfg.weight_clip,
            seed=seed,
        ).fit_reference(phi_ref, y_ref.numpy())
        rep = det.score(phi, y)
        raw, drift, p_value = rep.magnitude, rep.drift, rep.p_value
        magnitude = rep.magnitude if rep.drift else 0.0
        if cfg.weighting:
            w = rep.weights / rep.weights.mean()
            weights = torch.from_numpy(w.astype(np.float32))

    loss0 = float("nan")
    if cfg.method == "feddrift" and seen_classes:
        mask = np.isin(y, seen_classes)
        if mask.any():
            with torch.no_grad():
                loss0 = float(F.cross_entropy(teacher(xt[mask]), yt[mask]))

    # 3. calibrated local adaptation
    lam = cfg.kd * (1.0 - magnitude) if cfg.uses_drift else 0.0
    # plain SGD (torch.optim would import torch._dynamo)
    params_c: list[torch.Tensor] = list(clf.parameters())
    n, nr = len(y), len(yr)
    clf.train()
    for _ in range(cfg.local_epochs):
        perm = torch.randperm(n, generator=gen_rng)
        for i in range(0, n, cfg.batch_size):
            idx = perm[i : i + cfg.batch_size]
            wb = weights[idx]
            ce = F.cross_entropy(clf(xt[idx]), yt[idx], reduction="none")
            loss = (wb * ce).sum() / wb.sum()
            if nr:
                j = torch.randint(0, nr, (min(cfg.batch_size, nr),), generator=gen_rng)
                logits_r = clf(xr[j])
                loss = loss + F.cross_entropy(logits_r, yr[j])
                if lam > 0:
                    t = cfg.kd_temperature
                    with torch.no_grad():
                        q = F.softmax(teacher(xr[j]) / t, dim=1)
                    kd = F.kl_div(F.log_softmax(logits_r / t, dim=1), q, reduction="batchmean")
                    loss = loss + lam * t * t * kd
            grads = torch.autograd.grad(loss, params_c)
            with torch.no_grad():
                torch._foreach_add_(params_c, grads, alpha=-cfg.lr)

    # the generator learns the new classes and replays its own old ones
    if cfg.uses_replay and cfg.gen_epochs > 0:
        gx = torch.cat([xt, xr]) if nr else xt
        gy = torch.cat([yt, yr]) if nr else yt
        gen.fit(
            gx, gy, epochs=cfg.gen_epochs, lr=cfg.gen_lr, batch_size=cfg.gen_batch_size, seed=seed
        )

    return LocalResult(get_params(clf, gen), n, magnitude, drift, p_value, raw, loss0)


@torch.no_grad()
def accuracy(params: Params, x: np.ndarray, y: np.ndarray, cfg: RCFCLConfig) -> float:
    clf, gen = build_models(cfg)
    set_params(clf, gen, params)
    pred = clf(torch.as_tensor(x, dtype=torch.float32)).argmax(1).numpy()
    return float((pred == np.asarray(y)).mean())


@dataclass
class SimulationResult:
    params: Params  # final global model (the main cluster's for feddrift)
    acc: np.ndarray  # (T, T): acc[i, j] = accuracy on task j after learning task i (j <= i)
    flags: np.ndarray  # (K, R) drift flagged by client k at round r
    magnitudes: np.ndarray  # (K, R) m_k sent (gated)
    raw_magnitudes: np.ndarray  # (K, R) 2 AUC - 1 before gating
    rejected: list[dict] = field(default_factory=list)  # per round: client -> reason
    config: dict = field(default_factory=dict)

    @property
    def final_accuracy(self) -> float:
        return float(self.acc[-1].mean())

    @property
    def forgetting(self) -> float:
        """Mean over tasks j < T-1 of max_{i < T-1} acc[i, j] - acc[T-1, j]."""
        t = self.acc.shape[0]
        if t < 2:
            return 0.0
        return float(
            np.mean([self.acc[j : t - 1, j].max() - self.acc[-1, j] for j in range(t - 1)])
        )


def detection_scores(flags: np.ndarray, scenario: AsyncDriftScenario) -> dict[str, float]:
    """Event-level F1 and delay of per-client drift flags against the known drift episodes.

    A drifting client is a true positive when flagged at some round where its data is drifted
    (``scenario.is_drifted``; delay = the first such round - onset); a flag at a round where
    its data is clean (before the onset, after a ``task_end`` drift ended, or on a client that
    never drifts) is a false positive (one per client at most); an unflagged drifting client a
    false negative.
    """
    flags = np.asarray(flags, dtype=bool)
    if flags.shape != (scenario.n_clients, scenario.n_rounds):
        raise ValueError(
            f"flags: expected shape ({scenario.n_clients}, {scenario.n_rounds}); got {flags.shape}"
        )
    tp = fp = fn = 0
    delays = []
    for k in range(scenario.n_clients):
        drifted = np.array([scenario.is_drifted(k, r) for r in range(scenario.n_rounds)])
        fp += int(flags[k, ~drifted].any())
        if not drifted.any():
            continue
        hit = np.flatnonzero(flags[k] & drifted)
        if hit.size:
            tp += 1
            delays.append(int(hit[0]) - scenario.onset[k])
        else:
            fn += 1
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {
        "f1": f1,
        "precision": prec,
        "recall": rec,
        "delay": float(np.mean(delays)) if delays else float("nan"),
    }


def simulate(
    scenario: AsyncDriftScenario,
    cfg: RCFCLConfig,
    *,
    seed: int = 0,
    corrupt: dict[tuple[int, int], str] | None = None,
    oracle_drop: bool = False,
) -> SimulationResult:
    """Run every round in-process: all clients train, the server aggregates (robustly).

    ``corrupt`` {(round, client): "nan" | "shape" | "magnitude"} injects a bad update, for
    tests of the server's behaviour. ``oracle_drop``: a client whose data is drifted at round
    r (``scenario.is_drifted``, the ground truth) takes no part in round r (the oracle arm:
    perfect detection, drifted updates discarded).
    """
    corrupt = corrupt or {}
    K, R, T = scenario.n_clients, scenario.n_rounds, len(scenario.tasks)
    clusters: list[Params] = [init_params(cfg, seed)]
    assign = np.zeros(K, dtype=int)
    acc = np.zeros((T, T))
    flags = np.zeros((K, R), dtype=bool)
    mags = np.zeros((K, R))
    raws = np.zeros((K, R))
    rejected: list[dict] = []
    last_m = np.zeros(K)  # each client's previous m_k (carried over untestable rounds)
    for r in range(R):
        seen, old = scenario.seen_classes(r), scenario.old_classes(r)
        results: dict[int, LocalResult] = {}
        for k in range(K):
            if oracle_drop and scenario.is_drifted(k, r):
                continue
            x, y = scenario.client_data(k, r)
            if cfg.method == "feddrift" and len(clusters) > 1 and seen:
                assign[k] = _best_cluster(clusters, x, y, seen, cfg)
            res = local_update(
                clusters[assign[k]],
                x,
                y,
                seen_classes=seen,
                old_classes=old,
                cfg=cfg,
                seed=client_seed(seed, r, k),
                carried_magnitude=float(last_m[k]),
            )
            last_m[k] = res.magnitude
            if cfg.method == "feddrift" and res.loss > cfg.cluster_threshold:
                clusters.append([p.copy() for p in clusters[assign[k]]])
                assign[k] = len(clusters) - 1
                flags[k, r] = True
            flags[k, r] |= res.drift
            mags[k, r] = res.magnitude
            raws[k, r] = res.raw_magnitude
            results[k] = corrupt_update(res, corrupt.get((r, k)))
        rej: dict = {}
        for c in range(len(clusters)):
            members = {k: results[k] for k in results if assign[k] == c}
            if not members:
                continue
            out = robust_drift_average(
                {k: (v.params, v.n, v.magnitude) for k, v in members.items()},
                clusters[c],
                beta=cfg.beta if cfg.uses_drift else 0.0,
            )
            clusters[c] = out.params
            rej.update(out.rejected)
        rejected.append(rej)
        if (r + 1) % scenario.rounds_per_task == 0:
            t = scenario.task_of(r)
            main = clusters[_main_cluster(assign, results, len(clusters))]
            for j in range(t + 1):
                xs, ys = scenario.test_data(j)
                mask = np.isin(ys, scenario.tasks[j])
                acc[t, j] = accuracy(main, xs[mask], ys[mask], cfg)
    main = clusters[_main_cluster(assign, results, len(clusters))]
    return SimulationResult(main, acc, flags, mags, raws, rejected, asdict(cfg))


def _best_cluster(
    clusters: list[Params], x: np.ndarray, y: np.ndarray, seen: list[int], cfg: RCFCLConfig
) -> int:
    mask = np.isin(y, seen)
    if not mask.any():
        return 0
    losses = []
    for p in clusters:
        clf, gen = build_models(cfg)
        set_params(clf, gen, p)
        with torch.no_grad():
            losses.append(
                float(F.cross_entropy(clf(torch.from_numpy(x[mask])), torch.from_numpy(y[mask])))
            )
    return int(np.argmin(losses))


def _main_cluster(assign: np.ndarray, results: dict[int, LocalResult], n_clusters: int) -> int:
    size = np.zeros(n_clusters)
    for k, res in results.items():
        size[assign[k]] += res.n
    return int(np.argmax(size))


def corrupt_update(res: LocalResult, how: str | None) -> LocalResult:
    if how is None:
        return res
    if how == "nan":
        p = [a.copy() for a in res.params]
        p[0][0, 0] = np.nan
        return replace(res, params=p)
    if how == "shape":
        return replace(res, params=[*res.params[:-1], res.params[-1][:-1]])
    if how == "magnitude":
        return replace(res, magnitude=float("nan"))
    raise ValueError(f"corrupt: unknown corruption {how!r}")
