"""Offline tokenizers with a chat template (no network)."""

from __future__ import annotations

import pytest

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> "
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
CORPUS = [
    "lines containing the word dog followed by a number",
    "lines that start with a vowel and end with a letter",
    "convert natural language to regular expression",
    ".*(dog).*[0-9].* ([AEIOUaeiou]).*([A-Za-z]) (.*)(.*)",
    "items with at least 3 characters and the string abc before def",
]


def make_tokenizer(kind: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL)
    elif kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=SPECIAL)
    else:
        tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
        trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=SPECIAL)
        tok.decoder = decoders.WordPiece()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tok.train_from_iterator(CORPUS * 3, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=SPECIAL[4:],
    )
    fast.chat_template = TEMPLATE
    return fast


@pytest.fixture(scope="session", params=["wordlevel", "bpe", "wordpiece"])
def tokenizer(request):
    return make_tokenizer(request.param)


@pytest.fixture(scope="session")
def bpe_tokenizer():
    return make_tokenizer("bpe")
