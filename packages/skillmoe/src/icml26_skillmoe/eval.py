"""Answer extraction and scoring, with upstream's semantics (``utils.py`` of Symbolic-MoE).

- multiple choice: the last ``X)`` in the text, else the last bare capital letter among the
  first ``num_choices`` letters, else ``"N/A"`` (upstream builds the character class as
  ``[A|B|C|D]``, which also matches ``|``; here it is ``[A-D]``);
- maths: the content of the last ``\\boxed{...}`` (braces balanced), else the whole text;
- equivalence: ``math-verify`` (upstream's three-way ``verify`` attempt) when installed
  (extra ``math``), else exact match after whitespace / ``$`` / parenthesis normalisation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "INVALID",
    "accuracy",
    "extract_answer",
    "extract_boxed",
    "extract_choice",
    "extract_number",
    "math_equiv",
]

INVALID = "N/A"


def extract_choice(text: str | None, num_choices: int = 4) -> str:
    """The chosen letter: last ``X)`` match, else last bare letter in ``A..`` (``num_choices``
    letters; upstream uses 10 for MMLU-Pro, 4 otherwise), else ``"N/A"``."""
    if not isinstance(num_choices, int) or not 1 <= num_choices <= 26:
        raise ValueError(f"num_choices must be an int in [1, 26], got {num_choices!r}")
    if not text:
        return INVALID
    letters = f"A-{chr(64 + num_choices)}"
    match = re.findall(f"([{letters}])\\)", text)
    if not match:
        match = re.findall(f"([{letters}])", text)
    return match[-1] if match else INVALID


def _last_boxed(text: str) -> str | None:
    idx = text.rfind("\\boxed")
    if idx < 0:
        idx = text.rfind("\\fbox")
        if idx < 0:
            return None
    depth = 0
    for i in range(idx, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[idx : i + 1]
    return None


def extract_boxed(text: str | None) -> str:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces; the whole
    text when there is none or it is unclosed (upstream's ``remove_boxed(last_boxed_only_string)``);
    ``"N/A"`` for empty text."""
    if not text:
        return INVALID
    box = _last_boxed(text)
    if box is None:
        return text
    for left in ("\\boxed{", "\\fbox{"):
        if box.startswith(left) and box.endswith("}"):
            return box[len(left) : -1]
    return box


def extract_number(text: str | None) -> float | None:
    """The last number in the text (``1,234.5`` -> 1234.5), or ``None``."""
    if not text:
        return None
    match = re.findall(r"-?[0-9][0-9,]*\.?[0-9]*", text)
    for m in reversed(match):
        try:
            return float(m.replace(",", ""))
        except ValueError:
            continue
    return None


def extract_answer(text: str | None, task: str = "choice", num_choices: int = 4) -> str:
    """``task="choice"``: :func:`extract_choice`; ``task="math"``: :func:`extract_boxed`."""
    if task == "choice":
        return extract_choice(text, num_choices)
    if task == "math":
        return extract_boxed(text)
    raise ValueError(f"task must be 'choice' or 'math', got {task!r}")


def _norm(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = s.replace("\\(", "").replace("\\)", "")
    s = re.sub(r"\s+", "", s)
    if len(s) >= 2 and s[0] == "(" and s[-1] == ")":
        s = s[1:-1]
    return s


def math_equiv(pred: str, gold: str) -> bool:
    """Whether ``pred`` and ``gold`` denote the same answer.

    With ``math-verify`` installed: true iff any of upstream's three attempts verifies
    (``$gold$`` vs ``$pred$``; raw; ``pred`` with ``\\(``/``\\)`` removed). Without it, or when
    it raises: normalised string equality (so ``(A)`` == ``A``, ``$12$`` == ``12``).
    ``"N/A"`` never matches."""
    pred, gold = str(pred), str(gold)
    if pred == INVALID:
        return False
    if _norm(pred) == _norm(gold):
        return True
    try:
        from math_verify import parse, verify
    except ImportError:
        return False
    try:
        return bool(
            verify(parse(f"${gold}$"), parse(f"${pred}$"))
            or verify(parse(gold), parse(pred))
            or verify(parse(gold), parse(pred.replace("\\(", "").replace("\\)", "")))
        )
    except Exception:  # math-verify raises on unparsable input; upstream counts it wrong
        return False


def accuracy(preds: Sequence[str], golds: Sequence[str]) -> float:
    if len(preds) != len(golds):
        raise ValueError(f"preds ({len(preds)}) and golds ({len(golds)}) differ in length")
    if not preds:
        raise ValueError("preds is empty")
    return sum(math_equiv(p, g) for p, g in zip(preds, golds)) / len(preds)
