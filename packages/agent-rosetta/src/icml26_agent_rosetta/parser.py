"""Reading what an LLM wrote: the two-phase action protocol, tolerant of the usual mess.

Accepted forms (the official environment uses the first):

- XML tags: ``<action tag="choose"><name>rotamer_change</name></action>`` then
  ``<action tag="run"><name>rotamer_change</name><design_selector>{...}</design_selector>...</action>``
  (one child per argument; a child's text is read as JSON when it looks like JSON);
- JSON: ``{"action": "rotamer_change", "arguments": {...}}`` (or ``name`` / ``args``), also inside
  a Markdown code fence or surrounded by prose, with trailing commas, single quotes or Python
  literals (``True``/``None``).

Every failure is a ``ParseError`` whose message says what was expected, so it can be fed back
to the agent verbatim (the official ``parsing_error_template`` / ``debug_template``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from .actions import ACTIONS, BackboneChange, GoBackToStep, RotamerChange


class ParseError(ValueError):
    """The reply could not be read as an action; ``str(err)`` is the message for the agent."""


@dataclass(frozen=True)
class ParsedReply:
    """One reply: ``tag`` is ``"choose"`` (name only) or ``"run"`` (name and arguments)."""

    tag: Literal["choose", "run"]
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


_ACTION_XML = re.compile(r"<action\b([^>]*)>(.*?)</action\s*>", re.S | re.I)
_TAG_ATTR = re.compile(r"""tag\s*=\s*["']?(\w+)""", re.I)
_CHILD = re.compile(r"<([A-Za-z_][\w\-]*)\s*>(.*?)</\1\s*>", re.S)
_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _scalar(text: str) -> Any:
    s = text.strip()
    if not s:
        return ""
    if (
        s[0] in "[{"
        or s in ("true", "false", "null")
        or re.fullmatch(r"-?\d+(\.\d+)?([eE]-?\d+)?", s)
    ):
        try:
            return _loads(s)
        except ValueError:
            return s
    return s


def _loads(s: str) -> Any:
    """JSON, then JSON without trailing commas, then a Python literal."""
    for candidate in (s, _TRAILING_COMMA.sub(r"\1", s)):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    try:
        return ast.literal_eval(_TRAILING_COMMA.sub(r"\1", s))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise ValueError(str(exc)) from None


def _objects(text: str) -> list[str]:
    """Balanced ``{...}`` spans, outermost first, skipping braces inside strings."""
    spans, depth, start, quote, esc = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'" and depth:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def _from_json(obj: dict[str, Any], default_tag: str) -> ParsedReply:
    name = obj.get("action", obj.get("name", obj.get("tool")))
    if not isinstance(name, str):
        raise ParseError(
            'the JSON object needs "action": "<name>" (one of ' + ", ".join(ACTIONS) + ")"
        )
    args = obj.get("arguments", obj.get("args", obj.get("parameters")))
    if isinstance(args, str):  # OpenAI tool calls carry arguments as a JSON string
        try:
            args = _loads(args)
        except ValueError:
            raise ParseError(f'"arguments" is a string that is not JSON: {args[:80]!r}') from None
    if name == "choose_action":  # the function-calling form of phase 1
        chosen = args.get("name") if isinstance(args, dict) else None
        if not isinstance(chosen, str):
            raise ParseError(
                'choose_action needs {"name": "<action>"}; one of ' + ", ".join(ACTIONS)
            )
        return ParsedReply("choose", chosen.strip())
    tag = obj.get("tag", "run" if args is not None else default_tag)
    if tag not in ("choose", "run"):
        raise ParseError(f'"tag" must be "choose" or "run", got {tag!r}')
    if args is None:
        args = {k: v for k, v in obj.items() if k not in ("action", "name", "tool", "tag")}
    if not isinstance(args, dict):
        raise ParseError(f'"arguments" must be an object, got {type(args).__name__}')
    return ParsedReply(tag, name.strip(), args)


def parse_reply(text: str, *, default_tag: Literal["choose", "run"] = "run") -> ParsedReply:
    """Find the action in an LLM reply (XML tags or JSON); ``ParseError`` says what is wrong."""
    if not isinstance(text, str):
        raise ParseError(f"the reply must be text, got {type(text).__name__}")
    m = _ACTION_XML.search(text)
    if m:
        tm = _TAG_ATTR.search(m.group(1))
        tag = tm.group(1).lower() if tm else default_tag
        if tag not in ("choose", "run"):
            raise ParseError(f'<action tag="{tag}">: the tag must be "choose" or "run"')
        children = {k: _scalar(v) for k, v in _CHILD.findall(m.group(2))}
        name = children.pop("name", None)
        if not isinstance(name, str) or not name:
            raise ParseError("<action> needs a <name>...</name> child with the action's name")
        return ParsedReply(tag, name.strip(), children)  # type: ignore[arg-type]
    blocks = [*_FENCE.findall(text), text]
    errors = []
    for block in blocks:
        for span in _objects(block):
            try:
                obj = _loads(span)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            if isinstance(obj, dict):
                return _from_json(obj, default_tag)
    if errors:
        raise ParseError(f"found a {{...}} block but could not read it as JSON ({errors[0][:120]})")
    raise ParseError(
        'no action found: reply with <action tag="choose"><name>NAME</name></action> or a JSON '
        'object {"action": NAME, "arguments": {...}}; NAME is one of ' + ", ".join(ACTIONS)
    )


def format_validation_error(exc: ValidationError) -> str:
    """pydantic errors as one line per argument path, the way an agent can act on them."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown argument (not in the schema)"
        elif err["type"] == "missing":
            msg = "required argument is missing"
        elif err["type"] in ("union_tag_not_found", "union_tag_invalid"):
            ctx = err.get("ctx", {})
            msg = (
                f'needs "{ctx.get("discriminator", "type").strip(chr(39))}" set to one of '
                f"{ctx.get('expected_tags', 'index, layer, residue_name, not, and, or')}"
            )
        lines.append(f"- {loc}: {msg}")
    return "invalid arguments:\n" + "\n".join(lines)


def validate_action(
    name: str, arguments: dict[str, Any]
) -> RotamerChange | BackboneChange | GoBackToStep:
    """Arguments -> the action model; ``ParseError`` listing each bad argument otherwise."""
    if name not in ACTIONS:
        raise ParseError(f"unknown action {name!r}; choose one of {', '.join(ACTIONS)}")
    args = {k: v for k, v in arguments.items() if k != "action"}
    try:
        return ACTIONS[name].model_validate(args)
    except ValidationError as exc:
        raise ParseError(format_validation_error(exc)) from None
