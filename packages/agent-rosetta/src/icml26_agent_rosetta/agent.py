"""Policies and the episode loop.

A policy is any callable ``policy(messages) -> reply`` over an OpenAI-style chat history
(``[{"role": "system" | "user" | "assistant" | "tool", "content": str, ...}, ...]``). The reply
is text, or an assistant message with ``tool_calls`` (function calling): then the assistant
turn goes back into the history as that message, ids and all, and the observation as a
``{"role": "tool", "tool_call_id": ...}`` message. Several tool calls in one turn are refused
(``RosettaEnv.reject``: one reply that cannot be parsed), each call answered with the error,
since the environment takes one action at a time. An LLM client
(``icml26_agent_rosetta.openai_policy.OpenAIChatPolicy``, extra ``[openai]``), a script, or the
noisy scripted agent of the benchmark (``NoisyPolicy``).

``NoisyPolicy`` is the error model shared by both benchmark arms: it means to take a fixed
plan of actions and writes each one in the environment's format, but every *decision* it
writes (a JSON leaf of the arguments, an action name, an XML element of a whole protocol) is
corrupted independently with probability ``p``. A corruption is a schema mistake (misspelt
key, tag or attribute; wrong type), a semantic one (residue out of range, unknown residue
type, dangling reference) or a silent one (a valid but different value).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .actions import BackboneChange, GoBackToStep, RotamerChange
from .compile import compile_protocol

Message = dict[str, Any]
Reply = str | dict[str, Any]  # text, or an assistant message with "tool_calls"
Policy = Callable[[list[Message]], Reply]

SYSTEM_PROMPT = (
    "You operate Rosetta through a structured environment to design proteins. "
    "Read the task and each observation, then reply with exactly one action in the format asked."
)


@dataclass
class ScriptedPolicy:
    """Replies from a fixed list, in order (for tests); raises when it runs out."""

    replies: Sequence[str]
    i: int = 0

    def __call__(self, messages: list[Message]) -> str:
        if self.i >= len(self.replies):
            raise RuntimeError("ScriptedPolicy ran out of replies")
        self.i += 1
        return self.replies[self.i - 1]


def tool_call_text(call: Mapping[str, Any]) -> str:
    """One OpenAI tool call as the environment's JSON reply ``{"action", "arguments"}``."""
    fn = call.get("function") or {}
    return json.dumps({"action": fn.get("name"), "arguments": fn.get("arguments")})


def run_episode(env: Any, policy: Policy, *, max_turns: int | None = None) -> dict[str, Any]:
    """Reset ``env`` and let ``policy`` act until ``max_steps`` steps are spent (or the
    episode is stopped, official accounting).

    Returns ``messages``, ``steps``, ``turns``, ``valid_steps``, ``valid_rate`` (valid / steps),
    ``stopped`` and ``best`` (the task's best feasible primary metric).
    """
    obs, info = env.reset()
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": obs},
    ]
    limit = max_turns if max_turns is not None else 8 * env.task.max_steps
    truncated = terminated = False
    while not (truncated or terminated) and info["turns"] < limit:
        reply = policy(messages)
        calls = reply.get("tool_calls") or [] if isinstance(reply, dict) else []
        if not calls:
            text = reply.get("content") or "" if isinstance(reply, dict) else reply
            messages.append({"role": "assistant", "content": text})
            obs, _, terminated, truncated, info = env.step(text)
            messages.append({"role": "user", "content": obs})
            continue
        assert isinstance(reply, dict)
        messages.append(
            {"role": "assistant", "content": reply.get("content"), "tool_calls": list(calls)}
        )
        if len(calls) > 1:
            obs, _, terminated, truncated, info = env.reject(
                f"{len(calls)} parallel tool calls in one turn; the environment takes one "
                "action at a time: call exactly one tool"
            )
        else:
            obs, _, terminated, truncated, info = env.step(tool_call_text(calls[0]))
        for c in calls:  # every tool call gets its answer, by id
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": obs})
    steps = max(info["step"], 1)
    return {
        "messages": messages,
        "steps": info["step"],
        "turns": info["turns"],
        "valid_steps": info["n_valid"],
        "valid_rate": info["n_valid"] / steps,
        "stopped": bool(info.get("stop", False)),
        "best": env.best(),
    }


# ---------------------------------------------------------------------------------------------
# the noisy scripted agent (benchmark error model)

_BAD_RESIDUE = "XAA"


def _misspell(s: str, rng: np.random.Generator) -> str:
    if len(s) < 2:
        return s + "_"
    i = int(rng.integers(len(s) - 1))
    return s[:i] + s[i + 1] + s[i] + s[i + 2 :] if s[i] != s[i + 1] else s[:i] + s[i + 1 :]


def _corrupt_leaf(key: str, value: Any, n_res: int, rng: np.random.Generator) -> tuple[str, Any]:
    """One mistake on one argument leaf: (key, value) -> (key', value')."""
    kind = int(rng.integers(4))
    if kind == 0:  # schema: misspelt key
        return _misspell(key, rng), value
    if kind == 1:  # schema: wrong type
        return key, "a few" if not isinstance(value, str) else {"value": value}
    if kind == 2:  # semantic: out of range / unknown residue
        if key == "resnums":
            return key, f"1-{n_res + 3}"
        if isinstance(value, str) and len(value) == 3 and value.isupper():
            return key, _BAD_RESIDUE
        if isinstance(value, bool):
            return key, "maybe"
        if isinstance(value, int | float):
            return key, -abs(value) - 1
        return key, _misspell(value, rng) if isinstance(value, str) else value
    # silent: a valid but different value
    if isinstance(value, bool):
        return key, value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return key, type(value)(max(1, value * 2)) if value else value
    return key, value


def corrupt_arguments(args: Any, p: float, n_res: int, rng: np.random.Generator) -> Any:
    """Walk a JSON argument tree; each leaf is corrupted with probability p."""
    if isinstance(args, dict):
        out = {}
        for k, v in args.items():
            if isinstance(v, dict | list):
                out[k] = corrupt_arguments(v, p, n_res, rng)
            elif rng.random() < p:
                k2, v2 = _corrupt_leaf(k, v, n_res, rng)
                out[k2] = v2
            else:
                out[k] = v
        return out
    if isinstance(args, list):
        res = []
        for v in args:
            if isinstance(v, dict | list):
                res.append(corrupt_arguments(v, p, n_res, rng))
            elif rng.random() < p:
                res.append(_corrupt_leaf("item", v, n_res, rng)[1])
            else:
                res.append(v)
        return res
    return args


def corrupt_protocol(xml: str, p: float, n_res: int, rng: np.random.Generator) -> str:
    """Each element of a protocol is corrupted with probability p (tag, attribute, reference,
    value or a silent change of a number)."""
    root = ET.fromstring(xml)
    names = [el.get("name") for el in root.iter() if el.get("name")]
    for el in list(root.iter()):
        if rng.random() >= p:
            continue
        kind = int(rng.integers(4))
        attrs = [a for a in el.attrib if a != "name"]
        if kind == 0 or not attrs:  # misspelt tag
            el.tag = _misspell(el.tag, rng)
            continue
        a = attrs[int(rng.integers(len(attrs)))]
        v = el.attrib[a]
        if kind == 1:  # misspelt attribute
            del el.attrib[a]
            el.set(_misspell(a, rng), v)
        elif kind == 2:  # semantic: dangling reference, out of range, unknown residue
            if v in names or a in ("selector", "selectors", "mover", "scorefxn", "task_operations"):
                el.set(a, v + "_x")
            elif a == "resnums":
                el.set(a, f"1-{n_res + 3}")
            elif a in ("base_types", "residue_name3"):
                el.set(a, _BAD_RESIDUE)
            else:
                el.set(a, "-1")
        else:  # silent: a number doubled, anything else kept
            try:
                el.set(a, repr(float(v) * 2) if "." in v else str(int(v) * 2))
            except ValueError:
                pass
    return ET.tostring(root, encoding="unicode")


def to_arguments(action: RotamerChange | BackboneChange | GoBackToStep) -> dict[str, Any]:
    """The arguments an agent would write for ``action`` (defaults left out)."""
    full = action.model_dump(mode="json", exclude={"action"})
    fields = type(action).model_fields
    return {
        k: v
        for k, v in full.items()
        if fields[k].is_required() or v != fields[k].get_default(call_default_factory=True)
    }


def run_reply(name: str, args: dict[str, Any]) -> str:
    """``<action tag="run">`` with one child per argument (JSON text for structured values)."""
    kids = "".join(
        f"<{k}>{v if isinstance(v, str) else json.dumps(v)}</{k}>" for k, v in args.items()
    )
    return f'<action tag="run"><name>{name}</name>{kids}</action>'


@dataclass
class NoisyPolicy:
    """A scripted agent that follows ``plan`` (cycled) and makes mistakes at rate ``p``.

    ``mode="structured"``: choose (the name is one decision) then run (each argument leaf is
    one decision). ``mode="protocol"``: every reply is the whole compiled protocol, each XML
    element one decision. Every retry rewrites the whole reply with fresh mistakes (no memory).
    """

    plan: Sequence[RotamerChange | BackboneChange]
    p: float
    n_res: int
    mode: str = "structured"
    seed: int = 0
    step: int = 0
    _phase: str = "choose"
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        if not 0 <= self.p <= 1:
            raise ValueError(f"p must be in [0, 1], got {self.p}")
        if self.mode not in ("structured", "protocol"):
            raise ValueError(f"mode must be 'structured' or 'protocol', got {self.mode!r}")
        self.rng = np.random.default_rng(self.seed)

    def __call__(self, messages: list[Message]) -> str:
        last = messages[-1]["content"]
        if len(messages) > 2:  # what did the environment make of the previous reply?
            if self.mode == "structured" and last.startswith("# "):
                self._phase = "run"  # the chosen action's documentation: fill the arguments
            elif last.startswith("Step ") or "No retries left" in last:
                self.step, self._phase = self.step + 1, "choose"  # the step is over
            # any other error: retry the same phase
        action = self.plan[self.step % len(self.plan)]
        if self.mode == "protocol":
            return corrupt_protocol(compile_protocol(action), self.p, self.n_res, self.rng)
        if self._phase == "choose":
            name = (
                action.action if self.rng.random() >= self.p else _misspell(action.action, self.rng)
            )
            return f'<action tag="choose"><name>{name}</name></action>'
        args = corrupt_arguments(to_arguments(action), self.p, self.n_res, self.rng)
        return run_reply(action.action, args)
