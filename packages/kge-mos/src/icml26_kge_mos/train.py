"""1-N (KvsAll / LCWA) training and filtered rank evaluation.

Training minimises, for every query ``(s, r)`` seen in training (and its reciprocal
``(o, r + R)``), the cross-entropy between the model's ``log p(· | s, r)`` and the
label-smoothed normalised multi-hot row of its known answers::

    t_o = (1 − ε) · y_o / Σ y + ε / |E|,     loss = − Σ_o t_o log p(o | s, r)

(PyKEEN's LCWA ``CrossEntropyLoss`` with ``label_smoothing=ε``). Evaluation ranks the true
entity among all entities after removing the other known answers (filtered setting), using
the realistic rank (mean of optimistic and pessimistic rank under ties), and reports MRR,
Hits@{1,3,10} and the negative log-likelihood ``− log p(o | s, r)`` of the true answer.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from .kge import KGEModel
from .mos import _positive_int

__all__ = [
    "QueryIndex",
    "evaluate",
    "filtered_ranks",
    "fit_1n",
    "train_kge",
]


def _as_triples(
    triples: np.ndarray | torch.Tensor, name: str = "triples", *, nonempty: bool = False
) -> np.ndarray:
    arr = np.asarray(triples.cpu() if isinstance(triples, torch.Tensor) else triples)
    if arr.ndim != 2 or arr.shape[1] != 3 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be an (n, 3) integer array, got {arr.shape} {arr.dtype}")
    if nonempty and len(arr) == 0:
        raise ValueError(f"{name} is empty: at least one (s, r, o) triple is needed")
    return arr.astype(np.int64)


@dataclass
class QueryIndex:
    """Queries ``(s, r)`` and their answers, in CSR form.

    ``pairs[q] = (s, r)``; the answers of query q are ``answers[offsets[q]:offsets[q + 1]]``.
    """

    pairs: np.ndarray  # (Q, 2) int64
    offsets: np.ndarray  # (Q + 1,) int64
    answers: np.ndarray  # (nnz,) int64
    n_entities: int
    n_relations: int  # number of relation ids the queries may use (2R with reciprocals)

    @classmethod
    def from_triples(
        cls, triples: np.ndarray, n_entities: int, n_relations: int, *, reciprocal: bool = True
    ) -> QueryIndex:
        """Group triples by ``(s, r)``; with ``reciprocal`` also add ``(o, r + R) -> s``."""
        t = _as_triples(triples)
        n_entities = _positive_int("n_entities", n_entities)
        n_relations = _positive_int("n_relations", n_relations)
        if t.size and (t[:, [0, 2]].max() >= n_entities or t.min() < 0):
            raise ValueError(f"triples hold entity ids outside [0, {n_entities})")
        if t.size and t[:, 1].max() >= n_relations:
            raise ValueError(f"triples hold relation ids outside [0, {n_relations})")
        if reciprocal:
            t = np.concatenate([t, np.stack([t[:, 2], t[:, 1] + n_relations, t[:, 0]], 1)])
        n_rel = 2 * n_relations if reciprocal else n_relations
        keys = t[:, 0] * n_rel + t[:, 1]
        order = np.lexsort((t[:, 2], keys))
        keys, objs = keys[order], t[order, 2]
        # drop duplicate triples
        dup = np.zeros(len(keys), dtype=bool)
        dup[1:] = (keys[1:] == keys[:-1]) & (objs[1:] == objs[:-1])
        keep = ~dup
        keys, objs = keys[keep], objs[keep]
        uniq, start = np.unique(keys, return_index=True)
        offsets = np.append(start, len(keys)).astype(np.int64)
        pairs = np.stack([uniq // n_rel, uniq % n_rel], axis=1).astype(np.int64)
        return cls(pairs, offsets, objs.astype(np.int64), n_entities, n_rel)

    def __len__(self) -> int:
        return len(self.pairs)

    def dense(self, rows: np.ndarray) -> torch.Tensor:
        """Multi-hot label rows ``(len(rows), |E|)`` (float32) of the given query indices."""
        rows = np.asarray(rows)
        starts = self.offsets[rows]
        counts = self.offsets[rows + 1] - starts
        # gather every answer of every row without a Python loop
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        flat = self.answers[np.repeat(starts, counts) + within]
        out = torch.zeros(len(rows), self.n_entities)
        out[torch.from_numpy(np.repeat(np.arange(len(rows)), counts)), torch.from_numpy(flat)] = 1
        return out

    def lookup(self, pairs: np.ndarray) -> np.ndarray:
        """Row index of each ``(s, r)`` pair, ``-1`` where the pair is unknown."""
        keys = self.pairs[:, 0] * self.n_relations + self.pairs[:, 1]
        want = pairs[:, 0] * self.n_relations + pairs[:, 1]
        if len(keys) == 0:
            return np.full(len(want), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, want), 0, len(keys) - 1)
        return np.where(keys[pos] == want, pos, -1)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def fit_1n(
    log_prob_fn: Callable[[torch.Tensor], torch.Tensor],
    parameters: Iterator[torch.nn.Parameter] | list[torch.nn.Parameter],
    labels: QueryIndex,
    *,
    epochs: int = 100,
    batch_size: int = 256,
    lr: float = 0.01,
    label_smoothing: float = 0.0,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    log_every: int | None = None,
) -> list[float]:
    """Adam on the 1-N cross-entropy; ``log_prob_fn(query_rows (B,)) -> (B, |E|)``.

    Returns the mean training loss of every epoch. Progress is shown by default: a line
    ``epoch i/n loss L (t s)`` (that epoch's mean loss, seconds since the start) every
    ``log_every`` epochs (default ``max(1, epochs // 10)``: about ten lines) and after the last,
    to ``log`` (default: stderr). ``progress=False`` trains silently, whatever ``log`` is.
    """
    if len(labels) == 0:
        raise ValueError("labels holds no queries: nothing to train on")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    if not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be a non-negative int, got {epochs!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if log_every is not None and (
        isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1
    ):
        raise ValueError(f"log_every must be a positive int or None, got {log_every!r}")
    if not isinstance(progress, bool):
        raise ValueError(f"progress must be a bool, got {progress!r}")
    if log is not None and not callable(log):
        raise ValueError(f"log must be a callable taking one str, or None, got {log!r}")
    emit = (log if log is not None else _stderr) if progress else None
    every = log_every if log_every is not None else max(1, epochs // 10)
    t0 = time.perf_counter()
    opt = torch.optim.Adam(list(parameters), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    n, history = len(labels), []
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=gen).numpy()
        total = 0.0
        for start in range(0, n, batch_size):
            rows = perm[start : start + batch_size]
            y = labels.dense(rows)  # (B, |E|)
            target = (1 - label_smoothing) * y / y.sum(-1, keepdim=True)
            target = target + label_smoothing / labels.n_entities
            logp = log_prob_fn(torch.from_numpy(rows))  # (B, |E|)
            loss = -(target * logp).sum(-1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(rows)
        history.append(total / max(n, 1))
        if emit is not None and ((epoch + 1) % every == 0 or epoch == epochs - 1):
            elapsed = time.perf_counter() - t0
            emit(f"epoch {epoch + 1}/{epochs} loss {history[-1]:.4f} ({elapsed:.1f} s)")
    return history


def train_kge(
    model: KGEModel,
    triples: np.ndarray,
    *,
    epochs: int = 100,
    batch_size: int = 256,
    lr: float = 0.01,
    label_smoothing: float = 0.0,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    log_every: int | None = None,
) -> list[float]:
    """Train a :class:`KGEModel` with 1-N cross-entropy on ``triples`` (reciprocal queries
    included when ``model.reciprocal``). Returns the mean training loss of every epoch.

    Progress as :func:`fit_1n`: by default about ten lines ``epoch i/n loss L (t s)`` on
    stderr (``log_every`` epochs apart if given, to ``log`` if given); ``progress=False``
    prints nothing.
    """
    triples = _as_triples(triples, nonempty=True)
    labels = QueryIndex.from_triples(
        triples, model.n_entities, model.n_relations, reciprocal=model.reciprocal
    )
    pairs = torch.from_numpy(labels.pairs)
    model.train()
    return fit_1n(
        lambda rows: model(pairs[rows, 0], pairs[rows, 1]),
        model.parameters(),
        labels,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        label_smoothing=label_smoothing,
        seed=seed,
        progress=progress,
        log=log,
        log_every=log_every,
    )


def filtered_ranks(
    scores: torch.Tensor, targets: torch.Tensor, known: torch.Tensor | None = None
) -> torch.Tensor:
    """Realistic filtered rank of ``targets`` in each row of ``scores``.

    Args:
        scores: ``(B, N)`` higher is better.
        targets: ``(B,)`` the true entity of each row.
        known: ``(B, N)`` bool, other true answers to filter out (the target itself may be set).

    Returns:
        ``(B,)`` float ranks, ``1 + #{better} + #{tied others} / 2``.
    """
    if scores.dim() != 2 or targets.shape != scores.shape[:1]:
        raise ValueError(
            f"scores must be (B, N) and targets (B,), got {scores.shape}, {targets.shape}"
        )
    true = scores.gather(1, targets[:, None])  # (B, 1)
    others = torch.ones_like(scores, dtype=torch.bool)
    others.scatter_(1, targets[:, None], False)
    if known is not None:
        others &= ~known
    better = ((scores > true) & others).sum(1)
    tied = ((scores == true) & others).sum(1)
    return 1.0 + better.double() + tied.double() / 2


@torch.no_grad()
def evaluate(
    model: KGEModel,
    triples: np.ndarray,
    known_triples: np.ndarray | None = None,
    *,
    batch_size: int = 512,
    both_directions: bool | None = None,
) -> dict[str, float]:
    """Filtered MRR, Hits@1/3/10 and NLL of ``triples`` (tail and, with reciprocals, head).

    ``known_triples`` (default: ``triples``) are filtered out of each ranking.
    """
    t = _as_triples(triples, nonempty=True)
    known = _as_triples(known_triples, "known_triples") if known_triples is not None else t
    both = model.reciprocal if both_directions is None else both_directions
    if both and not model.reciprocal:
        raise ValueError("both_directions=True needs a model with reciprocal=True")
    index = QueryIndex.from_triples(known, model.n_entities, model.n_relations, reciprocal=both)
    queries = [t]
    if both:
        queries.append(np.stack([t[:, 2], t[:, 1] + model.n_relations, t[:, 0]], 1))
    q = np.concatenate(queries)
    model.eval()
    ranks, nll = [], []
    for start in range(0, len(q), batch_size):
        b = q[start : start + batch_size]
        logp = model(torch.from_numpy(b[:, 0]), torch.from_numpy(b[:, 1]))  # (B, |E|)
        rows = index.lookup(b[:, :2])
        filt = torch.zeros_like(logp, dtype=torch.bool)
        has = rows >= 0
        if has.any():
            filt[torch.from_numpy(np.nonzero(has)[0])] = index.dense(rows[has]).bool()
        tgt = torch.from_numpy(b[:, 2])
        ranks.append(filtered_ranks(logp, tgt, filt))
        nll.append(-logp.gather(1, tgt[:, None]).squeeze(1).double())
    r, n = torch.cat(ranks), torch.cat(nll)
    return {
        "mrr": float((1.0 / r).mean()),
        "hits@1": float((r <= 1).double().mean()),
        "hits@3": float((r <= 3).double().mean()),
        "hits@10": float((r <= 10).double().mean()),
        "nll": float(n.mean()),
    }
