"""fairpyx in both directions.

* ``fairpyx_offline(algorithm)``: a fairpyx offline algorithm as a values -> owner callable, to
  lift online with ``PlanAndMatch(fairpyx_offline(algorithm))``.
* ``fairpyx_online(policy, info)``: one of this package's online policies as a fairpyx
  algorithm, so ``fairpyx.divide(fairpyx_online(CappedGreedy(), NormalizationInfo.exact),
  valuations=...)`` runs it with the goods arriving in the instance's item order.

Every checker here also accepts a fairpyx ``Instance`` or valuations dict and a fairpyx
``{agent: [items]}`` allocation. fairpyx (``pip install icml26-online-fair[fairpyx]``) is
imported lazily, only when ``fairpyx_offline``'s callable runs; ``fairpyx_online`` only uses the
``AllocationBuilder`` it is given.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .instance import OnlineInstance
from .notions import check_values
from .policies import OnlinePolicy, divide_online

__all__ = ["fairpyx_offline", "fairpyx_online"]


def fairpyx_online(policy: OnlinePolicy, info=None) -> Callable:
    """``policy`` as a fairpyx algorithm ``algorithm(alloc: AllocationBuilder)``: the goods of
    ``alloc.instance`` arrive in its item order and each goes where the policy says
    (``alloc.give``). ``info`` is the side information, or a callable ``info(OnlineInstance)``
    that builds it from the instance (e.g. ``NormalizationInfo.exact``)."""
    if not isinstance(policy, OnlinePolicy):
        raise TypeError(
            f"policy must implement reset(info) and allocate(t, values), got {policy!r}"
        )

    def algorithm(alloc, **kwargs) -> None:
        inst = OnlineInstance(alloc.instance)
        assert inst.agents is not None and inst.items is not None
        side = info(inst) if callable(info) else info
        result = divide_online(policy, inst, side)
        for g, a in enumerate(result.owner):
            alloc.give(inst.agents[int(a)], inst.items[g])

    algorithm.__name__ = f"online_{type(policy).__name__}"
    return algorithm


def fairpyx_offline(algorithm: Callable, **kwargs) -> Callable[[np.ndarray], np.ndarray]:
    """Wrap a fairpyx algorithm (e.g. ``fairpyx.algorithms.round_robin``) as values -> owner."""
    if not callable(algorithm):
        raise TypeError(f"algorithm must be a fairpyx algorithm (a callable), got {algorithm!r}")

    def offline(values) -> np.ndarray:
        try:
            import fairpyx
        except ImportError as err:  # pragma: no cover - exercised only without the extra
            raise ImportError(
                "fairpyx_offline needs fairpyx: pip install 'icml26-online-fair[fairpyx]'"
            ) from err
        v = check_values(values)
        n, m = v.shape
        valuations = {i: {g: float(v[i, g]) for g in range(m)} for i in range(n)}
        result = fairpyx.divide(algorithm, valuations=valuations, **kwargs)
        owner = np.full(m, -1, dtype=np.int64)
        for agent, items in result.items():
            for g in items:
                owner[int(g)] = int(agent)
        if np.any(owner < 0):
            missing = np.flatnonzero(owner < 0).tolist()
            raise ValueError(
                f"fairpyx algorithm left goods {missing} unallocated; PlanAndMatch needs complete allocations"
            )
        return owner

    offline.__name__ = f"fairpyx_{getattr(algorithm, '__name__', 'algorithm')}"
    return offline
