"""Online fair division of indivisible goods with additional information.

Reimplementation of Neoh, Peters & Teh, "Online Fair Division with Additional Information"
(ICML 2026, arXiv:2505.24503). The public API is exactly ``__all__``.

>>> import icml26_online_fair as of
>>> inst = of.random_instance(n=4, m=30, kind="correlated", rng=0)
>>> alloc = of.divide_online(of.CappedGreedy(), inst, of.NormalizationInfo.exact(inst))
>>> of.prop1_ratio(inst.values, alloc)  # PROP1 for every n with exact totals
1.0
>>> bad = of.overshoot_instance(4)  # the family that breaks share-overshooting rules
>>> round(of.prop1_ratio(bad.values, of.divide_online(
...     of.ThresholdGreedy(), bad, of.NormalizationInfo.exact(bad))), 2)
0.7
"""

from .adversary import (
    OptimalGridPolicy,
    adversary_search,
    exhaustive_check,
    game_value,
    overshoot_instance,
    worst_order,
)
from .fairpyx_adapter import fairpyx_offline, fairpyx_online
from .info import FrequencyPrediction, NormalizationInfo
from .instance import Allocation, OnlineInstance, random_instance
from .notions import (
    NOTIONS,
    approx_ratio,
    ef1_ratio,
    ef_ratio,
    efx_ratio,
    is_fair,
    mms_lower_bound_lpt,
    mms_ratio,
    mms_value,
    mms_values,
    prop1_ratio,
    prop_ratio,
    propx_ratio,
)
from .offline import envy_cycle_elimination, max_mms_ratio, mms_bag_filling, round_robin
from .per_agent import PerAgentOptimalPolicy, per_agent_game_value, per_agent_worst_value
from .policies import (
    CappedGreedy,
    GreedyPolicy,
    MMSThresholdGreedy,
    OnlinePolicy,
    PlanAndMatch,
    RandomPolicy,
    RoundRobinPolicy,
    ThresholdGreedy,
    divide_online,
    predictions_separated,
)
from .randomised import RandomisedCertificate, randomised_game_value

__version__ = "0.1.0"

__all__ = [
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
    "RandomPolicy",
    "RandomisedCertificate",
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
