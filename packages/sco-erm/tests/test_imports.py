import icml26_sco_erm

EXPECTED_ALL = [
    "Certificate",
    "ERMResult",
    "FeldmanInstance",
    "Sample",
    "__version__",
    "code_dimension",
    "codeword_vectors",
    "codewords",
    "duality_gap",
    "erm_exact",
    "erm_smoothed",
    "gd_lower_bound",
    "gd_stability_bound",
    "gd_upper_bound",
    "good_code",
    "gv_rate",
    "lower_bound",
    "min_distance",
    "min_distance_bruteforce",
    "overfit_erm_probability",
    "paper_dimension",
    "paper_lambda",
    "projected_gd",
    "random_linear_code",
    "sgd_learner",
]


def test_public_api_is_pinned():
    assert sorted(icml26_sco_erm.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_sco_erm, name), name
