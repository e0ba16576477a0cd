"""ExtraMergeCallback inside a real transformers.Trainer (tiny random GPT-2), AdamW and Muon."""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from icml26_extramerge import load_checkpoint  # noqa: E402
from icml26_extramerge.hf import ExtraMergeCallback  # noqa: E402


class _Data(torch.utils.data.Dataset):
    def __init__(self, n=64, t=16, vocab=32):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, vocab, (n, t), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


class _Recorder(transformers.TrainerCallback):
    """Independent snapshots at the callback's steps, to check its merge against."""

    def __init__(self, every, start):
        self.every, self.start, self.snaps = every, start, []

    def on_step_end(self, args, state, control, model=None, **kw):
        s = state.global_step
        if s >= self.start and (s - self.start) % self.every == 0:
            self.snaps.append(
                copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
            )


def _train(tmp_path, optimizer):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(cfg)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=14,
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        lr_scheduler_type="constant",
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    cb = ExtraMergeCallback(every=2, window=3, start_step=4, alpha=1.5)
    rec = _Recorder(every=2, start=4)
    opts = (None, None)
    if optimizer == "muon":
        if not hasattr(torch.optim, "Muon"):  # torch.optim.Muon is new in torch 2.9
            pytest.skip("torch.optim.Muon needs torch >= 2.9")
        muon = torch.optim.Muon([p for p in model.parameters() if p.ndim == 2], lr=1e-2)
        opts = (muon, torch.optim.lr_scheduler.LambdaLR(muon, lambda s: 1.0))
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=_Data(), callbacks=[cb, rec], optimizers=opts
    )
    trainer.train()
    return model, cb, rec


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_callback_merges_and_extrapolates(tmp_path, optimizer):
    model, cb, rec = _train(tmp_path, optimizer)
    assert list(cb.snapshot_steps) == [10, 12, 14]
    assert len(rec.snaps) == 6  # steps 4, 6, ..., 14
    key = "transformer.h.0.attn.c_attn.weight"
    m_k = torch.stack([s[key] for s in rec.snaps[-3:]]).mean(0)
    m_k1 = torch.stack([s[key] for s in rec.snaps[-4:-1]]).mean(0)
    torch.testing.assert_close(cb.merged[-1][key], m_k)
    torch.testing.assert_close(cb.merged[-2][key], m_k1)
    assert not torch.equal(m_k, m_k1)  # the model did train
    torch.testing.assert_close(cb.result.state_dict[key], m_k + 1.5 * (m_k - m_k1))
    # tied embeddings stay tied in memory and both keys are written to disk
    out = cb.result.state_dict
    assert out["lm_head.weight"] is out["transformer.wte.weight"]
    disk = load_checkpoint(tmp_path / "extramerge" / "extramerge.safetensors")
    for k, v in out.items():
        assert torch.equal(disk[k], v), k
    merged_disk = load_checkpoint(tmp_path / "extramerge" / "merged.safetensors")
    torch.testing.assert_close(merged_disk[key], m_k)
    # the result loads into the model
    model.load_state_dict(out)


class _StepCounter(transformers.TrainerCallback):
    def __init__(self):
        self.steps = 0

    def on_step_end(self, args, state, control, **kw):
        self.steps += 1


def test_misconfigured_window_raises_before_training(tmp_path):
    # the example: every=50 with max_steps=20 can never merge; it must fail in
    # on_train_begin, before any step (so a user's save_model() after train() is not lost)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(cfg)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=20,
        per_device_train_batch_size=8,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    counter = _StepCounter()
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=_Data(),
        callbacks=[ExtraMergeCallback(every=50, window=3), counter],
    )
    with pytest.raises(ValueError, match=r"every=50.*max_steps=20"):
        trainer.train()
    assert counter.steps == 0
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_callback_too_few_snapshots_raises(tmp_path):
    cb = ExtraMergeCallback(every=100, window=3)
    with pytest.raises(RuntimeError, match="need 2"):
        cb.on_train_end(None, None, None)


def test_callback_bad_arguments():
    with pytest.raises(ValueError, match="window"):
        ExtraMergeCallback(every=1, window=0)
    with pytest.raises(ValueError, match="direction"):
        ExtraMergeCallback(every=1, window=2, direction="x")
