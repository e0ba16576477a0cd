"""Knowledge-graph data: PyKEEN's bundled dense graphs, user TSV files, synthetic graphs.

Triples are ``(n, 3)`` int64 numpy arrays of ``(subject, relation, object)`` ids.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["KGData", "load_pykeen_dataset", "load_tsv", "synthetic_graph"]

PYKEEN_DATASETS = ("nations", "umls", "kinships")


@dataclass
class KGData:
    """A knowledge graph split into train / valid / test id triples."""

    train: np.ndarray  # (n_train, 3) int64
    valid: np.ndarray  # (n_valid, 3) int64
    test: np.ndarray  # (n_test, 3) int64
    n_entities: int
    n_relations: int
    entity_to_id: dict[str, int] = field(default_factory=dict)
    relation_to_id: dict[str, int] = field(default_factory=dict)

    def all_triples(self) -> np.ndarray:
        """Every known triple (for filtered evaluation)."""
        return np.concatenate([self.train, self.valid, self.test], axis=0)


def _read_labels(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise ValueError(f"{path}:{lineno}: expected 3 tab-separated fields, got {len(parts)}")
        rows.append((parts[0], parts[1], parts[2]))
    return rows


def load_tsv(
    train: str | Path, valid: str | Path | None = None, test: str | Path | None = None
) -> KGData:
    """Load label triples ``subject<TAB>relation<TAB>object`` from one to three TSV files.

    Ids are assigned in sorted label order over the union of all files (as PyKEEN does).
    """
    paths = {"train": train, "valid": valid, "test": test}
    rows = {k: _read_labels(Path(p)) if p is not None else [] for k, p in paths.items()}
    if not rows["train"]:
        raise ValueError(f"train={train!r} holds no triples")
    every = [t for part in rows.values() for t in part]
    entity_to_id = {
        e: i for i, e in enumerate(sorted({t[0] for t in every} | {t[2] for t in every}))
    }
    relation_to_id = {r: i for i, r in enumerate(sorted({t[1] for t in every}))}

    def ids(part: list[tuple[str, str, str]]) -> np.ndarray:
        out = [(entity_to_id[s], relation_to_id[r], entity_to_id[o]) for s, r, o in part]
        return np.asarray(out, dtype=np.int64).reshape(-1, 3)

    return KGData(
        ids(rows["train"]),
        ids(rows["valid"]),
        ids(rows["test"]),
        len(entity_to_id),
        len(relation_to_id),
        entity_to_id,
        relation_to_id,
    )


def load_pykeen_dataset(name: str) -> KGData:
    """Nations, UMLS or Kinships, read from the files inside the installed ``pykeen`` wheel.

    Needs the ``[pykeen]`` extra; pykeen itself is not imported (its import is slow), only its
    package folder is located.
    """
    key = name.lower()
    if key not in PYKEEN_DATASETS:
        raise ValueError(f"name must be one of {PYKEEN_DATASETS}, got {name!r}")
    spec = importlib.util.find_spec("pykeen")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("load_pykeen_dataset needs pykeen: pip install 'icml26-kge-mos[pykeen]'")
    folder = Path(next(iter(spec.submodule_search_locations))) / "datasets" / key
    return load_tsv(folder / "train.txt", folder / "valid.txt", folder / "test.txt")


def synthetic_graph(
    n_entities: int,
    out_degree: int,
    *,
    n_queries: int | None = None,
    n_relations: int = 1,
    seed: int = 0,
) -> np.ndarray:
    """A graph whose every query ``(s, r)`` has exactly ``out_degree`` random distinct objects.

    ``n_queries`` (default ``n_entities``) queries are spread over ``n_relations`` relations
    with subjects drawn without repetition per relation, so |E| and the maximum out-degree c
    are controlled exactly. Returns ``(n_queries · c, 3)`` int64 triples.
    """
    if not isinstance(n_entities, int) or n_entities < 2:
        raise ValueError(f"n_entities must be an int >= 2, got {n_entities!r}")
    if not isinstance(out_degree, int) or not 1 <= out_degree < n_entities:
        raise ValueError(f"out_degree must be an int in [1, n_entities), got {out_degree!r}")
    n_queries = n_entities if n_queries is None else n_queries
    if not isinstance(n_queries, int) or not 1 <= n_queries <= n_entities * n_relations:
        raise ValueError(
            f"n_queries must be an int in [1, n_entities*n_relations], got {n_queries!r}"
        )
    rng = np.random.default_rng(seed)
    pairs = rng.choice(n_entities * n_relations, size=n_queries, replace=False)
    rows = []
    for p in pairs:
        s, r = int(p % n_entities), int(p // n_entities)
        for o in rng.choice(n_entities, size=out_degree, replace=False):
            rows.append((s, r, int(o)))
    return np.asarray(rows, dtype=np.int64)
