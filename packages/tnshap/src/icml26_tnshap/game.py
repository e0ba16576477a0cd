"""The masked graph game and exact (enumeration) Shapley values and interactions.

Masking scheme (TN-SHAP-G, Sec. 2): for node features ``X (n, F)``, a baseline ``X₀`` and a
coalition indicator ``z ∈ {0, 1}^n`` (fractional ``z`` interpolates),

    X_S = X₀ + z ⊙ (X − X₀),        v(z) = f(X_S, edge_index)

The graph is kept; only the features of the nodes outside the coalition are replaced by the
baseline. :class:`MaskedGraphGame` evaluates ``v`` for a batch of coalitions at once by stacking
the masked copies into one disjoint-union graph (the PyG batching convention), and counts the
oracle queries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from icml26_kernels.tensornet import normalize_edges
from shapiq import Game

__all__ = ["MaskedGraphGame"]


class MaskedGraphGame(Game):
    """``v(z) = f(X₀ + z ⊙ (X − X₀), edge_index)``, batched, with a query counter.

    Args:
        model: a torch module or callable. With ``batched=True`` (default) it is called as
            ``model(x, edge_index, batch)`` on a disjoint union of ``B`` masked copies
            (``x (B·n, F)``, ``edge_index (2, B·E)``, ``batch (B·n,)`` graph ids) and must return
            ``(B,)`` or ``(B, 1)`` (or ``(B, C)`` with ``output_index``). With ``batched=False``
            it is called per coalition as ``model(x, edge_index)`` and must return one value.
        x: ``(n, F)`` node features.
        edge_index: ``(2, E)`` edges (PyG convention; one or both directions).
        baseline: ``None`` (zeros), a scalar, ``(F,)`` or ``(n, F)`` replacement features X₀.
        batch_size: coalitions per model call.
        output_index: column of a multi-output model to explain.

    A :class:`shapiq.Game`: calling it with a ``(B, n)`` boolean/0-1 matrix (or a list of
    tuples) returns ``(B,)`` numpy values, so shapiq's approximators, ``ExactComputer`` and
    ``precompute`` apply. ``normalize=False`` (default) returns raw model outputs;
    ``normalize=True`` subtracts ``v(∅)`` (one extra query at construction), shapiq's
    convention. :meth:`evaluate` also accepts fractional ``z`` (the multilinear interpolation of
    the masking). :attr:`n_queries` counts coalitions evaluated so far.
    """

    def __init__(
        self,
        model: Callable[..., Any],
        x: Any,
        edge_index: Any,
        baseline: Any = None,
        batch_size: int = 256,
        *,
        batched: bool = True,
        output_index: int | None = None,
        normalize: bool = False,
    ) -> None:
        x_t = torch.as_tensor(x)
        if x_t.ndim == 1:
            x_t = x_t[:, None]
        if x_t.ndim != 2 or x_t.shape[0] < 1:
            raise ValueError(
                f"x must be (n_nodes, n_features) node features; got shape {tuple(x_t.shape)}"
            )
        if not torch.is_floating_point(x_t):
            x_t = x_t.to(torch.get_default_dtype())
        if not bool(torch.isfinite(x_t).all()):
            bad = torch.nonzero(~torch.isfinite(x_t).all(1)).flatten().tolist()
            raise ValueError(f"x has non-finite (NaN/inf) features on nodes {bad[:8]}")
        n, f = x_t.shape
        if baseline is None:
            base = torch.zeros_like(x_t)
        else:
            base = torch.as_tensor(baseline, dtype=x_t.dtype, device=x_t.device)
            if base.ndim == 0:
                base = base.expand(n, f).clone()
            elif tuple(base.shape) == (f,):
                base = base.expand(n, f).clone()
            elif tuple(base.shape) != (n, f):
                raise ValueError(
                    f"baseline must be a scalar, ({f},) or ({n}, {f}) to match x; got shape {tuple(base.shape)}"
                )
        if not bool(torch.isfinite(base).all()):
            raise ValueError("baseline has non-finite (NaN/inf) entries")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}")
        ei = torch.as_tensor(edge_index, dtype=torch.long, device=x_t.device)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, E); got {tuple(ei.shape)}")
        if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
            raise ValueError(f"edge_index references nodes outside [0, {n}) (x has {n} rows)")
        self.model = model
        self.x = x_t  # (n, F)
        self.baseline = base  # (n, F)
        self.edge_index = ei  # (2, E)
        self.edges = normalize_edges(n, ei.cpu().numpy(), edge_index=True)
        self.batch_size = batch_size
        self.batched = batched
        self.output_index = output_index
        self.n_queries = 0
        super().__init__(n, normalize=False)
        if normalize:
            self.normalization_value = float(self.value_function(np.zeros((1, n), bool))[0])

    def reset_counter(self) -> None:
        self.n_queries = 0

    def masked_features(self, z: Any) -> torch.Tensor:
        """``(B, n) -> (B, n, F)``: ``X₀ + z ⊙ (X − X₀)`` per coalition."""
        z_t = torch.as_tensor(
            np.asarray(z, dtype=np.float64), dtype=self.x.dtype, device=self.x.device
        )
        return self.baseline + z_t[:, :, None] * (self.x - self.baseline)

    def _select(self, out: Any, b: int) -> torch.Tensor:
        out = torch.as_tensor(out)
        if self.output_index is not None:
            out = out.reshape(b, -1)[:, self.output_index]
        elif out.numel() != b:
            raise ValueError(
                f"model must return one value per graph ({b}); got shape {tuple(out.shape)} "
                "(pass output_index= for multi-output models)"
            )
        return out.reshape(b)

    def value_function(self, coalitions: np.ndarray) -> np.ndarray:
        """shapiq's hook: ``(B, n)`` 0/1 coalitions -> ``(B,)`` raw values."""
        return self.evaluate(coalitions)

    @torch.no_grad()
    def evaluate(self, coalitions: Any) -> np.ndarray:
        """``v(z)`` for ``(B, n)`` coalitions in ``[0, 1]`` (fractional z interpolates the masking)."""
        z = np.asarray(coalitions)
        if z.ndim == 1:
            z = z[None]
        if z.ndim != 2 or z.shape[1] != self.n_players:
            raise ValueError(
                f"coalitions must have shape (B, n_players={self.n_players}); got {z.shape}"
            )
        out = np.empty(z.shape[0])
        n, e = self.n_players, self.edge_index.shape[1]
        for start in range(0, z.shape[0], self.batch_size):
            chunk = z[start : start + self.batch_size]
            b = chunk.shape[0]
            xs = self.masked_features(chunk)  # (b, n, F)
            if self.batched:
                offsets = torch.arange(b, device=self.x.device).repeat_interleave(e) * n
                ei = self.edge_index.repeat(1, b) + offsets  # (2, b·E)
                batch = torch.arange(b, device=self.x.device).repeat_interleave(n)  # (b·n,)
                vals = self._select(self.model(xs.reshape(b * n, -1), ei, batch), b)
            else:
                vals = torch.stack(
                    [self._select(self.model(xs[i], self.edge_index), 1)[0] for i in range(b)]
                )
            out[start : start + b] = vals.detach().cpu().double().numpy()
        self.n_queries += z.shape[0]
        return out
