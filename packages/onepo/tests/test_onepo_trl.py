"""TRL integration: GRPOTrainer parity without a teacher, teacher injection through the rollout hook."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from icml26_onepo import OnePOConfig, OnePOGRPOTrainer, grpo_advantages, onepo_policy_loss  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

N_GEN = 4
PROBLEMS = [("12+7=", "91"), ("3+4=", "7"), ("25+25=", "05"), ("9+9=", "81")]


def _dataset():
    return datasets.Dataset.from_dict(
        {
            "prompt": [p for p, _ in PROBLEMS],
            "answer": [a for _, a in PROBLEMS],
            "teacher": [a for _, a in PROBLEMS],
        }
    )


def exact_match(completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer, strict=True)]


def partial_credit(completions, answer, **kwargs):
    return [
        sum(x == y for x, y in zip(c, a)) / len(a) for c, a in zip(completions, answer, strict=True)
    ]


def _common(tmp_path, **kw):
    base = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=N_GEN,
        max_completion_length=5,
        report_to="none",
        bf16=False,
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
        logging_steps=1,
        save_strategy="no",
        epsilon=0.2,
        epsilon_high=0.28,
        delta=10.0,
    )
    base.update(kw)
    return base


def _rows(ds):
    return [dict(ds[i]) for i in range(len(ds)) for _ in range(N_GEN)][: 2 * N_GEN]


@pytest.mark.parametrize(
    "loss_type, beta",
    [("dapo", 0.0), ("grpo", 0.0), ("bnpo", 0.0), ("dr_grpo", 0.0), ("dapo", 0.05)],
)
def test_no_teacher_loss_equals_grpo_trainer(tmp_path, char_tokenizer, tiny_lm, loss_type, beta):
    ds = _dataset()
    kw = dict(loss_type=loss_type, beta=beta)
    model_a: object = tiny_lm
    model_b: object = copy.deepcopy(tiny_lm)
    if beta:  # TRL loads the reference model from a path
        tiny_lm.save_pretrained(tmp_path / "m")
        model_a = model_b = str(tmp_path / "m")
    trl_tr = GRPOTrainer(
        model=model_a,
        reward_funcs=partial_credit,
        args=GRPOConfig(**_common(tmp_path / "a", **kw)),
        train_dataset=ds,
        processing_class=char_tokenizer,
    )
    ours = OnePOGRPOTrainer(
        model=model_b,
        reward_funcs=partial_credit,
        args=OnePOConfig(**_common(tmp_path / "b", **kw)),
        train_dataset=ds,
        processing_class=char_tokenizer,
    )
    tiny_lm, model_b = trl_tr.model, ours.model
    tiny_lm.train()
    model_b.train()
    for tr in (trl_tr, ours):
        tr.current_gradient_accumulation_steps = 1  # set by Trainer's loop; one window here
    torch.manual_seed(1)
    batch = trl_tr._generate_and_score_completions(_rows(ds))
    # an off-policy batch (as after a few PPO updates) so that both clips and the dual clip act
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        logps, _, _ = trl_tr._get_per_token_logps_and_entropies(
            tiny_lm,
            torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1),
            torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1),
            batch["completion_ids"].size(1),
        )
    batch["old_per_token_logps"] = logps + 1.5 * torch.randn(logps.shape, generator=g)
    batch["advantages"] = torch.randn(batch["advantages"].shape, generator=g)
    ratio = torch.exp(logps - batch["old_per_token_logps"])
    negative = (batch["advantages"] < 0)[:, None] & batch["completion_mask"].bool()
    assert (ratio[negative] > 10.0).any() and (ratio < 0.8).any()  # dual clip and both clips act
    assert "teacher_mask" not in batch
    loss_trl = trl_tr.compute_loss(tiny_lm, dict(batch))
    loss_ours = ours.compute_loss(model_b, dict(batch))
    assert torch.equal(loss_trl, loss_ours), (loss_trl.item(), loss_ours.item())
    loss_trl.backward()
    loss_ours.backward()
    for (name, p_a), p_b in zip(tiny_lm.named_parameters(), model_b.parameters(), strict=True):
        assert p_a.grad is not None
        torch.testing.assert_close(p_a.grad, p_b.grad, rtol=1e-6, atol=1e-9, msg=name)


def _onepo(tmp_path, tok, model, reward, **kw):
    return OnePOGRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=OnePOConfig(**_common(tmp_path, **kw)),
        train_dataset=_dataset(),
        processing_class=tok,
    )


def test_teacher_injected_through_rollout_hook(tmp_path, char_tokenizer, tiny_lm):
    calls = []

    def reward(completions, answer, **kwargs):
        calls.append(list(completions))
        return exact_match(completions, answer)

    tr = _onepo(
        tmp_path, char_tokenizer, tiny_lm, reward, onepo_seed=7, onepo_overlong_penalty=False
    )
    tr.current_gradient_accumulation_steps = 1
    tiny_lm.train()
    torch.manual_seed(0)
    rows = _rows(_dataset())
    out = tr._generate_and_score_completions(rows)
    # random-init students never solve it; the gold teacher (reward 1) beats every student
    rng = np.random.default_rng(7 + 0)
    want = [int(rng.integers(0, N_GEN)), int(rng.integers(N_GEN, 2 * N_GEN))]
    teacher_rows = out["teacher_mask"].any(-1).nonzero().flatten().tolist()
    assert teacher_rows == want
    assert out["completion_ids"].shape[0] == 2 * N_GEN  # group size preserved
    for r, (_, ans) in zip(want, PROBLEMS[:2], strict=True):
        ids = [*char_tokenizer.encode(ans, add_special_tokens=False), char_tokenizer.eos_token_id]
        n = len(ids)
        assert out["completion_ids"][r, :n].tolist() == ids
        assert out["teacher_mask"][r].sum() == n and out["completion_mask"][r].sum() == n
    # TRL's advantages are computed from the rewards that decided the injection
    rewards = torch.zeros(2 * N_GEN)
    rewards[want] = 1.0
    torch.testing.assert_close(
        out["advantages"], grpo_advantages(rewards, N_GEN, eps=1e-4), rtol=1e-5, atol=0
    )
    assert len(calls) == 2  # students once, teachers once: nothing scored twice
    assert calls[1] == [PROBLEMS[0][1], PROBLEMS[1][1]]
    assert tr._metrics["train"]["onepo/retirement_rate"] == [0.0]
    # the loss on this batch is onepo_policy_loss (token-mean == dapo with one micro-batch)
    # after some updates (old log-probs below the current ones), so OnePO != plain PPO here
    with torch.no_grad():
        logps, _, _ = tr._get_per_token_logps_and_entropies(
            tiny_lm,
            torch.cat([out["prompt_ids"], out["completion_ids"]], 1),
            torch.cat([out["prompt_mask"], out["completion_mask"]], 1),
            out["completion_ids"].size(1),
        )
        out["old_per_token_logps"] = logps - 0.7
        loss = tr.compute_loss(tiny_lm, dict(out))
    args = (logps - 0.7, logps, out["advantages"], out["completion_mask"])
    ref, metrics = onepo_policy_loss(*args, out["teacher_mask"])
    plain, _ = onepo_policy_loss(*args, None)
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=0)
    assert not torch.allclose(ref, plain, rtol=1e-3)
    assert (
        metrics["onepo/rescaled_token_fraction"] > 0
    )  # random-init: p_old << floor on teacher tokens


def test_replacement_rows_are_seeded_seed_plus_global_step(tmp_path, char_tokenizer, tiny_lm):
    """The official manager seeds each step's draw with seed + global_step, not seed alone."""
    tr = _onepo(tmp_path, char_tokenizer, tiny_lm, exact_match, onepo_seed=7)
    tr.current_gradient_accumulation_steps = 1
    tiny_lm.train()

    def rows_for(seed):
        rng = np.random.default_rng(seed)
        return [int(rng.integers(0, N_GEN)), int(rng.integers(N_GEN, 2 * N_GEN))]

    # a step whose draw differs from step 0's, so "seed" and "seed + step" disagree
    step = next(s for s in range(1, 50) if rows_for(7 + s) != rows_for(7))
    tr.state.global_step = step
    torch.manual_seed(0)
    out = tr._generate_and_score_completions(_rows(_dataset()))
    assert out["teacher_mask"].any(-1).nonzero().flatten().tolist() == rows_for(7 + step)


def test_tie_retires_teacher(tmp_path, char_tokenizer, tiny_lm):
    tr = _onepo(
        tmp_path,
        char_tokenizer,
        tiny_lm,
        lambda completions, **kw: [1.0] * len(completions),
        onepo_filter_groups=False,
        onepo_overlong_penalty=False,  # else long students score below the short teacher
    )
    tiny_lm.train()
    out = tr._generate_and_score_completions(_rows(_dataset()))
    assert not out["teacher_mask"].any()
    assert tr._metrics["train"]["onepo/retirement_rate"] == [1.0]


def test_missing_teacher_column_and_bad_config(tmp_path, char_tokenizer, tiny_lm):
    tr = _onepo(tmp_path, char_tokenizer, tiny_lm, exact_match, onepo_teacher_column="gold")
    tiny_lm.train()
    with pytest.raises(KeyError, match="gold"):
        tr._generate_and_score_completions(_rows(_dataset()))
    with pytest.raises(ValueError, match="onepo_floor"):
        OnePOConfig(**_common(tmp_path, onepo_floor=1.0))
    with pytest.raises(ValueError, match="loss_type"):
        _onepo(tmp_path, char_tokenizer, tiny_lm, exact_match, loss_type="sapo")


def test_train_runs_and_logs(tmp_path, char_tokenizer, tiny_lm):
    tr = _onepo(tmp_path, char_tokenizer, tiny_lm, partial_credit, max_steps=2, learning_rate=1e-2)
    tr.train()
    logged = [h for h in tr.state.log_history if "onepo/retirement_rate" in h]
    assert len(logged) == 2
    assert all(0.0 <= h["onepo/retirement_rate"] <= 1.0 for h in logged)
    assert any(h["onepo/teacher_token_fraction"] > 0 for h in logged)


def test_trl_internals_are_checked_by_signature():
    """A TRL whose private rollout/loss hooks moved is refused at import, naming the method."""
    from icml26_onepo.trl import check_trl_internals
    from trl import GRPOTrainer

    check_trl_internals(GRPOTrainer)  # the installed (tested) TRL passes

    class Moved(GRPOTrainer):
        def _generate(self, prompts, images):  # a new required parameter
            return super()._generate(prompts)

    with pytest.raises(ImportError, match=r"_generate\('self', 'prompts', 'images'\)"):
        check_trl_internals(Moved)

    class Gone(GRPOTrainer):
        _compute_loss = None

    with pytest.raises(ImportError, match="_compute_loss"):
        check_trl_internals(Gone)


# ---------------------------------------------------------------- DAPO filter, overlong penalty
CONSTANT_PROMPT = PROBLEMS[0][0]  # "12+7=": every completion of it scores 0.5


def alternating(completions, prompts, **kwargs):
    """0.5 for every completion of CONSTANT_PROMPT; 0, 1, 0, 1 … within any other group."""
    return [0.5 if p == CONSTANT_PROMPT else float(i % 2) for i, p in enumerate(prompts)]


def _eos_head(model, tok, eos_logit):
    """Replace the LM head: logits 0 for every token but EOS (``eos_logit``), whatever the input."""
    head = torch.nn.Linear(model.lm_head.in_features, model.lm_head.out_features)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[tok.eos_token_id] = eos_logit
    model.lm_head = head


def _prompts(tok, out):
    return [tok.decode(r, skip_special_tokens=True) for r in out["prompt_ids"]]


@pytest.mark.timeout(300)
def test_dapo_filter_drops_constant_groups_from_the_gradient(tmp_path, char_tokenizer, tiny_lm):
    """OnePO.sh's filter_groups: a group whose rewards are all equal is dropped and replaced by
    a regenerated group; the loss (token mean) runs over the kept groups' tokens only."""
    tr = _onepo(
        tmp_path,
        char_tokenizer,
        tiny_lm,
        alternating,
        onepo_teacher_enabled=False,
        onepo_overlong_penalty=False,
    )
    assert tr.args.onepo_filter_groups and tr.args.onepo_max_num_gen_batches == 20  # defaults
    tr.current_gradient_accumulation_steps = 1
    tiny_lm.train()
    torch.manual_seed(0)
    rows = _rows(_dataset())  # groups: CONSTANT_PROMPT, "3+4="
    out = tr._generate_and_score_completions(rows)
    prompts = _prompts(char_tokenizer, out)
    assert len(prompts) == 2 * N_GEN  # the generation batch is refilled to its G groups
    assert CONSTANT_PROMPT not in prompts, prompts
    assert prompts[:N_GEN] == ["3+4="] * N_GEN  # the kept group of the first batch comes first
    adv = out["advantages"].view(2, N_GEN)
    assert (adv.abs() > 0.5).all()  # every kept group has a nonzero reward spread
    assert tr._metrics["train"]["onepo/num_gen_batches"][-1] >= 2
    mask = out["completion_mask"].float()
    assert int(out["num_items_in_batch"]) == int(mask.sum())
    # gradient of the trainer's loss = gradient of -Σ A·r / Σ mask over the kept rows (on-policy)
    loss = tr.compute_loss(tiny_lm, dict(out))
    loss.backward()
    got = [p.grad.clone() for p in tiny_lm.parameters()]
    tiny_lm.zero_grad()
    logps, _, _ = tr._get_per_token_logps_and_entropies(
        tiny_lm,
        torch.cat([out["prompt_ids"], out["completion_ids"]], 1),
        torch.cat([out["prompt_mask"], out["completion_mask"]], 1),
        out["completion_ids"].size(1),
    )
    ratio = torch.exp(logps - logps.detach())
    ref = -(out["advantages"][:, None] * ratio * mask).sum() / mask.sum()
    ref.backward()
    for g, p in zip(got, tiny_lm.parameters(), strict=True):
        scale = float(p.grad.abs().max()) + 1e-12
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-6 * scale)


@pytest.mark.timeout(300)
def test_dapo_filter_gives_up_after_max_num_gen_batches(tmp_path, char_tokenizer, tiny_lm):
    calls = []

    def constant(completions, **kwargs):
        calls.append(len(completions))
        return [1.0] * len(completions)

    tr = _onepo(
        tmp_path,
        char_tokenizer,
        tiny_lm,
        constant,
        onepo_teacher_enabled=False,
        onepo_max_num_gen_batches=3,
    )
    tiny_lm.train()
    with pytest.raises(ValueError, match="onepo_max_num_gen_batches=3"):
        tr._generate_and_score_completions(_rows(_dataset()))
    assert calls == [2 * N_GEN] * 3  # three generation batches, then refused
    off = _onepo(
        tmp_path,
        char_tokenizer,
        tiny_lm,
        constant,
        onepo_filter_groups=False,
        onepo_teacher_enabled=False,
    )
    out = off._generate_and_score_completions(_rows(_dataset()))
    assert out["completion_ids"].shape[0] == 2 * N_GEN and (out["advantages"] == 0).all()
    with pytest.raises(ValueError, match="onepo_filter_groups_metric"):
        _onepo(tmp_path, char_tokenizer, tiny_lm, constant, onepo_filter_groups_metric="pass")


@pytest.mark.timeout(300)
def test_overlong_penalty_shapes_the_reward(tmp_path, char_tokenizer, tiny_lm):
    """DAPO soft overlong punishment (OnePO.sh: on, factor 0.6): with L_max = 6 and a buffer
    of 4, a completion of L tokens gains 0.6 · min(-(L - 2) / 4, 0) on top of its reward."""
    tr = _onepo(
        tmp_path,
        char_tokenizer,
        tiny_lm,
        lambda completions, **kw: [0.0] * len(completions),
        max_completion_length=6,
        onepo_overlong_buffer_len=4,
        onepo_teacher_enabled=False,
        onepo_filter_groups=False,
    )
    assert tr.args.onepo_overlong_penalty and tr.args.onepo_overlong_penalty_factor == 0.6
    _eos_head(tiny_lm, char_tokenizer, 3.1)  # P(EOS) ~ 0.3 per token: lengths 1 … 6
    tiny_lm.train()
    torch.manual_seed(0)
    out = tr._generate_and_score_completions(_rows(_dataset()))
    lengths = out["completion_mask"].sum(-1).double()  # (B,) tokens incl. EOS
    assert (lengths <= 2).any() and ((lengths > 2) & (lengths < 6)).any() and (lengths == 6).any()
    want = [0.6 * min(-(float(L) - 2.0) / 4.0, 0.0) for L in lengths]
    got = float(np.mean(tr._metrics["train"]["reward"]))
    assert got == pytest.approx(float(np.mean(want)), rel=1e-6, abs=1e-9)
    assert got < 0
    r = torch.tensor(want, dtype=torch.float64).view(2, N_GEN)
    adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).flatten()
    torch.testing.assert_close(out["advantages"].double(), adv, rtol=1e-4, atol=1e-5)


@pytest.mark.timeout(300)
def test_overlong_penalty_enters_the_teacher_decision(tmp_path, char_tokenizer, tiny_lm):
    """The teacher is scored by the same (penalised) reward: a correct but overlong teacher
    (8 tokens, reward 1 - 0.6 = 0.4) loses to students that stop at once (reward 0.5)."""
    _eos_head(tiny_lm, char_tokenizer, 30.0)  # every student emits EOS first
    ds = datasets.Dataset.from_dict(
        {
            "prompt": [p for p, _ in PROBLEMS],
            "answer": [a for _, a in PROBLEMS],
            "teacher": [a + "      " for _, a in PROBLEMS],  # 8 tokens + EOS -> truncated at 8
        }
    )

    def reward(completions, answer, **kwargs):
        return [1.0 if c.strip() == a else 0.5 for c, a in zip(completions, answer, strict=True)]

    def make(**kw):
        return OnePOGRPOTrainer(
            model=tiny_lm,
            reward_funcs=reward,
            args=OnePOConfig(
                **_common(
                    tmp_path,
                    max_completion_length=8,
                    onepo_overlong_buffer_len=4,
                    onepo_filter_groups=False,
                    **kw,
                )
            ),
            train_dataset=ds,
            processing_class=char_tokenizer,
        )

    tiny_lm.train()
    rows = [dict(ds[i]) for i in range(2) for _ in range(N_GEN)]
    torch.manual_seed(0)
    on = make()
    on._generate_and_score_completions(rows)
    assert on._metrics["train"]["onepo/retirement_rate"] == [1.0]
    torch.manual_seed(0)
    off = make(onepo_overlong_penalty=False)
    off._generate_and_score_completions(rows)
    assert off._metrics["train"]["onepo/retirement_rate"] == [0.0]


@pytest.mark.timeout(120)
def test_online_teacher_fills_missing_teacher_cells(tmp_path, char_tokenizer, tiny_lm):
    """A group with no cached teacher asks the OpenAI-compatible endpoint (loopback here)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    gold = dict(PROBLEMS)
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = req["messages"][-1]["content"]
            asked.append(prompt)
            data = json.dumps({"choices": [{"message": {"content": gold[prompt]}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        ds = (
            _dataset()
            .remove_columns("teacher")
            .add_column("teacher", [None, "", PROBLEMS[2][1], None])
        )
        tr = OnePOGRPOTrainer(
            model=tiny_lm,
            reward_funcs=exact_match,
            args=OnePOConfig(
                **_common(
                    tmp_path,
                    onepo_teacher_api_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1",
                    onepo_teacher_timeout=10.0,
                    onepo_overlong_penalty=False,
                    onepo_filter_groups=False,
                    onepo_seed=7,
                )
            ),
            train_dataset=ds,
            processing_class=char_tokenizer,
        )
        tiny_lm.train()
        torch.manual_seed(0)
        out = tr._generate_and_score_completions(
            [dict(ds[i]) for i in (0, 1) for _ in range(N_GEN)]
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
    assert sorted(asked) == sorted([PROBLEMS[0][0], PROBLEMS[1][0]])  # None, "" go online
    rng = np.random.default_rng(7)
    want = [int(rng.integers(0, N_GEN)), int(rng.integers(N_GEN, 2 * N_GEN))]
    assert out["teacher_mask"].any(-1).nonzero().flatten().tolist() == want
    for r, (_, ans) in zip(want, PROBLEMS[:2], strict=True):
        ids = [*char_tokenizer.encode(ans, add_special_tokens=False), char_tokenizer.eos_token_id]
        assert out["completion_ids"][r, : len(ids)].tolist() == ids
