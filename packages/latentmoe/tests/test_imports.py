import icml26_latentmoe

EXPECTED_ALL = [
    "AuxFreeBalancer",
    "ByteLM",
    "CommStats",
    "MoE",
    "MultiHeadLatentMoE",
    "TrainResult",
    "__version__",
    "all_reduce_grads",
    "check_equal_tokens",
    "combine",
    "count_comm",
    "data_parallel",
    "dispatch",
    "ep_bytes_formula",
    "ep_bytes_from_routing",
    "evaluate_bpb",
    "fully_shard_hp",
    "head_local_names",
    "hp_bytes_formula",
    "hp_dp_groups",
    "hp_dp_mesh",
    "load_corpus",
    "mh_latent_moe_ref",
    "moe_ref",
    "replace_mlp",
    "sync_head_local_grads",
    "train_byte_lm",
]


def test_public_api_is_pinned():
    assert sorted(EXPECTED_ALL) == sorted(icml26_latentmoe.__all__)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_latentmoe, name)


def test_import_leaves_fsdp_unloaded():
    """Issue 66: `import icml26_latentmoe` took 10 s, 9.3 of them an eager torch.distributed.fsdp.

    fully_shard_hp imports FSDP when called (the multi-process test calls it); a fresh interpreter
    that only imports the package must not have loaded it.
    """
    import subprocess
    import sys

    code = (
        "import sys, icml26_latentmoe; "
        "print(sorted(m for m in sys.modules if m.startswith('torch.distributed.fsdp')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
