import icml26_online_fair

EXPECTED_ALL = [
    "NOTIONS",
    "Allocation",
    "CappedGreedy",
    "FrequencyPrediction",
    "GreedyPolicy",
    "MMSThresholdGreedy",
    "NormalizationInfo",
    "OnlineInstance",
    "OnlinePolicy",
    "OptimalGridPolicy",
    "PerAgentOptimalPolicy",
    "PlanAndMatch",
    "RandomisedCertificate",
    "RandomPolicy",
    "RoundRobinPolicy",
    "ThresholdGreedy",
    "__version__",
    "adversary_search",
    "approx_ratio",
    "divide_online",
    "ef1_ratio",
    "ef_ratio",
    "efx_ratio",
    "envy_cycle_elimination",
    "exhaustive_check",
    "fairpyx_offline",
    "fairpyx_online",
    "game_value",
    "is_fair",
    "max_mms_ratio",
    "mms_bag_filling",
    "mms_lower_bound_lpt",
    "mms_ratio",
    "mms_value",
    "mms_values",
    "overshoot_instance",
    "per_agent_game_value",
    "per_agent_worst_value",
    "predictions_separated",
    "prop1_ratio",
    "prop_ratio",
    "propx_ratio",
    "random_instance",
    "randomised_game_value",
    "round_robin",
    "worst_order",
]


def test_all_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_online_fair.__all__)


def test_every_name_resolves():
    for name in icml26_online_fair.__all__:
        assert hasattr(icml26_online_fair, name), name
