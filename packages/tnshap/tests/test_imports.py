import icml26_tnshap

EXPECTED_ALL = [
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


def test_all_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_tnshap.__all__)


def test_every_name_resolves():
    for name in icml26_tnshap.__all__:
        assert getattr(icml26_tnshap, name) is not None
