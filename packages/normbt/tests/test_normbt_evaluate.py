"""RewardBench-format evaluation from local files: accuracy per subset and section weighting."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from icml26_normbt import (
    REWARDBENCH_EXAMPLE_COUNTS,
    REWARDBENCH_SECTIONS,
    evaluate_rewardbench,
    load_preference_pairs,
    pairwise_accuracy,
    rewardbench_scores,
)

pytest.importorskip("datasets")


class CountA(torch.nn.Module):
    """Reward = number of 'a' characters: a model whose accuracy is known by hand."""

    def __init__(self, a_id: int):
        super().__init__()
        self.a_id = a_id
        self.dummy = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, attention_mask=None):
        r = ((input_ids == self.a_id) & (attention_mask == 1)).sum(-1).float()
        return SimpleNamespace(logits=r[:, None] + self.dummy)


ROWS = [
    # subset, chosen, rejected  (correct iff chosen has more 'a's; ties are wrong)
    ("alpacaeval-easy", "aaa", "a"),
    ("alpacaeval-easy", "a", "aa"),
    ("mt-bench-hard", "aa", "b"),
    ("refusals-dangerous", "b", "b"),
    ("math-prm", "aaaa", "aaa"),
    ("math-prm", "aa", "aaaa"),
    ("hep-python", "ab", "bb"),
    ("custom-set", "a", "b"),
]


def _write(tmp_path):
    path = tmp_path / "rb.jsonl"
    with path.open("w") as f:
        for i, (s, c, r) in enumerate(ROWS):
            f.write(
                json.dumps({"id": i, "prompt": "q:", "chosen": c, "rejected": r, "subset": s})
                + "\n"
            )
    return path


def test_evaluate_rewardbench_on_local_file(tmp_path, char_tokenizer):
    path = _write(tmp_path)
    model = CountA(char_tokenizer.convert_tokens_to_ids("a"))
    res = evaluate_rewardbench(model, char_tokenizer, path, batch_size=3)
    assert res.num_pairs == len(ROWS)
    assert res.accuracy == pytest.approx(5 / 8)
    assert res.subset_accuracy == {
        "alpacaeval-easy": 0.5,
        "custom-set": 1.0,
        "hep-python": 1.0,
        "math-prm": 0.5,
        "mt-bench-hard": 1.0,
        "refusals-dangerous": 0.0,
    }
    # Reasoning: math-prm weighs 984, hep-python 164
    assert res.sections["Reasoning"] == pytest.approx((0.5 * 984 + 1.0 * 164) / (984 + 164))
    assert res.sections["Chat"] == 0.5 and res.sections["Chat Hard"] == 1.0
    assert res.sections["Safety"] == 0.0
    assert res.sections["score"] == pytest.approx((0.5 + 1.0 + 0.0 + res.sections["Reasoning"]) / 4)
    obs = evaluate_rewardbench(model, char_tokenizer, path, weighting="observed")
    assert obs.sections["Reasoning"] == pytest.approx((0.5 * 2 + 1.0 * 1) / 3)


def test_rewardbench_scores_weighting_closed_form():
    acc = {s: 1.0 for s in REWARDBENCH_SECTIONS["Reasoning"]}
    acc["math-prm"] = 0.0
    # math is upweighted to equal all of code: Reasoning = 1/2 exactly
    assert rewardbench_scores(acc)["Reasoning"] == pytest.approx(0.5)
    assert REWARDBENCH_EXAMPLE_COUNTS["math-prm"] == sum(
        REWARDBENCH_EXAMPLE_COUNTS[s] for s in REWARDBENCH_SECTIONS["Reasoning"] if s != "math-prm"
    )
    with pytest.raises(ValueError, match="weighting"):
        rewardbench_scores(acc, weighting="uniform")
    with pytest.raises(ValueError, match="subset_counts"):
        rewardbench_scores(acc, weighting="observed")


def test_pairwise_accuracy_and_bad_input(tmp_path):
    out = pairwise_accuracy(
        torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 3.0]), ["x", "x", "y"]
    )
    assert out == {"overall": pytest.approx(1 / 3), "x": 0.5, "y": 0.0}
    with pytest.raises(ValueError, match="categories"):
        pairwise_accuracy(torch.ones(2), torch.zeros(2), ["x"])
    with pytest.raises(FileNotFoundError, match="data_files"):
        load_preference_pairs(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"chosen": "a"}) + "\n")
    with pytest.raises(ValueError, match="rejected"):
        load_preference_pairs(bad)
    with pytest.raises(ValueError, match="extension"):
        load_preference_pairs(tmp_path / "x.txt")


class Recorder(torch.nn.Module):
    """Records the token ids it is called with; reward 0."""

    def __init__(self):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(()))
        self.calls = []

    def forward(self, input_ids, attention_mask=None):
        self.calls.append([row[m.bool()].tolist() for row, m in zip(input_ids, attention_mask)])
        return SimpleNamespace(logits=torch.zeros(input_ids.shape[0], 1) + self.dummy)


def test_score_pairs_builds_sequences_as_trl_and_rewardbench(char_tokenizer):
    from icml26_normbt import score_pairs

    rows = [{"prompt": "q:", "chosen": "ab", "rejected": "b"}]
    eos = char_tokenizer.eos_token_id
    model = Recorder()
    score_pairs(model, char_tokenizer, rows)  # no chat template: TRL's prompt + response + EOS
    seqs = model.calls[-1]
    assert seqs[0] == char_tokenizer("q:ab")["input_ids"] + [eos]
    assert seqs[1][-1] == eos
    # with a chat template (RewardBench): user turn + assistant turn through the template
    char_tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }};{% endfor %}"
    )
    score_pairs(model, char_tokenizer, rows)
    msgs = [{"role": "user", "content": "q:"}, {"role": "assistant", "content": "ab"}]
    expect = char_tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
    assert model.calls[-1][0] == list(expect)
    score_pairs(model, char_tokenizer, rows, chat_template=False)
    assert model.calls[-1][0] == seqs[0]
    # conversational rows always go through the template
    conv = [{"prompt": msgs[:1], "chosen": msgs[1:], "rejected": msgs[1:]}]
    score_pairs(model, char_tokenizer, conv)
    assert model.calls[-1][0] == list(expect)
