"""Teacher Retirement, GRPO advantages, DAPO filter and overlong penalty against brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from icml26_onepo import (
    RetirementController,
    dapo_keep_groups,
    grpo_advantages,
    inject_teacher,
    overlong_penalty,
    retained_teacher_indices,
    reward_at_last_token,
)


def test_grpo_advantages_match_numpy():
    rng = np.random.default_rng(0)
    r = rng.random(12)
    adv = grpo_advantages(torch.tensor(r), 4).numpy()
    for g in range(3):
        x = r[4 * g : 4 * g + 4]
        np.testing.assert_allclose(
            adv[4 * g : 4 * g + 4], (x - x.mean()) / (x.std(ddof=1) + 1e-6), rtol=1e-12
        )
    raw = grpo_advantages(torch.tensor(r), 4, norm_by_std=False).numpy()
    np.testing.assert_allclose(raw[:4], r[:4] - r[:4].mean(), rtol=1e-12)
    single = grpo_advantages(torch.tensor(r), 1).numpy()
    np.testing.assert_allclose(single, r / (1 + 1e-6), rtol=1e-12)  # verl: mean 0, std 1
    with pytest.raises(ValueError, match="group_size"):
        grpo_advantages(torch.tensor(r), 5)
    with pytest.raises(ValueError, match="rewards"):
        grpo_advantages(torch.tensor([1.0, float("nan")]), 2)


def test_retained_is_strict():
    assert retained_teacher_indices([1.0, 0.5, 0.51, float("nan")], [0.5, 0.2]) == [0, 2]
    assert retained_teacher_indices([0.5], [0.5, 0.1]) == []  # a tie retires
    with pytest.raises(ValueError, match="on_policy_rewards"):
        retained_teacher_indices([1.0], [])
    with pytest.raises(ValueError, match="on_policy_rewards"):
        retained_teacher_indices([1.0], [float("nan")])


def test_inject_teacher_semantics():
    n = 4
    students = torch.tensor(
        [
            0.0,
            0.2,
            0.1,
            0.0,
            1.0,
            0.3,
            0.0,
            0.0,
            0.5,
            0.5,
            0.5,
            0.5,
            0.0,
            0.0,
            0.0,
            0.0,
            0.9,
            0.0,
            0.0,
            0.0,
        ]
    )
    teacher = [
        1.0,
        1.0,
        0.5,
        None,
        0.95,
    ]  # beats, ties the best (retires), ties (retires), none, beats
    res = inject_teacher(students, teacher, n, seed=123)
    # the seeded draws: rng.integers(g*n, g*n+n) in group order, for retained groups only
    rng = np.random.default_rng(123)
    want = [int(rng.integers(0, 4)), -1, -1, -1, int(rng.integers(16, 20))]
    assert res.rows == want
    assert res.candidates == 4 and res.replaced == 2 and res.retired == 2
    assert res.retirement_rate == 0.5
    assert res.rewards.shape == students.shape  # group size preserved
    assert res.teacher_rows.nonzero().flatten().tolist() == [want[0], want[4]]
    expected = students.clone()
    expected[want[0]] = 1.0
    expected[want[4]] = 0.95
    assert torch.equal(res.rewards, expected)
    # the teacher can replace the best student (uniform over the whole group)
    hits = {inject_teacher(students[:4], [1.0], n, seed=s).rows[0] for s in range(40)}
    assert hits == {0, 1, 2, 3}
    # under GRPO the injected row has the largest advantage of its group, hence positive
    adv = grpo_advantages(res.rewards, n)
    assert adv[want[0]] > 0 and adv[want[4]] > 0
    with pytest.raises(ValueError, match="teacher_rewards"):
        inject_teacher(students, [1.0], n, seed=0)
    with pytest.raises(ValueError, match="seed"):
        inject_teacher(students, teacher, n)


def test_nan_teacher_reward_is_a_retired_candidate():
    res = inject_teacher(torch.zeros(4), [float("nan"), None], 2, seed=0)
    assert res.rows == [-1, -1] and res.candidates == 1 and res.retirement_rate == 1.0


def test_reward_at_last_token():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    out = reward_at_last_token(torch.tensor([0.5, 1.0, 2.0, 3.0]), mask)
    want = torch.zeros(4, 4)
    want[0, 2], want[1, 0], want[2, 0], want[3, 3] = 0.5, 1.0, 2.0, 3.0
    assert torch.equal(out, want)
    assert torch.equal(out.sum(-1), torch.tensor([0.5, 1.0, 2.0, 3.0]))


def test_controller_plateau_semantics():
    c = RetirementController(
        plateau_window=3, plateau_tolerance=0.01, plateau_min_retirement_rate=0.9
    )
    assert c.teacher_enabled(0)
    assert c.observe(9, 10)  # 0.9
    assert c.observe(19, 20)  # 0.95: window not full yet
    assert c.observe(0, 0)  # no candidates: not recorded
    assert c.observe(10, 10)  # [0.9, 0.95, 1.0]: spread 0.1 > 0.01
    assert c.observe(10, 10)  # [0.95, 1, 1]: spread 0.05
    assert not c.observe(10, 10)  # [1, 1, 1]: plateau, stop
    assert c.disabled_reason is not None and "plateau" in c.disabled_reason
    assert not c.teacher_enabled(100) and not c.observe(0, 10)  # stays off
    # high but below the minimum rate never stops
    c = RetirementController(plateau_window=2, plateau_min_retirement_rate=0.9)
    assert all(c.observe(89, 100) for _ in range(5))
    # every rate of the window must reach the minimum, not just one
    c = RetirementController(
        plateau_window=2, plateau_tolerance=0.05, plateau_min_retirement_rate=0.9
    )
    assert c.observe(88, 100) and c.observe(91, 100)  # spread 0.03 but 0.88 < 0.9
    assert not c.observe(92, 100)  # [0.91, 0.92]
    # default: never stops
    c = RetirementController()
    assert all(c.observe(10, 10) for _ in range(10)) and c.teacher_enabled(10**6)


def test_controller_step_cap():
    c = RetirementController(max_teacher_steps=3)
    assert [c.teacher_enabled(s) for s in range(1, 4)] == [True, True, True]
    assert not c.teacher_enabled(4) and not c.teacher_enabled(1)
    assert not RetirementController(max_teacher_steps=0).teacher_enabled(0)
    for bad in (
        dict(max_teacher_steps=-2),
        dict(plateau_window=0),
        dict(plateau_min_retirement_rate=1.5),
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            RetirementController(**bad)


def test_dapo_filter_and_overlong_penalty():
    acc = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    assert dapo_keep_groups(acc, 2).tolist() == [False, True, False, False]
    assert dapo_keep_groups(acc, 4).tolist() == [True, True]
    assert dapo_keep_groups(acc, 1).all()
    pen = overlong_penalty(
        torch.tensor([100, 4000, 6000, 8000]), 8000, buffer_length=4000, penalty_factor=0.6
    )
    torch.testing.assert_close(pen, torch.tensor([0.0, 0.0, -0.3, -0.6]))
    with pytest.raises(ValueError, match="buffer_length"):
        overlong_penalty(torch.tensor([1]), 10, buffer_length=20)


def test_retirement_rate_without_any_teacher_is_one():
    """No group has a teacher: no candidate, rate 1.0 (the official metric), nothing replaced."""
    res = inject_teacher(torch.zeros(6), [None, None, None], 2, seed=0)
    assert res.candidates == 0 and res.replaced == 0 and res.retired == 0
    assert res.retirement_rate == 1.0
    assert not res.teacher_rows.any() and res.rows == [-1, -1, -1]


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_infinite_teacher_reward_is_refused(bad):
    with pytest.raises(ValueError, match="teacher_rewards"):
        inject_teacher(torch.zeros(4), [bad, 1.0], 2, seed=0)
