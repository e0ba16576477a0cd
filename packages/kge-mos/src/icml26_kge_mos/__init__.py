"""KGE-MoS: rank bottlenecks of linear-output KGEs and the mixture-of-softmaxes output layer.

When PyKEEN is importable, importing this package also imports
:mod:`icml26_kge_mos.pykeen_model`, which registers ``MoSKGE`` as ``"moskge"`` in PyKEEN's
``model_resolver`` (so ``import icml26_kge_mos; pipeline(model="moskge", ...)`` works).
PyKEEN 1.11's ``model_resolver`` reads no entry points (only its dataset and triples-importer
resolvers do), so registration on import is the only hook; without PyKEEN the core imports
nothing from it.
"""

import importlib.util as _importlib_util
import warnings as _warnings

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


def _register_with_pykeen() -> None:
    """Import :mod:`.pykeen_model` (it registers ``"moskge"``) if PyKEEN is installed."""
    if _importlib_util.find_spec("pykeen") is None:
        return
    try:
        from . import pykeen_model  # noqa: F401  (registration happens on import)
    except ImportError as err:  # a broken PyKEEN install must not break the core
        _warnings.warn(
            f"pykeen is installed but icml26_kge_mos.pykeen_model failed to import ({err}); "
            f"'moskge' is not registered in pykeen's model_resolver",
            stacklevel=2,
        )


_register_with_pykeen()
