"""Mixture-of-softmaxes (MoS) output layer for 1-N link prediction.

A knowledge-graph embedding maps a query ``(s, r)`` to a vector ``h ∈ R^d`` and scores every
entity with a *linear* output layer, ``logits = E h``. Over all queries the logit matrix
``H Eᵀ`` has rank ≤ d (the log-probability matrix rank ≤ d + 1): the rank bottleneck of
Badreddine, van Krieken & Serafini (ICML 2026, Sec. "Breaking the bottleneck"). The MoS layer
replaces it by a mixture of K softmaxes over the entities::

    π(h)   = softmax(W_π h)                      ∈ Δ^K          (mixture weights)
    g_k(h) = τ · tanh(W_k h + b_k)               ∈ R^d          (component heads)
    p(o | s, r) = Σ_k π_k(h) · softmax_o(E g_k(h))

Its extra parameters (K·d² + K·d + K·d + 1) do not depend on |E|. ``τ = exp(log τ)`` is one
learnable output temperature (init 1), our addition: tanh bounds the heads in the unit cube,
and in a KGE the entity table ``E`` is also the *input* of the query (``h = e_s ⊙ w_r``), so
without τ sharp distributions need large entity norms that push the heads into tanh
saturation. On UMLS at d = 4 it is the difference between MoS losing to and beating the
linear layer (README, "What differs"). Everything is computed in log
space::

    log p(o | s, r) = logsumexp_k [ log π_k + z_ko − logsumexp_o' z_ko' ],   z_k = E g_k

Two implementations of that last line live here, side by side:

* :func:`mos_log_probs_ref` — the reference: materialises the ``(B, K, |E|)`` logits and lets
  autograd keep them (and their log-softmax) for the backward pass.
* :func:`mos_log_probs_sliced` — the fused path: a custom autograd function that streams over
  slices of the entity table in the forward *and* the backward pass (recomputing the logits of
  each slice), so it never holds more than ``(B, K, chunk)`` logits and saves only
  ``(B, |E|)`` for backward. This is what makes K-fold wider 1-N scoring affordable when |E| is
  large (PyKEEN issues #298 / #808 are about exactly this memory wall).

No Triton kernel: there was no GPU to measure one against this torch path (see README).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from torch import nn

__all__ = [
    "MoSOutput",
    "linear_log_probs",
    "mos_log_probs_ref",
    "mos_log_probs_sliced",
]

ACTIVATIONS: tuple[str, ...] = ("residual", "tanh", "identity")

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check_inputs(log_pi: torch.Tensor, g: torch.Tensor, entities: torch.Tensor) -> None:
    if log_pi.dim() != 2:
        raise ValueError(f"log_pi must have shape (B, K), got {tuple(log_pi.shape)}")
    if g.dim() != 3 or g.shape[:2] != log_pi.shape:
        raise ValueError(
            f"g must have shape (B, K, d) matching log_pi (B, K) = {tuple(log_pi.shape)}, "
            f"got {tuple(g.shape)}"
        )
    if entities.dim() != 2 or entities.shape[1] != g.shape[2]:
        raise ValueError(
            f"entities must have shape (|E|, d) with d = {g.shape[2]}, got {tuple(entities.shape)}"
        )


def linear_log_probs(h: torch.Tensor, entities: torch.Tensor) -> torch.Tensor:
    """The linear output layer: ``log softmax_o(E h)``.  ``(B, d), (|E|, d) -> (B, |E|)``."""
    if h.dim() != 2 or entities.dim() != 2 or h.shape[1] != entities.shape[1]:
        raise ValueError(
            f"expected h (B, d) and entities (|E|, d) with equal d, got h {tuple(h.shape)} "
            f"and entities {tuple(entities.shape)}"
        )
    return torch.log_softmax(h @ entities.T, dim=-1)


def mos_log_probs_ref(
    log_pi: torch.Tensor,
    g: torch.Tensor,
    entities: torch.Tensor,
    score_fn: ScoreFn | None = None,
) -> torch.Tensor:
    """Reference MoS log-probabilities.

    ``log p_bo = logsumexp_k(log_pi_bk + log_softmax_o(z_bk·)_o)`` with ``z_bko = score_fn(g, E)``
    (default: the dot product ``g_bk · e_o``).

    Args:
        log_pi: ``(B, K)`` log mixture weights (rows sum to one in probability space).
        g: ``(B, K, d)`` component query vectors.
        entities: ``(|E|, d)`` output entity representations.
        score_fn: optional ``(B, K, d), (|E|, d) -> (B, K, |E|)`` scoring function for KGEs
            whose score is not a dot product (e.g. RotatE's negative distance).

    Returns:
        ``(B, |E|)`` log-probabilities; ``logsumexp`` over the last axis is 0.
    """
    _check_inputs(log_pi, g, entities)
    z = g @ entities.T if score_fn is None else score_fn(g, entities)  # (B, K, |E|)
    return torch.logsumexp(log_pi.unsqueeze(-1) + torch.log_softmax(z, dim=-1), dim=1)


class _SlicedMoS(torch.autograd.Function):
    """Entity-sliced MoS log-probabilities with a recomputing backward pass.

    Notation (per query b, component k, entity o): ``z = g_k · e_o``, ``L_k = logsumexp_o z``,
    ``q = exp(z − L_k)`` (component softmax), ``r_k = exp(log π_k + z − L_k − log p_o)``
    (responsibility, ``Σ_k r_k = 1``). With upstream gradient ``G_o``::

        ∂/∂log π_k = S_k = Σ_o G_o r_ko
        ∂/∂z_ko    = G_o r_ko − S_k q_ko
    """

    @staticmethod
    def forward(ctx, log_pi, g, entities, chunk_size):  # type: ignore[override]
        n = entities.shape[0]
        # pass 1: per-component normaliser L (B, K), online over entity slices
        lse = torch.full(log_pi.shape, float("-inf"), dtype=g.dtype, device=g.device)
        for start in range(0, n, chunk_size):
            z = g @ entities[start : start + chunk_size].T  # (B, K, c)
            lse = torch.logaddexp(lse, torch.logsumexp(z, dim=-1))
        # pass 2: mix the components slice by slice into the (B, |E|) output
        out = torch.empty(g.shape[0], n, dtype=g.dtype, device=g.device)
        shift = (log_pi - lse).unsqueeze(-1)  # (B, K, 1)
        for start in range(0, n, chunk_size):
            z = g @ entities[start : start + chunk_size].T  # (B, K, c)
            out[:, start : start + chunk_size] = torch.logsumexp(z + shift, dim=1)
        ctx.save_for_backward(log_pi, g, entities, lse, out)
        ctx.chunk_size = chunk_size
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        log_pi, g, entities, lse, out = ctx.saved_tensors
        chunk_size, n = ctx.chunk_size, entities.shape[0]
        shift = (log_pi - lse).unsqueeze(-1)  # (B, K, 1)
        # pass 1: S (B, K) = Σ_o G_o r_ko
        s = torch.zeros_like(log_pi)
        for start in range(0, n, chunk_size):
            sl = slice(start, start + chunk_size)
            z = g @ entities[sl].T  # (B, K, c)
            r = torch.exp(z + shift - out[:, None, sl])  # (B, K, c)
            s += (r * grad_out[:, None, sl]).sum(-1)
        # pass 2: dz = G r − S q, pushed to g and to the entity slice
        grad_g = torch.zeros_like(g)
        grad_e = torch.zeros_like(entities)
        for start in range(0, n, chunk_size):
            sl = slice(start, start + chunk_size)
            z = g @ entities[sl].T  # (B, K, c)
            r = torch.exp(z + shift - out[:, None, sl])
            q = torch.exp(z - lse.unsqueeze(-1))
            dz = grad_out[:, None, sl] * r - s.unsqueeze(-1) * q  # (B, K, c)
            grad_g += dz @ entities[sl]  # (B, K, d)
            grad_e[sl] = torch.einsum("bkc,bkd->cd", dz, g)
        return s, grad_g, grad_e, None


def mos_log_probs_sliced(
    log_pi: torch.Tensor, g: torch.Tensor, entities: torch.Tensor, chunk_size: int = 1024
) -> torch.Tensor:
    """Fused, entity-sliced MoS log-probabilities (dot-product scores only).

    Same maths and signature as :func:`mos_log_probs_ref` (without ``score_fn``); peak extra
    memory is ``O(B·K·chunk_size)`` instead of ``O(B·K·|E|)``, and only the ``(B, |E|)``
    output is saved for backward (the logits are recomputed slice by slice).
    """
    _check_inputs(log_pi, g, entities)
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    return _SlicedMoS.apply(log_pi, g, entities, chunk_size)


def _positive_int(name: str, value: object) -> int:
    """``value`` as an int >= 1 (Python or NumPy integer, not bool), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _check_float_input(name: str, x: torch.Tensor, like: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != like.dtype:
        raise ValueError(
            f"{name} has dtype {x.dtype} but the layer's parameters are {like.dtype}; "
            f"cast one of them (e.g. layer.to({x.dtype}) or {name}.to({like.dtype}))"
        )
    if x.device != like.device:
        raise ValueError(f"{name} is on {x.device} but the layer's parameters on {like.device}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} holds NaN or infinite values")


class MoSOutput(nn.Module):
    """Mixture-of-softmaxes output layer: ``(B, d), (|E|, d) -> (B, |E|)`` log-probabilities.

    ``log p(o|h) = log Σ_k softmax(W_π h)_k · softmax_o(E g_k(h))`` with the component heads

    * ``"tanh"``:     ``g_k = τ · tanh(W_k h + b_k)``      (Yang et al. 2018; the paper's MoS)
    * ``"identity"``: ``g_k = τ · (W_k h + b_k)``
    * ``"residual"``: ``g_k = τ · (h + tanh(W_k h + b_k))`` (ours, the default)

    With ``init="identity"`` (default) the heads start where every component equals the
    linear layer — ``W_k = I`` for ``"identity"``/``"tanh"``, ``W_k = 0`` for
    ``"residual"``, ``b_k = 0``, ``τ = 1`` — so for ``"identity"`` and ``"residual"`` the
    layer *is* the linear layer ``log softmax(E h)`` at initialisation whatever K and the
    gate, and training can only move away from it where that lowers the loss (a superset
    start). The gate ``W_π`` keeps PyTorch's random Linear initialisation, which breaks the
    symmetry between the components (their gradients are weighted by ``π_k(h)``).
    ``init="random"`` is PyTorch's default Linear initialisation of the heads (the MoS
    reference code).

    Args:
        dim: query / entity dimension d.
        n_components: number of mixture components K (K ≥ 1).
        activation: ``"residual"``, ``"tanh"`` or ``"identity"`` (see above).
        init: ``"identity"`` (start at the linear layer) or ``"random"``.
        gate_bias: whether the mixture-weight projection W_π has a bias (MoS: no).
        learn_scale: learn the output temperature τ (init 1); ``False`` fixes τ = 1.
        chunk_size: default entity slice for :func:`mos_log_probs_sliced`; ``None`` uses the
            one-shot reference (fastest for small |E|).
    """

    def __init__(
        self,
        dim: int,
        n_components: int = 4,
        *,
        activation: Literal["residual", "tanh", "identity"] = "residual",
        init: Literal["identity", "random"] = "identity",
        gate_bias: bool = False,
        learn_scale: bool = True,
        chunk_size: int | None = None,
    ) -> None:
        super().__init__()
        dim = _positive_int("dim", dim)
        n_components = _positive_int("n_components", n_components)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        if init not in ("identity", "random"):
            raise ValueError(f"init must be 'identity' or 'random', got {init!r}")
        if not isinstance(gate_bias, bool):
            raise ValueError(f"gate_bias must be a bool, got {gate_bias!r}")
        if not isinstance(learn_scale, bool):
            raise ValueError(f"learn_scale must be a bool, got {learn_scale!r}")
        if chunk_size is not None:
            chunk_size = _positive_int("chunk_size", chunk_size)
        self.dim, self.n_components = dim, n_components
        self.activation, self.init, self.chunk_size = activation, init, chunk_size
        self.gate = nn.Linear(dim, n_components, bias=gate_bias)  # W_π: d -> K
        self.heads = nn.Linear(dim, n_components * dim)  # [W_1; ...; W_K], b: d -> K·d
        self.log_scale = nn.Parameter(torch.zeros(()), requires_grad=learn_scale)  # log τ
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Gate: PyTorch's Linear default; heads: the ``init`` scheme; ``τ = 1``."""
        self.gate.reset_parameters()
        if self.init == "identity":
            self.set_identity_()
        else:
            self.heads.reset_parameters()
            self.log_scale.zero_()

    def mixture(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``h (B, d) -> (log π (B, K), g (B, K, d))``."""
        if not isinstance(h, torch.Tensor) or h.dim() != 2 or h.shape[1] != self.dim:
            shape = tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__
            raise ValueError(f"h must have shape (B, {self.dim}), got {shape}")
        log_pi = torch.log_softmax(self.gate(h), dim=-1)  # (B, K)
        pre = self.heads(h).view(h.shape[0], self.n_components, self.dim)  # (B, K, d)
        if self.activation == "tanh":
            g = torch.tanh(pre)
        elif self.activation == "residual":
            g = h.unsqueeze(1) + torch.tanh(pre)
        else:
            g = pre
        return log_pi, g * self.log_scale.exp()

    def forward(
        self,
        h: torch.Tensor,
        entities: torch.Tensor,
        *,
        score_fn: ScoreFn | None = None,
        chunk_size: int | None = None,
    ) -> torch.Tensor:
        """Log-probabilities ``(B, |E|)`` of every entity for each query vector.

        ``chunk_size`` (or the layer's default) selects the sliced fused path; it needs the
        dot-product score (``score_fn=None``). ``h`` and ``entities`` must be finite and of
        the layer's dtype and device (a ValueError names the argument otherwise).
        """
        _check_float_input("h", h, self.gate.weight)
        _check_float_input("entities", entities, self.gate.weight)
        log_pi, g = self.mixture(h)
        chunk = chunk_size if chunk_size is not None else self.chunk_size
        if chunk is not None and score_fn is None:
            return mos_log_probs_sliced(log_pi, g, entities, int(chunk))
        return mos_log_probs_ref(log_pi, g, entities, score_fn)

    @torch.no_grad()
    def set_identity_(self) -> MoSOutput:
        """Start every component at the linear layer: ``b_k = 0``, ``τ = 1`` and ``W_k = I``
        (``W_k = 0`` for ``"residual"``). For ``"identity"`` and ``"residual"`` the layer then
        equals ``log softmax(E h)`` exactly, for any K and gate."""
        if self.activation == "residual":
            self.heads.weight.zero_()
        else:
            eye = torch.eye(self.dim, dtype=self.heads.weight.dtype)
            self.heads.weight.copy_(eye.repeat(self.n_components, 1))
        self.heads.bias.zero_()
        self.log_scale.zero_()
        return self

    def extra_parameters(self) -> int:
        """Parameters the layer adds on top of a linear output layer (independent of |E|)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
