"""PyKEEN adapter (extra ``[pykeen]``): a PyKEEN ``Model`` whose scores are log-probabilities.

``score_t`` returns ``log p(t | h, r)`` normalised over all entities. PyKEEN's LCWA
``CrossEntropyLoss`` applies ``cross_entropy(predictions, normalize(labels))``, i.e. a
``log_softmax`` of the scores; since ``log_softmax(log p) = log p`` the LCWA pipeline trains
exactly the 1-N objective of :mod:`icml26_kge_mos.train`, and PyKEEN's rank-based evaluators
rank by ``log p`` unchanged. sLCWA (negative sampling) scores single triples with a
*margin / pointwise* loss on unnormalised scores; a mixture normalised over all entities has
no such per-triple score, so training with it is refused with a clear error.

Usage::

    from pykeen.pipeline import pipeline
    from icml26_kge_mos.pykeen_model import MoSKGE

    result = pipeline(
        dataset="nations", dataset_kwargs=dict(create_inverse_triples=True),
        model=MoSKGE, model_kwargs=dict(embedding_dim=16, scorer="distmult", n_components=4),
        training_loop="lcwa", loss="crossentropy", epochs=10,
    )
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from pykeen.losses import CrossEntropyLoss
from pykeen.models.base import Model

from .kge import KGEModel

__all__ = ["SLCWA_ERROR", "MoSKGE"]

SLCWA_ERROR = (
    "MoSKGE returns log-probabilities normalised over all entities (a mixture of softmaxes); "
    "it cannot be trained with sLCWA negative sampling, which scores triples one by one. "
    "Use training_loop='lcwa' (1-N / KvsAll) with loss='crossentropy'."
)


class MoSKGE(Model):
    """A KGE (DistMult, ComplEx, RESCAL, TuckER, RotatE) with a linear or MoS output layer.

    Args:
        triples_factory: PyKEEN's triples factory (with or without inverse triples).
        embedding_dim: d.
        scorer: one of :data:`icml26_kge_mos.SCORERS`.
        n_components: K (1 = the plain KGE with a softmax over entities).
        activation, init_std, relation_dim: passed to :class:`icml26_kge_mos.KGEModel`.
        loss: must be PyKEEN's ``CrossEntropyLoss`` (the default).
    """

    loss_default: ClassVar[type] = CrossEntropyLoss
    loss_default_kwargs: ClassVar[dict[str, Any]] = {}
    hpo_default: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        *,
        triples_factory,
        embedding_dim: int = 16,
        scorer: str = "distmult",
        n_components: int = 4,
        activation: str = "tanh",
        init_std: float = 0.1,
        relation_dim: int | None = None,
        loss=None,
        loss_kwargs=None,
        random_seed: int | None = None,
    ) -> None:
        super().__init__(
            triples_factory=triples_factory,
            loss=loss,
            loss_kwargs=loss_kwargs,
            random_seed=random_seed,
            predict_with_sigmoid=False,
        )
        if not isinstance(self.loss, CrossEntropyLoss):
            raise ValueError(
                f"loss must be PyKEEN's CrossEntropyLoss (the scores are log-probabilities), "
                f"got {type(self.loss).__name__}; pass loss='crossentropy' and "
                f"training_loop='lcwa' to pykeen's pipeline()"
            )
        # With inverse triples PyKEEN already stores 2R relations (r -> 2r, inverse 2r+1);
        # otherwise the KGE keeps its own reciprocal relations for head prediction.
        self.kge = KGEModel(
            self.num_entities,
            self.num_relations,
            embedding_dim,
            scorer=scorer,  # type: ignore[arg-type]
            n_components=n_components,
            reciprocal=not self.use_inverse_triples,
            relation_dim=relation_dim,
            init_std=init_std,
            activation=activation,  # type: ignore[arg-type]
        )

    # -- PyKEEN plumbing ------------------------------------------------------------------
    def _reset_parameters_(self) -> None:
        self.kge.reset_parameters()

    def _get_entity_len(self, *, mode=None) -> int:
        return self.num_entities

    def collect_regularization_term(self) -> torch.Tensor:
        return torch.zeros((), device=self.kge.entity.device)

    # -- scoring ---------------------------------------------------------------------------
    def _log_probs(self, s: torch.Tensor, r: torch.Tensor, slice_size: int | None) -> torch.Tensor:
        chunk = slice_size if slice_size and slice_size < self.num_entities else None
        return self.kge(s, r, chunk_size=chunk)  # (B, |E|)

    @staticmethod
    def _select(logp: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        if ids is None:
            return logp
        if ids.dim() == 1:
            return logp[:, ids]
        return logp.gather(1, ids)

    def _inverse_relation(self, r: torch.Tensor) -> torch.Tensor:
        if self.use_inverse_triples:
            return self.relation_inverter.get_inverse_id(r)
        return r + self.num_relations

    def score_t(self, hr_batch, *, slice_size=None, mode=None, tails=None):
        """``log p(t | h, r)`` for all (or the given) tails: ``(B, 2) -> (B, |E|)``."""
        logp = self._log_probs(hr_batch[:, 0], hr_batch[:, 1], slice_size)
        return self._select(logp, tails)

    def score_h(self, rt_batch, *, slice_size=None, mode=None, heads=None):
        """``log p(h | ?, r, t)`` via the reciprocal query ``(t, r⁻¹)``: ``(B, 2) -> (B, |E|)``."""
        r_inv = self._inverse_relation(rt_batch[:, 0])
        logp = self._log_probs(rt_batch[:, 1], r_inv, slice_size)
        return self._select(logp, heads)

    def score_hrt(self, hrt_batch, *, mode=None):
        """``log p(t | h, r)`` of single triples ``(B, 3) -> (B, 1)`` (evaluation only)."""
        if self.training and torch.is_grad_enabled():
            raise ValueError(SLCWA_ERROR)
        logp = self._log_probs(hrt_batch[:, 0], hrt_batch[:, 1], None)
        return logp.gather(1, hrt_batch[:, 2:3])

    def score_r(self, ht_batch, *, slice_size=None, mode=None, relations=None):
        """``log p(t | h, r)`` for every relation r: ``(B, 2) -> (B, R)``."""
        rel = (
            torch.arange(self.num_relations, device=ht_batch.device)
            if relations is None
            else relations
        )
        if rel.dim() == 1:
            rel = rel.unsqueeze(0).expand(ht_batch.shape[0], -1)  # (B, R)
        b, n_r = rel.shape
        s = ht_batch[:, 0:1].expand(b, n_r).reshape(-1)
        t = ht_batch[:, 1:2].expand(b, n_r).reshape(-1)
        logp = self._log_probs(s, rel.reshape(-1), slice_size)  # (B·R, |E|)
        return logp.gather(1, t[:, None]).view(b, n_r)
