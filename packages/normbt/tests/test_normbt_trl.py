"""TRL integration: parity with trl.RewardTrainer side by side, NormBT path, logging, checkpoint."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from icml26_normbt import NormBTConfig, NormBTRewardTrainer, last_token_pool, normbt_loss  # noqa: E402
from trl import RewardConfig, RewardTrainer  # noqa: E402

PAIRS = [
    ("the cat sat on the mat.", "the mat sat on the cat."),
    ("2+3=5", "2+3=6"),
    ("to be or not to be", "be to or not to be"),
    ("a quick brown fox", "zzz qqq"),
    ("hello world", "hello word"),
    ("7+8=15", "7+8=14"),
    ("all is well that ends well", "well ends that is all well"),
    ("good morning", "morning good"),
]


def _dataset(with_margin: bool):
    cols = {"chosen": [c for c, _ in PAIRS], "rejected": [r for _, r in PAIRS]}
    if with_margin:
        cols["margin"] = [0.1 * i for i in range(len(PAIRS))]
    return datasets.Dataset.from_dict(cols)


def _common(tmp_path, **kw):
    return dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        report_to="none",
        bf16=False,
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
        **kw,
    )


def _batch(trainer):
    return next(iter(trainer.get_train_dataloader()))


@pytest.mark.parametrize("with_margin, center", [(False, None), (True, 0.05)])
def test_disabled_normbt_matches_trl_reward_trainer(
    tmp_path, char_tokenizer, tiny_llama, with_margin, center
):
    ds = _dataset(with_margin)
    model_a = tiny_llama
    model_b = copy.deepcopy(tiny_llama)
    trl_tr = RewardTrainer(
        model=model_a,
        args=RewardConfig(**_common(tmp_path / "a", center_rewards_coefficient=center)),
        train_dataset=ds,
        processing_class=char_tokenizer,
    )
    ours = NormBTRewardTrainer(
        model=model_b,
        args=NormBTConfig(
            **_common(tmp_path / "b", center_rewards_coefficient=center), normbt_enabled=False
        ),
        train_dataset=ds,
        processing_class=char_tokenizer,
    )
    batch = _batch(trl_tr)
    assert ("margin" in batch) == with_margin
    model_a.train()
    model_b.train()
    loss_trl = trl_tr.compute_loss(model_a, dict(batch))
    loss_ours = ours.compute_loss(model_b, dict(batch))
    assert torch.equal(loss_trl, loss_ours), (loss_trl.item(), loss_ours.item())
    loss_trl.backward()
    loss_ours.backward()
    for (n, pa), (_, pb) in zip(model_a.named_parameters(), model_b.named_parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=0, atol=0, msg=n)
    # the metrics TRL logs are logged the same way
    for key in ("accuracy", "margin", "mean_reward"):
        assert trl_tr._metrics["train"][key] == ours._metrics["train"][key]


def test_enabled_normbt_loss_matches_manual_computation(tmp_path, char_tokenizer, tiny_llama):
    ds = _dataset(with_margin=True)
    tr = NormBTRewardTrainer(
        model=tiny_llama,
        args=NormBTConfig(**_common(tmp_path, center_rewards_coefficient=0.01), normbt_decay=0.9),
        train_dataset=ds,
        processing_class=char_tokenizer,
    )
    batch = _batch(tr)
    tiny_llama.train()
    loss = tr.compute_loss(tiny_llama, dict(batch))
    with torch.no_grad():
        out = tiny_llama(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            output_hidden_states=True,
        )
    r_c, r_r = torch.chunk(out.logits.squeeze(-1), 2)
    h_c, h_r = torch.chunk(last_token_pool(out.hidden_states[-1], batch["input_ids"], 0), 2)
    d = torch.linalg.vector_norm(h_c - h_r, dim=-1)
    expect, w = normbt_loss(
        r_c, r_r, h_c, h_r, state=None, margin=batch["margin"]
    )  # first update: m = d̄
    expect = expect + 0.01 * torch.mean((r_c + r_r) ** 2)
    torch.testing.assert_close(loss.detach(), expect, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tr.normbt_state.mean_distance, d.mean(), rtol=1e-5, atol=1e-6)
    assert int(tr.normbt_state.num_updates) == 1
    assert tr._metrics["train"]["normbt/distance_p50"][0] == pytest.approx(
        torch.quantile(d, 0.5).item(), rel=1e-4
    )
    assert tr._metrics["train"]["normbt/weight_p90"][0] == pytest.approx(
        torch.quantile(w, 0.9).item(), rel=1e-4
    )


def test_train_logs_and_checkpoint_state(tmp_path, char_tokenizer, tiny_llama):
    ds = _dataset(with_margin=False)
    args = NormBTConfig(**_common(tmp_path, max_steps=2, logging_steps=1, save_strategy="no"))
    tr = NormBTRewardTrainer(
        model=tiny_llama, args=args, train_dataset=ds, processing_class=char_tokenizer
    )
    tr.train()
    logs = [h for h in tr.state.log_history if "loss" in h]
    assert logs and all("normbt/mean_distance" in h and "normbt/weight_p50" in h for h in logs)
    assert int(tr.normbt_state.num_updates) == 2
    tr._save_rng_state(str(tmp_path / "ckpt"))
    tr2 = NormBTRewardTrainer(
        model=copy.deepcopy(tiny_llama),
        args=args,
        train_dataset=ds,
        processing_class=char_tokenizer,
    )
    assert int(tr2.normbt_state.num_updates) == 0
    tr2._load_rng_state(str(tmp_path / "ckpt"))
    assert torch.equal(tr2.normbt_state.mean_distance, tr.normbt_state.mean_distance)
    assert int(tr2.normbt_state.num_updates) == 2


def test_trainer_checkpoint_writes_state_and_resume_restores_it(
    tmp_path, char_tokenizer, tiny_llama
):
    """Through Trainer itself (not the hooks called by hand): save, then resume mid-epoch."""
    ds = _dataset(with_margin=False)  # 8 pairs, 4 per step: 2 steps per epoch

    def trainer(model):
        args = NormBTConfig(
            **_common(tmp_path, max_steps=2, save_strategy="steps", save_steps=1),
            normbt_decay=0.5,
        )
        return NormBTRewardTrainer(
            model=model, args=args, train_dataset=ds, processing_class=char_tokenizer
        )

    fresh = copy.deepcopy(tiny_llama)
    tr = trainer(tiny_llama)
    tr.train()
    saved = torch.load(tmp_path / "checkpoint-1" / "normbt_state.pt", weights_only=True)
    assert int(saved["num_updates"]) == 1 and float(saved["mean_distance"]) > 0
    assert int(tr.normbt_state.num_updates) == 2
    # resuming from step 1 restores m (1 update) and adds step 2's: a fresh EMA would hold 1
    tr2 = trainer(fresh)
    tr2.train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))
    assert int(tr2.normbt_state.num_updates) == 2
    torch.testing.assert_close(
        tr2.normbt_state.mean_distance, tr.normbt_state.mean_distance, rtol=1e-4, atol=1e-6
    )


def test_config_rejects_bad_options(tmp_path):
    with pytest.raises(ValueError, match="normbt_decay"):
        NormBTConfig(**_common(tmp_path), normbt_decay=1.5)
    with pytest.raises(ValueError, match="normbt_clip"):
        NormBTConfig(**_common(tmp_path), normbt_clip=-1.0)
