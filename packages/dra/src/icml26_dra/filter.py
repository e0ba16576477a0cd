"""``DRAFilter``: score a ``datasets.Dataset`` with DRA and drop the most unsafe-like samples.

The step before a TRL ``SFTTrainer``::

    clean = DRAFilter(model, tokenizer, unsafe_targets, budget=200)(train_dataset)
    SFTTrainer(model=..., train_dataset=clean, ...)

Duck-typed on the dataset: it reads ``dataset[column]`` (a list of strings) and returns
``dataset.select(kept_indices)``, so a ``datasets.Dataset`` comes back as one (with its
features and fingerprinting) and ``datasets`` is not imported here. A list of dicts or a dict of
lists is accepted for the targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .attribution import DRA, filter_top
from .representations import (
    RandomProjector,
    extract_hidden_states,
    per_sample_grads,
    select_parameters,
    tokenize_pairs,
)

__all__ = ["DRAFilter"]


def _column(data: Any, name: str | None, what: str) -> list[str] | None:
    if name is None:
        return None
    if (
        isinstance(data, Sequence)
        and not isinstance(data, str)
        and data
        and isinstance(data[0], dict)
    ):
        rows = data
        if name not in rows[0]:
            raise ValueError(f"{what} rows have no {name!r} key")
        return [str(r[name]) for r in rows]
    try:
        col = data[name]
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{what} has no column {name!r}") from exc
    return [str(x) for x in col]


class DRAFilter:
    """Score every sample of a dataset against unsafe targets with DRA; drop the top ``budget``.

    Args:
        model: a causal LM (``transformers``-style: ``output_hidden_states`` / ``.logits``).
        tokenizer: its tokenizer (``tokenizer(text, add_special_tokens=False)["input_ids"]``).
        targets: the unsafe target examples (a ``datasets.Dataset``, dict of lists or list of
            dicts) with the same columns as the data.
        budget: how many samples ``__call__`` removes.
        prompt_column / response_column: text columns; ``prompt_column=None`` for plain text.
        representation: ``"hidden"`` (pooled hidden states of ``layer``) or ``"gradient"``
            (per-sample gradients of ``params``, randomly projected to ``proj_dim``).
        **dra_kwargs: passed to ``DRA`` (``whiten``, ``k``, ``agg``...).

    After a call: ``scores_`` (N,), ``dra_`` (the fitted ``DRA``).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        targets: Any,
        *,
        budget: int,
        prompt_column: str | None = "prompt",
        response_column: str = "response",
        representation: str = "hidden",
        layer: int = -1,
        pool: str = "mean",
        params: Any = "all",
        proj_dim: int = 8192,
        proj_kind: str = "rademacher",
        seed: int = 0,
        max_length: int = 256,
        batch_size: int = 32,
        **dra_kwargs: Any,
    ) -> None:
        if representation not in ("hidden", "gradient"):
            raise ValueError(
                f"representation must be 'hidden' or 'gradient'; got {representation!r}"
            )
        self.model, self.tokenizer, self.targets = model, tokenizer, targets
        self.budget = budget
        self.prompt_column, self.response_column = prompt_column, response_column
        self.representation, self.layer, self.pool = representation, layer, pool
        self.params, self.proj_dim, self.proj_kind, self.seed = params, proj_dim, proj_kind, seed
        self.max_length, self.batch_size = max_length, batch_size
        self.dra_kwargs = dra_kwargs
        self.dra_: DRA | None = None
        self.scores_: np.ndarray | None = None

    def _reps(self, data: Any, what: str) -> np.ndarray:
        responses = _column(data, self.response_column, what)
        prompts = _column(data, self.prompt_column, what)
        assert responses is not None
        if not responses:
            raise ValueError(f"{what} is empty")
        batch = tokenize_pairs(self.tokenizer, prompts, responses, max_length=self.max_length)
        if self.representation == "hidden":
            return extract_hidden_states(
                self.model, batch, layer=self.layer, pool=self.pool, batch_size=self.batch_size
            )
        n_params = sum(p.numel() for _, p in select_parameters(self.model, self.params))
        projector = None
        if self.proj_dim < n_params:
            projector = RandomProjector(
                n_params, self.proj_dim, kind=self.proj_kind, seed=self.seed
            )
        return per_sample_grads(self.model, batch, params=self.params, projector=projector)

    def score(self, dataset: Any) -> np.ndarray:
        """DRA score of every sample (higher = more like the unsafe targets), (N,)."""
        train = self._reps(dataset, "dataset")
        target = self._reps(self.targets, "targets")
        self.dra_ = DRA(self.representation, **self.dra_kwargs).fit(train, target)
        self.scores_ = self.dra_.score()
        return self.scores_

    def __call__(self, dataset: Any) -> Any:
        """``dataset`` without its ``budget`` highest-scoring samples."""
        if len(dataset) < self.budget:
            raise ValueError(f"budget={self.budget} exceeds the dataset size {len(dataset)}")
        return filter_top(dataset, self.score(dataset), self.budget)
