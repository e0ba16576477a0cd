import icml26_kge_mos

EXPECTED_ALL = [
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


def test_all_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_kge_mos.__all__)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_kge_mos, name)
