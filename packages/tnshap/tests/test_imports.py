import icml26_tnshap

EXPECTED_ALL = [
    "FitConfig",
    "FitResult",
    "GIN",
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


def test_all_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_tnshap.__all__)


def test_every_name_resolves():
    for name in icml26_tnshap.__all__:
        assert getattr(icml26_tnshap, name) is not None
