"""STPSFTTrainer against TRL's SFTTrainer on a tiny random-init Llama (no network)."""

from __future__ import annotations

import pytest
import torch

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
from icml26_stp import stp_loss, tokenize_messages  # noqa: E402
from icml26_stp.trl import STPConfig, STPSFTTrainer  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from .test_stp_spans import CONVS  # noqa: E402


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


def conv_dataset(n=8):
    return datasets.Dataset.from_list([{"messages": CONVS[i % len(CONVS)]} for i in range(n)])


def make(tok, tmp_path, cls=STPSFTTrainer, **kw):
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
    return cls(model=tiny_model(tok), args=args, train_dataset=ds, processing_class=tok)


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
    metrics = tr.evaluate(tr.train_dataset.select(range(2)))
    assert 0.0 <= metrics["eval_stp_loss"] <= 2.0
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
