"""Merges: hand-computed SMA / EMA, AveragedModel side by side, the SMA increment identity,
fp32 accumulation, integer buffers, tied weights, streaming == in-memory bit for bit."""

import pytest
import torch
from icml26_extramerge import (
    ema,
    ema_trajectory,
    ema_weights,
    load_checkpoint,
    merged_trajectory,
    save_checkpoint,
    sma,
    weighted_merge,
)
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def _ckpts(n, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [
        {
            "w": torch.randn(3, 4, generator=g).to(dtype),
            "b": torch.randn(4, generator=g).to(dtype),
            "steps": torch.tensor(10 * i),
        }
        for i in range(n)
    ]


def test_sma_and_ema_equal_hand_computation():
    a, b, c = _ckpts(3)
    m = sma([a, b, c])
    torch.testing.assert_close(m["w"], (a["w"] + b["w"] + c["w"]) / 3)
    d = 0.7
    e = ema([a, b, c], decay=d)
    # m1 = a; m2 = d a + (1-d) b; m3 = d m2 + (1-d) c
    hand = d * (d * a["b"] + (1 - d) * b["b"]) + (1 - d) * c["b"]
    torch.testing.assert_close(e["b"], hand)
    assert ema_weights(3, d) == pytest.approx([d * d, (1 - d) * d, 1 - d])
    assert sum(ema_weights(9, 0.9)) == pytest.approx(1.0)


def _models(n):
    torch.manual_seed(0)
    return [
        torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
        for _ in range(n)
    ]


def test_sma_equals_averaged_model_side_by_side():
    models = _models(6)
    swa = AveragedModel(models[0])
    for m in models:
        swa.update_parameters(m)
    ours = sma([m.state_dict() for m in models])
    for k, v in swa.module.state_dict().items():
        torch.testing.assert_close(ours[k], v, rtol=1e-6, atol=1e-7)


def test_ema_equals_averaged_model_side_by_side():
    models = _models(6)
    swa = AveragedModel(models[0], multi_avg_fn=get_ema_multi_avg_fn(0.8))
    for m in models:
        swa.update_parameters(m)
    ours = ema([m.state_dict() for m in models], decay=0.8)
    for k, v in swa.module.state_dict().items():
        torch.testing.assert_close(ours[k], v, rtol=1e-6, atol=1e-7)


def test_sma_increment_identity():
    # M_k - M_{k-1} = (theta_k - theta_{k-W}) / W, exactly (float64 checkpoints)
    th = _ckpts(12, dtype=torch.float64)
    w = 4
    traj = merged_trajectory(th, window=w)
    assert len(traj) == 12 - w + 1
    for j in range(1, len(traj)):
        k = j + w - 1  # 0-based index of the newest checkpoint in traj[j]
        torch.testing.assert_close(
            traj[j]["w"] - traj[j - 1]["w"],
            (th[k]["w"] - th[k - w]["w"]) / w,
            rtol=1e-12,
            atol=1e-12,
        )
    # stride keeps every stride-th merge
    assert [t["steps"].item() for t in merged_trajectory(th, window=w, stride=3)] == [30, 60, 90]


def test_fp32_accumulation_of_bf16_checkpoints():
    g = torch.Generator().manual_seed(1)
    th = [{"w": (1.0 + 0.01 * torch.randn(256, generator=g)).to(torch.bfloat16)} for _ in range(64)]
    exact = torch.stack([t["w"].double() for t in th]).mean(0)
    out = sma(th)["w"]
    assert out.dtype == torch.bfloat16
    # within one bf16 rounding of the exact mean (a bf16 accumulator is off by many ulps)
    assert ((out.double() - exact).abs() / exact.abs()).max() <= 2.0**-8


def test_integer_buffers_come_from_last_checkpoint():
    th = _ckpts(5)
    assert sma(th)["steps"].item() == 40
    assert ema(th, 0.5)["steps"].item() == 40
    assert sma(th)["steps"].dtype == torch.int64


def test_tied_weights_stay_tied():
    th = []
    for i in range(3):
        emb = torch.full((4, 2), float(i))
        th.append({"wte": emb, "lm_head": emb, "ln": torch.full((2,), 2.0 * i)})
    out = sma(th)
    assert out["wte"] is out["lm_head"]
    torch.testing.assert_close(out["wte"], torch.full((4, 2), 1.0))
    torch.testing.assert_close(out["ln"], torch.full((2,), 2.0))


def test_weighted_merge_is_unnormalised_linear_combination():
    a, b = _ckpts(2)
    out = weighted_merge([a, b], [2.5, -1.5])
    torch.testing.assert_close(out["w"], 2.5 * a["w"] - 1.5 * b["w"])


def test_streaming_from_safetensors_equals_in_memory_bit_for_bit(tmp_path):
    th = _ckpts(9, dtype=torch.bfloat16)
    paths = []
    for i, sd in enumerate(th):
        p = tmp_path / f"ck{i}.safetensors"
        save_checkpoint(sd, p)
        paths.append(p)
    for disk, mem in [
        (sma(paths), sma(th)),
        (ema(paths, 0.9), ema(th, 0.9)),
        (weighted_merge(iter(paths), [0.1] * 9), weighted_merge(th, [0.1] * 9)),
    ]:
        assert disk.keys() == mem.keys()
        for k in mem:
            assert torch.equal(disk[k], mem[k]), k
    for disk_m, mem_m in zip(merged_trajectory(iter(paths), 4), merged_trajectory(th, 4)):
        for k in mem_m:
            assert torch.equal(disk_m[k], mem_m[k]), k


def test_save_checkpoint_writes_tied_keys():
    emb = torch.randn(3, 2)
    sd = {"wte": emb, "lm_head": emb}
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        save_checkpoint(sd, d + "/x.safetensors")
        back = load_checkpoint(d + "/x.safetensors")
    assert torch.equal(back["wte"], emb) and torch.equal(back["lm_head"], emb)


def test_ema_trajectory_is_the_recursion_and_matches_ema_prefixes():
    th = _ckpts(7, dtype=torch.float64)
    d = 0.6
    traj = ema_trajectory(th, d)
    assert len(traj) == 7
    m = th[0]["w"].clone()
    torch.testing.assert_close(traj[0]["w"], m, rtol=0, atol=0)
    for k in range(1, 7):
        m = d * m + (1 - d) * th[k]["w"]  # by hand
        torch.testing.assert_close(traj[k]["w"], m, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(traj[k]["b"], ema(th[: k + 1], d)["b"], rtol=1e-12, atol=1e-12)
        assert traj[k]["steps"].item() == 10 * k
    # last / stride keep a suffix / every stride-th state
    tail = ema_trajectory(iter(th), d, last=3)
    assert [t["steps"].item() for t in tail] == [40, 50, 60]
    for x, y in zip(tail, traj[-3:]):
        assert torch.equal(x["w"], y["w"])
    assert [t["steps"].item() for t in ema_trajectory(th, d, stride=3)] == [0, 30, 60]
    with pytest.raises(ValueError, match="decay"):
        ema_trajectory(th, 1.0)


def test_extra_merge_on_an_ema_trajectory_uses_the_ema_increment():
    from icml26_extramerge import extra_merge

    th = _ckpts(6, dtype=torch.float64)
    d = 0.75
    traj = ema_trajectory(th, d)
    r = extra_merge(traj, alpha=2.0, direction="diff")
    # m_K - m_{K-1} = (1 - b)(theta_K - m_{K-1})
    g = (1 - d) * (th[-1]["w"] - traj[-2]["w"])
    torch.testing.assert_close(r.state_dict["w"], traj[-1]["w"] + 2.0 * g, rtol=1e-12, atol=1e-12)
