"""1-N scoring heads of standard KGEs, each with a linear or a mixture-of-softmaxes output.

Every head turns a query ``(s, r)`` into a vector ``h_{s,r} ∈ R^d`` and scores all entities
against it at once (1-N scoring). For the bilinear family the score is a dot product with the
entity's output representation, so the model is ``logits = E h`` — the linear output layer
whose rank bottleneck the paper studies:

================  =========================================================  =================
head              query vector h_{s,r}                                        score(h, e_o)
================  =========================================================  =================
DistMult          e_s ⊙ w_r                                                   h · e_o
ComplEx           Re/Im of e_s ⊙ w_r in C^{d/2}, stacked as R^d               h · e_o (=Re⟨e_s,w_r,ē_o⟩)
RESCAL            M_rᵀ e_s,  M_r ∈ R^{d×d}                                     h · e_o
TuckER            W ×₁ e_s ×₂ w_r,  W ∈ R^{d×d_r×d}                            h · e_o
RotatE            e_s ∘ exp(iθ_r) in C^{d/2}                                   −Σ_j |h_j − e_{o,j}|
================  =========================================================  =================

With ``n_components > 1`` the final layer is :class:`~icml26_kge_mos.mos.MoSOutput` applied to
``h`` (for RotatE with its distance as the component score). Reciprocal relations: the model
keeps ``2R`` relation parameters, and head prediction ``(?, r, o)`` is the tail query
``(o, r + R)`` (Lacroix et al. 2018), so one 1-N output layer serves both directions.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .mos import MoSOutput, _positive_int, linear_log_probs

__all__ = ["SCORERS", "FreeQueryModel", "KGEModel"]

ScorerName = Literal["distmult", "complex", "rescal", "tucker", "rotate"]
SCORERS: tuple[str, ...] = ("distmult", "complex", "rescal", "tucker", "rotate")


def _complex_halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]


def rotate_score(q: torch.Tensor, entities: torch.Tensor) -> torch.Tensor:
    """RotatE score ``−Σ_j |q_j − e_j|`` (complex modulus). ``(..., d), (N, d) -> (..., N)``."""
    q_re, q_im = _complex_halves(q.unsqueeze(-2))  # (..., 1, d/2)
    e_re, e_im = _complex_halves(entities)  # (N, d/2)
    dist = torch.sqrt((q_re - e_re) ** 2 + (q_im - e_im) ** 2 + 1e-12)  # (..., N, d/2)
    return -dist.sum(-1)


class KGEModel(nn.Module):
    """A KGE scoring head with a linear (``n_components=1``) or MoS (``> 1``) output layer.

    Args:
        n_entities: |E|.
        n_relations: number of (forward) relations R; ``2R`` are stored when ``reciprocal``.
        dim: d, the real dimension of the query / entity output space (even for ComplEx and
            RotatE, which use d/2 complex coordinates). The linear model's logit rank is ≤ d.
        scorer: one of :data:`SCORERS`.
        n_components: K. ``1`` is the plain KGE (linear output layer); ``K > 1`` uses MoS.
        reciprocal: learn inverse relations and answer head queries as tail queries.
        relation_dim: TuckER's relation dimension d_r (default d).
        init_std: standard deviation of the normal initialisation of embeddings.
        chunk_size: entity slice for the MoS fused path (``None``: one-shot reference).
        activation: MoS head, ``"residual"`` (default), ``"tanh"`` or ``"identity"``
            (:class:`~icml26_kge_mos.mos.MoSOutput`).
        init: MoS head initialisation, ``"identity"`` (start at the linear layer) or
            ``"random"``.
    """

    def __init__(
        self,
        n_entities: int,
        n_relations: int,
        dim: int,
        *,
        scorer: ScorerName = "distmult",
        n_components: int = 1,
        reciprocal: bool = True,
        relation_dim: int | None = None,
        init_std: float = 0.1,
        chunk_size: int | None = None,
        activation: Literal["residual", "tanh", "identity"] = "residual",
        init: Literal["identity", "random"] = "identity",
    ) -> None:
        super().__init__()
        n_entities = _positive_int("n_entities", n_entities)
        n_relations = _positive_int("n_relations", n_relations)
        dim = _positive_int("dim", dim)
        if scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {SCORERS}, got {scorer!r}")
        if scorer in ("complex", "rotate") and dim % 2:
            raise ValueError(f"dim must be even for scorer={scorer!r} (d/2 complex), got {dim}")
        n_components = _positive_int("n_components", n_components)
        if relation_dim is not None:
            relation_dim = _positive_int("relation_dim", relation_dim)
        if not (isinstance(init_std, (int, float)) and math.isfinite(init_std) and init_std > 0):
            raise ValueError(f"init_std must be a positive finite float, got {init_std!r}")
        self.n_entities, self.n_relations, self.dim = n_entities, n_relations, dim
        self.scorer, self.n_components, self.reciprocal = scorer, n_components, reciprocal
        self.relation_dim, self.init_std = relation_dim or dim, init_std
        n_rel = 2 * n_relations if reciprocal else n_relations
        self.entity = nn.Parameter(torch.empty(n_entities, dim))  # (N, d)
        if scorer in ("distmult", "complex"):
            self.relation = nn.Parameter(torch.empty(n_rel, dim))  # (R', d)
        elif scorer == "rescal":
            self.relation = nn.Parameter(torch.empty(n_rel, dim, dim))  # (R', d, d)
        elif scorer == "tucker":
            self.relation = nn.Parameter(torch.empty(n_rel, self.relation_dim))  # (R', d_r)
            self.core = nn.Parameter(torch.empty(dim, self.relation_dim, dim))  # (d, d_r, d)
        else:  # rotate: phases θ_r
            self.relation = nn.Parameter(torch.empty(n_rel, dim // 2))  # (R', d/2)
        self.output = (
            MoSOutput(dim, n_components, activation=activation, init=init, chunk_size=chunk_size)
            if n_components > 1
            else None
        )
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal(0, init_std) embeddings; RotatE phases uniform in [0, 2π); TuckER core
        Normal(0, 1/d); MoS layer: :meth:`MoSOutput.reset_parameters`."""
        nn.init.normal_(self.entity, std=self.init_std)
        if self.scorer == "rotate":
            nn.init.uniform_(self.relation, 0.0, 2 * torch.pi)
        else:
            nn.init.normal_(self.relation, std=self.init_std)
        if self.scorer == "tucker":
            nn.init.normal_(self.core, std=self.dim**-0.5)
        if self.output is not None:
            self.output.reset_parameters()

    # -- query vectors -------------------------------------------------------------------
    def query(self, s: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """Query vectors ``h_{s,r}``: ``(B,), (B,) -> (B, d)`` (r indexes the stored relations)."""
        e_s = self.entity[s]  # (B, d)
        w = self.relation[r]
        if self.scorer == "distmult":
            return e_s * w
        if self.scorer == "complex":
            a, b = _complex_halves(e_s)
            c, d = _complex_halves(w)
            return torch.cat([a * c - b * d, a * d + b * c], dim=-1)
        if self.scorer == "rescal":
            return torch.einsum("bi,bij->bj", e_s, w)
        if self.scorer == "tucker":
            return torch.einsum("bi,bj,ijk->bk", e_s, w, self.core)
        a, b = _complex_halves(e_s)  # rotate: e_s ∘ (cos θ + i sin θ)
        c, d = torch.cos(w), torch.sin(w)
        return torch.cat([a * c - b * d, a * d + b * c], dim=-1)

    def _check_ids(self, s: torch.Tensor, r: torch.Tensor, n_rel: int) -> None:
        if s.shape != r.shape or s.dim() != 1:
            raise ValueError(f"s and r must be 1-d of equal length, got {s.shape}, {r.shape}")
        if s.numel() and (int(s.min()) < 0 or int(s.max()) >= self.n_entities):
            raise ValueError(
                f"entity ids must be in [0, {self.n_entities}), got {s.min()}..{s.max()}"
            )
        if r.numel() and (int(r.min()) < 0 or int(r.max()) >= n_rel):
            raise ValueError(f"relation ids must be in [0, {n_rel}), got {r.min()}..{r.max()}")

    # -- 1-N log-probabilities -----------------------------------------------------------
    def log_probs_from_query(
        self, h: torch.Tensor, *, chunk_size: int | None = None
    ) -> torch.Tensor:
        """``(B, d) -> (B, |E|)`` log-probabilities over all entities."""
        score_fn = rotate_score if self.scorer == "rotate" else None
        if self.output is not None:
            return self.output(h, self.entity, score_fn=score_fn, chunk_size=chunk_size)
        if score_fn is not None:
            return torch.log_softmax(score_fn(h, self.entity), dim=-1)
        return linear_log_probs(h, self.entity)

    def forward(
        self, s: torch.Tensor, r: torch.Tensor, *, chunk_size: int | None = None
    ) -> torch.Tensor:
        """``log p(o | s, r)`` for every entity o: ``(B,), (B,) -> (B, |E|)``.

        ``r`` may index reciprocal relations (``R ≤ r < 2R``) when ``reciprocal``.
        """
        n_rel = self.relation.shape[0]
        self._check_ids(s, r, n_rel)
        return self.log_probs_from_query(self.query(s, r), chunk_size=chunk_size)

    def tail_log_probs(self, s: torch.Tensor, r: torch.Tensor, **kw) -> torch.Tensor:
        """``log p(o | s, r)`` over all o (forward relations only)."""
        self._check_ids(s, r, self.n_relations)
        return self(s, r, **kw)

    def head_log_probs(self, r: torch.Tensor, o: torch.Tensor, **kw) -> torch.Tensor:
        """``log p(s | ?, r, o)`` over all s, via the reciprocal query ``(o, r + R)``."""
        if not self.reciprocal:
            raise ValueError("head prediction needs reciprocal=True (a reciprocal relation)")
        self._check_ids(o, r, self.n_relations)
        return self(o, r + self.n_relations, **kw)

    def extra_parameters(self) -> int:
        """Parameters of the MoS layer (0 for the linear output layer)."""
        return 0 if self.output is None else self.output.extra_parameters()


class FreeQueryModel(nn.Module):
    """One free vector ``h_q ∈ R^d`` per query, then a linear or MoS output layer.

    Every KGE with a linear output layer produces *some* ``h_{s,r} ∈ R^d``, so whatever this
    model cannot fit at dimension d, no such KGE can: it isolates the output layer's capacity
    (used for the synthetic-graph experiments).
    """

    def __init__(
        self,
        n_queries: int,
        n_entities: int,
        dim: int,
        *,
        n_components: int = 1,
        init_std: float = 1.0,
        activation: Literal["residual", "tanh", "identity"] = "residual",
        init: Literal["identity", "random"] = "identity",
    ) -> None:
        super().__init__()
        n_queries = _positive_int("n_queries", n_queries)
        n_entities = _positive_int("n_entities", n_entities)
        dim = _positive_int("dim", dim)
        n_components = _positive_int("n_components", n_components)
        self.dim, self.n_entities = dim, n_entities
        self.queries = nn.Parameter(torch.randn(n_queries, dim) * init_std)  # (Q, d)
        self.entity = nn.Parameter(torch.randn(n_entities, dim) * init_std)  # (N, d)
        self.output = (
            MoSOutput(dim, n_components, activation=activation, init=init)
            if n_components > 1
            else None
        )

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        """``(B,) query ids -> (B, |E|)`` log-probabilities."""
        h = self.queries[q]  # (B, d)
        if self.output is not None:
            return self.output(h, self.entity)
        return linear_log_probs(h, self.entity)
