"""KGE-MoS: rank bottlenecks of linear-output KGEs and the mixture-of-softmaxes output layer."""

from .bounds import (
    diagnostics,
    exact_set_accuracy,
    logprob_rank,
    max_out_degree,
    necessary_dim,
    numerical_rank,
    ranking_cells_upper_bound,
    sample_rankings,
    sign_construction,
    sign_pattern_upper_bound,
    sign_sufficient_dim,
)
from .data import KGData, load_pykeen_dataset, load_tsv, synthetic_graph
from .kge import SCORERS, FreeQueryModel, KGEModel
from .mos import MoSOutput, linear_log_probs, mos_log_probs_ref, mos_log_probs_sliced
from .train import QueryIndex, evaluate, filtered_ranks, fit_1n, train_kge

__all__ = [
    "SCORERS",
    "FreeQueryModel",
    "KGData",
    "KGEModel",
    "MoSOutput",
    "QueryIndex",
    "diagnostics",
    "evaluate",
    "exact_set_accuracy",
    "filtered_ranks",
    "fit_1n",
    "linear_log_probs",
    "load_pykeen_dataset",
    "load_tsv",
    "logprob_rank",
    "max_out_degree",
    "mos_log_probs_ref",
    "mos_log_probs_sliced",
    "necessary_dim",
    "numerical_rank",
    "ranking_cells_upper_bound",
    "sample_rankings",
    "sign_construction",
    "sign_pattern_upper_bound",
    "sign_sufficient_dim",
    "synthetic_graph",
    "train_kge",
]
