"""shapiq integration: TN-SHAP-G as a shapiq ``Approximator`` returning ``InteractionValues``.

``TNSHAPApproximator(n, edges, ...)(budget, game)`` draws ``budget`` coalitions with the
approximator's own ``CoalitionSampler`` (so ``pairing_trick`` and ``sampling_weights`` act;
default weights are size-uniform, the paper's sampler), fits a graph-aligned surrogate on them,
then reads every interaction of orders ``min_order..max_order`` off it. ``k-SII`` is SII
aggregated by shapiq itself (``InteractionValues(..., target_index="k-SII")``), with
``estimated=True``. At ``budget >= 2**n`` no surrogate is fitted: the ``2**n`` queried values go
to ``shapiq.ExactComputer`` and the result is exact (``estimated=False``), as shapiq promises.

Conventions (checked against ``shapiq.ExactComputer`` in the tests): the empty set holds
``∫₀¹ ν̂(t·1) dt`` for SII, ``ν̂(½·1)`` for BII and ``ν̂(∅)`` for SV/STII; STII's orders below
``max_order`` hold Möbius coefficients ``m(T) = ∂_T ν̂(0)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np
from shapiq.approximator.base import Approximator
from shapiq.interaction_values import InteractionValues

from .attribution import gauss_legendre_01, interactions, moebius, shapley_values
from .surrogate import FitConfig, FitResult, GraphTN, Structure, fit_surrogate

__all__ = ["TNSHAPApproximator", "exact_interaction_values", "to_interaction_values"]

SUPPORTED = ("SV", "SII", "STII", "BII")  # read off the surrogate directly
APPROXIMATED = (*SUPPORTED, "k-SII")  # k-SII: SII aggregated by shapiq


def _empty_value(tn: GraphTN, index: str) -> float:
    n = tn.n_players
    if index == "SII":  # ∫ ν̂(t1) dt, degree n
        ts, w = gauss_legendre_01(math.ceil((n + 1) / 2))
        return float(tn.value(np.repeat(ts[:, None], n, axis=1)) @ w)
    if index == "BII":
        return float(tn.value(np.full((1, n), 0.5))[0])
    return float(tn.value(np.zeros((1, n)))[0])


def to_interaction_values(
    tn: GraphTN,
    index: str = "SII",
    max_order: int = 2,
    min_order: int = 0,
    *,
    estimation_budget: int | None = None,
    estimated: bool = True,
) -> InteractionValues:
    """All interactions of a fitted surrogate of orders ``min_order..max_order`` as shapiq values.

    ``index="k-SII"`` computes SII (orders 0..max_order) and hands it to ``InteractionValues``
    with ``target_index="k-SII"``: shapiq's own aggregation (Bernoulli-number weights).
    """
    target = index
    if index == "k-SII":  # SII of orders 0..max_order, aggregated by InteractionValues itself
        index, min_order = "SII", 0
    if index not in SUPPORTED:
        raise ValueError(
            f"index must be one of {APPROXIMATED}; got {index!r} (FSII/FBII need a weighted "
            "regression over all coalitions and are not read off the surrogate)"
        )
    tn.check_fitted()
    n = tn.n_players
    if index == "SV" and max_order != 1:
        raise ValueError(f"index='SV' needs max_order=1; got {max_order}")
    if not 0 <= min_order <= max_order <= n:
        raise ValueError(f"need 0 <= min_order <= max_order <= n={n}; got {min_order}, {max_order}")
    lookup: dict[tuple[int, ...], int] = {}
    values: list[float] = []
    for k in range(min_order, max_order + 1):
        sets = list(combinations(range(n), k))
        if k == 0:
            vals = np.array([_empty_value(tn, index)])
        elif index == "SV":
            vals = shapley_values(tn)
        elif index == "STII" and k < max_order:
            vals = moebius(tn, sets)
        else:
            vals = interactions(tn, sets, index=index, order=k).values
        for s, v in zip(sets, vals):
            lookup[s] = len(values)
            values.append(float(v))
    return InteractionValues(
        np.asarray(values),
        index=index,
        max_order=max_order,
        min_order=min_order,
        n_players=n,
        interaction_lookup=lookup,
        estimated=estimated,
        estimation_budget=estimation_budget,
        target_index=target,
        baseline_value=float(tn.value(np.zeros((1, n)))[0]),
    )


class TNSHAPApproximator(Approximator):
    """TN-SHAP-G for shapiq: fit a graph-aligned tensor network, read off the interactions.

    Args:
        n: number of players (graph nodes).
        edges: the graph, as ``(E, 2)`` pairs or a ``(2, E)`` edge_index.
        max_order: highest interaction order (1 for ``index="SV"``).
        index: ``"SV"``, ``"SII"``, ``"k-SII"``, ``"STII"`` or ``"BII"``.
        bond_dim, structure: passed to :class:`~icml26_tnshap.GraphTN`.
        config: :class:`~icml26_tnshap.FitConfig` for :func:`~icml26_tnshap.fit_surrogate`
            (its ``seed`` is replaced by one drawn from ``random_state``).
        top_order: only the interactions of ``max_order``.
        pairing_trick, sampling_weights: shapiq's coalition-sampler options (``sampling_weights``
            of shape ``(n + 1,)`` over coalition sizes; default uniform over sizes, the paper's).
        random_state: seeds the sampler, the surrogate's initialization and the minibatch order;
            ``None`` draws fresh randomness on every call.
    """

    valid_indices = APPROXIMATED  # type: ignore[assignment]

    def __init__(
        self,
        n: int,
        edges: Any,
        max_order: int = 2,
        index: str = "SII",
        *,
        bond_dim: int = 4,
        structure: Structure = "graph",
        config: FitConfig | None = None,
        top_order: bool = False,
        pairing_trick: bool = False,
        sampling_weights: np.ndarray | None = None,
        random_state: int | None = None,
    ) -> None:
        if index not in APPROXIMATED:
            raise ValueError(
                f"index must be one of {APPROXIMATED}; got {index!r} (FSII/FBII need a weighted "
                "regression over all coalitions and are not read off the surrogate)"
            )
        if index == "SV":
            max_order = 1
        if sampling_weights is not None:
            sampling_weights = np.asarray(sampling_weights, dtype=np.float64)
            if sampling_weights.shape != (n + 1,):
                raise ValueError(
                    f"sampling_weights must have shape (n + 1,) = ({n + 1},); got {sampling_weights.shape}"
                )
        super().__init__(
            n,
            max_order,
            index,  # type: ignore[arg-type]
            top_order=top_order,
            pairing_trick=pairing_trick,
            sampling_weights=sampling_weights,
            random_state=random_state,
            initialize_dict=False,
        )
        self.edges = edges
        self.bond_dim = bond_dim
        self.structure = structure
        self.config = config
        self.last_fit: FitResult | None = None
        self.surrogate: GraphTN | None = None

    def _init_sampling_weights(self) -> np.ndarray:
        """Uniform over coalition sizes (the paper's balanced sampler); ∅ and N always drawn."""
        return np.full(self.n + 1, 1.0 / (self.n + 1))

    def approximate(
        self, budget: int, game: Callable[[np.ndarray], np.ndarray], *args: Any, **kwargs: Any
    ) -> InteractionValues:
        """``budget < 2^n``: fit the surrogate on ``budget`` sampled coalitions and read the
        interactions off it (``estimated=True``). ``budget >= 2^n``: query all ``2^n`` coalitions
        once and compute the values exactly from them with ``shapiq.ExactComputer`` (no
        surrogate; ``estimated=False``, ``estimation_budget=2^n``; :attr:`surrogate` and
        :attr:`last_fit` are ``None``)."""
        if self.n < 63 and budget >= 2**self.n:
            self.last_fit, self.surrogate = None, None
            return exact_interaction_values(
                _NPlayers(game, self.n), self.n, self.index, self.max_order, self.min_order
            )
        seed = int(self._rng.integers(2**31 - 1))  # fresh when random_state is None
        tn = GraphTN(
            (self.n, self.edges),
            self.bond_dim,
            structure=self.structure,
            seed=seed,
        )
        cfg = dataclasses.replace(self.config or FitConfig(), seed=seed)
        self.last_fit = fit_surrogate(
            tn, _NPlayers(game, self.n), budget=budget, sampler=self._sampler, config=cfg
        )
        self.surrogate = tn
        return to_interaction_values(
            tn,
            self.index,
            self.max_order,
            self.min_order,
            estimation_budget=self.last_fit.n_queries,
            estimated=True,
        )


def exact_interaction_values(
    game: Callable[[np.ndarray], np.ndarray],
    n: int,
    index: str = "SII",
    max_order: int = 2,
    min_order: int = 0,
    *,
    computer: Any = None,
) -> InteractionValues:
    """Exact values from all ``2^n`` game values (one call of ``game`` on the full powerset):
    ``shapiq.ExactComputer`` (sums over the powerset), restricted to orders
    ``min_order..max_order``; ``estimated=False``, ``estimation_budget=2^n``. Pass the same
    ``computer`` (a ``shapiq.ExactComputer`` of ``game``) to read several indices off one
    evaluation of the powerset."""
    from shapiq import ExactComputer

    ec = ExactComputer(game, n) if computer is None else computer
    ref = ec(index, 1 if index == "SV" else max_order)  # type: ignore[arg-type]  # a str index, checked by shapiq
    lookup: dict[tuple[int, ...], int] = {}
    values: list[float] = []
    for s in sorted(ref.interaction_lookup, key=lambda t: (len(t), t)):
        if min_order <= len(s) <= max_order:
            lookup[s] = len(values)
            values.append(float(ref[s]))
    return InteractionValues(
        np.asarray(values),
        index=ref.index,
        max_order=max_order,
        min_order=min_order,
        n_players=n,
        interaction_lookup=lookup,
        estimated=False,
        estimation_budget=2**n,
        baseline_value=float(ref.baseline_value),
    )


class _NPlayers:
    """A game callable with an ``n_players`` attribute (shapiq games may be plain functions)."""

    def __init__(self, game: Callable[[np.ndarray], np.ndarray], n: int) -> None:
        self.game, self.n_players = game, n
        gn = getattr(game, "n_players", None)
        if gn is not None and int(gn) != n:
            raise ValueError(f"game has {gn} players but the approximator was built for n={n}")

    def __call__(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(self.game(np.asarray(z, dtype=bool)), dtype=np.float64)
