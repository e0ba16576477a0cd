"""The environment: two phases, retries, go-back, failures that never lose the trajectory."""

import dataclasses
import json

import numpy as np
import pytest
from icml26_agent_rosetta import (
    ACTIONS,
    BackboneChange,
    HPBackend,
    IndexSelector,
    NoisyPolicy,
    RosettaEnv,
    RotamerChange,
    ScriptedPolicy,
    action_docs,
    hp_optimum,
    hp_task,
    run_episode,
    tool_schemas,
)


def choose(name):
    return f'<action tag="choose"><name>{name}</name></action>'


def run(name, **args):
    kids = "".join(
        f"<{k}>{v if isinstance(v, str) else json.dumps(v)}</{k}>" for k, v in args.items()
    )
    return f'<action tag="run"><name>{name}</name>{kids}</action>'


DESIGN = dict(
    design_selector={"type": "index", "resnums": "1-8"},
    restrict=["LEU", "SER"],
    composition_penalties=[{"types": ["LEU"], "target": 4, "weight": 2.0}],
)
MOVE = dict(
    mover="backrub", selector={"type": "index", "resnums": "1-8"}, nmoves=80, temperature=1.0
)


@pytest.fixture
def env():
    return RosettaEnv(hp_task(8, 4, nstruct=8, max_steps=6), HPBackend(), max_retries=1)


def test_two_phases_docs_then_run(env):
    obs, _, _, _, info = env.step(choose("rotamer_change"))
    assert obs == action_docs("rotamer_change") and info["phase"] == "run" and info["step"] == 0
    obs, _, _, _, info = env.step(run("rotamer_change", **DESIGN))
    assert obs.startswith("Step 1 (rotamer_change): 8 designs")
    assert info["valid"] is True and info["step"] == 1 and info["phase"] == "choose"
    assert len(env.trajectory) == 2 and env.trajectory[1].protocol.startswith("<ROSETTASCRIPTS>")


def test_run_before_choose_is_refused(env):
    obs, _, _, _, info = env.step(run("rotamer_change", **DESIGN))
    assert "first choose the action" in obs and info["valid"] is None and len(env.trajectory) == 1


def test_retries_then_the_step_is_spent(env):
    env.step(choose("backbone_change"))
    obs, *_, info = env.step(
        run("backbone_change", mover="wiggle", selector={"type": "index", "resnums": "1-3"})
    )
    assert "mover" in obs and "retries left" in obs and info["step"] == 0
    obs, *_, info = env.step(run("rotamer_change", **DESIGN))
    assert "you chose 'backbone_change'" in obs and "No retries left" in obs
    assert info["valid"] is False and info["step"] == 1 and info["phase"] == "choose"
    assert len(env.trajectory) == 1  # nothing recorded for a failed step


def test_semantic_errors_are_actionable(env):
    env.step(choose("rotamer_change"))
    obs, *_ = env.step(run("rotamer_change", design_selector={"type": "index", "resnums": "3-12"}))
    assert "residue 9 is out of range (pose has 1-8)" in obs
    obs, *_ = env.step(
        run(
            "rotamer_change",
            design_selector={"type": "index", "resnums": "1-3"},
            restrict=["TRF", "L"],
        )
    )
    assert "unknown residue type(s) ['TRF']" in obs and "no non-canonical params" in obs


def test_non_canonical_types_the_task_has_params_for():
    task = hp_task(6, 3, nstruct=4)
    task = dataclasses.replace(task, ncaa=("NLE",))
    env = RosettaEnv(task, HPBackend(hydrophobic=HPBackend().hydrophobic | {"NLE"}))
    env.step(choose("rotamer_change"))
    *_, info = env.step(
        run(
            "rotamer_change",
            design_selector={"type": "index", "resnums": "1-6"},
            restrict=["NLE", "SER"],
        )
    )
    assert info["valid"] is True
    assert any("NLE" in d.sequence for d in env.trajectory[-1].designs)
    # Rosetta sees the task's non-canonical types through the packer palette
    assert 'additional_residue_types="NLE"' in env.trajectory[-1].protocol


class CrashingBackend(HPBackend):
    def run(self, *args, **kwargs):
        raise RuntimeError("segmentation fault in core::pack")


def test_backend_crash_keeps_the_trajectory(env):
    env.step(choose("rotamer_change"))
    env.step(run("rotamer_change", **DESIGN))
    before = [(r.index, len(r.designs)) for r in env.trajectory]
    env.backend = CrashingBackend()
    env.step(choose("backbone_change"))
    obs, *_, info = env.step(run("backbone_change", **MOVE))
    assert "backend failed" in obs and "segmentation fault" in obs and info["error"]
    assert [(r.index, len(r.designs)) for r in env.trajectory] == before
    env.backend = HPBackend()  # and the episode goes on
    obs, *_, info = env.step(run("backbone_change", **MOVE))
    assert info["valid"] is True and len(env.trajectory) == 3


def test_go_back_restores_that_steps_pareto_designs(env):
    env.step(choose("rotamer_change"))
    env.step(run("rotamer_change", **DESIGN))
    env.step(choose("backbone_change"))
    env.step(run("backbone_change", **MOVE))
    assert env.current == 2
    step1 = env.trajectory[1]
    env.step(choose("go_back_to_step"))
    obs, *_, info = env.step(run("go_back_to_step", step=1))
    assert info["valid"] is True and env.current == 3 and len(env.trajectory) == 4
    assert [d.sequence for d in env.parents] == [step1.designs[i].sequence for i in step1.front]
    assert all(
        (a.payload == b.payload).all()
        for a, b in zip(env.parents, [step1.designs[i] for i in step1.front])
    )
    env.step(choose("go_back_to_step"))
    obs, *_ = env.step(run("go_back_to_step", step=7))
    assert "not a successful step" in obs and "[0, 1, 2, 3]" in obs


def test_next_action_applies_to_pareto_designs_only(env):
    env.step(choose("rotamer_change"))
    env.step(run("rotamer_change", **DESIGN))
    rec = env.trajectory[1]
    vals = np.array([[d.metrics[k] for k in env.task.objectives] for d in rec.designs])
    for i in rec.front:  # nothing on the front is dominated
        assert not any(
            (vals[j] <= vals[i]).all() and (vals[j] < vals[i]).any() for j in range(len(vals))
        )
    assert len(env.parents) == len(rec.front)


def test_episode_never_beats_the_exhaustive_optimum_and_can_reach_it():
    task = hp_task(8, 4, nstruct=16, max_steps=12)
    e_star = hp_optimum(8, 4)[0]
    plan = [
        RotamerChange(
            design_selector=IndexSelector(resnums="1-8"),
            restrict=["LEU", "SER"],
            composition_penalties=[{"types": ["LEU"], "target": 4, "weight": 2.0}],
            repeats=2,
        ),
        BackboneChange(
            mover="backrub", selector=IndexSelector(resnums="1-8"), nmoves=100, temperature=0.5
        ),
        BackboneChange(
            mover="small", selector=IndexSelector(resnums="1-8"), nmoves=100, temperature=0.5
        ),
        BackboneChange(
            mover="shear", selector=IndexSelector(resnums="1-8"), nmoves=100, temperature=0.5
        ),
    ]
    res = run_episode(RosettaEnv(task, HPBackend(), seed=3), NoisyPolicy(plan, 0.0, 8))
    assert res["valid_rate"] == 1.0 and res["steps"] == 12
    assert res["best"] == e_star  # exact: the ground state of the 8-mer with 4 H


def test_noisy_policy_fails_at_the_expected_rate():
    # with p = 1 every structured run reply is corrupted: no step can succeed
    task = hp_task(6, 3, nstruct=2, max_steps=4)
    plan = [BackboneChange(mover="small", selector=IndexSelector(resnums="1-6"))]
    res = run_episode(RosettaEnv(task, HPBackend()), NoisyPolicy(plan, 1.0, 6, seed=0))
    assert res["valid_rate"] == 0.0 and res["steps"] == 4


def test_protocol_mode_runs_whole_protocols():
    task = hp_task(6, 3, nstruct=4, max_steps=3)
    plan = [BackboneChange(mover="small", selector=IndexSelector(resnums="1-6"))]
    res = run_episode(
        RosettaEnv(task, HPBackend(), mode="protocol"), NoisyPolicy(plan, 0.0, 6, mode="protocol")
    )
    assert res["valid_rate"] == 1.0 and res["turns"] == 3


def test_tool_schemas_cover_every_action_and_accept_the_docs_example():
    tools = tool_schemas()
    assert [t["function"]["name"] for t in tools] == ["choose_action", *ACTIONS]
    for t in tools[1:]:
        assert "action" not in t["function"]["parameters"]["properties"]
        json.dumps(t)  # serialisable as sent to an OpenAI-compatible server


def test_bad_construction():
    with pytest.raises(TypeError, match="Backend protocol"):
        RosettaEnv(hp_task(), object())
    with pytest.raises(ValueError, match="max_retries"):
        RosettaEnv(hp_task(), HPBackend(), max_retries=-1)
    with pytest.raises(ValueError, match="n_h"):
        hp_task(8, 9)
    env = RosettaEnv(hp_task(6, 3, max_steps=1), HPBackend(), max_retries=0)
    env.step("nonsense")
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("more")


def test_scripted_policy_runs_out():
    with pytest.raises(RuntimeError, match="ran out"):
        run_episode(
            RosettaEnv(hp_task(6, 3), HPBackend()), ScriptedPolicy([choose("rotamer_change")])
        )


class StubBackend:
    """Returns designs with set energies and CA noise of set sizes; records its parents."""

    name = "stub"

    def __init__(self, energies, noise):
        self.energies, self.noise, self.calls = energies, noise, []

    def layers(self, design):
        return ["core"] * len(design.sequence)

    def score(self, design):
        return {"total_score": 0.0}

    def run(self, action, protocol, parents, nstruct, seed, palette):
        from icml26_agent_rosetta import Design

        self.calls.append(list(parents))
        rng = np.random.default_rng(0)
        base = parents[0]
        return [
            Design(
                base.sequence,
                base.ca + s * rng.normal(size=base.ca.shape),
                {"total_score": e},
                base.payload,
            )
            for e, s in zip(self.energies, self.noise)
        ]


def test_front_is_over_every_objective_and_only_it_is_carried_forward():
    from icml26_agent_rosetta import Task

    start = hp_task(6, 3).start
    task = Task("stub", "d", start, {"total_score": "min", "rmsd_to_init": "min"}, nstruct=4)
    # design 0: worst energy, no move (rmsd 0); 1: best energy, big move; 2: dominated by 3;
    # 3: best energy, smaller move -> dominates 1 and 2. Front = {0, 3}.
    backend = StubBackend([3.0, 1.0, 2.0, 1.0], [0.0, 2.0, 3.0, 0.5])
    env = RosettaEnv(task, backend)
    env.step(choose("backbone_change"))
    env.step(run("backbone_change", **{**MOVE, "selector": {"type": "index", "resnums": "1-6"}}))
    rec = env.trajectory[1]
    assert rec.front == [0, 3]
    env.step(choose("backbone_change"))
    env.step(run("backbone_change", **{**MOVE, "selector": {"type": "index", "resnums": "1-6"}}))
    assert [id(d) for d in backend.calls[1]] == [id(rec.designs[0]), id(rec.designs[3])]


def test_error_model_rates_match_the_decision_counts():
    """A protocol of k elements survives p-corruption with probability between (1-p)^k (no
    mistake at all) and (1 - 3p/4)^k (only the silent quarter of mistakes is harmless)."""
    import xml.etree.ElementTree as ET

    from icml26_agent_rosetta import ProtocolError, compile_protocol, parse_protocol
    from icml26_agent_rosetta.agent import corrupt_protocol

    a = BackboneChange(mover="small", selector=IndexSelector(resnums="1-6"))
    xml = compile_protocol(a)
    k = sum(1 for _ in ET.fromstring(xml).iter())
    rng = np.random.default_rng(0)
    p, trials, ok = 0.05, 400, 0
    for _ in range(trials):
        try:
            parse_protocol(corrupt_protocol(xml, p, 6, rng))
            ok += 1
        except ProtocolError:
            pass
    lo, hi = (1 - p) ** k, (1 - 0.75 * p) ** k
    assert lo - 0.08 <= ok / trials <= hi + 0.08, (ok / trials, lo, hi)
    with pytest.raises(ProtocolError):
        parse_protocol(corrupt_protocol(xml, 1.0, 6, rng))


# --- official step accounting (the official runner's global_step and StopStep) -----------------


def test_official_accounting_counts_every_choose_and_every_run():
    env = RosettaEnv(hp_task(8, 4, nstruct=4, max_steps=5), HPBackend(), step_accounting="official")
    *_, info = env.step(choose("rotamer_change"))
    assert info["step"] == 1 and info["phase"] == "run"  # a choose is a step
    *_, info = env.step(run("rotamer_change", **DESIGN))
    assert info["step"] == 2 and info["valid"] is True
    env.step(choose("backbone_change"))
    # a run the environment cannot apply is a step too, and the agent fixes the same action
    obs, _, term, trunc, info = env.step(
        run("backbone_change", mover="small", selector={"type": "index", "resnums": "2-12"})
    )
    assert info["step"] == 4 and info["valid"] is False and info["phase"] == "run"
    assert "out of range" in obs and not term and not trunc
    obs, _, term, trunc, info = env.step(run("backbone_change", **MOVE))
    assert info["step"] == 5 and info["valid"] is True and trunc  # max_steps bounds them all
    with pytest.raises(RuntimeError, match="max_steps"):
        env.step(choose("rotamer_change"))


def test_official_accounting_parse_failure_past_retries_stops_the_episode():
    env = RosettaEnv(
        hp_task(8, 4, nstruct=4, max_steps=20),
        HPBackend(),
        max_retries=1,
        step_accounting="official",
    )
    obs, _, term, _, info = env.step("I would rather not.")
    assert not term and info["step"] == 0 and "retries left" in obs  # parse failures: no step
    obs, _, term, trunc, info = env.step("still no action")
    assert term and not trunc and info["stop"] is True and info["step"] == 0
    with pytest.raises(RuntimeError, match="StopStep"):
        env.step(choose("rotamer_change"))
    res = run_episode(
        RosettaEnv(hp_task(8, 4, nstruct=4), HPBackend(), step_accounting="official"),
        ScriptedPolicy(["no", "no", "no", "unused"]),
    )
    assert res["stopped"] and res["turns"] == 3 and res["steps"] == 0


def test_action_accounting_shares_the_retry_budget_between_choose_and_run(env):
    # max_retries=1: one failed choose and one failed run spend the step, even though a
    # successful choose came in between (it used to refill the budget)
    obs, *_, info = env.step(choose("wiggle_change"))
    assert "retries left" in obs and info["step"] == 0
    env.step(choose("backbone_change"))
    obs, *_, info = env.step(
        run("backbone_change", mover="wiggle", selector={"type": "index", "resnums": "1-3"})
    )
    assert "No retries left" in obs and info["step"] == 1 and info["valid"] is False


# --- finding 5: selector emptiness on every parent, NaN structures --------------------------------


class TwoParentBackend(HPBackend):
    """Layers differ per design: design 0 has no core residue, design 1 has core residues."""

    def layers(self, design):
        return ["core" if design.sequence[0] == "LEU" else "surface"] * len(design.sequence)


def _env_with_parents(backend, seqs):
    env = RosettaEnv(hp_task(6, 3, nstruct=2), backend)
    base = env.trajectory[0].designs[0]
    # two designs, both on the front: design 1 has the lower energy, design 0 the lower error
    designs = [
        dataclasses.replace(
            base,
            sequence=tuple(s),
            metrics={**base.metrics, "total_score": float(-i), "composition_error": float(i)},
        )
        for i, s in enumerate(seqs)
    ]
    env.trajectory[0] = dataclasses.replace(env.trajectory[0], designs=designs, front=[0, 1])
    return env


@pytest.mark.parametrize("order", [("SER", "LEU"), ("LEU", "SER")])
def test_check_tests_selector_emptiness_on_every_parent(order):
    seqs = [[order[0]] + ["SER"] * 5, [order[1]] + ["SER"] * 5]
    env = _env_with_parents(TwoParentBackend(), seqs)
    core = RotamerChange(design_selector={"type": "layer", "core": True})
    from icml26_agent_rosetta.env import ActionError

    empty = [i for i, s in enumerate(order) if s == "SER"]
    with pytest.raises(ActionError, match=rf"selects no residue of current design\(s\) \{empty}"):
        env.check(core)


def test_repack_selector_is_range_checked_on_every_parent(env):
    from icml26_agent_rosetta.env import ActionError

    bad = RotamerChange(
        design_selector={"type": "index", "resnums": "1-3"},
        repack_selector={"type": "index", "resnums": "4-11"},
    )
    with pytest.raises(ActionError, match="residue 9 is out of range"):
        env.check(bad)
    env.step(choose("rotamer_change"))
    obs, *_ = env.step(
        run(
            "rotamer_change",
            design_selector={"type": "index", "resnums": "1-3"},
            repack_selector={"type": "index", "resnums": "4-11"},
        )
    )
    assert "out of range" in obs and len(env.trajectory) == 1


class NaNBackend(HPBackend):
    def run(self, *args, **kwargs):
        out = super().run(*args, **kwargs)
        ca = out[0].ca.copy()
        ca[2, 0] = np.nan
        out[0] = dataclasses.replace(out[0], ca=ca)
        return out


def test_nan_structure_is_a_clear_error_not_a_linalg_error(env):
    env.backend = NaNBackend()
    env.step(choose("backbone_change"))
    obs, *_ = env.step(run("backbone_change", **MOVE))
    assert "returned a structure with non-finite (NaN/inf) coordinates" in obs
    assert "SVD" not in obs
    assert len(env.trajectory) == 1
    from icml26_agent_rosetta import kabsch_rmsd

    p = np.zeros((4, 3))
    p[1, 2] = np.nan
    with pytest.raises(ValueError, match="p has non-finite"):
        kabsch_rmsd(p, np.ones((4, 3)))
    with pytest.raises(ValueError, match="q has non-finite"):
        kabsch_rmsd(np.ones((4, 3)), p)


# --- finding 6: go-back restores step k's Pareto front, not all its designs -----------------------


class SpreadBackend(HPBackend):
    """Designs whose scores make a strict Pareto subset: design i has energy -i mod 3."""

    def run(self, action, protocol, parents, nstruct, seed, palette=()):
        out = super().run(action, protocol, parents, nstruct, seed, palette)
        return [
            dataclasses.replace(d, metrics={"total_score": float(-(i % 3))})
            for i, d in enumerate(out)
        ]


def test_go_back_restores_only_the_pareto_front_of_step_k():
    env = RosettaEnv(hp_task(8, 4, nstruct=6, max_steps=6), SpreadBackend())
    env.step(choose("backbone_change"))
    env.step(run("backbone_change", **MOVE))
    step1 = env.trajectory[1]
    assert 0 < len(step1.front) < len(step1.designs)  # the front is a strict subset
    env.step(choose("backbone_change"))
    env.step(run("backbone_change", **MOVE))
    env.step(choose("go_back_to_step"))
    *_, info = env.step(run("go_back_to_step", step=1))
    assert info["valid"] is True
    assert len(env.parents) == len(step1.front)
    expected = [step1.designs[i] for i in step1.front]
    assert all(a is b for a, b in zip(env.parents, expected))
