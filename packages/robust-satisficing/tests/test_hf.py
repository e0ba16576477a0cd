"""IRSTrainer: group ids survive the Trainer's column pruning and the loss is IRSLoss's."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from icml26_robust_satisficing import IRSLoss  # noqa: E402
from icml26_robust_satisficing.hf import IRSTrainer  # noqa: E402


class TinyClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, labels=None):  # Trainer keeps only forward's arguments (+ group_ids)
        return {"logits": self.lin(x)}


class Rows(torch.utils.data.Dataset):
    def __init__(self, n=16):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 4, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)
        self.gid = torch.arange(n) % 2

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i], "group_ids": self.gid[i], "unused": 0}


def _args(tmp_path, **kw):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        max_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        learning_rate=0.1,
        **kw,
    )


def test_compute_loss_is_the_irs_loss_and_training_runs(tmp_path):
    ds, model = Rows(), TinyClassifier()
    irs = IRSLoss.from_counts([1, 3])
    trainer = IRSTrainer(model=model, args=_args(tmp_path), train_dataset=ds, irs_loss=irs)
    batch = next(iter(trainer.get_train_dataloader()))
    assert "group_ids" in batch and "unused" not in batch
    loss = trainer.compute_loss(model, batch)
    per = torch.nn.functional.cross_entropy(
        model(batch["x"])["logits"], batch["labels"], reduction="none"
    )
    ref, _ = irs(per, batch["group_ids"])
    torch.testing.assert_close(loss, ref)
    before = model.lin.weight.detach().clone()
    out = trainer.train()
    assert torch.isfinite(torch.tensor(out.training_loss))
    assert not torch.equal(before, model.lin.weight.detach())
    logged = [h for h in trainer.state.log_history if "irs/kappa" in h]
    assert logged and all(torch.isfinite(torch.tensor(h["irs/kappa"])) for h in logged)


def test_missing_group_column_is_a_clear_error(tmp_path):
    model = TinyClassifier()
    trainer = IRSTrainer(
        model=model, args=_args(tmp_path), train_dataset=Rows(), irs_loss=IRSLoss([0.5, 0.5])
    )
    with pytest.raises(KeyError, match="group_ids"):
        trainer.compute_loss(model, {"x": torch.randn(2, 4), "labels": torch.tensor([0, 1])})
