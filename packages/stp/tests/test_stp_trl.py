"""STPSFTTrainer against TRL's SFTTrainer on a tiny random-init Llama (no network)."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.nn.functional as F

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
from icml26_stp import stp_loss, tokenize_messages  # noqa: E402
from icml26_stp.trl import STPConfig, STPSFTTrainer  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from .test_stp_spans import CONVS  # noqa: E402

# torch's generic (non-vectorised) CPU kernels, as in .ci/run's portability pass, reach a oneDNN
# bf16 packing routine that raises "pack_vnni2 is only supported when avx512 is supported" inside
# the TRL training step: a torch limitation, not this package's; the same tests run on vector kernels
_GENERIC_KERNELS = pytest.mark.skipif(
    os.environ.get("ATEN_CPU_CAPABILITY") == "default",
    reason="torch: pack_vnni2 needs avx512 under ATEN_CPU_CAPABILITY=default",
)


def tiny_model(tok, seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    return LlamaForCausalLM(cfg)


def conv_dataset(n=8):  # cycles the 4 conversations, the multi-turn one included
    return datasets.Dataset.from_list([{"messages": CONVS[i % len(CONVS)]} for i in range(n)])


def make(tok, tmp_path, cls=STPSFTTrainer, dtype=torch.float32, **kw):
    base = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=3,
        max_length=None,
    )
    base.update(kw)
    args = STPConfig(**base) if cls is STPSFTTrainer else trl.SFTConfig(**base)
    ds = conv_dataset()
    if cls is not STPSFTTrainer:  # same tokens and assistant-only labels, no spans
        ds = ds.map(lambda ex: tokenize_messages(tok, ex["messages"]), remove_columns=["messages"])
        ds = ds.remove_columns(["stp_spans"])
    model = tiny_model(tok).to(dtype)
    return cls(model=model, args=args, train_dataset=ds, processing_class=tok)


def first_batch(trainer):
    return trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))


def test_lambda_zero_equals_sft_trainer_and_lambda_adds_stp_of_the_same_forward(
    bpe_tokenizer, tmp_path
):
    tok = bpe_tokenizer
    stp = make(tok, tmp_path / "a", stp_lambda=0.0)
    sft = make(tok, tmp_path / "b", cls=trl.SFTTrainer)
    b_stp, b_sft = first_batch(stp), first_batch(sft)
    assert b_stp["stp_spans"].shape == (4, 2, 2)
    assert torch.equal(b_stp["labels"], b_sft["labels"])  # assistant-only NTP, as upstream
    assert (b_stp["labels"] != -100).sum() < (b_stp["attention_mask"] == 1).sum()
    spans = b_stp["stp_spans"].clone()
    model = stp.model
    l_stp = stp.compute_loss(model, dict(b_stp))
    l_sft = sft.compute_loss(model, dict(b_sft))
    assert torch.equal(l_stp, l_sft)

    # lambda > 0: loss - NTP == lambda * STP of the final-layer states of that forward
    stp.args.stp_lambda = 0.5
    stp._stp_generator.manual_seed(123)
    total = stp.compute_loss(model, dict(b_stp))
    ids, am = b_stp["input_ids"], b_stp["attention_mask"]
    with torch.no_grad():
        hid = model(input_ids=ids, attention_mask=am, output_hidden_states=True).hidden_states[-1]
    want = stp_loss(hid, spans, generator=torch.Generator().manual_seed(123))
    torch.testing.assert_close(total - l_sft, 0.5 * want, rtol=1e-5, atol=1e-7)
    assert stp._metrics["train"]["stp_loss"][-1] == pytest.approx(float(want), rel=1e-5)


def test_layer_option_reads_that_hidden_state(bpe_tokenizer, tmp_path):
    tok = bpe_tokenizer
    tr = make(tok, tmp_path, stp_lambda=1.0, stp_gamma=0.0, stp_layer=1)
    b = first_batch(tr)
    spans = b["stp_spans"].clone()
    tr._stp_generator.manual_seed(9)
    got = tr.compute_loss(tr.model, dict(b))
    with torch.no_grad():
        hs = tr.model(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], output_hidden_states=True
        ).hidden_states
    torch.testing.assert_close(
        got,
        stp_loss(hs[1], spans, generator=torch.Generator().manual_seed(9)),
        rtol=1e-5,
        atol=1e-7,
    )
    assert not torch.allclose(hs[1], hs[-1])


@_GENERIC_KERNELS
def test_train_with_accumulation_logs_both_terms_and_eval_returns_no_hidden(
    bpe_tokenizer, tmp_path
):
    tr = make(
        bpe_tokenizer,
        tmp_path,
        stp_lambda=0.1,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-3,
        stp_lambda_warmup=True,
    )
    before = [p.detach().clone() for p in tr.model.parameters()]
    tr.train()
    logs = [x for x in tr.state.log_history if "stp_loss" in x]
    assert logs and all(0.0 <= x["stp_loss"] <= 2.0 and x["ntp_loss"] > 0 for x in logs)
    assert logs[0]["stp_lambda"] == 0.0  # warm-up starts at min lambda
    assert any(not torch.equal(a, p) for a, p in zip(before, tr.model.parameters()))
    tr.evaluate(tr.train_dataset.select(range(2)))
    # read from the log: trl 1.0's SFTTrainer.log copies the dict, so evaluate() returns the
    # STP metric only on later TRL (nox lowest); every version logs it
    assert 0.0 <= tr.state.log_history[-1]["eval_stp_loss"] <= 2.0
    out = tr.predict(tr.train_dataset.select(range(2)))
    assert not isinstance(out.predictions, tuple)  # logits only: no hidden-state tuple


def test_config_and_data_errors(bpe_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="stp_sampler"):
        STPConfig(output_dir=str(tmp_path), stp_sampler="gauss", report_to=[], use_cpu=True)
    with pytest.raises(ValueError, match="stp_length_adjustment"):
        STPConfig(output_dir=str(tmp_path), stp_length_adjustment="cos", report_to=[], use_cpu=True)
    with pytest.raises(ValueError, match="packing"):
        STPConfig(output_dir=str(tmp_path), packing=True, report_to=[], use_cpu=True)
    with pytest.raises(ValueError, match="max_length"):
        make(bpe_tokenizer, tmp_path, max_length=8)
    tr = make(bpe_tokenizer, tmp_path)
    b = first_batch(tr)
    b.pop("stp_spans")
    with pytest.raises(ValueError, match="stp_spans"):
        tr.compute_loss(tr.model, b)


# ---------------------------------------------------------------------------- gradients
# The gradient comparisons run in float64: the STP gradient divides by |patch|, and for
# short patches float32 rounding is amplified to ~1e-3 of the gradient (measured: 8x1 and
# 4x2 each sit ~5e-3 relative from the float64 update, while in float64 they agree to 1e-16).
# TRL's fused LM head (trl.kernels.chunked_logprob) still computes the NTP log-probs in
# float32, so the NTP part of a gradient carries float32 rounding.
F64_EPS = torch.finfo(torch.float64).eps
F32_EPS = torch.finfo(torch.float32).eps


def tolerance(ref, n, eps=F64_EPS):
    """Portable tolerance for a result reduced over n terms: 8 eps relative,
    8 eps max|ref| sqrt(n) absolute (CONTRIBUTING: another CPU rounds differently)."""
    return 8 * eps, 8 * eps * float(ref.abs().max()) * math.sqrt(n)


def trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def test_gradient_is_ntp_plus_lambda_stp_of_a_separate_forward(bpe_tokenizer, tmp_path):
    """autograd.grad(total) == grad(NTP) + lambda * grad(stp_loss(hidden_states[-1])), the
    reference from a separate forward, a hand-written assistant-only CE and the same seed."""
    lam = 0.5
    tr = make(bpe_tokenizer, tmp_path, stp_lambda=lam, dtype=torch.float64)
    b = first_batch(tr)
    spans = b["stp_spans"].clone()
    model = tr.model.train()
    params = trainable(model)
    tr._stp_generator.manual_seed(123)
    g_total = torch.autograd.grad(tr.compute_loss(model, dict(b)), params)

    out = model(
        input_ids=b["input_ids"], attention_mask=b["attention_mask"], output_hidden_states=True
    )
    labels = b["labels"][:, 1:]  # (B, T-1): next-token targets, -100 off the assistant text
    ntp = F.cross_entropy(out.logits[:, :-1].flatten(0, 1), labels.flatten(), ignore_index=-100)
    stp = stp_loss(out.hidden_states[-1], spans, generator=torch.Generator().manual_seed(123))
    g_ntp = torch.autograd.grad(ntp, params, retain_graph=True)
    g_stp = torch.autograd.grad(
        stp, params, allow_unused=True, materialize_grads=True
    )  # no lm_head
    n = b["input_ids"].numel()  # tokens reduced into each gradient entry
    stp_share = 0.0
    for gt, gn, gs in zip(g_total, g_ntp, g_stp):
        want = gn + lam * gs
        rtol, atol = tolerance(want, n)
        rtol_ntp, atol_ntp = tolerance(gn, n, F32_EPS)  # TRL's float32 NTP kernel
        atol += atol_ntp
        torch.testing.assert_close(gt, want, rtol=rtol + rtol_ntp, atol=atol)
        stp_share = max(stp_share, float((lam * gs).abs().max()) / max(atol, 1e-30))
    assert stp_share > 100  # the STP part of the gradient is far above the tolerance


def sgd_step(tok, path, bs, ga, lam=0.5):
    """One SGD update (lr 1, no clipping, no decay) over the same 8 rows; returns the
    parameter change, the parameters before, and the training logs."""
    tr = make(
        tok,
        path,
        dtype=torch.float64,
        stp_lambda=lam,
        per_device_train_batch_size=bs,
        gradient_accumulation_steps=ga,
        max_steps=1,
        optim="sgd",
        learning_rate=1.0,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=0.0,
        logging_steps=1,
    )
    before = [p.detach().clone() for p in trainable(tr.model)]
    tr.train()
    delta = [p.detach() - b for p, b in zip(trainable(tr.model), before)]
    logs = [x for x in tr.state.log_history if "ntp_loss" in x]
    return delta, before, logs


@pytest.fixture(scope="module")
def accumulation_runs(bpe_tokenizer, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ga")
    return {
        (8, 1): sgd_step(bpe_tokenizer, tmp / "8x1", 8, 1),
        (4, 2): sgd_step(bpe_tokenizer, tmp / "4x2", 4, 2),
    }


def test_accumulated_update_with_stp_equals_the_full_batch_update(accumulation_runs):
    """4 x 2 accumulation and one batch of 8 take the same SGD step with lambda > 0:
    STP is a per-micro-batch mean, so it must be averaged over the accumulation steps."""
    full, before, _ = accumulation_runs[(8, 1)]
    acc, _, _ = accumulation_runs[(4, 2)]
    n = 8 * 64  # rows x an upper bound on the padded length: the reduction size
    moved = 0.0
    for d_full, d_acc, p0 in zip(full, acc, before):
        rtol, atol = tolerance(d_full, n, F32_EPS)  # bounded by TRL's float32 NTP kernel
        atol += 8 * F64_EPS * float(p0.abs().max())  # rounding of p + delta
        torch.testing.assert_close(d_acc, d_full, rtol=rtol, atol=atol)
        moved = max(moved, float(d_full.abs().max()))
    assert moved > 1e-3


def test_ntp_loss_log_does_not_depend_on_accumulation(accumulation_runs):
    (log_full,) = accumulation_runs[(8, 1)][2]
    (log_acc,) = accumulation_runs[(4, 2)][2]
    for key in ("ntp_loss", "stp_loss"):
        assert log_acc[key] == pytest.approx(log_full[key], rel=1e-5), key
    # and it is the mean assistant-token NTP: about log(vocab) for a random-init model
    assert 0.5 * math.log(120) < log_full["ntp_loss"] < 2 * math.log(120)


class Recording(STPSFTTrainer):
    """Records (returned loss, logged ntp, logged stp, logged lambda) of every train call."""

    calls: list

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        m = self._metrics["train"]
        if self.model.training:
            self.calls.append(
                (float(loss), m["ntp_loss"][-1], m["stp_loss"][-1], m["stp_lambda"][-1])
            )
        return loss


@_GENERIC_KERNELS
def test_lambda_warmup_reaches_lambda_at_the_last_step(bpe_tokenizer, tmp_path):
    lam, steps = 0.3, 4
    Recording.calls = []
    args = STPConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        max_steps=steps,
        logging_steps=1,
        learning_rate=1e-3,
        stp_lambda=lam,
        stp_lambda_warmup=True,
        stp_min_lambda=0.0,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=3,
        max_length=None,
    )
    tr = Recording(
        model=tiny_model(bpe_tokenizer),
        args=args,
        train_dataset=conv_dataset(),
        processing_class=bpe_tokenizer,
    )
    tr.train()
    logged = [x["stp_lambda"] for x in tr.state.log_history if "stp_lambda" in x]
    want = [lam * k / (steps - 1) for k in range(steps)]  # upstream get_lbd: step / (max - 1)
    assert logged == pytest.approx(want, abs=1e-12)
    assert len(Recording.calls) == steps
    for loss, ntp, stp, lbd in Recording.calls:  # the lambda logged is the lambda trained with
        assert loss == pytest.approx(ntp + lbd * stp, rel=1e-5)
    assert Recording.calls[-1][3] == pytest.approx(lam, abs=1e-12)


def test_span_generator_is_seeded_per_rank_as_upstream(bpe_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setattr(STPConfig, "process_index", property(lambda self: 2))
    tr = make(bpe_tokenizer, tmp_path, seed=3)
    assert tr.args.process_index == 2
    assert tr._stp_generator.initial_seed() == 3 + 3 * 2  # upstream: seed + rank * 3


def test_a_trl_without_the_overridden_private_api_is_a_clear_error(
    bpe_tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setattr(trl.SFTTrainer, "_prepare_dataset", lambda self, dataset, args: dataset)
    with pytest.raises(RuntimeError, match=r"_prepare_dataset.*trl>=1.0,<2"):
        make(bpe_tokenizer, tmp_path)
