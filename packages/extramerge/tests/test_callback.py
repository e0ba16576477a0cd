"""ExtraMergeCallback's own paths, driven step by step without a Trainer: parameters set to
known values per step, so every snapshot, merge and extrapolation is known by hand."""

import tempfile
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from icml26_extramerge.hf import ExtraMergeCallback

BASE = torch.tensor([1.0, 2.0, 3.0, 4.0])


class _Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4))
        self.emb = torch.nn.Parameter(torch.zeros(2, 2))
        self.head = self.emb  # tied, like GPT-2's wte / lm_head
        self.register_buffer("n", torch.tensor(0))

    def set_step(self, s, values=None):
        with torch.no_grad():
            self.w.copy_(s * BASE if values is None else values)
            self.emb.fill_(-float(s))
            self.n.fill_(s)


def _drive(cb, max_steps, values=None, model=None):
    """on_train_begin, on_step_end for steps 1..max_steps (model at step s), on_train_end."""
    model = model or _Toy()
    args = SimpleNamespace(output_dir=tempfile.mkdtemp(), process_index=0)
    state = SimpleNamespace(global_step=0, max_steps=max_steps)
    cb.on_train_begin(args, state, None, model=model)
    for s in range(1, max_steps + 1):
        model.set_step(s, None if values is None else values[s])
        state.global_step = s
        cb.on_step_end(args, state, None, model=model)
    cb.on_train_end(args, state, None, model=model)
    return model


def test_start_step_and_eval_fn_line_search():
    # every=3 from start_step=5: snapshots at 5, 8, 11, 14, 17, 20; window 2 ->
    # M_K = mean(theta_17, theta_20) = 18.5 BASE, M_{K-1} = 15.5 BASE, g = 3 BASE
    seen = []

    def eval_fn(sd):
        a = float(((sd["w"] - 18.5 * BASE) / (3.0 * BASE)).mean())  # the alpha this sd is at
        seen.append(a)
        return (a - 2.0) ** 2 + 1.0

    cb = ExtraMergeCallback(
        every=3,
        window=2,
        start_step=5,
        history=10,
        eval_fn=eval_fn,
        alphas=(1.0, 2.0, 4.0),
        save=False,
    )
    _drive(cb, max_steps=20)
    assert list(cb.snapshot_steps) == [17, 20]
    # nothing before start_step: 6 snapshots -> 5 merges, the first = mean(theta_5, theta_8)
    assert len(cb.merged) == 5
    torch.testing.assert_close(cb.merged[0]["w"], 6.5 * BASE)
    torch.testing.assert_close(cb.merged[-1]["w"], 18.5 * BASE)
    torch.testing.assert_close(cb.merged[-2]["w"], 15.5 * BASE)
    # the line search evaluated {0} U alphas, in that order, and kept the argmin (alpha = 2)
    assert seen == pytest.approx([0.0, 1.0, 2.0, 4.0], abs=1e-6)
    assert sorted(cb.result.losses) == [0.0, 1.0, 2.0, 4.0]
    assert cb.result.losses == pytest.approx({0.0: 5.0, 1.0: 2.0, 2.0: 1.0, 4.0: 5.0}, abs=1e-5)
    assert cb.result.alpha == 2.0
    torch.testing.assert_close(cb.result.state_dict["w"], (18.5 + 2 * 3.0) * BASE)
    # integer buffers from the newest snapshot; tied keys stay tied
    assert cb.result.state_dict["n"].item() == 20
    assert cb.result.state_dict["head"] is cb.result.state_dict["emb"]


def test_start_step_zero_counts_from_every():
    cb = ExtraMergeCallback(every=4, window=3, alpha=1.0, save=False)
    _drive(cb, max_steps=17)  # snapshots at 4, 8, 12, 16
    assert list(cb.snapshot_steps) == [8, 12, 16]
    torch.testing.assert_close(cb.result.state_dict["w"], (12.0 + 1.0 * 4.0) * BASE)


@pytest.mark.parametrize(
    ("every", "window", "start", "ok_max", "bad_max"),
    [(3, 2, 5, 11, 10), (5, 3, 0, 20, 19), (1, 4, 7, 11, 10)],
)
def test_configuration_checked_before_training(every, window, start, ok_max, bad_max):
    # window + 1 snapshots are needed: steps start, start + every, ... <= max_steps
    ExtraMergeCallback(every=every, window=window, start_step=start).on_train_begin(
        None, SimpleNamespace(max_steps=ok_max), None
    )
    cb = ExtraMergeCallback(every=every, window=window, start_step=start)
    with pytest.raises(ValueError, match=rf"every={every}.*max_steps={bad_max}.*need at least"):
        cb.on_train_begin(None, SimpleNamespace(max_steps=bad_max), None)


def test_issue_example_every_50_max_steps_20_raises_at_train_begin():
    cb = ExtraMergeCallback(every=50, window=3)
    with pytest.raises(ValueError, match="0 snapshot.*max_steps=20"):
        cb.on_train_begin(None, SimpleNamespace(max_steps=20), None)


def test_running_window_sums_equal_window_means():
    g = torch.Generator().manual_seed(0)
    values = {s: torch.randn(4, generator=g) * 10 + 100 for s in range(1, 41)}
    cb = ExtraMergeCallback(every=1, window=5, history=30, alpha=0.0, save=False)
    _drive(cb, max_steps=40, values=values)
    assert len(cb.merged) == 30
    eps = torch.finfo(torch.float32).eps
    for j, m in enumerate(cb.merged):  # merged[j] is the SMA of steps 7 + j .. 11 + j
        steps = range(7 + j, 12 + j)
        ref = torch.stack([values[s].double() for s in steps]).mean(0)  # (4,) float64
        atol = 8 * eps * float(ref.abs().max()) * 5**0.5
        torch.testing.assert_close(m["w"].double(), ref, rtol=8 * eps, atol=atol)
        assert m["n"].item() == 11 + j


def test_ema_merge_option_is_the_ema_recursion():
    cb = ExtraMergeCallback(every=2, merge="ema", decay=0.75, alpha=1.0, save=False)
    _drive(cb, max_steps=8)  # snapshots 2, 4, 6, 8 (theta = s BASE)
    m = 2.0
    hist = [m]
    for s in (4, 6, 8):
        m = 0.75 * m + 0.25 * s  # m_k = b m_{k-1} + (1 - b) theta_k
        hist.append(m)
    torch.testing.assert_close(cb.merged[-1]["w"], hist[-1] * BASE)
    torch.testing.assert_close(cb.merged[-2]["w"], hist[-2] * BASE)
    want = hist[-1] + 1.0 * (hist[-1] - hist[-2])
    torch.testing.assert_close(cb.result.state_dict["w"], want * BASE)
    assert len(cb.snapshots) == 0  # no window kept for EMA


def test_zero3_partitions_are_refused_and_state_dict_fn_is_used():
    model = _Toy()
    model.w.ds_id = 0  # what DeepSpeed ZeRO-3 puts on its partitioned parameters
    cb = ExtraMergeCallback(every=1, window=1)
    with pytest.raises(RuntimeError, match="ZeRO-3.*state_dict_fn"):
        _drive(cb, max_steps=3, model=model)
    # with a gather function (e.g. accelerator.get_state_dict) the callback uses it
    calls = []

    def gather(m):
        calls.append(1)
        return {"w": m.w.detach() * 1.0, "n": m.n.clone()}

    cb = ExtraMergeCallback(every=1, window=1, alpha=1.0, save=False, state_dict_fn=gather)
    _drive(cb, max_steps=3, model=model)
    assert len(calls) == 3 and set(cb.result.state_dict) == {"w", "n"}
    torch.testing.assert_close(cb.result.state_dict["w"], 4.0 * BASE)
    # a rank that receives {} keeps nothing and leaves the merge to rank 0
    cb = ExtraMergeCallback(every=1, window=1, save=False, state_dict_fn=lambda m: {})
    _drive(cb, max_steps=3, model=model)
    assert cb.result is None and len(cb.merged) == 0


@pytest.mark.timeout(120)
def test_fsdp2_sharded_parameters_are_gathered(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    from torch.distributed.device_mesh import init_device_mesh

    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "fully_shard"):  # FSDP2 is public from torch 2.6 (nox lowest: 2.4)
        pytest.skip("FSDP2 (torch.distributed.fsdp.fully_shard) needs torch >= 2.6")
    fully_shard = fsdp.fully_shard

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
        ref = [{k: v.clone() for k, v in net.state_dict().items()}]
        fully_shard(net, mesh=init_device_mesh("cpu", (1,)))
        assert type(net[0].weight).__name__ == "DTensor"
        cb = ExtraMergeCallback(every=1, window=1, alpha=1.0, save=False)
        args = SimpleNamespace(output_dir=str(tmp_path), process_index=0)
        state = SimpleNamespace(global_step=0, max_steps=2)
        cb.on_train_begin(args, state, None)
        for s in (1, 2):
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(1.0)
            ref.append({k: v + s for k, v in ref[0].items()})
            state.global_step = s
            cb.on_step_end(args, state, None, model=net)
        cb.on_train_end(args, state, None, model=net)
    finally:
        dist.destroy_process_group()
    for k, v in cb.merged[-1].items():
        assert type(v) is torch.Tensor, k  # full tensors, not DTensor shards
        torch.testing.assert_close(v, ref[2][k])
        torch.testing.assert_close(cb.result.state_dict[k], ref[2][k] + 1.0)


def test_callback_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="window"):
        ExtraMergeCallback(every=1)
    with pytest.raises(ValueError, match="decay"):
        ExtraMergeCallback(every=1, merge="ema")
    with pytest.raises(ValueError, match="merge"):
        ExtraMergeCallback(every=1, window=2, merge="wma")
    with pytest.raises(ValueError, match="start_step"):
        ExtraMergeCallback(every=1, window=2, start_step=-1)
