import math

import icml26_latentmoe as L
import numpy as np
import pytest
import torch


def test_corpus_is_the_pydoc_topics_text():
    train, val = L.load_corpus(0.1)
    assert train.dtype == np.uint8 and len(train) > 300_000
    assert abs(len(val) / (len(train) + len(val)) - 0.1) < 1e-3
    assert b'The "assert" statement' in train.tobytes() + val.tobytes()


class _Uniform(torch.nn.Module):
    seq_len = 8

    def forward(self, idx):
        return torch.zeros(*idx.shape, 256)


def test_bpb_of_a_uniform_model_is_eight_bits():
    data = np.arange(100, dtype=np.uint8)
    assert L.evaluate_bpb(_Uniform(), data, 8) == pytest.approx(8.0)


def test_training_lowers_bits_per_byte_and_the_moe_layer_carries_part_of_it():
    train, val = L.load_corpus()
    torch.manual_seed(0)
    model = L.ByteLM(
        32,
        1,
        2,
        32,
        lambda i: L.MultiHeadLatentMoE(
            32, 2, 16, 4, 2, 16, num_layers=1, init_std=0.1, backend="torch"
        ),
    )
    before = L.evaluate_bpb(model, val, 32, max_windows=16)
    assert before == pytest.approx(8.0, abs=0.4)  # small init: close to uniform
    res = L.train_byte_lm(
        model, train, val, steps=40, batch_size=8, lr=1e-2, warmup=5, eval_windows=16
    )
    assert res.val_bpb < before - 1.5
    assert res.tokens == 40 * 8 * 32
    assert res.final_imbalance is not None and res.final_imbalance >= 1.0
    assert math.isfinite(res.train_loss)
    # attention alone also learns: the trained model must get worse without its MoE output
    ffn = model.blocks[0].ffn
    hook = ffn.register_forward_hook(lambda mod, inp, out: torch.zeros_like(out))
    ablated = L.evaluate_bpb(model, val, 32, max_windows=16)
    hook.remove()
    assert ablated > res.val_bpb + 0.02, (ablated, res.val_bpb)  # measured: +0.05


@pytest.mark.parametrize("kind", ["latent", "moe"])
def test_same_seed_same_bytes_through_the_training_recipe(kind):
    # the whole recipe (init, batch sampling, AdamW, aux losses, aux-free bias steps) twice
    train, val = L.load_corpus()
    if kind == "latent":
        ffn = lambda i: L.MultiHeadLatentMoE(16, 2, 8, 4, 2, 16, init_std=0.1, backend="torch")
    else:
        ffn = lambda i: L.MoE(16, 4, 2, 16, aux_loss_coef=0.01, z_loss_coef=1e-3, backend="torch")
    runs = []
    for _ in range(2):
        torch.manual_seed(5)
        model = L.ByteLM(16, 1, 2, 16, ffn)
        res = L.train_byte_lm(
            model, train, val, steps=4, batch_size=2, warmup=2, bias_update_rate=0.01,
            seed=3, eval_windows=4,
        )  # fmt: skip
        state = b"".join(t.detach().numpy().tobytes() for t in model.state_dict().values())
        runs.append((state, res.val_bpb, res.train_loss))
    assert runs[0] == runs[1]


def test_bad_input_raises():
    with pytest.raises(ValueError, match="val_fraction"):
        L.load_corpus(1.5)
    with pytest.raises(ValueError, match="divisible by n_heads"):
        L.ByteLM(30, 1, 4, 8, lambda i: torch.nn.Identity())
    with pytest.raises(ValueError, match="seq_len=8"):
        L.ByteLM(8, 1, 2, 8, lambda i: torch.nn.Identity())(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="steps must be"):
        L.train_byte_lm(_Uniform(), np.zeros(10, np.uint8), np.zeros(10, np.uint8), steps=0)


def test_progress_on_by_default_and_off_with_none(capsys):
    # issue 66: the public training loop was silent by default (a 22-minute README run printed nothing)
    train, val = L.load_corpus()
    ffn = lambda i: L.MoE(16, 4, 2, 16, backend="torch")
    for log, want in [("default", 3), (None, 0)]:
        torch.manual_seed(0)
        model = L.ByteLM(16, 1, 2, 16, ffn)
        kw = {} if log == "default" else {"log": log}
        L.train_byte_lm(model, train, val, steps=60, batch_size=2, warmup=2, eval_windows=2, **kw)
        got = capsys.readouterr()
        lines = [ln for ln in got.err.splitlines() if ln.startswith("step ")]
        assert got.out == ""
        assert len(lines) == want, got.err  # steps 0, 50 and the last (59)
        if want:
            assert lines[-1].startswith("step   59 loss ") and lines[-1].endswith("s")
