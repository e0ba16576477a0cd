"""Token spans of the user and assistant messages in a chat-templated sequence.

The official code finds a message by encoding its content alone and searching the decoded
tokens in the full sequence (`find_start_end`, last occurrence). Here the rendered chat text
is tokenized once with `return_offsets_mapping`, each message's characters are located in
order, and the tokens overlapping them form the span: no re-encoding, no ambiguity when the
same text occurs twice, and the result is the [start, end) range the official (i-1, i+L-1)
pair describes. Any HF fast tokenizer with a chat template works (duck-typed, no import).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["message_spans", "tokenize_messages"]


def _locate(text: str, messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Character range of each message's content in `text`, searched left to right."""
    out, cursor = [], 0
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, str):
            raise TypeError(
                f"`messages`[{i}]['content'] must be a str, got {type(content).__name__}"
            )
        needle = content.strip()
        at = text.find(needle, cursor) if needle else -1
        if at < 0:
            raise ValueError(
                f"`messages`[{i}] (role {m.get('role')!r}) does not appear in the chat-templated "
                "text: the template hides or rewrites this message, so its span is undefined"
            )
        out.append((at, at + len(needle)))
        cursor = at + len(needle)
    return out


def _pick(messages: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Index of the last assistant message and of the last user message before it."""
    roles = [m.get("role") for m in messages]
    if "assistant" not in roles:
        raise ValueError("`messages` needs an assistant message")
    a = len(roles) - 1 - roles[::-1].index("assistant")
    users = [i for i in range(a) if roles[i] == "user"]
    if not users:
        raise ValueError("`messages` needs a user message before the last assistant message")
    return users[-1], a


def tokenize_messages(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], **template_kwargs: Any
) -> dict[str, Any]:
    """Chat-template and tokenize `messages`; return input_ids, the spans and a label mask.

    Returns a dict with `input_ids` (list[int]), `stp_spans` ([[u0, u1], [a0, a1]], the
    half-open token ranges of the last user message before the last assistant message and
    of that assistant message) and `assistant_masks` (1 on the content tokens of every
    assistant message: the official NTP loss covers exactly those, `create_masked_labels`).
    Upstream reads messages[1] and messages[2] (single-turn data); for a multi-turn
    conversation the STP pair here is the final exchange.
    """
    if getattr(tokenizer, "chat_template", None) is None and "chat_template" not in template_kwargs:
        raise ValueError("`tokenizer` has no chat template (set tokenizer.chat_template)")
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("`tokenizer` must be a fast tokenizer (offset mappings are needed)")
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, **template_kwargs)
    chars = _locate(text, messages)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets: list[tuple[int, int]] = enc["offset_mapping"]

    def token_range(k: int) -> list[int]:  # [start, end) tokens overlapping message k
        c0, c1 = chars[k]
        toks = [j for j, (o0, o1) in enumerate(offsets) if o1 > o0 and o1 > c0 and o0 < c1]
        if not toks:
            raise ValueError(f"`messages`[{k}] covers no token after tokenization")
        return [toks[0], toks[-1] + 1]

    spans = [token_range(k) for k in _pick(messages)]
    if spans[0][0] < 1:
        raise ValueError(
            "the user message starts at token 0: STP needs one token before it (its anchor "
            "state); use a chat template that emits a prefix (BOS or a role header)"
        )
    mask = [0] * len(enc["input_ids"])
    for k, m in enumerate(messages):  # every assistant message, as `create_masked_labels`
        if m.get("role") == "assistant":
            a0, a1 = token_range(k)
            mask[a0:a1] = [1] * (a1 - a0)
    return {"input_ids": list(enc["input_ids"]), "stp_spans": spans, "assistant_masks": mask}


def message_spans(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], **template_kwargs: Any
) -> list[list[int]]:
    """[[user_start, user_end], [asst_start, asst_end]] token ranges (see `tokenize_messages`)."""
    out: list[list[int]] = tokenize_messages(tokenizer, messages, **template_kwargs)["stp_spans"]
    return out
