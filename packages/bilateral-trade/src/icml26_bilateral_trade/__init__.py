"""icml26-bilateral-trade: sublinear regret against the global-budget-balance benchmark in online
bilateral trade under one-bit feedback (Lunghi, Piccinato, Castiglioni, Marchesi, ICML 2026)."""

from .benchmarks import (
    GBBSolution,
    opt_gbb,
    opt_wbb,
    pair_tables,
    price_grid,
    solve_brute,
    solve_lp,
    solve_two_support,
)
from .envs import (
    CustomEnv,
    IndependentUniform,
    RectangleMixture,
    ValuationEnv,
    correlated_four_rectangles,
    separated_markets,
)
from .gym_env import BilateralTradeEnv
from .learners import FixedPriceWBB, GBBTrader, Policy, Trace, simulate

__version__ = "0.1.0"

__all__ = [
    "BilateralTradeEnv",
    "CustomEnv",
    "FixedPriceWBB",
    "GBBSolution",
    "GBBTrader",
    "IndependentUniform",
    "Policy",
    "RectangleMixture",
    "Trace",
    "ValuationEnv",
    "__version__",
    "correlated_four_rectangles",
    "opt_gbb",
    "opt_wbb",
    "pair_tables",
    "price_grid",
    "separated_markets",
    "simulate",
    "solve_brute",
    "solve_lp",
    "solve_two_support",
]
