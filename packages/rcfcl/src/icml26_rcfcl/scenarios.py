"""Asynchronous concept drift across clients on a class-incremental task sequence.

Tasks are disjoint class sets learned one after another (class-incremental); every round each
of the ``n_clients`` clients holds its own shard of the current task's training data. Client k
drifts at its own round ``onset[k]`` with its own magnitude ``m_k``, and either stays drifted
(``drift_until="persistent"``: drift acts as a permanent corruption of the client) or returns to
the clean concept at the next task boundary (``drift_until="task_end"``: a transient drift episode
inside one task, the reading the benchmark tests):

* ``"real"`` drift (P(y | x) changes): inside each class pair (a, b) of the task, a fraction
  m_k of the client's labels is swapped a <-> b;
* ``"virtual"`` drift (P(x) changes): the pixels are inverted by m_k, x' = (1 - m_k) x + m_k (1 - x).

Ground truth (onset round, magnitude, kind) is known, so detection F1 and delay can be scored.
[recon] the paper's exact scenarios are not public; these follow the research notes (digits,
10 clients, 5 tasks of 2 classes, label swap for real drift, intensity inversion for virtual).
Onsets are drawn on rounds that are not the first of a task, when a reference for the task's
classes already exists (a brand-new class has nothing to drift from). With
``drift_until="task_end"`` every drifted round is therefore testable: the first round of each
task is clean and trains the generator's reference for the task's classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    drift_until: str = "persistent"  # "persistent" | "task_end" (drift ends at the task boundary)

    def __post_init__(self) -> None:
        if self.drift_until not in ("persistent", "task_end"):
            raise ValueError(
                f"drift_until: expected 'persistent' or 'task_end'; got {self.drift_until!r}"
            )
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
        """Client k's data at round r follows its drifted concept."""
        if k not in self.onset or r < self.onset[k]:
            return False
        return self.drift_until == "persistent" or self.task_of(r) == self.task_of(self.onset[k])

    def without_drift(self) -> AsyncDriftScenario:
        """The same data, shards and test set with no drifting client (the no-drift ceiling)."""
        return replace(self, onset={}, magnitude={}, kind={})

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
        drift_until: str = "persistent",
        seed: int = 0,
    ) -> AsyncDriftScenario:
        """Random train/test split, classes in order 0..C-1 grouped into ``n_tasks`` tasks,
        ``n_drifting`` clients with random onset (not a task's first round), magnitude and kind.
        With ``test=(x_test, y_test)`` all of (x, y) trains and ``test`` is held out as given.
        ``drift_until``: "persistent" (a drifted client stays drifted) or "task_end" (its drift
        ends at the next task boundary)."""
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
            drift_until=drift_until,
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


SEA_THRESHOLDS = {0: 8.0, 1: 9.0, 2: 7.0, 3: 9.5}  # river.datasets.synth.SEA: y = x1 + x2 > theta


def sea_label_change(variant: int) -> float:
    """P(label differs between SEA concept 0 and ``variant``) for x1, x2 ~ U(0, 10):
    the density of s = x1 + x2 is s / 100 on [0, 10], so P(a < s <= b) = (b^2 - a^2) / 200."""
    a, b = sorted((SEA_THRESHOLDS[0], SEA_THRESHOLDS[variant]))
    return (b * b - a * a) / 200.0


@dataclass
class StreamDriftScenario(AsyncDriftScenario):
    """Clients that read their own river stream: every client starts on one concept and client
    k switches to another concept at round ``onset[k]`` (abrupt real drift, P(y | x) changes).

    Data is drawn once per (client, round) and stored; ``magnitude[k]`` is the fraction of the
    input space whose label the switch changes. Build it with :meth:`river_sea`.
    """

    stream: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    variant: dict[int, int] = field(default_factory=dict)  # client -> concept after its onset

    def without_drift(self) -> AsyncDriftScenario:
        raise NotImplementedError(
            "without_drift: a stream scenario's data is drawn with its drift; build it with "
            "river_sea(n_drifting=0) instead"
        )

    def client_data(self, k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= k < self.n_clients:
            raise ValueError(f"k: client index must be in [0, {self.n_clients}); got {k}")
        if not 0 <= r < self.n_rounds:
            raise ValueError(f"r: round must be in [0, {self.n_rounds}); got {r}")
        x, y = self.stream[(k, r)]
        return x.copy(), y.copy()

    @classmethod
    def river_sea(
        cls,
        *,
        n_clients: int = 10,
        n_rounds: int = 10,
        per_round: int = 100,
        n_drifting: int = 5,
        noise: float = 0.0,
        n_test: int = 1000,
        seed: int = 0,
    ) -> StreamDriftScenario:
        """river's SEA stream (3 features in [0, 10], scaled to [0, 1]; binary label).

        Every client reads ``SEA(variant=0)``; a drifting client switches to ``SEA(variant=v_k)``,
        v_k in {1, 2, 3}, at a random round >= 1 and stays there. The test set is concept 0.
        Needs the ``river`` extra (``pip install icml26-rcfcl[river]``).
        """
        try:
            from river.datasets import synth
        except ImportError as exc:  # pragma: no cover - exercised without the extra
            raise ImportError(
                "StreamDriftScenario.river_sea needs river: pip install 'icml26-rcfcl[river]'"
            ) from exc
        if not 0 <= n_drifting <= n_clients:
            raise ValueError(f"n_drifting: expected in [0, {n_clients}]; got {n_drifting}")
        if n_rounds < 2 or per_round < 2:
            raise ValueError(f"n_rounds, per_round: expected >= 2; got {n_rounds}, {per_round}")

        def take(variant: int, n: int, s: int) -> tuple[np.ndarray, np.ndarray]:
            rows = list(synth.SEA(variant=variant, noise=noise, seed=s).take(n))
            x = np.array([[d[0], d[1], d[2]] for d, _ in rows], dtype=np.float32) / 10.0
            return x, np.array([int(t) for _, t in rows], dtype=np.int64)

        rng = np.random.default_rng(seed)
        drifting = sorted(rng.choice(n_clients, size=n_drifting, replace=False).tolist())
        onset = {k: int(rng.integers(1, n_rounds)) for k in drifting}
        variant = {k: int(rng.integers(1, 4)) for k in drifting}
        stream = {}
        for k in range(n_clients):
            for r in range(n_rounds):
                v = variant[k] if k in onset and r >= onset[k] else 0
                # one river seed per (scenario, client, round): rounds do not share samples
                stream[(k, r)] = take(v, per_round, (seed * 7919 + k) * 1009 + r)
        x_te, y_te = take(0, n_test, seed * 7919 + 7907)
        x_tr, y_tr = stream[(0, 0)]
        return cls(
            x_train=x_tr,
            y_train=y_tr,
            x_test=x_te,
            y_test=y_te,
            tasks=[(0, 1)],
            n_clients=n_clients,
            rounds_per_task=n_rounds,
            onset=onset,
            magnitude={k: sea_label_change(v) for k, v in variant.items()},
            kind={k: "real" for k in drifting},
            seed=seed,
            n_classes=2,
            stream=stream,
            variant=variant,
        )
