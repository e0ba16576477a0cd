"""icml26-tnshap: TN-SHAP-G, graph-aligned tensor-network surrogates for Shapley values."""

from .attribution import InteractionResult, gauss_legendre_01, interactions, moebius, shapley_values
from .game import MaskedGraphGame, exact_interactions, exact_shapley, moebius_transform
from .gin import GIN
from .surrogate import FitConfig, FitResult, GraphTN, fit_surrogate, size_uniform_sampler

_LAZY = {
    "TNSHAPApproximator": "shapiq_integration",  # extra [shapiq]
    "to_interaction_values": "shapiq_integration",
    "game_from_data": "pyg_integration",  # extra [pyg]
    "explain_data": "pyg_integration",
    "data_from_attributions": "pyg_integration",
}

__all__ = [
    "GIN",
    "FitConfig",
    "FitResult",
    "GraphTN",
    "InteractionResult",
    "MaskedGraphGame",
    "TNSHAPApproximator",
    "data_from_attributions",
    "exact_interactions",
    "exact_shapley",
    "explain_data",
    "fit_surrogate",
    "game_from_data",
    "gauss_legendre_01",
    "interactions",
    "moebius",
    "moebius_transform",
    "shapley_values",
    "size_uniform_sampler",
    "to_interaction_values",
]


def __getattr__(name: str) -> object:
    """Integrations import their framework only when first used (extras [shapiq], [pyg])."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
