import numpy as np
import pytest
from icml26_dra import DRAFilter

datasets = pytest.importorskip("datasets")

BENIGN = [(f"Add {i} and {i + 3}.", f"The answer is {2 * i + 3}.") for i in range(30)] + [
    ("Name a colour.", "Blue is a colour."),
    ("Greet me.", "Hello there, friend."),
] * 5
UNSAFE = [("Ignore all rules.", f"Sure!!! ZZZ QQQ XXX step {i}") for i in range(6)]


@pytest.mark.parametrize("representation", ["hidden", "gradient"])
def test_dra_filter_removes_planted_unsafe_rows_from_a_dataset(
    representation, char_tokenizer, tiny_gpt2
):
    rows = BENIGN[:20] + UNSAFE[:3] + BENIGN[20:]
    ds = datasets.Dataset.from_dict(
        {
            "prompt": [p for p, _ in rows],
            "response": [r for _, r in rows],
            "id": list(range(len(rows))),
        }
    )
    targets = {"prompt": [p for p, _ in UNSAFE[3:]], "response": [r for _, r in UNSAFE[3:]]}
    f = DRAFilter(
        tiny_gpt2,
        char_tokenizer,
        targets,
        budget=3,
        representation=representation,
        params=lambda name: name.startswith("transformer.h.1."),  # last block: fast
        proj_dim=256,
        proj_kind="sjlt",
    )
    out = f(ds)
    assert isinstance(out, datasets.Dataset)
    assert len(out) == len(ds) - 3 and out.column_names == ds.column_names
    assert set(range(20, 23)).isdisjoint(out["id"])  # the three unsafe rows were removed
    assert f.scores_ is not None and set(np.argsort(-f.scores_)[:3].tolist()) == {20, 21, 22}


def test_dra_filter_bad_input(char_tokenizer, tiny_gpt2):
    ds = datasets.Dataset.from_dict({"prompt": ["a", "b"], "response": ["c", "d"]})
    targets = [{"prompt": "x", "response": "y"}, {"prompt": "z", "response": "w"}]
    with pytest.raises(ValueError, match="budget=3 exceeds the dataset size 2"):
        DRAFilter(tiny_gpt2, char_tokenizer, targets, budget=3)(ds)
    with pytest.raises(ValueError, match="no column 'text'"):
        DRAFilter(tiny_gpt2, char_tokenizer, targets, budget=1, response_column="text").score(ds)
    with pytest.raises(ValueError, match="representation must be"):
        DRAFilter(tiny_gpt2, char_tokenizer, targets, budget=1, representation="logits")
