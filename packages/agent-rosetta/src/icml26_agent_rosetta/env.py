"""``RosettaEnv``: the structured environment (two-phase actions, ensembles, Pareto, go-back).

One *step* is one action attempt. In the default ``structured`` mode it takes two phases:

1. the agent chooses an action by name (``<action tag="choose">``); the environment answers
   with that action's documentation (its schema, defaults and an example);
2. the agent fills the arguments (``<action tag="run">``); they are validated (schema, then
   task semantics: residue types the task has params for, selectors in range), compiled to a
   RosettaScripts protocol and run by the backend on every Pareto-optimal design of the
   current step, ``nstruct`` designs in all.

A failure in either phase returns a precise message (the official ``debug_template``) and the
agent retries, up to ``max_retries`` times per step (choose and run share the budget); then the
step is spent and counted invalid. A backend crash is a failure like any other: the trajectory
is never touched by a failed step. ``go_back_to_step(k)`` makes step k's Pareto designs
current again.

``step_accounting="official"`` counts as the official runner does (its ``global_step``): every
choose and every run is one step (a run the environment cannot apply -- a semantic error, a
backend crash -- included, after which the agent fixes the same action), ``max_steps`` bounds
them all (the official configs use 20), and a reply that cannot be parsed is retried; past the
retries the episode ends (``StopStep``: ``terminated`` is True, ``info["stop"]`` is True).
Deviation: the official ``max_parse_retries = N`` allows N replies in all, ``max_retries = N``
here allows N + 1 (the first one and N retries).

``mode="protocol"`` is the prompt-only baseline: every reply must be a whole RosettaScripts
protocol, with the same retry budget and the same backend. It is judged by ``parse_protocol``
(the inverse of the compiler), or with ``validate_xml=True`` by what RosettaScripts accepts
(``rosetta_xsd.validate_rosetta_xml``: the XSD, then parse-time checks; extra ``[xsd]``), and
then read into an action for backends that are not Rosetta (``n_uninterpretable`` counts
protocols Rosetta would accept that ``parse_protocol`` cannot read).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from .actions import (
    ACTIONS,
    CANONICAL,
    AndSelector,
    BackboneChange,
    GoBackToStep,
    NotSelector,
    OrSelector,
    ResidueNameSelector,
    RotamerChange,
    Selector,
    resolve_selector,
)
from .compile import ProtocolError, compile_protocol, parse_protocol
from .metrics import Design, Sense, kabsch_rmsd, pareto_front
from .parser import ParseError, parse_reply, validate_action

AnyAction = RotamerChange | BackboneChange | GoBackToStep


@runtime_checkable
class Backend(Protocol):
    """What runs a protocol: Rosetta itself, PyRosetta, OpenMM or the HP lattice model."""

    name: str

    def layers(self, design: Design) -> list[str]:
        """Per residue: ``"core"``, ``"boundary"`` or ``"surface"`` (for ``Layer`` selectors)."""
        ...

    def score(self, design: Design) -> dict[str, float]:
        """Metrics of one design; must include ``total_score``."""
        ...

    def run(
        self,
        action: RotamerChange | BackboneChange,
        protocol: str,
        parents: Sequence[Design],
        nstruct: int,
        seed: int,
        palette: Sequence[str],
    ) -> list[Design]:
        """``nstruct`` new designs from ``parents`` (scored with ``score``)."""
        ...


@dataclass(frozen=True)
class Task:
    """A design task: the start, the objectives of the Pareto front, what counts as feasible.

    ``objectives`` maps metric -> ``"min"``/``"max"``; ``rmsd_to_init`` (Kabsch CA RMSD to
    the start) is computed by the environment, the rest by the backend and ``extra_metrics``.
    ``primary`` under ``constraints`` (metric <= bound) is the task's headline number.
    """

    name: str
    description: str
    start: Design
    objectives: Mapping[str, Sense]
    primary: str = "total_score"
    constraints: Mapping[str, float] = field(default_factory=dict)
    ncaa: tuple[str, ...] = ()  # non-canonical types the task has params for (e.g. TRF)
    extra_metrics: Callable[[Design], dict[str, float]] | None = None
    nstruct: int = 16  # designs per step (the official runs use 128)
    max_steps: int = 20

    def __post_init__(self) -> None:
        if self.primary not in self.objectives:
            raise ValueError(
                f"primary {self.primary!r} must be one of the objectives {list(self.objectives)}"
            )
        if self.nstruct < 1 or self.max_steps < 1:
            raise ValueError("nstruct and max_steps must be >= 1")


@dataclass
class StepRecord:
    """One step of the trajectory (step 0 is the scored start)."""

    index: int
    action: AnyAction | None
    protocol: str | None
    designs: list[Design]
    front: list[int]  # indices into designs of the Pareto-optimal ones
    ok: bool
    errors: list[str] = field(default_factory=list)


class ActionError(ValueError):
    """An action that is well-formed but cannot apply to this task or these designs."""


def _selectors(sel: Selector) -> list[Selector]:
    out = [sel]
    if isinstance(sel, NotSelector):
        out += _selectors(sel.selector)
    elif isinstance(sel, AndSelector | OrSelector):
        for s in sel.selectors:
            out += _selectors(s)
    return out


def action_docs(name: str) -> str:
    """Phase-2 documentation of one action: what it does, its arguments, an example."""
    model = ACTIONS[name]
    schema = model.model_json_schema()
    schema["properties"].pop("action", None)
    lines = [f"# {name}", inspect.cleandoc(model.__doc__ or ""), "", "Arguments (JSON schema):"]
    lines.append(json.dumps({k: v for k, v in schema.items() if k != "title"}, indent=1))
    lines += [
        "",
        "Reply with:",
        f'<action tag="run"><name>{name}</name>',
        EXAMPLES[name],
        "</action>",
    ]
    return "\n".join(lines)


EXAMPLES = {
    "rotamer_change": (
        '<design_selector>{"type": "layer", "core": true}</design_selector>\n'
        "<prohibit>CYS,PRO</prohibit>\n"
        '<composition_penalties>[{"types": ["LEU", "ILE", "VAL"], "target": 3, "weight": 1.0}]'
        "</composition_penalties>"
    ),
    "backbone_change": (
        '<mover>small</mover>\n<selector>{"type": "index", "resnums": "2-6"}</selector>\n'
        "<nmoves>100</nmoves><angle_max>6</angle_max><temperature>0.5</temperature>"
    ),
    "go_back_to_step": "<step>0</step>",
}


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI-style function tools: ``choose_action`` then one tool per action."""
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {
                "name": "choose_action",
                "description": "Phase 1: choose the next action; its documentation comes back.",
                "parameters": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "enum": list(ACTIONS)}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    for name, model in ACTIONS.items():
        schema = model.model_json_schema()
        schema["properties"].pop("action", None)
        schema.pop("title", None)
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": "Phase 2: "
                    + inspect.cleandoc(model.__doc__ or "").split("\n")[0],
                    "parameters": schema,
                },
            }
        )
    return tools


class RosettaEnv:
    """Gymnasium-style environment over text: ``reset() -> (obs, info)``,
    ``step(reply) -> (obs, reward, terminated, truncated, info)``.

    ``reward`` is the improvement of the best feasible ``task.primary`` (positive is better).
    ``info``: ``phase``, ``step`` (actions attempted), ``valid`` (True when an action ran,
    False when a step was spent without one, None mid-step), ``error``, ``best``.
    """

    def __init__(
        self,
        task: Task,
        backend: Backend,
        *,
        max_retries: int = 2,
        mode: Literal["structured", "protocol"] = "structured",
        seed: int = 0,
        summary_top_k: int = 5,
        step_accounting: Literal["action", "official"] = "action",
        validate_xml: bool = False,
    ) -> None:
        if not isinstance(task, Task):
            raise TypeError(f"task must be a Task, got {type(task).__name__}")
        if not isinstance(backend, Backend):
            raise TypeError(
                f"backend must implement the Backend protocol (layers, score, run), got {type(backend).__name__}"
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if mode not in ("structured", "protocol"):
            raise ValueError(f"mode must be 'structured' or 'protocol', got {mode!r}")
        if step_accounting not in ("action", "official"):
            raise ValueError(
                f"step_accounting must be 'action' or 'official', got {step_accounting!r}"
            )
        self.step_accounting = step_accounting
        self.validate_xml = validate_xml
        self.task, self.backend, self.max_retries, self.mode = task, backend, max_retries, mode
        self.seed, self.summary_top_k = seed, summary_top_k
        self.palette = (*CANONICAL, *task.ncaa)
        self.reset()

    # --- state ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if seed is not None:
            self.seed = seed
        start = self._scored([self.task.start])
        self.trajectory: list[StepRecord] = [
            StepRecord(0, None, None, start, self._front(start), True)
        ]
        self.current = 0  # the step whose Pareto designs the next action applies to
        self.steps = 0  # actions attempted
        self.turns = 0  # replies read
        self.phase: Literal["choose", "run"] = "choose"
        self.pending: str | None = None
        self.retries = 0  # failed replies in the current step (both phases together)
        self.n_valid = 0
        self.n_uninterpretable = 0
        self.stopped = False  # official accounting: a parse failure past the retries (StopStep)
        self._errors: list[str] = []
        return self.intro(), self._info(None, None)

    @property
    def parents(self) -> list[Design]:
        rec = self.trajectory[self.current]
        return [rec.designs[i] for i in rec.front]

    def best(self) -> float | None:
        """Best ``primary`` over every design so far that meets the constraints."""
        sign = 1.0 if self.task.objectives[self.task.primary] == "min" else -1.0
        vals = [
            d.metrics[self.task.primary]
            for rec in self.trajectory
            for d in rec.designs
            if all(d.metrics[k] <= b for k, b in self.task.constraints.items())
        ]
        return None if not vals else sign * min(sign * v for v in vals)

    def intro(self) -> str:
        if self.mode == "protocol":
            how = (
                "Reply each step with one complete RosettaScripts XML protocol "
                "(<ROSETTASCRIPTS>...</ROSETTASCRIPTS>) using FastDesign, Small, Shear or Backrub."
            )
        else:
            how = (
                'Each step: first choose an action with <action tag="choose"><name>NAME</name></action>; '
                "you will then see its documentation and fill its arguments."
            )
        return (
            f"Task {self.task.name}: {self.task.description}\n"
            f"Objectives: {', '.join(f'{k} ({v})' for k, v in self.task.objectives.items())}.\n"
            f"Actions: {', '.join(ACTIONS)}. {how}\n"
            f"You have {self.task.max_steps} steps.\n\n" + self.summary(self.trajectory[0])
        )

    # --- one reply ------------------------------------------------------------------------------
    def step(self, reply: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.stopped:
            raise RuntimeError(
                "the episode was stopped (StopStep after a parse failure); call reset()"
            )
        if self.steps >= self.task.max_steps:
            raise RuntimeError("the episode is over (max_steps reached); call reset()")
        self.turns += 1
        before = self.best()
        try:
            if self.mode == "protocol":
                action = self._read_protocol(reply)
            elif self.phase == "choose":
                obs = self._choose(reply)
                if self.step_accounting == "official":  # a choose is a global step
                    self.steps += 1
                    self.retries = 0
                truncated = self.steps >= self.task.max_steps
                return obs, 0.0, False, truncated, self._info(None, None)
            else:
                action = self._read_run(reply)
        except (ParseError, ProtocolError) as exc:
            return self._fail(str(exc), parse=True)
        try:
            obs = self._run(action)
        except (ActionError, ParseError, ProtocolError) as exc:
            return self._fail(str(exc), parse=False)
        except Exception as exc:  # a backend crash mid-episode: report, keep the trajectory
            return self._fail(
                f"the backend failed while running the protocol: {type(exc).__name__}: {exc}",
                parse=False,
            )
        after = self.best()
        reward = 0.0
        if after is not None:
            sign = 1.0 if self.task.objectives[self.task.primary] == "min" else -1.0
            reward = 0.0 if before is None else sign * (before - after)
        truncated = self.steps >= self.task.max_steps
        return obs, reward, False, truncated, self._info(True, None)

    def reject(self, error: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Refuse a reply before parsing it (e.g. several parallel tool calls in one turn):
        it counts as one reply that could not be parsed."""
        if self.stopped or self.steps >= self.task.max_steps:
            raise RuntimeError("the episode is over; call reset()")
        self.turns += 1
        return self._fail(error, parse=True)

    def _fail(self, msg: str, *, parse: bool) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._errors.append(msg)
        if self.step_accounting == "official":
            if not parse:  # the run happened and failed: one global step, fix the same action
                self.steps += 1
                self.retries = 0
                truncated = self.steps >= self.task.max_steps
                obs = f"Error: {msg}\nThe action failed (this step is spent). Write the corrected action."
                return obs, 0.0, False, truncated, self._info(False, msg)
            self.retries += 1
            if self.retries > self.max_retries:  # StopStep: the official run ends here
                self.stopped = True
                obs = f"Error: {msg}\nNo retries left: the episode is stopped."
                return obs, 0.0, True, False, self._info(False, msg)
            obs = f"Error: {msg}\nFix it and reply again ({self.max_retries - self.retries + 1} retries left)."
            return obs, 0.0, False, False, self._info(None, msg)
        self.retries += 1
        if self.retries > self.max_retries:  # the step is spent without an action
            self.steps += 1
            self.phase, self.pending, self.retries, self._errors = "choose", None, 0, []
            truncated = self.steps >= self.task.max_steps
            obs = f"Error: {msg}\nNo retries left: this step is spent. " + (
                "Choose the next action."
                if self.mode == "structured"
                else "Write the next protocol."
            )
            return obs, 0.0, False, truncated, self._info(False, msg)
        obs = f"Error: {msg}\nFix it and reply again ({self.max_retries - self.retries + 1} retries left)."
        return obs, 0.0, False, False, self._info(None, msg)

    def _info(self, valid: bool | None, error: str | None) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "step": self.steps,
            "turns": self.turns,
            "valid": valid,
            "error": error,
            "best": self.best(),
            "n_valid": self.n_valid,
            "stop": self.stopped,
        }

    def _choose(self, reply: str) -> str:
        parsed = parse_reply(reply, default_tag="choose")
        if parsed.name not in ACTIONS:
            raise ParseError(f"unknown action {parsed.name!r}; choose one of {', '.join(ACTIONS)}")
        if parsed.tag != "choose":
            raise ParseError(
                f'first choose the action: <action tag="choose"><name>{parsed.name}</name></action>; '
                "its documentation comes back, then you fill the arguments"
            )
        # the retry budget is per step: a successful choose does not refill it
        self.phase, self.pending = "run", parsed.name
        return action_docs(parsed.name)

    def _read_run(self, reply: str) -> AnyAction:
        parsed = parse_reply(reply, default_tag="run")
        if parsed.tag != "run":
            raise ParseError(
                f'now fill the arguments of {self.pending}: <action tag="run"><name>{self.pending}</name>...</action>'
            )
        if parsed.name != self.pending:
            raise ParseError(f"you chose {self.pending!r}; run that action (got {parsed.name!r})")
        return validate_action(parsed.name, parsed.arguments)

    def _read_protocol(self, reply: str) -> AnyAction:
        if not isinstance(reply, str):
            raise ParseError(f"the reply must be text, got {type(reply).__name__}")
        lo, hi = reply.find("<ROSETTASCRIPTS"), reply.rfind("</ROSETTASCRIPTS>")
        if lo < 0 or hi < 0:
            raise ProtocolError("no <ROSETTASCRIPTS>...</ROSETTASCRIPTS> protocol in the reply")
        xml = reply[lo : hi + len("</ROSETTASCRIPTS>")]
        if not self.validate_xml:
            return parse_protocol(xml)
        from .rosetta_xsd import validate_rosetta_xml

        validate_rosetta_xml(xml, len(self.task.start.sequence), self.palette)
        try:
            return parse_protocol(xml)
        except ProtocolError as exc:
            self.n_uninterpretable += 1
            raise ProtocolError(
                f"RosettaScripts would accept this protocol, but the {self.backend.name} "
                f"backend cannot interpret it: {exc}"
            ) from None

    # --- running an action -------------------------------------------------------------------
    def check(self, action: AnyAction) -> None:
        """Task semantics: known residue types, selectors in range and non-empty, valid step."""
        if isinstance(action, GoBackToStep):
            ok = [r.index for r in self.trajectory if r.ok]
            if action.step not in ok:
                raise ActionError(
                    f"go_back_to_step: step {action.step} is not a successful step; choose one of {ok}"
                )
            return
        names: list[str] = []
        sels = [action.design_selector] if isinstance(action, RotamerChange) else [action.selector]
        if isinstance(action, RotamerChange):
            names += list(action.restrict or []) + list(action.prohibit)
            names += [t for p in action.composition_penalties for t in p.types]
            if action.repack_selector is not None:
                sels.append(action.repack_selector)
        for sel in sels:
            for s in _selectors(sel):
                if isinstance(s, ResidueNameSelector):
                    names += list(s.names)
        unknown = sorted({n for n in names if n not in self.palette})
        if unknown:
            extra = (
                f" and {', '.join(self.task.ncaa)}"
                if self.task.ncaa
                else " (no non-canonical params)"
            )
            raise ActionError(
                f"unknown residue type(s) {unknown}: this task has the 20 canonical types{extra}"
            )
        which = "design_selector" if isinstance(action, RotamerChange) else "selector"
        empty = []
        for i, d in enumerate(self.parents):  # every parent the action will apply to
            layers = self.backend.layers(d)
            try:
                mask = resolve_selector(sels[0], d.sequence, layers)
                for s in sels[1:]:
                    resolve_selector(s, d.sequence, layers)
            except ValueError as exc:
                raise ActionError(str(exc)) from None
            if not mask.any():
                empty.append(i)
        if empty:
            raise ActionError(
                f"{which} selects no residue of current design(s) {empty} "
                f"(of {len(self.parents)} Pareto-optimal designs); widen it"
            )

    def _run(self, action: AnyAction) -> str:
        self.check(action)
        k = len(self.trajectory)
        if isinstance(action, GoBackToStep):
            src = self.trajectory[action.step]
            rec = StepRecord(k, action, None, list(src.designs), list(src.front), True)
        else:
            protocol = compile_protocol(action, self.task.ncaa)
            seed = int(np.random.SeedSequence([self.seed, k]).generate_state(1)[0])
            designs = self.backend.run(
                action, protocol, self.parents, self.task.nstruct, seed, self.palette
            )
            if not designs:
                raise ActionError("the protocol produced no designs")
            designs = self._scored(designs)
            rec = StepRecord(k, action, protocol, designs, self._front(designs), True)
        self.trajectory.append(rec)
        self.current = k
        self.steps += 1
        self.n_valid += 1
        self.phase, self.pending, self.retries, self._errors = "choose", None, 0, []
        return self.summary(rec)

    def _scored(self, designs: Sequence[Design]) -> list[Design]:
        out = []
        for d in designs:
            if len(d.sequence) != len(self.task.start.sequence):
                raise ActionError(f"the backend returned a design of length {len(d.sequence)}")
            m = dict(self.backend.score(d)) if not d.metrics else dict(d.metrics)
            if not np.isfinite(d.ca).all():
                raise ActionError(
                    "the backend returned a structure with non-finite (NaN/inf) coordinates"
                )
            m["rmsd_to_init"] = kabsch_rmsd(d.ca, self.task.start.ca)
            if self.task.extra_metrics is not None:
                m.update(self.task.extra_metrics(d))
            missing = [o for o in self.task.objectives if o not in m]
            if missing:
                raise ActionError(f"the backend did not report the objective(s) {missing}")
            if not all(np.isfinite(v) for v in m.values()):
                raise ActionError(f"the backend returned non-finite metrics {m}")
            out.append(Design(d.sequence, d.ca, m, d.payload))
        return out

    def _front(self, designs: Sequence[Design]) -> list[int]:
        keys = list(self.task.objectives)
        vals = np.array([[d.metrics[k] for k in keys] for d in designs])
        return np.flatnonzero(pareto_front(vals, [self.task.objectives[k] for k in keys])).tolist()

    def summary(self, rec: StepRecord) -> str:
        """Concise ensemble summary for the agent: mean ± std per objective, the front."""
        what = "start" if rec.action is None else rec.action.action
        lines = [
            f"Step {rec.index} ({what}): {len(rec.designs)} designs, {len(rec.front)} Pareto-optimal."
        ]
        for k, sense in self.task.objectives.items():
            v = np.array([d.metrics[k] for d in rec.designs])
            fv = np.array([rec.designs[i].metrics[k] for i in rec.front])
            best = fv.min() if sense == "min" else fv.max()
            lines.append(
                f"  {k} ({sense}): mean {v.mean():.3f} ± {v.std():.3f}, best on front {best:.3f}"
            )
        b = self.best()
        lines.append(
            f"  best feasible {self.task.primary} so far: {'none' if b is None else f'{b:.3f}'}"
        )
        order = sorted(rec.front, key=lambda i: rec.designs[i].metrics[self.task.primary])
        if self.task.objectives[self.task.primary] == "max":
            order = order[::-1]
        for i in order[: self.summary_top_k]:
            d = rec.designs[i]
            ms = ", ".join(f"{k}={d.metrics[k]:.3f}" for k in self.task.objectives)
            lines.append(f"  design {i}: {ms}; sequence {'-'.join(d.sequence)}")
        hot = getattr(self.backend, "hotspots", None)
        if callable(hot) and order:
            lines.append("  " + hot(rec.designs[order[0]]))
        return "\n".join(lines)
