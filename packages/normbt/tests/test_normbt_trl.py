"""TRL integration: parity with trl.RewardTrainer side by side, NormBT path, logging, checkpoint."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from icml26_normbt import NormBTConfig, NormBTRewardTrainer  # noqa: E402
from trl import RewardConfig, RewardTrainer  # noqa: E402

EPS = 0.05  # NormBTConfig's default ε (relative to m)

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
    base = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        report_to="none",
        bf16=False,
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
    )
    return {**base, **kw}


def _batch(trainer):
    return next(iter(trainer.get_train_dataloader()))


def _pooled_by_hand(model, batch):
    """Last-layer state at each row's last real token (the collator pads on the right)."""
    with torch.no_grad():
        hs = model.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state  # (2B, T, H)
    last = batch["attention_mask"].sum(-1) - 1
    return hs[torch.arange(hs.shape[0]), last]  # (2B, H)


def _trainer(tmp_path, model, tok, ds=None, cls=NormBTRewardTrainer, eval_ds=None, **kw):
    cfg_cls = NormBTConfig if cls is NormBTRewardTrainer else RewardConfig
    normbt = {k: kw.pop(k) for k in list(kw) if k.startswith("normbt_")}
    return cls(
        model=model,
        args=cfg_cls(**_common(tmp_path, **kw), **normbt),
        train_dataset=ds if ds is not None else _dataset(with_margin=False),
        eval_dataset=eval_ds,
        processing_class=tok,
    )


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
    """Expectation written out with torch ops on the model's own internals (no package code)."""
    ds = _dataset(with_margin=True)
    tr = _trainer(tmp_path, tiny_llama, char_tokenizer, ds, center_rewards_coefficient=0.01)
    batch = _batch(tr)
    tiny_llama.train()
    loss = tr.compute_loss(tiny_llama, dict(batch))
    with torch.no_grad():
        logits = tiny_llama(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits[:, 0]
    r_c, r_r = logits[:4], logits[4:]
    h = _pooled_by_hand(tiny_llama, batch)
    d = torch.sqrt(((h[:4] - h[4:]) ** 2).sum(-1))
    m = d.mean()  # first step: the batch's own mean
    w = m / (d + EPS * m)
    per_pair = torch.log1p(torch.exp(-(r_c - r_r - batch["margin"])))
    expect = (w * per_pair).mean() + 0.01 * ((r_c + r_r) ** 2).mean()
    torch.testing.assert_close(loss.detach(), expect, rtol=1e-5, atol=1e-6)
    assert int(tr.normbt_state.num_updates) == 0  # folded at the optimizer step, not here
    assert float(tr.normbt_state.pending[1]) == 4
    metrics = tr._metrics["train"]
    assert metrics["normbt/distance_p50"][0] == pytest.approx(
        torch.quantile(d, 0.5).item(), rel=1e-4
    )
    assert metrics["normbt/weight_p90"][0] == pytest.approx(torch.quantile(w, 0.9).item(), rel=1e-4)
    # the unweighted BT loss of the same batch is logged beside the weighted one
    assert metrics["normbt/bt_loss"][0] == pytest.approx(per_pair.mean().item(), rel=1e-5)


def test_trainer_per_pair_head_gradient_through_hf_logits(
    tmp_path, char_tokenizer, tiny_llama, fp_tol
):
    """The trainer's head gradient = (1/B) Σ w_i ∇ℓ_i with ∇ℓ_i from autograd of HF's logits of
    pair i alone, w_i = m/(d_i+ε·m) from the hand-pooled states; and ‖w_i ∇ℓ_i‖ = m·σ(−Δr_i)·
    d_i/(d_i+ε·m), the paper's head identity, on a real model."""
    tr = _trainer(tmp_path, tiny_llama, char_tokenizer)
    batch = _batch(tr)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    b = ids.shape[0] // 2
    tiny_llama.train()
    tiny_llama.zero_grad()
    tr.compute_loss(tiny_llama, dict(batch)).backward()
    g_trainer = tiny_llama.score.weight.grad.clone().reshape(-1)  # (H,)

    h = _pooled_by_hand(tiny_llama, batch)
    d = torch.sqrt(((h[:b] - h[b:]) ** 2).sum(-1))
    m = d.mean()
    w = m / (d + EPS * m)
    per, sig = [], []
    for i in range(b):
        tiny_llama.zero_grad()
        logits = tiny_llama(input_ids=ids[[i, b + i]], attention_mask=mask[[i, b + i]]).logits
        dr = logits[0, 0] - logits[1, 0]
        (-F.logsigmoid(dr)).backward()
        per.append(tiny_llama.score.weight.grad.clone().reshape(-1))
        sig.append(torch.sigmoid(-dr.detach()))
    per_t, sig_t = torch.stack(per), torch.stack(sig)  # (B, H), (B,)
    # batch of 2B rows vs 2-row forwards: different kernels; each head gradient reduces over
    # the batch's tokens (n), each norm over H (and d over H)
    want = (w[:, None] * per_t).mean(0)
    torch.testing.assert_close(g_trainer, want, **fp_tol(want, ids.numel()))
    norms = torch.linalg.vector_norm(w[:, None] * per_t, dim=-1)
    want = m * sig_t * d / (d + EPS * m)
    torch.testing.assert_close(norms, want, **fp_tol(want, ids.numel() * h.shape[-1]))
    # under BT the same per-pair norms are σ(−Δr_i)·d_i: they do depend on d
    want = sig_t * d
    torch.testing.assert_close(
        torch.linalg.vector_norm(per_t, dim=-1), want, **fp_tol(want, ids.numel() * h.shape[-1])
    )


def test_gradient_accumulation_gives_micro_batches_the_same_m(
    tmp_path, char_tokenizer, tiny_llama, fp_tol
):
    """Two micro-batches of 2 pairs accumulate the gradient of one batch of 4 (m is shared).

    Batch 8 and batch 4 run different kernels (another CPU sums in another order), so the
    tolerance is fp32's: rtol 8·eps, atol 8·eps·max|g|·sqrt(n), g the whole model's gradient
    (one backward: an entry's rounding error comes from the terms upstream of it, so the scale
    is the gradient's, not the tensor's own), n the batch's tokens (the reduction of every
    weight gradient). A micro-batch weighted with its own m is off by ~1e-2 relative."""
    tr = _trainer(tmp_path, tiny_llama, char_tokenizer)
    tr.normbt_state.update(torch.tensor([3.0]))  # as after some training: m = 3
    batch = _batch(tr)
    tiny_llama.train()
    tiny_llama.zero_grad()
    tr.compute_loss(tiny_llama, dict(batch)).backward()
    g_full = {n: p.grad.clone() for n, p in tiny_llama.named_parameters()}
    tr.normbt_state.pending.zero_()
    tiny_llama.zero_grad()
    for rows in ([0, 1, 4, 5], [2, 3, 6, 7]):
        micro = {k: v[rows] for k, v in batch.items()}
        (tr.compute_loss(tiny_llama, micro) / 2).backward()
    tol = fp_tol(torch.cat([g.reshape(-1) for g in g_full.values()]), batch["input_ids"].numel())
    for n, p in tiny_llama.named_parameters():
        torch.testing.assert_close(p.grad, g_full[n], **tol, msg=n)
    assert int(tr.normbt_state.num_updates) == 1  # nothing folded mid-step


def test_train_with_accumulation_folds_m_once_per_step(tmp_path, char_tokenizer, tiny_llama):
    tr = _trainer(
        tmp_path,
        tiny_llama,
        char_tokenizer,
        max_steps=2,
        logging_steps=1,
        save_strategy="no",
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
    )
    tr.train()
    assert int(tr.normbt_state.num_updates) == 2  # 2 optimizer steps, 4 micro-batches
    logs = [h for h in tr.state.log_history if "loss" in h]
    keys = ("normbt/mean_distance", "normbt/weight_p50", "normbt/bt_loss", "accuracy")
    assert logs and all(all(k in h for k in keys) for h in logs)


def test_logged_mean_distance_is_the_m_each_step_used(tmp_path, char_tokenizer, tiny_llama, fp_tol):
    """Step 1 is weighted with its own batch mean (no EMA yet), so that is what is logged, not
    the still-empty EMA (0); step 2 uses m_1 = that same mean (α_1 = 1). One batch holds all 4
    pairs, so step 1's mean is computed by hand from the untrained model."""
    ds = datasets.Dataset.from_dict(
        {"chosen": [c for c, _ in PAIRS[:4]], "rejected": [r for _, r in PAIRS[:4]]}
    )
    untrained = copy.deepcopy(tiny_llama)
    tr = _trainer(
        tmp_path, tiny_llama, char_tokenizer, ds, max_steps=2, logging_steps=1, save_strategy="no"
    )
    batch = _batch(tr)
    h = _pooled_by_hand(untrained, batch)
    d = torch.sqrt(((h[:4] - h[4:]) ** 2).sum(-1))  # (4,)
    want = d.mean()
    tr.train()
    logged = [x["normbt/mean_distance"] for x in tr.state.log_history if "loss" in x]
    assert len(logged) == 2 and logged[0] > 0, logged
    tol = fp_tol(want, batch["input_ids"].numel() * h.shape[-1])
    for got in logged:
        torch.testing.assert_close(torch.tensor(got), want, **tol)
    assert (
        float(tr.normbt_state.mean_distance) != logged[1]
    )  # m_2 (folded after step 2) is not logged


def test_logged_mean_distance_is_the_fixed_m(tmp_path, char_tokenizer, tiny_llama):
    tr = _trainer(
        tmp_path, tiny_llama, char_tokenizer, max_steps=1, logging_steps=1, save_strategy="no",
        normbt_fixed_m=1.0,
    )  # fmt: skip
    tr.train()
    logged = [x["normbt/mean_distance"] for x in tr.state.log_history if "loss" in x]
    assert logged == [1.0]


def test_evaluate_does_not_move_m(tmp_path, char_tokenizer, tiny_llama):
    ds = _dataset(with_margin=False)
    # the eval set goes in at construction, where TRL tokenizes it (trl 1.0's evaluate(raw_ds)
    # drops the raw text columns: "No columns ... match the model's forward", nox lowest)
    tr = _trainer(
        tmp_path, tiny_llama, char_tokenizer, ds, eval_ds=ds, max_steps=2, save_strategy="no"
    )
    tr.evaluate()  # before any training: m stays uninitialised
    assert int(tr.normbt_state.num_updates) == 0 and float(tr.normbt_state.pending[1]) == 0
    tr.train()
    before = tr.normbt_state.state_dict()
    tr.evaluate()
    # what evaluate logged (TRL >= 1.x returns it too; trl 1.0's log() copies the dict, so
    # only the log holds the NormBT metrics there: nox lowest)
    logged = tr.state.log_history[-1]
    assert "eval_normbt/distance_p50" in logged and "eval_normbt/bt_loss" in logged, logged
    after = tr.normbt_state.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert float(tr.normbt_state.pending[1]) == 0  # nothing recorded for the next step


def test_predict_and_compute_metrics_see_what_trl_gives(tmp_path, char_tokenizer, tiny_llama):
    """No hidden states leave compute_loss: predictions are TRL's (B-pair logits), not a tuple."""
    ds = _dataset(with_margin=False)
    seen = {}

    def metrics_fn(name):
        def fn(pred):
            seen[name] = pred.predictions
            return {}

        return fn

    def build(cls, sub, model, name):
        cfg_cls = NormBTConfig if cls is NormBTRewardTrainer else RewardConfig
        return cls(
            model=model,
            args=cfg_cls(**_common(tmp_path / sub, per_device_eval_batch_size=4)),
            train_dataset=ds,
            eval_dataset=ds,
            processing_class=char_tokenizer,
            compute_metrics=metrics_fn(name),
        )

    ours = build(NormBTRewardTrainer, "a", copy.deepcopy(tiny_llama), "ours")
    ref = build(RewardTrainer, "b", tiny_llama, "trl")
    ours.normbt_state.update(torch.tensor([2.0]))  # as after training: m = 2
    p_ours, p_ref = ours.predict(ours.eval_dataset), ref.predict(ref.eval_dataset)
    # prediction runs in eval mode: it neither moves m nor leaves distances for the next step
    assert float(ours.normbt_state.mean_distance) == 2.0
    assert int(ours.normbt_state.num_updates) == 1 and float(ours.normbt_state.pending[1]) == 0
    assert isinstance(p_ours.predictions, np.ndarray)
    assert p_ours.predictions.shape == p_ref.predictions.shape
    np.testing.assert_allclose(p_ours.predictions, p_ref.predictions, rtol=1e-6)
    ours.evaluate()
    ref.evaluate()
    assert isinstance(seen["ours"], np.ndarray) and seen["ours"].shape == seen["trl"].shape


def test_model_card_names_normbt(tmp_path, char_tokenizer, tiny_llama):
    tr = _trainer(tmp_path, tiny_llama, char_tokenizer)
    tr.create_model_card(model_name="rm")
    card = (tmp_path / "README.md").read_text()
    assert "normbt" in card and "2512.06343" in card
    assert "normbt" in tiny_llama.model_tags


def test_head_must_be_found(tmp_path, char_tokenizer, tiny_llama):
    with pytest.raises(ValueError, match="normbt_head"):
        _trainer(tmp_path, tiny_llama, char_tokenizer, normbt_head="model.nope")
    tr = _trainer(tmp_path, tiny_llama, char_tokenizer, normbt_head="score")
    assert tr._head is tiny_llama.score


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


@pytest.mark.parametrize(
    "field, value, exc",
    [
        ("normbt_decay", 1.5, ValueError),
        ("normbt_decay", float("nan"), ValueError),
        ("normbt_eps", float("nan"), ValueError),
        ("normbt_eps", -0.1, ValueError),
        ("normbt_clip", -1.0, ValueError),
        ("normbt_clip", float("inf"), ValueError),
        ("normbt_fixed_m", 0.0, ValueError),
        ("normbt_enabled", "yes", TypeError),
        ("normbt_renormalize", 1, TypeError),
        ("normbt_head", 3, TypeError),
    ],
)
def test_config_rejects_bad_options(tmp_path, field, value, exc):
    with pytest.raises(exc, match=field):
        NormBTConfig(**_common(tmp_path), **{field: value})
