"""One-bit online bilateral trade as a `gymnasium.Env` (the `gym` extra: `pip install
icml26-bilateral-trade[gym]`).

Each `step((p, q))` draws one valuation pair (s, b) from the wrapped `ValuationEnv` with the
env's seeded `np_random`, and returns the learner's one bit

    observation = 1{s <= p, b >= q}  in Discrete(2),     reward = (q - p) 1{s <= p, b >= q}

(the realised profit, which the learner can compute from the bit). The realised gain from trade
(b - s) 1{trade}, hidden from a one-bit learner, is in `info["gft"]`; the running profit (the
GBB constraint's left side) in `info["cum_profit"]`. The action is the price pair (p, q) in
Box([0, 1]^2) (float64: prices are compared with valuations exactly).

This is the ecosystem adapter (one round per Python call). For regret curves use
`simulate(policy, env, T, seed)`, which runs a learner's whole horizon as numpy blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .envs import ValuationEnv, check_prices

if TYPE_CHECKING:
    from gymnasium import Env as _Base
else:
    try:
        from gymnasium import Env as _Base
    except ImportError:  # the class still imports bare; constructing it says what to install
        _Base = object

_HINT = "BilateralTradeEnv: needs gymnasium; pip install 'icml26-bilateral-trade[gym]'"


class BilateralTradeEnv(_Base):
    """`gymnasium.Env` for one-bit bilateral trade: action (p, q), observation the trade bit.

    horizon: after `horizon` steps `terminated` is True (the learner's T; None: never).
    `reset(seed=...)` seeds the valuation draws, so equal seeds give equal episodes.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium.Env's attribute)

    def __init__(self, env: ValuationEnv, horizon: int | None = None) -> None:
        try:
            from gymnasium import spaces
        except ImportError as err:
            raise ImportError(_HINT) from err
        if horizon is not None and (int(horizon) != horizon or horizon < 1):
            raise ValueError(f"horizon: must be an integer >= 1 or None, got {horizon!r}")
        if not isinstance(env, ValuationEnv):
            raise TypeError(f"env: expected a ValuationEnv (sample, expectations), got {env!r}")
        self.env = env
        self.horizon = horizon
        self.action_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float64)  # (p, q)
        self.observation_space = spaces.Discrete(2)  # the one bit: trade or not
        self.t = 0
        self.profit = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.profit = 0.0
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=float).reshape(-1)  # (2,): (p, q)
        if a.shape != (2,):
            raise ValueError(f"action: expected a price pair (p, q), got shape {a.shape}")
        p, q = check_prices(a[0], a[1])
        s, b = self.env.sample(self.np_random, 1)  # (1,) each
        trade = int(s[0] <= p and b[0] >= q)
        profit = float(q - p) * trade
        self.t += 1
        self.profit += profit
        done = self.horizon is not None and self.t >= self.horizon
        info = {"gft": float(b[0] - s[0]) * trade, "cum_profit": self.profit}
        return trade, profit, done, False, info
