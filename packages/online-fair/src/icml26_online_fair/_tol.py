"""The package's one numerical tolerance, and the only place it is applied.

Every comparison of values is *relative*: to the agent's total value v_i(M) for anything measured
in agent i's units (bundle values, shares, envy), and to the quantity itself for predictions and
totals. So multiplying every value by any positive constant (1e-13 or 1e13) changes no decision
and no ratio (``tests/test_online_fair_scale.py``); an absolute ``1e-9`` would have declared an
allocation that gives an agent nothing "fair" once values are small enough.
"""

from __future__ import annotations

import numpy as np

RTOL = 1e-9  # relative slack for every value comparison

__all__ = ["RTOL", "at_least", "below", "close", "positive"]


def positive(x, scale):
    """x > 0 beyond round-off relative to ``scale`` (x > RTOL * scale); 0 when scale is 0."""
    return np.asarray(x) > RTOL * np.asarray(scale)


def at_least(a, b, scale):
    """a >= b up to RTOL * scale."""
    return np.asarray(a) >= np.asarray(b) - RTOL * np.asarray(scale)


def below(a, b, scale):
    """a < b by more than RTOL * scale (strict, the negation of ``at_least``)."""
    return ~at_least(a, b, scale)


def close(a, b, scale):
    """|a - b| <= RTOL * scale."""
    return np.abs(np.asarray(a) - np.asarray(b)) <= RTOL * np.asarray(scale)
