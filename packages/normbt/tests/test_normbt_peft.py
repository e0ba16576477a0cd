"""NormBT through TRL with a LoRA reward model (`peft_config=LoraConfig(task_type="SEQ_CLS")`):
the head NormBT reads is PEFT's `ModulesToSaveWrapper` around `score`, and d must be measured on
the input of its *active* trainable copy (the one that produces the reward)."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("trl")
peft = pytest.importorskip("peft")
datasets = pytest.importorskip("datasets")

import numpy as np  # noqa: E402
from icml26_normbt import NormBTConfig, NormBTRewardTrainer  # noqa: E402
from peft import LoraConfig  # noqa: E402
from peft.utils import ModulesToSaveWrapper  # noqa: E402
from trl import RewardConfig, RewardTrainer  # noqa: E402

EPS = 0.05  # NormBTConfig's default ε (relative to m)
PAIRS = [
    ("the cat sat on the mat.", "the mat sat on the cat."),
    ("2+3=5", "2+3=6"),
    ("to be or not to be", "be to or not to be"),
    ("a quick brown fox", "zzz qqq"),
]


def _lora():
    return LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])


def _args(cls, tmp_path, **kw):
    base = dict(
        output_dir=str(tmp_path), per_device_train_batch_size=4, per_device_eval_batch_size=4,
        report_to="none", bf16=False, use_cpu=True, seed=0, dataloader_num_workers=0,
        save_strategy="no",
    )  # fmt: skip
    return cls(**{**base, **kw})


def _dataset():
    return datasets.Dataset.from_dict(
        {"chosen": [c for c, _ in PAIRS], "rejected": [r for _, r in PAIRS]}
    )


def _trainer(tmp_path, model, tok, cls=NormBTRewardTrainer, **kw):
    cfg = NormBTConfig if cls is NormBTRewardTrainer else RewardConfig
    ds = _dataset()
    return cls(
        model=model, args=_args(cfg, tmp_path, **kw), train_dataset=ds, eval_dataset=ds,
        processing_class=tok, peft_config=_lora(),
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_lora_reward_model_loss_and_head_gradient_use_the_active_head_copy(
    tmp_path, char_tokenizer, tiny_llama, fp_tol
):
    tr = _trainer(tmp_path, tiny_llama, char_tokenizer)
    wrapper = tr._head
    assert isinstance(wrapper, ModulesToSaveWrapper), type(wrapper)
    active = wrapper.modules_to_save["default"]  # the trainable copy that outputs the reward
    seen: list[torch.Tensor] = []
    hook = active.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    batch = next(iter(tr.get_train_dataloader()))
    model = tr.model
    model.train()
    model.zero_grad()
    try:
        loss = tr.compute_loss(model, dict(batch))
    finally:
        hook.remove()
    assert len(seen) == 1
    # expectation by hand from the active copy's own input (pooled at each row's last real
    # token) and its own weights: no package code
    last = batch["attention_mask"].sum(-1) - 1
    h = seen[0][torch.arange(seen[0].shape[0]), last]  # (2B, H)
    v = active.weight.detach()[0]  # (H,)  Llama's score has no bias
    r = h @ v  # (2B,)
    b = h.shape[0] // 2
    d = torch.sqrt(((h[:b] - h[b:]) ** 2).sum(-1))  # (B,)
    m = d.mean()  # step 1: the batch's own mean
    w = m / (d + EPS * m)
    dr = r[:b] - r[b:]
    want = (w * torch.log1p(torch.exp(-dr))).mean()
    torch.testing.assert_close(loss.detach(), want, **fp_tol(want, h.numel()))
    assert tr._metrics["train"]["normbt/mean_distance"][-1] == pytest.approx(m.item(), rel=1e-5)
    # the head gradient is the closed form −(1/B) Σ w_i σ(−Δr_i)(h_c,i − h_r,i), and it lands on
    # the active copy only; the frozen original and the base weights get none
    loss.backward()
    g_want = -(w * torch.sigmoid(-dr))[:, None] * (h[:b] - h[b:])  # (B, H)
    g_want = g_want.mean(0)
    torch.testing.assert_close(active.weight.grad[0], g_want, **fp_tol(g_want, h.numel()))
    assert wrapper.original_module.weight.grad is None
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b)
    base = [p for n, p in model.named_parameters() if n.endswith("q_proj.base_layer.weight")]
    assert base and all(p.grad is None and not p.requires_grad for p in base)


@pytest.mark.timeout(300)
def test_lora_reward_model_trains_and_predicts_like_trl(
    tmp_path, char_tokenizer, tiny_llama, fp_tol
):
    ref_model = copy.deepcopy(tiny_llama)
    tr = _trainer(tmp_path / "a", tiny_llama, char_tokenizer, max_steps=2, logging_steps=1)
    ref = _trainer(tmp_path / "b", ref_model, char_tokenizer, cls=RewardTrainer)
    # before training LoRA's B is 0: the same function as TRL's own LoRA reward model
    p_ours, p_ref = tr.predict(tr.eval_dataset), ref.predict(ref.eval_dataset)
    assert isinstance(p_ours.predictions, np.ndarray)
    assert p_ours.predictions.shape == p_ref.predictions.shape
    want = torch.as_tensor(p_ref.predictions)
    torch.testing.assert_close(torch.as_tensor(p_ours.predictions), want, **fp_tol(want, 1))
    active = tr._head.modules_to_save["default"]
    frozen = tr._head.original_module.weight.detach().clone()
    before = active.weight.detach().clone()
    lora_b = {n: p.detach().clone() for n, p in tr.model.named_parameters() if "lora_B" in n}
    tr.train()
    assert int(tr.normbt_state.num_updates) == 2
    logs = [x for x in tr.state.log_history if "loss" in x]
    assert len(logs) == 2 and all(
        np.isfinite(x["loss"]) and x["normbt/mean_distance"] > 0 for x in logs
    )
    assert not torch.equal(active.weight, before)  # the head copy trains
    assert torch.equal(tr._head.original_module.weight, frozen)  # the original stays
    params = dict(tr.model.named_parameters())
    assert any(not torch.equal(params[n], p) for n, p in lora_b.items())
    assert tr.predict(tr.eval_dataset).predictions.shape == p_ref.predictions.shape
