"""A deterministic NL -> regex task in the style of NL-RX-SYNTH (Locascio et al., 2016).

NL-RX-SYNTH (the paper's 16x dataset) pairs grammar-generated English descriptions with
regexes. Its files live in the official repo, not on PyPI, so this module regenerates a task
of the same shape from a small grammar: character classes, words, and the NL-RX templates
"lines containing / starting with / ending with X", "X before Y", "X or Y", "at least n X",
"X followed by Y". The regexes use Python `re` syntax (no NL-RX `&` / `~` operators), so
two scores are available: exact match (the paper's metric) and `regex_equivalent`, a
bounded-language check (same accept/reject on every string up to `max_len` characters over
an alphabet that hits every literal and class in both regexes).
"""

from __future__ import annotations

import itertools
import random
import re

__all__ = ["SYSTEM_PROMPT", "nl_regex_pairs", "regex_equivalent", "to_messages"]

SYSTEM_PROMPT = "Convert natural language to regular expression."

_CLASSES = {
    "a letter": "[A-Za-z]",
    "a capital letter": "[A-Z]",
    "a lower-case letter": "[a-z]",
    "a vowel": "[AEIOUaeiou]",
    "a number": "[0-9]",
    "a character": ".",
}
_WORDS = [
    "dog", "truck", "ring", "lake", "tree", "bird", "rock", "moon",
    "sand", "fish", "gold", "wind", "lamp", "rain", "salt", "star",
]  # fmt: skip


def _atom(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        nl, rx = rng.choice(sorted(_CLASSES.items()))
        return nl, rx
    w = rng.choice(_WORDS)
    return f"the string '{w}'", f"({w})"


def _pair(rng: random.Random) -> tuple[str, str]:
    (n1, r1), (n2, r2) = _atom(rng), _atom(rng)
    k = rng.randint(2, 5)
    forms = [
        (f"lines containing {n1}", f".*{r1}.*"),
        (f"lines starting with {n1}", f"{r1}.*"),
        (f"lines ending with {n1}", f".*{r1}"),
        (f"lines containing {n1} before {n2}", f".*{r1}.*{r2}.*"),
        (f"lines containing {n1} or {n2}", f".*({r1}|{r2}).*"),
        (f"lines with at least {k} of {n1}", f"(.*{r1}.*){{{k},}}"),
        (f"lines with {n1} followed by {n2}", f".*{r1}{r2}.*"),
        (f"lines starting with {n1} and ending with {n2}", f"{r1}.*{r2}"),
        (f"lines ending with {n1} followed by {n2}", f".*{r1}{r2}"),
    ]
    return rng.choice(forms)


def nl_regex_pairs(
    n: int, *, seed: int = 0, exclude: set[str] | None = None
) -> list[tuple[str, str]]:
    """`n` distinct (description, regex) pairs, deterministic in `seed`; skips `exclude`d
    descriptions (use it to keep a test set disjoint). Thousands of distinct pairs exist."""
    if n < 0:
        raise ValueError(f"`n` must be >= 0, got {n}")
    rng = random.Random(seed)
    seen: set[str] = set(exclude or ())
    out: list[tuple[str, str]] = []
    misses = 0  # draws since the last new description: the grammar is exhausted long before
    for _ in range(200 * n + 1000):  # 50 * |seen| + 1000 of them (a coupon collector needs
        if len(out) == n:  # about |grammar| / remaining per new one), so stop there
            return out
        nl, rx = _pair(rng)
        if nl not in seen:
            seen.add(nl)
            out.append((nl, rx))
            misses = 0
        else:
            misses += 1
            if misses > 50 * len(seen) + 1000:
                break
    raise ValueError(f"the grammar cannot supply {n} distinct pairs beyond `exclude`")


def to_messages(nl: str, rx: str | None = None) -> list[dict[str, str]]:
    """Chat messages in the official synth format (system, user[, assistant])."""
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": nl}]
    if rx is not None:
        msgs.append({"role": "assistant", "content": rx})
    return msgs


def regex_equivalent(a: str, b: str, *, max_pieces: int = 4) -> bool:
    """Same accept/reject on every string of up to `max_pieces` pieces (bounded check).

    Pieces: each word literal of either regex, its first letter, and one witness per
    character class ('A', 'E', 'b', 'e', '7', '#'). Equal regexes are always equivalent;
    a regex that does not compile never is. Bounded: a difference that needs more pieces
    is missed (none does within this grammar, whose patterns use at most two atoms
    and a repeat count of at most 5).
    """
    if a == b:
        return True
    try:
        ra, rb = re.compile(a), re.compile(b)
    except re.error:
        return False
    words = set(re.findall(r"[a-z]{2,}", a + b))
    pieces = sorted(words | {w[0] for w in words} | {"A", "E", "b", "e", "7", "#"})
    for n in range(max_pieces + 1):
        for combo in itertools.product(pieces, repeat=n):
            s = "".join(combo)
            if (ra.fullmatch(s) is None) != (rb.fullmatch(s) is None):
                return False
    return True
