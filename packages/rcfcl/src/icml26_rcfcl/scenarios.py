"""Asynchronous concept drift across clients on a class-incremental task sequence.

Tasks are disjoint class sets learned one after another (class-incremental); every round each
of the ``n_clients`` clients holds its own shard of the current task's training data. Client k
drifts at its own round ``onset[k]`` (then stays drifted) with its own magnitude ``m_k``:

* ``"real"`` drift (P(y | x) changes): inside each class pair (a, b) of the task, a fraction
  m_k of the client's labels is swapped a <-> b;
* ``"virtual"`` drift (P(x) changes): the pixels are inverted by m_k, x' = (1 - m_k) x + m_k (1 - x).

Ground truth (onset round, magnitude, kind) is known, so detection F1 and delay can be scored.
[recon] the paper's exact scenarios are not public; these follow the research notes (digits,
10 clients, 5 tasks of 2 classes, label swap for real drift, intensity inversion for virtual).
Onsets are drawn on rounds that are not the first of a task, when a reference for the task's
classes already exists (a brand-new class has nothing to drift from).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class AsyncDriftScenario:
    """Data of every client at every round, with known asynchronous drift."""

    x_train: np.ndarray  # (N, d) in [0, 1]
    y_train: np.ndarray  # (N,)
    x_test: np.ndarray  # (M, d) clean data of the learned concepts (what accuracy is on)
    y_test: np.ndarray  # (M,)
    tasks: list[tuple[int, ...]]  # class sets, learned in this order
    n_clients: int = 10
    rounds_per_task: int = 3
    onset: dict[int, int] = field(default_factory=dict)  # client -> first drifted round
    magnitude: dict[int, float] = field(default_factory=dict)  # client -> m_k in (0, 1]
    kind: dict[int, str] = field(default_factory=dict)  # client -> "real" | "virtual"
    seed: int = 0
    n_classes: int = 10

    def __post_init__(self) -> None:
        if self.n_clients < 1:
            raise ValueError(f"n_clients: expected >= 1; got {self.n_clients}")
        if self.rounds_per_task < 1:
            raise ValueError(f"rounds_per_task: expected >= 1; got {self.rounds_per_task}")
        for k, m in self.magnitude.items():
            if not (np.isfinite(m) and 0 <= m <= 1):
                raise ValueError(f"magnitude: client {k} has magnitude {m}; expected in [0, 1]")
        for k, v in self.kind.items():
            if v not in ("real", "virtual"):
                raise ValueError(f"kind: client {k} has kind {v!r}; expected 'real' or 'virtual'")
        # shard each task's training data over the clients, once (iid within a task)
        rng = np.random.default_rng(self.seed)
        self._shards: list[list[np.ndarray]] = []
        for classes in self.tasks:
            idx = np.flatnonzero(np.isin(self.y_train, classes))
            if len(idx) < self.n_clients:
                raise ValueError(f"tasks: task {classes} has {len(idx)} training samples")
            self._shards.append(np.array_split(rng.permutation(idx), self.n_clients))

    @property
    def n_rounds(self) -> int:
        return len(self.tasks) * self.rounds_per_task

    def task_of(self, r: int) -> int:
        return r // self.rounds_per_task

    def seen_classes(self, r: int) -> list[int]:
        """Classes the global model has been trained on before round r (reference exists)."""
        return (
            sorted({c for t in self.tasks[: (r - 1) // self.rounds_per_task + 1] for c in t})
            if r > 0
            else []
        )

    def old_classes(self, r: int) -> list[int]:
        """Classes of the tasks before round r's task (replayed, not in the local data)."""
        return sorted({c for t in self.tasks[: self.task_of(r)] for c in t})

    def is_drifted(self, k: int, r: int) -> bool:
        return k in self.onset and r >= self.onset[k]

    def client_data(self, k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Client k's local training data at round r (drift applied): (n_k, d), (n_k,)."""
        if not 0 <= k < self.n_clients:
            raise ValueError(f"k: client index must be in [0, {self.n_clients}); got {k}")
        if not 0 <= r < self.n_rounds:
            raise ValueError(f"r: round must be in [0, {self.n_rounds}); got {r}")
        t = self.task_of(r)
        idx = self._shards[t][k]
        x, y = self.x_train[idx].copy(), self.y_train[idx].copy()
        if self.is_drifted(k, r):
            m = self.magnitude[k]
            if self.kind[k] == "virtual":
                x = (1.0 - m) * x + m * (1.0 - x)
            else:  # real drift: swap labels inside consecutive class pairs of the task
                rng = np.random.default_rng([self.seed, k, t])
                flip = rng.random(len(y)) < m
                classes = list(self.tasks[t])
                swap = {}
                for a, b in zip(classes[0::2], classes[1::2]):
                    swap[a], swap[b] = b, a
                y = np.where(flip, np.vectorize(lambda c: swap.get(int(c), int(c)))(y), y)
        return x.astype(np.float32), y.astype(np.int64)

    def test_data(self, upto_task: int) -> tuple[np.ndarray, np.ndarray]:
        classes = [c for t in self.tasks[: upto_task + 1] for c in t]
        mask = np.isin(self.y_test, classes)
        return self.x_test[mask].astype(np.float32), self.y_test[mask].astype(np.int64)

    @classmethod
    def make(
        cls,
        x: np.ndarray,
        y: np.ndarray,
        *,
        n_clients: int = 10,
        n_tasks: int = 5,
        rounds_per_task: int = 3,
        n_drifting: int = 5,
        magnitude_range: tuple[float, float] = (0.6, 1.0),
        kinds: tuple[str, ...] = ("real", "virtual"),
        test_fraction: float = 0.3,
        test: tuple[np.ndarray, np.ndarray] | None = None,
        seed: int = 0,
    ) -> AsyncDriftScenario:
        """Random train/test split, classes in order 0..C-1 grouped into ``n_tasks`` tasks,
        ``n_drifting`` clients with random onset (not a task's first round), magnitude and kind.
        With ``test=(x_test, y_test)`` all of (x, y) trains and ``test`` is held out as given."""
        x = np.asarray(x, dtype=np.float32)
        y = np.asarray(y, dtype=np.int64)
        if x.ndim != 2 or len(x) != len(y):
            raise ValueError(f"x, y: expected (n, d) and (n,); got {x.shape} and {y.shape}")
        if not 0 <= n_drifting <= n_clients:
            raise ValueError(f"n_drifting: expected in [0, {n_clients}]; got {n_drifting}")
        classes = np.unique(y)
        if len(classes) % n_tasks:
            raise ValueError(f"n_tasks: {len(classes)} classes do not split into {n_tasks} tasks")
        rng = np.random.default_rng(seed)
        perm = rng.permutation(len(y))
        if test is None:
            n_test = round(test_fraction * len(y))
            te, tr = perm[:n_test], perm[n_test:]
            x_te, y_te = x[te], y[te]
        else:
            tr = perm
            x_te, y_te = np.asarray(test[0], np.float32), np.asarray(test[1], np.int64)
        tasks = [tuple(int(c) for c in ch) for ch in np.split(classes, n_tasks)]
        n_rounds = n_tasks * rounds_per_task
        eligible = [r for r in range(n_rounds) if r % rounds_per_task != 0]
        eligible = eligible or list(range(1, n_rounds)) or [0]  # one round per task
        drifting = sorted(rng.choice(n_clients, size=n_drifting, replace=False).tolist())
        onset = {k: int(rng.choice(eligible)) for k in drifting}
        lo, hi = magnitude_range
        magnitude = {k: float(rng.uniform(lo, hi)) for k in drifting}
        kind = {k: str(kinds[i % len(kinds)]) for i, k in enumerate(drifting)}
        return cls(
            x_train=x[tr],
            y_train=y[tr],
            x_test=x_te,
            y_test=y_te,
            tasks=tasks,
            n_clients=n_clients,
            rounds_per_task=rounds_per_task,
            onset=onset,
            magnitude=magnitude,
            kind=kind,
            seed=seed,
            n_classes=int(classes.max()) + 1,
        )


def load_digits_xy() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's embedded digits (1797 x 64, 10 classes), pixels scaled to [0, 1].

    Needs the ``data`` extra (``pip install icml26-rcfcl[data]``); no download.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "load_digits_xy needs scikit-learn: pip install 'icml26-rcfcl[data]'"
        ) from exc
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
