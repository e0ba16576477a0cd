"""icml26-tnshap: TN-SHAP-G, graph-aligned tensor-network surrogates for Shapley values."""

from .attribution import InteractionResult, gauss_legendre_01, interactions, moebius, shapley_values
from .game import MaskedGraphGame
from .shapiq_integration import TNSHAPApproximator, exact_interaction_values, to_interaction_values
from .surrogate import FitConfig, FitResult, GraphTN, fit_surrogate

# extra [pyg]: ``from icml26_tnshap.pyg_integration import TNSHAPExplainer`` (also reachable as
# ``icml26_tnshap.TNSHAPExplainer``); kept out of __all__, which must import without extras
_LAZY = {
    "TNSHAPExplainer": "pyg_integration",
    "game_from_data": "pyg_integration",
}

__all__ = [
    "FitConfig",
    "FitResult",
    "GraphTN",
    "InteractionResult",
    "MaskedGraphGame",
    "TNSHAPApproximator",
    "exact_interaction_values",
    "fit_surrogate",
    "gauss_legendre_01",
    "interactions",
    "moebius",
    "shapley_values",
    "to_interaction_values",
]


def __getattr__(name: str) -> object:
    """The PyG integration imports torch_geometric only when first used (extra [pyg])."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
