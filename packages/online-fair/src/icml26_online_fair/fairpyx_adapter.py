"""Lift fairpyx offline algorithms online: ``PlanAndMatch(fairpyx_offline(algorithm))``.

fairpyx (``pip install icml26-online-fair[fairpyx]``) is imported lazily, only when the returned
callable runs. A fairpyx algorithm mutates an ``AllocationBuilder``; ``fairpyx.divide`` returns
``{agent: [items]}``, which is turned into this package's owner vector (m,).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .notions import check_values

__all__ = ["fairpyx_offline"]


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
