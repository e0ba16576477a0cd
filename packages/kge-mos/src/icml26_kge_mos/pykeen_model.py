"""PyKEEN model (extra ``[pykeen]``): an ``ERModel`` whose output layer is a mixture of softmaxes.

:class:`MoSKGE` is a :class:`pykeen.models.ERModel`: its entity and relation embeddings are
PyKEEN ``Representation`` modules (so PyKEEN's initialisers, constrainers, regularizers and
representation classes apply), its ``interaction`` is PyKEEN's own ``DistMultInteraction`` or
``ComplExInteraction``, and it trains with PyKEEN's training loops and evaluators. Importing
this module (which ``import icml26_kge_mos`` does when PyKEEN is installed) registers it in
PyKEEN's ``model_resolver``, so ``pipeline(model="moskge")`` works.

Both base interactions are bilinear, ``score(h, r, t) = ⟨q(h, r), t⟩`` with the query vector
``q = h ⊙ r`` (DistMult; ComplEx: ``Re⟨h ⊙ r, t̄⟩``, the real dot product of the stacked real
and imaginary parts). The model replaces the linear output ``log softmax_t ⟨q, t⟩`` by
:class:`~icml26_kge_mos.mos.MoSOutput`::

    log p(t | h, r) = log Σ_k softmax(W_π q)_k · softmax_t ⟨g_k(q), t⟩

so ``score_t`` returns log-probabilities normalised over all entities. PyKEEN's LCWA
``CrossEntropyLoss`` applies ``cross_entropy(scores, normalize(labels))``, a ``log_softmax`` of
the scores, and ``log_softmax(log p) = log p``: the LCWA pipeline trains exactly the 1-N
objective of the paper. With ``n_components=1`` the scores are PyKEEN's own DistMult / ComplEx
scores (no softmax; the LCWA loss applies it), so K = 1 *is* the PyKEEN model.

**One score function.** Every scoring method returns the same number for a triple,
``f(h, r, t) = log p(t | h, r)``: ``score_hrt``, ``score_t``, ``score_r`` and (default
``head_scoring="tail_model"``) ``score_h``, which scores each candidate head ``h'`` by the
tail model's ``log p(t | h', r)``. That costs one |E|-wide mixture per candidate head,
O(K·|E|²·d) per (r, t) query instead of O(K·|E|·d), and a ``score_h`` row is not normalised over
heads. The paper's setup avoids it: with inverse triples (``create_inverse_triples=True``, the
reciprocal relations of 1-N training) PyKEEN predicts heads by ``score_t`` of the inverse
relation, one normalised O(K·|E|·d) row, and never calls ``score_h``.
``head_scoring="head_mixture"`` is the labelled variant: a second mixture ``p(h | r, t)`` on the
head-side query (DistMult: ``r ⊙ t``; ComplEx: ``conj(r) ⊙ t``), cheap and normalised but a
*different model* from ``score_hrt`` (PyKEEN's one-score-function invariant does not hold).

Defaults: ``loss_default`` is ``CrossEntropyLoss``, which direct construction and PyKEEN's
``hpo_pipeline`` honour. PyKEEN's ``pipeline`` and CLI do not: they resolve ``loss=None`` to
``MarginRankingLoss`` before the model sees it, and default to the sLCWA loop (PyKEEN has no
model-level training-loop default). :func:`mos_pipeline` is ``pipeline`` with the paper's
defaults (``model="moskge"``, ``training_loop="lcwa"``, ``loss="crossentropy"``) unless the
caller overrides them. Any other loss trains, with a warning; sLCWA training sees
log-probabilities as scores and pays an |E|-wide normaliser per scored triple.

Why no new ``Interaction``: an ``Interaction`` scores the (h, r, t) triples it is given, but a
mixture of softmaxes needs each component's normaliser over *all* entities, so MoS lives in the
model as an output head over PyKEEN's interaction's query vector.
"""

import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

import torch
from pykeen.constants import DEFAULT_EMBEDDING_HPO_EMBEDDING_DIM_RANGE
from pykeen.losses import CrossEntropyLoss, Loss
from pykeen.models import ERModel, model_resolver
from pykeen.nn.init import xavier_normal_norm_, xavier_uniform_
from pykeen.nn.modules import ComplExInteraction, DistMultInteraction
from pykeen.regularizers import Regularizer
from pykeen.typing import Constrainer, Hint, HintOrType, Initializer

from .mos import ACTIVATIONS, MoSOutput, _positive_int

__all__ = ["BASES", "HEAD_SCORING", "MoSKGE", "mos_pipeline"]

#: supported base interactions (bilinear: score = <query(h, r), t>)
BASES: tuple[str, ...] = ("distmult", "complex")
#: how ``score_h`` scores heads (module docstring): the tail model, or a second head mixture
HEAD_SCORING: tuple[str, ...] = ("tail_model", "head_mixture")
#: candidate rows (query, candidate) scored at once by ``score_h`` with the tail model, times
#: K·|E| logits each: the default memory budget when PyKEEN passes no ``slice_size``
_ROW_BUDGET = 1 << 22


def _real(x: torch.Tensor) -> torch.Tensor:
    """Complex ``(..., d)`` -> real ``(..., 2d)`` (real parts, then imaginary parts)."""
    if x.is_complex():
        return torch.cat([x.real, x.imag], dim=-1)
    return x


class MoSKGE(ERModel):
    """DistMult or ComplEx with a mixture-of-softmaxes output layer, as a PyKEEN ``ERModel``.

    Args:
        triples_factory: PyKEEN's triples factory (with or without inverse triples).
        embedding_dim: d (ComplEx: d complex coordinates, i.e. a 2d-dimensional real query).
        n_components: K; 1 gives PyKEEN's plain DistMult / ComplEx scores.
        base: ``"distmult"`` or ``"complex"``; the PyKEEN interaction used.
        activation: MoS head, ``"residual"`` (default), ``"tanh"`` or ``"identity"``.
        mos_init: ``"identity"`` (start at the linear layer, default) or ``"random"``.
        head_scoring: ``"tail_model"`` (default: ``score_h[h] = log p(t | h, r)``, equal to
            ``score_hrt``) or ``"head_mixture"`` (a second, head-side mixture ``p(h | r, t)``;
            cheaper, but another model; see the module docstring).
        entity_initializer, relation_initializer: PyKEEN initialisers (defaults: PyKEEN's
            DistMult ones; ComplEx: ``normal_``).
        entity_constrainer: optional PyKEEN constrainer (PyKEEN's DistMult uses L2
            normalisation; off here by default).
        regularizer, regularizer_kwargs: optional PyKEEN regularizer on both representations
            (PyKEEN's DistMult uses an Lp regularizer; off here by default).
        loss, loss_kwargs: a PyKEEN loss (default ``CrossEntropyLoss``, the paper's 1-N
            objective; others train with a warning). Declared here so PyKEEN's CLI has ``--loss``.
        kwargs: passed to :class:`pykeen.models.ERModel` (``random_seed``, ...).
    """

    hpo_default: ClassVar[dict[str, Any]] = dict(
        embedding_dim=DEFAULT_EMBEDDING_HPO_EMBEDDING_DIM_RANGE,
        n_components=dict(type=int, low=1, high=8),
    )
    loss_default: ClassVar[type[Loss]] = CrossEntropyLoss
    loss_default_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        *,
        embedding_dim: int = 50,
        n_components: int = 4,
        base: str = "distmult",
        activation: str = "residual",
        mos_init: str = "identity",
        head_scoring: str = "tail_model",
        entity_initializer: Hint[Initializer] = None,
        relation_initializer: Hint[Initializer] = None,
        entity_constrainer: Hint[Constrainer] = None,
        regularizer: HintOrType[Regularizer] = None,
        regularizer_kwargs: Optional[Mapping[str, Any]] = None,  # noqa: UP045 (PyKEEN's CLI)
        loss: HintOrType[Loss] = None,
        loss_kwargs: Optional[Mapping[str, Any]] = None,  # noqa: UP045
        **kwargs,
    ) -> None:
        embedding_dim = _positive_int("embedding_dim", embedding_dim)
        n_components = _positive_int("n_components", n_components)
        if base not in BASES:
            raise ValueError(f"base must be one of {BASES}, got {base!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        if mos_init not in ("identity", "random"):
            raise ValueError(f"mos_init must be 'identity' or 'random', got {mos_init!r}")
        if head_scoring not in HEAD_SCORING:
            raise ValueError(f"head_scoring must be one of {HEAD_SCORING}, got {head_scoring!r}")
        if base == "complex":
            interaction: type = ComplExInteraction
            dtype = torch.cfloat
            e_init = entity_initializer or torch.nn.init.normal_
            r_init = relation_initializer or torch.nn.init.normal_
        else:
            interaction, dtype = DistMultInteraction, None
            e_init = entity_initializer or xavier_uniform_
            r_init = relation_initializer or xavier_normal_norm_
        ent_kw: dict[str, Any] = dict(shape=embedding_dim, initializer=e_init, dtype=dtype)
        rel_kw: dict[str, Any] = dict(shape=embedding_dim, initializer=r_init, dtype=dtype)
        if entity_constrainer is not None:
            ent_kw["constrainer"] = entity_constrainer
        if regularizer is not None:
            ent_kw.update(regularizer=regularizer, regularizer_kwargs=regularizer_kwargs)
            rel_kw.update(regularizer=regularizer, regularizer_kwargs=regularizer_kwargs)
        # ERModel builds the representations and calls reset_parameters_() exactly once; the
        # MoS layer does not exist yet then, so it initialises itself on construction below.
        # Later reset_parameters_() calls reach MoSOutput.reset_parameters() through
        # ERModel._reset_parameters_, which resets every submodule bottom-up.
        super().__init__(
            interaction=interaction,
            entity_representations_kwargs=ent_kw,
            relation_representations_kwargs=rel_kw,
            loss=loss,
            loss_kwargs=loss_kwargs,
            **kwargs,
        )
        if not isinstance(self.loss, CrossEntropyLoss):
            # PyKEEN's pipeline and CLI pass MarginRankingLoss whatever loss_default says, so
            # refusing other losses would break them; log-probabilities are valid scores for any
            # PyKEEN loss, but the paper's objective is the 1-N cross-entropy.
            warnings.warn(
                f"MoSKGE is trained with {type(self.loss).__name__}; the paper's objective is "
                f"the 1-N log-likelihood: pass loss='crossentropy' and training_loop='lcwa' "
                f"(icml26_kge_mos.pykeen_model.mos_pipeline does)",
                stacklevel=2,
            )
        self.base, self.n_components, self.head_scoring = base, n_components, head_scoring
        real_dim = 2 * embedding_dim if base == "complex" else embedding_dim
        self.output = (
            MoSOutput(real_dim, n_components, activation=activation, init=mos_init)  # type: ignore[arg-type]
            if n_components > 1
            else None
        )

    # -- query vectors and 1-N log-probabilities ------------------------------------------
    def _tail_query(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """``(B, d) x2 -> (B, d')``: q with score(h, r, t) = <q, t> (real; ComplEx d' = 2d)."""
        return _real(h * r)

    def _head_query(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``(B, d) x2 -> (B, d')``: q with score(h, r, t) = <q, h>."""
        return _real((r.conj() if r.is_complex() else r) * t)

    def _mos(
        self, query: torch.Tensor, candidates: torch.Tensor, slice_size: int | None
    ) -> torch.Tensor:
        """MoS log-probabilities ``(B, d'), (N, d') -> (B, N)``."""
        assert self.output is not None
        chunk = slice_size if slice_size and slice_size < candidates.shape[0] else None
        return self.output(query, candidates, chunk_size=chunk)

    @staticmethod
    def _select(logp: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        if ids is None:
            return logp
        if ids.dim() == 1:
            return logp[:, ids]
        return logp.gather(1, ids)

    def _tail_log_probs(self, hr_batch, slice_size, mode) -> torch.Tensor:
        h, r, t = self._get_representations(h=hr_batch[:, 0], r=hr_batch[:, 1], t=None, mode=mode)
        return self._mos(self._tail_query(h, r), _real(t), slice_size)  # (B, N)

    def score_t(self, hr_batch, *, slice_size=None, mode=None, tails=None):
        """``log p(t | h, r)``: ``(B, 2) -> (B, N)`` (or ``(B, k)`` for given ``tails``)."""
        if self.output is None:
            return super().score_t(hr_batch, slice_size=slice_size, mode=mode, tails=tails)
        return self._select(self._tail_log_probs(hr_batch, slice_size, mode), tails)

    def score_h(self, rt_batch, *, slice_size=None, mode=None, heads=None):
        """Scores of candidate heads ``(B, 2) -> (B, N)`` (or ``(B, k)`` for given ``heads``).

        ``head_scoring="tail_model"``: ``log p(t | h', r)`` for every candidate ``h'``, the same
        number ``score_hrt`` gives the triple ``(h', r, t)``; ``slice_size`` caps the
        (query, candidate) rows scored at once. ``"head_mixture"``: ``log p(h' | r, t)`` of the
        head-side mixture (another model).
        """
        if self.output is None:
            return super().score_h(rt_batch, slice_size=slice_size, mode=mode, heads=heads)
        if self.head_scoring == "head_mixture":
            h, r, t = self._get_representations(
                h=None, r=rt_batch[:, 0], t=rt_batch[:, 1], mode=mode
            )
            logp = self._mos(self._head_query(r, t), _real(h), slice_size)  # (B, N)
            return self._select(logp, heads)
        b = rt_batch.shape[0]
        if heads is None:
            heads = torch.arange(self.num_entities, device=rt_batch.device)
        if heads.dim() == 1:
            heads = heads.unsqueeze(0).expand(b, -1)  # (B, M)
        m = heads.shape[1]
        r = rt_batch[:, 0:1].expand(b, m).reshape(-1)  # (B·M,)
        t = rt_batch[:, 1:2].expand(b, m).reshape(-1, 1)  # (B·M, 1)
        rows = slice_size or max(1, _ROW_BUDGET // (self.n_components * self.num_entities))
        h_flat = heads.reshape(-1)
        out = [
            self._tail_log_probs(  # (c, N) -> gather t -> (c, 1)
                torch.stack([h_flat[i : i + rows], r[i : i + rows]], 1), None, mode
            ).gather(1, t[i : i + rows])
            for i in range(0, b * m, rows)
        ]
        return torch.cat(out).view(b, m)

    def score_hrt(self, hrt_batch, *, mode=None):
        """``log p(t | h, r)`` of single triples ``(B, 3) -> (B, 1)`` (training mode too)."""
        if self.output is None:
            return super().score_hrt(hrt_batch, mode=mode)
        logp = self._tail_log_probs(hrt_batch[:, :2], None, mode)
        return logp.gather(1, hrt_batch[:, 2:3])

    def score_r(self, ht_batch, *, slice_size=None, mode=None, relations=None):
        """``log p(t | h, r)`` for every (or the given) relation r: ``(B, 2) -> (B, R)``."""
        if self.output is None:
            return super().score_r(ht_batch, slice_size=slice_size, mode=mode, relations=relations)
        rel = (
            torch.arange(self.num_relations, device=ht_batch.device)
            if relations is None
            else relations
        )
        if rel.dim() == 1:
            rel = rel.unsqueeze(0).expand(ht_batch.shape[0], -1)  # (B, R')
        b, n_r = rel.shape
        hr = torch.stack([ht_batch[:, 0:1].expand(b, n_r).reshape(-1), rel.reshape(-1)], 1)
        logp = self._tail_log_probs(hr, slice_size, mode)  # (B·R', N)
        t = ht_batch[:, 1:2].expand(b, n_r).reshape(-1, 1)
        return logp.gather(1, t).view(b, n_r)

    def forward(self, h_indices, r_indices, t_indices, slice_size=None, slice_dim=0, *, mode):
        """Broadcast scoring is PyKEEN's linear score; a normalised mixture has no such form."""
        if self.output is None:
            return super().forward(
                h_indices,
                r_indices,
                t_indices,
                slice_size=slice_size,
                slice_dim=slice_dim,
                mode=mode,
            )
        raise NotImplementedError(
            "MoSKGE scores through score_hrt / score_t / score_h / score_r (1-N log-probabilities)"
        )


def mos_pipeline(**kwargs: Any):
    """:func:`pykeen.pipeline.pipeline` with MoSKGE's defaults, each used only if not given.

    ``model="moskge"``, ``training_loop="lcwa"`` and ``loss="crossentropy"``: the paper's 1-N
    log-likelihood (PyKEEN's ``pipeline`` would pick sLCWA and ``MarginRankingLoss``). A loss
    given inside ``model_kwargs`` counts as given. Returns PyKEEN's ``PipelineResult``.
    """
    from pykeen.pipeline import pipeline

    kwargs.setdefault("model", "moskge")
    kwargs.setdefault("training_loop", "lcwa")
    if kwargs.get("loss") is None and "loss" not in (kwargs.get("model_kwargs") or {}):
        kwargs["loss"] = "crossentropy"
    return pipeline(**kwargs)


if "moskge" not in model_resolver.lookup_dict:
    model_resolver.register(MoSKGE)
