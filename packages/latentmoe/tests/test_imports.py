import icml26_latentmoe

EXPECTED_ALL = [
    "AuxFreeBalancer",
    "ByteLM",
    "CommStats",
    "MoE",
    "MultiHeadLatentMoE",
    "TrainResult",
    "__version__",
    "combine",
    "count_comm",
    "dispatch",
    "ep_bytes_formula",
    "ep_bytes_from_routing",
    "evaluate_bpb",
    "hp_bytes_formula",
    "load_corpus",
    "mh_latent_moe_ref",
    "moe_ref",
    "replace_mlp",
    "train_byte_lm",
]


def test_public_api_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_latentmoe.__all__)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_latentmoe, name)
