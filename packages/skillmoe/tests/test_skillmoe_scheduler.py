"""The batch scheduler equals naive per-instance execution, with one load per distinct expert."""

from __future__ import annotations

import random

import pytest
from icml26_skillmoe import (
    BatchScheduler,
    FunctionGenerator,
    GenerationError,
    ScheduleError,
    run_naive,
)


class Pool:
    """Deterministic fake experts; tracks loads and that one model is resident at a time."""

    def __init__(self, fail_on=None):
        self.resident: set[str] = set()
        self.max_resident = 0
        self.loads: list[str] = []
        self.fail_on = fail_on or {}

    def load(self, name):
        self.resident.add(name)
        self.max_resident = max(self.max_resident, len(self.resident))
        self.loads.append(name)

        def answer(prompts):
            if name in self.fail_on:
                done = [f"{name}|{p}" if p not in self.fail_on[name] else None for p in prompts]
                if None in done:
                    raise GenerationError("endpoint down", done)
            return [f"{name}|{p}|{len(p) * (ord(name[-1]) % 7)}" for p in prompts]

        return FunctionGenerator(answer)

    def unload(self, name, gen):
        self.resident.remove(name)


def random_assignments(n, pool, k, seed):
    rng = random.Random(seed)
    return [rng.choices(pool, k=k) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_batched_equals_naive_and_loads_each_expert_once(seed):
    experts = [f"e{i}" for i in range(16)]
    assign = random_assignments(40, experts, 3, seed)
    prompts = [f"question {i}" for i in range(40)]
    pool = Pool()
    sched = BatchScheduler(pool.load, pool.unload)
    batched = sched.run(assign, prompts)
    naive, nstats = run_naive(assign, prompts, Pool().load)
    assert batched == naive
    distinct = {e for a in assign for e in a}
    assert sched.stats.loads == len(distinct) == len(set(pool.loads)) == len(pool.loads)
    assert sched.stats.unloads == sched.stats.loads
    assert nstats.loads == 120
    assert pool.max_resident == 1 and not pool.resident
    # the experts are visited in order of first appearance (upstream's dict order)
    assert sched.stats.order == list(dict.fromkeys(e for a in assign for e in a))
    # every slot answered by its own expert, repeated slots included
    for a, row, p in zip(assign, batched, prompts):
        assert [r.split("|")[0] for r in row] == a and all(r.split("|")[1] == p for r in row)


def test_memory_accounting_and_hooks():
    events = []
    sched = BatchScheduler(
        lambda n: lambda ps: [n] * len(ps),
        memory_fn=lambda n, g: 100 * int(n[1:]),
        on_load=lambda n: events.append(("load", n)),
        on_unload=lambda n: events.append(("unload", n)),
    )
    out = sched.run([["e1", "e3"], ["e3", "e3"]], ["p", "q"])
    assert out == [["e1", "e3"], ["e3", "e3"]]
    assert events == [("load", "e1"), ("unload", "e1"), ("load", "e3"), ("unload", "e3")]
    assert sched.stats.memory == {"e1": 100, "e3": 300} and sched.stats.peak_memory == 300
    assert sched.stats.prompts == 4 and sched.stats.calls == 2


def test_failure_mid_batch_keeps_finished_answers_and_resumes():
    assign = [["a", "b"], ["b", "c"], ["c", "a"]]
    prompts = ["p0", "p1", "p2"]
    pool = Pool(fail_on={"b": {"p1"}})
    sched = BatchScheduler(pool.load, pool.unload)
    with pytest.raises(ScheduleError, match="expert 'b' failed") as info:
        sched.run(assign, prompts)
    err = info.value
    assert err.expert == "b"
    assert not pool.resident  # the failing expert was unloaded
    # a's answers and b's finished one are kept; b's failed one and c's are missing
    assert err.partial[0][0].startswith("a|p0") and err.partial[2][1].startswith("a|p2")
    assert err.partial[0][1] == "b|p0"
    assert err.partial[1] == [None, None] and err.partial[2][0] is None
    # resume once the endpoint is back: only b (one slot) and c are run
    pool.fail_on = {}
    out = sched.run(assign, prompts, partial=err.partial)
    assert sched.stats.order == ["b", "c"] and sched.stats.prompts == 3
    ref, _ = run_naive(assign, prompts, Pool().load)
    assert out[1] == ref[1] and out[2] == ref[2] and out[0][0] == ref[0][0]


def test_bad_input():
    s = BatchScheduler(lambda n: lambda ps: ps)
    with pytest.raises(ValueError, match="differ in length"):
        s.run([["a"]], ["p", "q"])
    with pytest.raises(ValueError, match=r"assignments\[1\] must be a non-empty list"):
        s.run([["a"], []], ["p", "q"])
    with pytest.raises(TypeError, match="not one str"):
        s.run([["a"]], "p")
    with pytest.raises(ValueError, match="partial does not match"):
        s.run([["a"]], ["p"], partial=[[None, None]])
    with pytest.raises(ScheduleError, match="returned 0 texts for 1 prompts"):
        BatchScheduler(lambda n: lambda ps: []).run([["a"]], ["p"])
    with pytest.raises(TypeError, match="load_fn"):
        BatchScheduler("not callable")
