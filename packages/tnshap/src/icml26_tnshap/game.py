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

import math
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import torch
from icml26_kernels.tensornet import normalize_edges

__all__ = ["MaskedGraphGame", "exact_interactions", "exact_shapley", "moebius_transform"]

MAX_ENUMERATION_PLAYERS = 20


class MaskedGraphGame:
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

    Calling the game with a ``(B, n)`` boolean/0-1 (or fractional) matrix returns ``(B,)``
    numpy values; :attr:`n_queries` counts coalitions evaluated so far. The call signature is
    shapiq's, so a ``MaskedGraphGame`` can be handed to shapiq's approximators directly.
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

    @property
    def n_players(self) -> int:
        return int(self.x.shape[0])

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

    @torch.no_grad()
    def __call__(self, coalitions: Any) -> np.ndarray:
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


# ----------------------------------------------------------------------------- exact values
def _n_players(game: Any, n_players: int | None) -> int:
    n = n_players if n_players is not None else getattr(game, "n_players", None)
    if n is None:
        raise ValueError("n_players must be given for a game without an n_players attribute")
    if n > MAX_ENUMERATION_PLAYERS:
        raise ValueError(
            f"exact enumeration needs 2^n game values; n_players={n} > {MAX_ENUMERATION_PLAYERS} "
            "is infeasible (use the surrogate)"
        )
    return int(n)


def _all_values(game: Callable[[np.ndarray], Any], n: int) -> np.ndarray:
    """``v[mask]`` for every coalition, ``mask`` an integer whose bit ``u`` is ``z_u``."""
    masks = np.arange(2**n)
    z = ((masks[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)  # (2^n, n)
    return np.asarray(game(z), dtype=np.float64).reshape(2**n)


def exact_shapley(game: Callable[[np.ndarray], Any], n_players: int | None = None) -> np.ndarray:
    """Shapley values by enumeration of all ``2^n`` coalitions (``n ≤ 20``).

        φ_u = Σ_{S ⊆ N∖{u}} |S|! (n − |S| − 1)! / n! · (v(S ∪ {u}) − v(S))

    Args:
        game: callable ``(B, n) bool -> (B,)`` (a :class:`MaskedGraphGame`, a shapiq game...).
        n_players: needed when ``game`` has no ``n_players`` attribute.
    """
    n = _n_players(game, n_players)
    v = _all_values(game, n)
    masks = np.arange(2**n)
    size = np.array([bin(m).count("1") for m in range(2**n)])
    w = np.array(
        [math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)]
    )
    phi = np.empty(n)
    for u in range(n):
        without = masks[(masks >> u) & 1 == 0]
        phi[u] = np.sum(w[size[without]] * (v[without | (1 << u)] - v[without]))
    return phi


def moebius_transform(values: np.ndarray, n: int) -> np.ndarray:
    """Möbius transform ``m(S) = Σ_{T⊆S} (−1)^{|S|−|T|} v(T)`` over bitmask-indexed values."""
    m = np.array(values, dtype=np.float64, copy=True)
    for u in range(n):
        bit = 1 << u
        idx = np.arange(2**n)
        has = idx[(idx & bit) != 0]
        m[has] -= m[has ^ bit]
    return m


def exact_interactions(
    game: Callable[[np.ndarray], Any],
    n_players: int | None = None,
    *,
    index: str = "SII",
    order: int = 2,
    sets: Sequence[Sequence[int]] | None = None,
) -> dict[tuple[int, ...], float]:
    """Interaction indices of ``order`` by enumeration, through the Möbius transform ``m``:

    - SII  (Grabisch–Roubens):  I(T) = Σ_{S ⊇ T} m(S) / (|S| − |T| + 1)
    - BII  (Banzhaf):           I(T) = Σ_{S ⊇ T} m(S) / 2^{|S| − |T|}
    - STII (Shapley–Taylor, top order k = |T|): I(T) = Σ_{S ⊇ T} m(S) / C(|S|, k)

    Returns ``{T: I(T)}`` for ``sets`` (default: every subset of size ``order``).
    """
    if index not in ("SII", "BII", "STII"):
        raise ValueError(f"index must be 'SII', 'BII' or 'STII'; got {index!r}")
    n = _n_players(game, n_players)
    m = moebius_transform(_all_values(game, n), n)
    masks = np.arange(2**n)
    size = np.array([bin(s).count("1") for s in range(2**n)])
    targets = (
        [tuple(sorted(t)) for t in sets]
        if sets is not None
        else list(combinations(range(n), order))
    )
    out = {}
    for t in targets:
        k = len(t)
        tm = sum(1 << u for u in t)
        sup = masks[(masks & tm) == tm]
        extra = size[sup] - k
        if index == "SII":
            w = 1.0 / (extra + 1)
        elif index == "BII":
            w = 0.5**extra
        else:
            w = 1.0 / np.array([math.comb(int(s), k) for s in size[sup]])
        out[t] = float(np.sum(m[sup] * w))
    return out
