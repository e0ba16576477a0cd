"""Scale invariance: every check and every decision is unchanged when all values are multiplied
by a positive constant (tolerances are relative to each agent's total value, ``_tol.RTOL``)."""

import icml26_online_fair as of
import numpy as np
import pytest
from icml26_online_fair import notions as N

TINY, HUGE = 2.0**-43, 2.0**43  # ~1.1e-13 and ~8.8e12; powers of two scale floats exactly


@pytest.mark.parametrize("scale", [1e-12, 1e-13, TINY])
def test_giving_an_agent_nothing_is_unfair_at_any_scale(scale):
    # with the old absolute 1e-9 this allocation reported EF, EF1, PROP and MMS ratio 1.0
    v = scale * np.array([[3.0, 2.0, 2.0, 1.0], [1.0, 2.0, 3.0, 2.0]])
    owner = np.zeros(4, dtype=int)  # agent 1 gets nothing
    for notion in ("ef", "ef1", "efx", "prop", "prop1", "propx", "mms"):
        assert of.approx_ratio(v, owner, notion) < 1.0, notion
        assert not of.is_fair(v, owner, notion), notion
        assert not N.is_fair_ref(v, owner, notion), notion
    assert of.prop_ratio(v, owner) == 0.0 and of.mms_ratio(v, owner) == 0.0


def _cases(seed, count=25):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n, m = int(rng.integers(2, 5)), int(rng.integers(3, 9))
        v = (
            rng.integers(0, 4, (n, m)).astype(float)
            if rng.random() < 0.5
            else rng.pareto(1, (n, m))
        )
        yield v, rng.integers(0, n, m)


@pytest.mark.parametrize("scale", [TINY, HUGE, 1e-13, 1e13])
def test_ratios_are_scale_invariant(scale):
    for v, owner in _cases(0):
        for notion in of.NOTIONS:
            a, b = of.approx_ratio(v, owner, notion), of.approx_ratio(scale * v, owner, notion)
            assert b == pytest.approx(a, rel=1e-9, abs=1e-12), notion


@pytest.mark.parametrize("scale", [TINY, HUGE])
def test_offline_algorithms_are_scale_invariant(scale):
    # the old envy-cycle elimination (absolute 1e-12) gave every good to agent 0 at scale 1e-13
    for v, _ in _cases(1):
        for alg in (of.round_robin, of.envy_cycle_elimination, of.mms_bag_filling):
            assert np.array_equal(alg(v), alg(scale * v)), alg.__name__


def test_envy_cycle_elimination_at_scale_1e13_spreads_the_goods():
    v = 1e-13 * np.random.default_rng(2).uniform(0.5, 1.0, (3, 9))
    owner = of.envy_cycle_elimination(v)
    assert len(set(owner.tolist())) == 3
    assert of.ef1_ratio(v, owner) == 1.0


@pytest.mark.parametrize("scale", [TINY, HUGE])
def test_online_policies_are_scale_invariant(scale):
    rng = np.random.default_rng(3)
    for _ in range(8):
        inst = of.random_instance(3, 9, "correlated", rng)
        small = of.OnlineInstance(scale * inst.values, inst.order)
        cases = [
            (of.CappedGreedy, lambda i: of.NormalizationInfo.exact(i)),
            (of.ThresholdGreedy, lambda i: of.NormalizationInfo.exact(i)),
            (
                lambda: of.MMSThresholdGreedy(mms="exact"),
                lambda i: of.FrequencyPrediction(i.values, "per_agent"),
            ),
            (
                lambda: of.PlanAndMatch(of.envy_cycle_elimination),
                lambda i: of.FrequencyPrediction(i.values, "joint"),
            ),
        ]
        for make, info in cases:
            a = of.divide_online(make(), inst, info(inst))
            b = of.divide_online(make(), small, info(small))
            assert np.array_equal(a.owner, b.owner)


def test_information_validation_is_relative():
    # totals 6e-12 vs a true total of 7e-12 are 14% off: rejected at every scale
    inst = of.OnlineInstance(1e-12 * np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 2.0]]))
    with pytest.raises(ValueError, match="totals do not match"):
        of.divide_online(
            of.CappedGreedy(), inst, of.NormalizationInfo(1e-12 * np.array([6.0, 6.0]))
        )
    bad = of.FrequencyPrediction(1e-12 * np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), "per_agent")
    with pytest.raises(ValueError, match="agent 1 is not within"):
        of.divide_online(of.MMSThresholdGreedy(), inst, bad)
