"""Fits the tools a fair-division researcher already uses: fairpyx-style inputs and outputs in
both directions, divide_online(valuations=...), doctests, quiet MILP solves."""

import doctest
import importlib

import icml26_online_fair as of
import numpy as np
import pytest

VALUATIONS = {"Ann": {"x": 5, "y": 1, "z": 3, "w": 0}, "Bob": {"x": 4, "y": 4, "z": 1, "w": 2}}


@pytest.mark.parametrize("module", ["__init__", "adversary", "notions", "policies", "randomised"])
def test_doctests(module):
    name = "icml26_online_fair" + ("" if module == "__init__" else f".{module}")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_divide_online_mirrors_fairpyx_divide_with_names():
    alloc = of.divide_online(of.GreedyPolicy(), valuations=VALUATIONS)
    assert alloc.to_dict() == {"Ann": ["x", "z"], "Bob": ["y", "w"]}
    # same goods as an array: same owners, integer names
    arr = np.array([[5, 1, 3, 0], [4, 4, 1, 2]], dtype=float)
    assert of.divide_online(of.GreedyPolicy(), valuations=arr).to_dict() == {0: [0, 2], 1: [1, 3]}
    # an arrival order and side information
    rr = of.divide_online(of.RoundRobinPolicy(), valuations=VALUATIONS, order=[3, 2, 1, 0])
    assert rr.to_dict() == {"Ann": ["y", "w"], "Bob": ["x", "z"]}
    capped = of.divide_online(
        of.CappedGreedy(), valuations=VALUATIONS, info=of.NormalizationInfo([9.0, 11.0])
    )
    assert of.prop1_ratio(VALUATIONS, capped.to_dict()) == 1.0


def test_checkers_accept_names_dicts_and_agree_with_arrays():
    arr = np.array([[5, 1, 3, 0], [4, 4, 1, 2]], dtype=float)
    named = {"Ann": ["y", "w"], "Bob": ["x", "z"]}
    owner = np.array([1, 0, 1, 0])
    for notion in of.NOTIONS:
        assert of.approx_ratio(VALUATIONS, named, notion) == of.approx_ratio(arr, owner, notion)
    assert of.approx_ratio(arr, {0: [1, 3], 1: [0, 2]}, "ef1") == of.ef1_ratio(arr, owner)
    assert of.prop_ratio({"a": [1.0, 3.0], "b": [2.0, 2.0]}, [1, 0]) == 1.0


def test_bad_named_inputs_are_rejected_clearly():
    with pytest.raises(ValueError, match="unknown item 'q'"):
        of.ef1_ratio(VALUATIONS, {"Ann": ["q"], "Bob": ["x", "y", "z", "w"]})
    with pytest.raises(ValueError, match="unknown agent 'Cy'"):
        of.ef1_ratio(VALUATIONS, {"Cy": ["x", "y", "z", "w"]})
    with pytest.raises(ValueError, match="gives item 'x' to two agents"):
        of.ef1_ratio(VALUATIONS, {"Ann": ["x", "y"], "Bob": ["x", "z", "w"]})
    with pytest.raises(ValueError, match=r"leaves items \['w'\] unallocated"):
        of.ef1_ratio(VALUATIONS, {"Ann": ["x", "y"], "Bob": ["z"]})
    with pytest.raises(ValueError, match="values must be non-negative"):
        of.divide_online(of.GreedyPolicy(), valuations={"a": {"x": -1}})
    with pytest.raises(TypeError, match="exactly one of instance= and valuations="):
        of.divide_online(of.GreedyPolicy())
    with pytest.raises(TypeError, match="instance must be an OnlineInstance or a fairpyx"):
        of.divide_online(of.GreedyPolicy(), [[1.0, 2.0]])
    with pytest.raises(ValueError, match="agents must name all 2 agents"):
        of.OnlineInstance(np.ones((2, 3)), agents=["a"])


def test_fairpyx_instance_and_allocations_in_both_directions():
    fairpyx = pytest.importorskip("fairpyx")
    inst = fairpyx.Instance(valuations=VALUATIONS)
    # fairpyx Instance -> our online loop and checkers
    alloc = of.divide_online(of.CappedGreedy(), inst, of.NormalizationInfo([9.0, 11.0]))
    assert set(alloc.to_dict()) == {"Ann", "Bob"}
    assert of.prop1_ratio(inst, alloc.to_dict()) == 1.0
    # fairpyx's own output dict -> our checkers (round robin is EF1)
    out = fairpyx.divide(fairpyx.algorithms.round_robin, instance=inst)
    assert of.ef1_ratio(inst, out) == 1.0
    # our online policy -> a fairpyx algorithm run by fairpyx.divide
    online = of.fairpyx_online(of.CappedGreedy(), of.NormalizationInfo.exact)
    got = fairpyx.divide(online, valuations=VALUATIONS)
    ours = of.divide_online(of.CappedGreedy(), inst, of.NormalizationInfo([9.0, 11.0]))
    assert {a: sorted(b) for a, b in got.items()} == {
        a: sorted(b) for a, b in ours.to_dict().items()
    }
    with pytest.raises(TypeError, match="policy must implement"):
        of.fairpyx_online(object())


def test_milp_solves_print_nothing(capfd):
    rng = np.random.default_rng(0)
    for _ in range(12):  # these sizes made HiGHS print "HighsMipSolverData::..." lines
        of.mms_value(rng.integers(0, 5, 16).astype(float), 3, method="milp")
        of.max_mms_ratio(rng.integers(0, 4, (3, 8)).astype(float))
    out, err = capfd.readouterr()
    assert out == "" and err == ""
