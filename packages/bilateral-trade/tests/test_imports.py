import icml26_bilateral_trade

EXPECTED_ALL = [
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


def test_public_api_is_pinned():
    assert sorted(icml26_bilateral_trade.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_bilateral_trade, name), name
