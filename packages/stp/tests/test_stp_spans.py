"""Message spans from offsets == spans from the official decode-and-search, three tokenizers."""

from __future__ import annotations

import pytest
from icml26_stp import message_spans, tokenize_messages

CONVS = [
    [
        {"role": "system", "content": "convert natural language to regular expression"},
        {"role": "user", "content": "lines containing the word dog followed by a number"},
        {"role": "assistant", "content": ".*(dog).*[0-9].*"},
    ],
    [
        {"role": "user", "content": "lines that start with a vowel"},
        {"role": "assistant", "content": "([AEIOUaeiou]).*"},
    ],
    [  # the user text also occurs inside the assistant text and in the system prompt
        {"role": "system", "content": "abc"},
        {"role": "user", "content": "abc"},
        {"role": "assistant", "content": "abc before def"},
    ],
    [  # multi-turn: STP pairs the LAST user message before the last assistant message
        {"role": "system", "content": "convert natural language to regular expression"},
        {"role": "user", "content": "lines that start with a vowel"},
        {"role": "assistant", "content": "([AEIOUaeiou]).*"},
        {"role": "user", "content": "items with at least 3 characters"},
        {"role": "assistant", "content": ".*(abc).*"},
    ],
]


def official_first_occurrence(tok, content, input_ids):
    """The official `create_masked_labels` search: first occurrence, [start, end)."""
    toks = tok.encode(content, add_special_tokens=False)
    dc = [tok.decode(t) for t in toks]
    di = [tok.decode(t) for t in input_ids]
    for i in range(len(input_ids) - len(toks) + 1):
        if di[i : i + len(toks)] == dc:
            return i, i + len(toks)
    raise AssertionError("not found")


def official_find_start_end(tok, content, input_ids):
    """Transcription of the official search: encode the content alone, decode token by
    token, last occurrence in the decoded sequence; returns the (i - 1, i + L - 1) pair."""
    toks = tok.encode(content, add_special_tokens=False)
    dc = [tok.decode(t) for t in toks]
    di = [tok.decode(t) for t in input_ids]
    for i in range(len(input_ids) - len(toks), -1, -1):
        if di[i : i + len(toks)] == dc:
            return i - 1, i + len(toks) - 1
    raise AssertionError("not found")


@pytest.mark.parametrize("conv", CONVS)
def test_offset_spans_equal_official_decode_search(tokenizer, conv):
    out = tokenize_messages(tokenizer, conv)
    ids = out["input_ids"]
    assert ids == tokenizer.apply_chat_template(conv, tokenize=True, return_dict=True)["input_ids"]
    (u0, u1), (a0, a1) = out["stp_spans"]
    ou = official_find_start_end(tokenizer, conv[-2]["content"], ids[:a0])  # before the answer
    oa = official_find_start_end(tokenizer, conv[-1]["content"], ids)
    assert (u0 - 1, u1 - 1) == ou
    assert (a0 - 1, a1 - 1) == oa
    assert tokenizer.decode(ids[a0:a1]).replace(" ", "") == conv[-1]["content"].replace(" ", "")
    want = [0] * len(ids)  # official create_masked_labels: every assistant message
    for m in conv:
        if m["role"] == "assistant":
            s0, s1 = official_first_occurrence(tokenizer, m["content"], ids)
            want[s0:s1] = [1] * (s1 - s0)
    assert out["assistant_masks"] == want
    assert message_spans(tokenizer, conv) == out["stp_spans"]


def test_template_that_hides_a_message_is_an_error(bpe_tokenizer):
    conv = CONVS[0]
    hide_user = (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] != 'user' %}"
        "<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endif %}{% endfor %}"
    )
    with pytest.raises(ValueError, match=r"messages`\[1\].*template hides"):
        tokenize_messages(bpe_tokenizer, conv, chat_template=hide_user)


def test_bad_conversations(bpe_tokenizer):
    with pytest.raises(ValueError, match="assistant"):
        tokenize_messages(bpe_tokenizer, [{"role": "user", "content": "abc"}])
    with pytest.raises(ValueError, match="user message"):
        tokenize_messages(bpe_tokenizer, [{"role": "assistant", "content": "abc"}])
    no_prefix = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    with pytest.raises(ValueError, match="token 0"):
        tokenize_messages(bpe_tokenizer, CONVS[1], chat_template=no_prefix)


def test_multi_turn_pairs_the_last_user_message_with_the_last_answer(bpe_tokenizer):
    conv = CONVS[3]
    out = tokenize_messages(bpe_tokenizer, conv)
    ids = out["input_ids"]
    (u0, u1), (a0, a1) = out["stp_spans"]
    # token text of each span is the content of messages[3] (user) and messages[4] (assistant)
    assert bpe_tokenizer.decode(ids[u0:u1]).replace(" ", "") == conv[3]["content"].replace(" ", "")
    assert bpe_tokenizer.decode(ids[a0:a1]).replace(" ", "") == conv[4]["content"].replace(" ", "")
    first_user = official_first_occurrence(bpe_tokenizer, conv[1]["content"], ids)
    assert u0 > first_user[1]  # after the first exchange, not the first user message
    first_answer = official_first_occurrence(bpe_tokenizer, conv[2]["content"], ids)
    assert first_answer[1] <= u0
    mask = out["assistant_masks"]
    assert all(mask[first_answer[0] : first_answer[1]]) and all(mask[a0:a1])
    assert sum(mask) == (first_answer[1] - first_answer[0]) + (a1 - a0)
