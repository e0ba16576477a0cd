import icml26_latentmoe as L
import pytest
import torch


def test_hp_formula_is_constant_in_k_and_ep_grows():
    # the analytical per-layer bytes: HP has no k at all; EP is linear in k
    hp = L.hp_bytes_formula(1024, 8, 16, 4, 2)
    assert hp == 2 * 1024 * 8 * 16 * 2 * 3 / 4
    ep = [L.ep_bytes_formula(1024, k, 128, 4, 2) for k in (1, 2, 4, 8)]
    assert ep == [ep[0] * k for k in (1, 2, 4, 8)]
    assert ep[0] == hp  # H·d_h = d: equal at k = 1, HP is k times cheaper at k


def test_ep_bytes_from_routing_brute_force():
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 8, (20, 3), generator=gen)
    for rank in range(4):
        remote = sum(1 for e in idx.reshape(-1).tolist() if e // 2 != rank)
        assert L.ep_bytes_from_routing(idx, 8, 16, 4, rank, 4) == 2 * remote * 16 * 4


def test_count_comm_records_nothing_without_a_group():
    m = L.MultiHeadLatentMoE(16, 4, 4, 4, 2, 8, backend="torch")
    with L.count_comm() as stats:
        m(torch.randn(3, 16))
    assert stats.collectives == 0 and stats.bytes_sent == 0


def test_all_to_all_checks_splits():
    with pytest.raises(ValueError, match="in_splits must sum"):
        from icml26_latentmoe.comm import all_to_all

        all_to_all(torch.zeros(3, 2), [1, 1], [1, 1], None)
