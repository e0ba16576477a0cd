"""Trainer integration: a tiny random-init Llama with MoE MLPs over a two-task sequence."""

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402
from icml26_cka_upcycling import BilevelUpcycler, ReservoirBuffer, find_moe_layers  # noqa: E402
from icml26_cka_upcycling.hf import SelectiveUpcyclingCallback, causal_lm_loss, replace_mlp  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402


class _Seqs(Dataset):
    def __init__(self, ids):
        self.ids = ids

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        x = self.ids[i]
        return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x}


def _task(seed, n=32, T=12, vocab=32):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (n, 1), generator=g)
    step = seed + 1  # each task: arithmetic sequences with its own stride
    return (start + step * torch.arange(T)) % vocab


class _SyncProbe(transformers.TrainerCallback):
    """After every optimizer step: the optimizer holds exactly the model's trainable tensors."""

    def __init__(self, model):
        self.model, self.bad, self.steps = model, [], 0

    def on_step_end(self, args, state, control, optimizer=None, **kwargs):
        opt = getattr(optimizer, "optimizer", optimizer)
        have = {id(p) for g in opt.param_groups for p in g["params"]}
        want = {id(p) for p in self.model.parameters() if p.requires_grad}
        self.steps += 1
        if have != want:
            self.bad.append(state.global_step)


def _model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
    )
    model = transformers.LlamaForCausalLM(cfg)
    names = replace_mlp(model, num_experts=3, top_k=2, expert_size=16, init_std=0.2)
    return model, names


@pytest.mark.parametrize("cache", [False, True])
def test_callback_runs_selective_upcycling_over_a_task_sequence(tmp_path, cache):
    model, names = _model()
    assert names == ["model.layers.0.mlp", "model.layers.1.mlp"]
    up = BilevelUpcycler(
        model,
        causal_lm_loss,
        cka_layers=["model.layers.1"],
        lambda_param=0.0,
        outer_lr=0.2,
        init_grow_logit=2.0,
    )
    buf = ReservoirBuffer(16, seed=0)
    cb = SelectiveUpcyclingCallback(
        up, search_steps=3, replay=buf, replay_batch_size=4, cache_teacher_features=cache
    )
    frozen_before, prev = None, None
    for t in range(2):
        ids = _task(t)
        val = [
            {"input_ids": ids[:8], "attention_mask": torch.ones_like(ids[:8]), "labels": ids[:8]}
        ]
        cb.set_task(
            val,
            remember=None
            if prev is None
            else {"input_ids": prev, "attention_mask": torch.ones_like(prev), "labels": prev},
        )
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / f"t{t}"),
            max_steps=6,
            per_device_train_batch_size=8,
            learning_rate=1e-2,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            use_cpu=True,
            seed=t,
            disable_tqdm=True,
        )
        probe = _SyncProbe(model)
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=_Seqs(ids), callbacks=[cb, probe]
        )
        trainer.train()
        assert probe.steps == 6 and probe.bad == []  # in sync during the search too
        opt = (
            trainer.optimizer.optimizer
            if hasattr(trainer.optimizer, "optimizer")
            else trainer.optimizer
        )
        in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
        assert in_opt == {
            id(p) for p in model.parameters() if p.requires_grad
        }  # optimizer follows growth
        if frozen_before is not None:  # sources frozen at task 0 kept their weights through task 1
            for name, (mask, w1) in frozen_before.items():
                layer = find_moe_layers(model)[name]
                assert torch.equal(layer.w1[: mask.numel()][mask], w1)
        frozen_before = {
            n: (lay.frozen.clone(), lay.w1.detach()[lay.frozen].clone())
            for n, lay in find_moe_layers(model).items()
        }
        prev = ids
    assert len(cb.plans) == 2
    assert up.mask is None and up.teacher is None and up._cache is None
    for layer in find_moe_layers(model).values():
        assert not layer.provisional.any()
    grown = sum(p.num_grown() for p in cb.plans)
    assert grown > 0
    assert grown == sum(
        sum(c - 1 for c in lay.copies_per_slot()) for lay in find_moe_layers(model).values()
    )
    assert len(buf) == 16


def test_callback_rejects_finite_difference_and_missing_validation():
    model, _ = _model()
    up = BilevelUpcycler(model, causal_lm_loss, hypergradient="finite_difference")
    with pytest.raises(ValueError, match="first_order"):
        SelectiveUpcyclingCallback(up)
    with pytest.raises(ValueError, match="Llama-style MLP"):
        replace_mlp(torch.nn.Linear(2, 2), num_experts=2, top_k=1, expert_size=2)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_replace_mlp_upcycles_a_pretrained_llm_exactly(arch):
    """replace_mlp(upcycle=True) turns every gated MLP of a (randomly initialised, no hub) Llama
    or Qwen2 into S SwiGLU copies of itself: the logits are unchanged to fp64 rounding, then
    growth adds capacity without changing them either."""
    torch.manual_seed(0)
    kw = dict(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16,
    )
    if arch == "llama":
        cfg, cls = transformers.LlamaConfig(mlp_bias=True, **kw), transformers.LlamaForCausalLM
    else:
        cfg, cls = transformers.Qwen2Config(**kw), transformers.Qwen2ForCausalLM
    model = cls(cfg).double().eval()
    if arch == "llama":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("mlp.gate_proj.bias") or name.endswith("mlp.down_proj.bias"):
                    p.normal_()
    ids = torch.randint(0, 32, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = model(input_ids=ids).logits
    names = replace_mlp(
        model, num_experts=4, top_k=2, upcycle=True, router_init="normal", generator=None
    )
    assert names == ["model.layers.0.mlp", "model.layers.1.mlp"]
    layers = find_moe_layers(model)
    assert all(lay.activation == "swiglu" and lay.expert_size == 24 for lay in layers.values())
    with torch.no_grad():
        after = model(input_ids=ids).logits
        for lay in layers.values():
            lay.grow([0, 3])
        grown = model(input_ids=ids).logits
    scale = float(before.abs().max())
    assert float((after - before).abs().max()) <= 1e-6 * scale
    assert float((grown - before).abs().max()) <= 1e-6 * scale


def test_replace_mlp_upcycle_refuses_an_expert_size_it_cannot_honour():
    cfg = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    llama = transformers.LlamaForCausalLM(cfg)
    with pytest.raises(ValueError, match="expert_size"):
        replace_mlp(llama, num_experts=2, top_k=1, expert_size=8, upcycle=True)
    with pytest.raises(ValueError, match="expert_size"):
        replace_mlp(llama, num_experts=2, top_k=1)  # random init needs a width


def test_callback_teacher_cache_gives_the_drift_of_a_teacher_forward():
    """cache_teacher_features=True: the CKA features of the replay buffer come from one teacher
    pass over the buffer (dict batches, collated by key); the regularizer equals the one with a
    teacher forward on the same replay batch, in value and gradient."""
    model, _ = _model()
    up = BilevelUpcycler(model, causal_lm_loss, cka_layers=["model.layers.1"], lambda_param=0.0)
    buf = ReservoirBuffer(16, seed=0)
    cb = SelectiveUpcyclingCallback(
        up, search_steps=0, replay=buf, replay_batch_size=4, cache_teacher_features=True
    )
    prev = _task(5)
    cb.set_task(
        [], remember={"input_ids": prev, "attention_mask": torch.ones_like(prev), "labels": prev}
    )
    up.snapshot_teacher()
    cb._cache()
    with torch.no_grad():  # the student drifts
        for p in model.model.layers[0].mlp.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    replay, idx = cb._replay_batch(torch.device("cpu"))
    assert idx is not None and replay is not None
    w = model.model.layers[0].mlp.w1
    direct = up.regularizer(replay)
    (g_direct,) = torch.autograd.grad(direct, w)
    cached = up.regularizer(replay, idx)
    (g_cached,) = torch.autograd.grad(cached, w)
    assert direct.item() > 1e-4  # the drift term is not trivially zero
    eps = torch.finfo(torch.float32).eps
    n = 4 * 12 * 32  # the longest reduction: samples × features
    assert abs(cached.item() - direct.item()) <= 8 * eps * n**0.5 * abs(direct.item()) + 1e-7
    assert torch.allclose(
        g_cached, g_direct, rtol=1e-4, atol=8 * eps * n**0.5 * float(g_direct.abs().max())
    )
