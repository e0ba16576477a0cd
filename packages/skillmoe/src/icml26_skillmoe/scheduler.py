"""Batch inference: group instances by assigned expert, load each expert once (Sec. 3.4).

Instance i with prompt x_i is assigned experts a_i = (a_i1, ..., a_ik) (repeats allowed:
recruitment samples with replacement). Naive instance-level execution loads expert a_ij for
every slot: sum_i k = kN loads. The batch scheduler visits the distinct experts in order of
first appearance, loads each once, answers every slot (i, j) with a_ij = e in one batched call
(a slot repeated within an instance is a separate request, as upstream), then unloads it:
|{a_ij}| <= min(kN, |pool|) loads, one model resident at a time. With deterministic experts
its output equals the naive one slot for slot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .backends import GenerationError, call_generate

__all__ = ["BatchScheduler", "ScheduleError", "ScheduleStats", "run_naive"]


@dataclass
class ScheduleStats:
    """What a run cost: model loads and unloads, generate calls, and (with ``memory_fn``) the
    resident bytes of each loaded expert and their peak (one model is resident at a time).

    ``loads`` / ``unloads`` count the experts' models. :meth:`SkillMoE.solve` also fills the
    models around them: ``annotator_loads`` / ``annotator_unloads`` (a loadable annotator,
    loaded for keyword inference and freed before any expert loads) and ``aggregator_loads``
    (the aggregator, loaded once per batch after the experts)."""

    loads: int = 0
    unloads: int = 0
    calls: int = 0
    prompts: int = 0
    order: list[str] = field(default_factory=list)  # experts in load order
    memory: dict[str, int] = field(default_factory=dict)
    annotator_loads: int = 0
    annotator_unloads: int = 0
    aggregator_loads: int = 0

    @property
    def peak_memory(self) -> int:
        return max(self.memory.values(), default=0)


class ScheduleError(RuntimeError):
    """An expert failed mid-batch. ``partial[i][j]`` holds every finished answer (``None`` for
    the rest); pass it back as ``run(..., partial=e.partial)`` to resume without redoing them."""

    def __init__(self, message: str, partial: list[list[str | None]], expert: str) -> None:
        super().__init__(message)
        self.partial = partial
        self.expert = expert


def _check(assignments: Sequence[Sequence[str]], prompts: Sequence[str]) -> None:
    if isinstance(prompts, str):
        raise TypeError("prompts must be a sequence of str, not one str")
    if len(assignments) != len(prompts):
        raise ValueError(
            f"assignments ({len(assignments)}) and prompts ({len(prompts)}) differ in length"
        )
    for i, a in enumerate(assignments):
        if isinstance(a, str) or len(a) == 0:
            raise ValueError(
                f"assignments[{i}] must be a non-empty list of expert names, got {a!r}"
            )


class BatchScheduler:
    """Run every (instance, expert) slot, loading each expert once.

    ``load_fn(name) -> generator`` returns a loaded :class:`~icml26_skillmoe.Generator` (or a
    ``prompts -> texts`` callable); ``unload_fn(name, generator)`` frees it (default: call its
    ``unload()`` or ``close()`` if it has one); ``memory_fn(name, generator) -> bytes`` records
    what the loaded expert holds. ``on_load`` / ``on_unload(name)`` are observer hooks.
    """

    def __init__(
        self,
        load_fn: Callable[[str], Any],
        unload_fn: Callable[[str, Any], None] | None = None,
        *,
        memory_fn: Callable[[str, Any], int] | None = None,
        on_load: Callable[[str], None] | None = None,
        on_unload: Callable[[str], None] | None = None,
        temperature: float = 0.7,  # upstream: 0.7 for every expert
        max_tokens: int = 4096,  # upstream: 4096 (32768 for R1 models)
    ) -> None:
        if not callable(load_fn):
            raise TypeError("load_fn must be callable: name -> generator")
        self.load_fn = load_fn
        self.unload_fn = unload_fn
        self.memory_fn = memory_fn
        self.on_load = on_load
        self.on_unload = on_unload
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stats = ScheduleStats()

    def _unload(self, name: str, gen: Any) -> None:
        if self.unload_fn is not None:
            self.unload_fn(name, gen)
        else:
            for attr in ("unload", "close"):
                if hasattr(gen, attr):
                    getattr(gen, attr)()
                    break
        self.stats.unloads += 1
        if self.on_unload is not None:
            self.on_unload(name)

    def plan(self, assignments: Sequence[Sequence[str]]) -> dict[str, list[tuple[int, int]]]:
        """expert -> its slots (i, j), experts in order of first appearance (upstream's order)."""
        groups: dict[str, list[tuple[int, int]]] = {}
        for i, experts in enumerate(assignments):
            for j, e in enumerate(experts):
                groups.setdefault(e, []).append((i, j))
        return groups

    def run(
        self,
        assignments: Sequence[Sequence[str]],
        prompts: Sequence[str],
        *,
        partial: list[list[str | None]] | None = None,
    ) -> list[list[str]]:
        """Answers ``out[i][j]`` of expert ``assignments[i][j]`` to ``prompts[i]``.

        On a failure the current expert is unloaded and :class:`ScheduleError` is raised with
        the finished answers; ``partial`` (from that error) skips the slots already answered.
        """
        _check(assignments, prompts)
        out: list[list[str | None]] = [[None] * len(a) for a in assignments]
        if partial is not None:
            if len(partial) != len(assignments) or any(
                len(p) != len(a) for p, a in zip(partial, assignments)
            ):
                raise ValueError("partial does not match the shape of assignments")
            out = [list(p) for p in partial]
        self.stats = ScheduleStats()
        for name, slots in self.plan(assignments).items():
            todo = [(i, j) for i, j in slots if out[i][j] is None]
            if not todo:
                continue
            gen = self.load_fn(name)
            self.stats.loads += 1
            self.stats.order.append(name)
            if self.on_load is not None:
                self.on_load(name)
            if self.memory_fn is not None:
                self.stats.memory[name] = int(self.memory_fn(name, gen))
            try:
                texts = call_generate(
                    gen,
                    [prompts[i] for i, _ in todo],
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                )
            except GenerationError as e:  # keep what this expert did finish
                for (i, j), t in zip(todo, e.partial):
                    out[i][j] = t
                raise ScheduleError(f"expert {name!r} failed: {e}", out, name) from e
            except Exception as e:
                raise ScheduleError(f"expert {name!r} failed: {e}", out, name) from e
            finally:
                self._unload(name, gen)
            self.stats.calls += 1
            self.stats.prompts += len(todo)
            for (i, j), t in zip(todo, texts):
                out[i][j] = t
        return [[t if t is not None else "" for t in row] for row in out]


def run_naive(
    assignments: Sequence[Sequence[str]],
    prompts: Sequence[str],
    load_fn: Callable[[str], Any],
    unload_fn: Callable[[str, Any], None] | None = None,
    *,
    temperature: float = 0.7,
    max_tokens: int = 4096,
) -> tuple[list[list[str]], ScheduleStats]:
    """The reference: instance by instance, slot by slot, load the expert, answer one prompt,
    unload it (``sum_i len(assignments[i])`` loads)."""
    _check(assignments, prompts)
    stats = ScheduleStats()
    out: list[list[str]] = []
    for i, experts in enumerate(assignments):
        row = []
        for e in experts:
            gen = load_fn(e)
            stats.loads += 1
            stats.order.append(e)
            try:
                row.append(
                    call_generate(
                        gen, [prompts[i]], temperature=temperature, max_tokens=max_tokens
                    )[0]
                )
            finally:
                if unload_fn is not None:
                    unload_fn(e, gen)
                elif hasattr(gen, "unload"):
                    gen.unload()
                stats.unloads += 1
            stats.calls += 1
            stats.prompts += 1
        out.append(row)
    return out, stats
