"""Each detector alone, and their composition."""

from __future__ import annotations

import pytest

from antiloop import (
    Action,
    AllOf,
    AnyOf,
    Cycle,
    FailStreak,
    Guard,
    GuardConfig,
    MaxSteps,
    Repeat,
    Verdict,
)
from antiloop.testing import ScriptedEmbedder, verdicts_of

A = {"tool": "grep", "args": {"pattern": "a"}, "output": "x\n"}
B = {"tool": "read", "args": {"path": "b.py"}, "output": "y\n"}
C = {"tool": "read", "args": {"path": "c.py"}, "output": "z\n"}


def first_fired(verdicts):
    return next(((i, v) for i, v in enumerate(verdicts) if v.fired), (None, None))


@pytest.mark.parametrize(
    ("sequence", "period", "index"),
    [
        ([A, B, A, B], 2, 3),
        ([A, B, C, A, B, C], 3, 5),
        ([C, A, B, C, A, B], 3, 5),
    ],
)
def test_cycle_stops_when_the_second_copy_completes(sequence, period, index):
    """A p-step sequence run twice with the same results stops at its last step."""
    guard = Guard(Cycle(4))
    at, verdict = first_fired(verdicts_of(guard, sequence))
    assert (at, verdict.detector, verdict.action) == (index, "cycle", Action.STOP)
    assert f"period {period}" in verdict.fingerprint
    assert len(verdict.evidence) == 2 * period


def test_cycle_context_lists_the_operations():
    """The cycle's context is its operations joined by '>'."""
    verdicts = verdicts_of(Guard(Cycle(4)), [A, B, A, B])
    assert verdicts[3].fingerprint.startswith("AGENT::agent::cycle::grep>read::period 2#")


def test_cycle_needs_the_same_results():
    """A-B-A-B where B's result changed is no cycle."""
    b2 = {**B, "output": "changed\n"}
    assert first_fired(verdicts_of(Guard(Cycle(4)), [A, B, A, b2])) == (None, None)


def test_cycle_period_must_be_primitive():
    """A-A-A-A is a repeat, not a cycle of period 2."""
    assert first_fired(verdicts_of(Guard(Cycle(4)), [A, A, A, A])) == (None, None)


def test_cycle_respects_max_period():
    """A period longer than max_period is not looked for."""
    assert first_fired(verdicts_of(Guard(Cycle(2)), [A, B, C, A, B, C])) == (None, None)


def test_repeat_threshold_three():
    """With threshold 3, the third identical step stops."""
    at, verdict = first_fired(verdicts_of(Guard(Repeat(3)), [A, A, A]))
    assert at == 2
    assert verdict.evidence == (0, 1, 2)


def test_fail_streak_asks_and_counts_afresh():
    """Three failures of one tool ask; the next three ask again."""
    steps = [
        {"tool": "Bash", "args": {"command": f"make t{i}"}, "output": f"e{i}", "exit_code": 2}
        for i in range(6)
    ]
    verdicts = verdicts_of(Guard(FailStreak(3)), steps)
    asked = [i for i, v in enumerate(verdicts) if v.action is Action.ASK]
    assert asked == [2, 5]
    assert verdicts[2].fingerprint.startswith("AGENT::agent::fail-streak::build::")
    assert verdicts[2].evidence == (0, 1, 2)


def test_fail_streak_is_broken_by_a_success_or_another_tool():
    """A success or another tool's failure in between breaks the streak."""
    fail = {"tool": "bash", "args": {"command": "x"}, "exit_code": 1}
    ok = {"tool": "bash", "args": {"command": "y"}, "exit_code": 0}
    other = {"tool": "python", "args": {"code": "z"}, "error": "boom"}
    seq = [fail, {**fail, "output": "1"}, ok, fail, other, {**fail, "output": "2"}]
    assert first_fired(verdicts_of(Guard(FailStreak(3)), seq)) == (None, None)


def test_max_steps_counts_the_whole_session():
    """Steps of every agent count towards the session budget."""
    steps = [{**C, "agent": f"a{i}", "args": {"path": f"{i}.py"}} for i in range(3)]
    at, verdict = first_fired(verdicts_of(Guard(MaxSteps(3)), steps))
    assert (at, verdict.detector, verdict.outcome) == (2, "max-steps", "budget")
    assert verdict.fingerprint is None


def test_task_type_sets_the_budget():
    """task_type picks the default budget."""
    assert GuardConfig(task_type="simple").budget == 25
    assert GuardConfig(task_type="coding").budget == 250
    assert GuardConfig(task_type="other").budget == 100


def test_or_flattens_and_keeps_the_worst():
    """a | b | c is one flat AnyOf, and a stop beats an ask."""
    policy = Repeat() | Cycle() | FailStreak().with_action(Action.NUDGE)
    assert isinstance(policy, AnyOf)
    assert len(policy.detectors) == 3
    assert "FailStreak(threshold=3).with_action(Action.NUDGE)" in repr(policy)


def test_plain_functions_compose():
    """A plain function is a detector on either side of | and &."""

    def always(history):
        return Verdict.nudge("custom", "always")

    policy = always | Repeat()
    assert isinstance(policy, AnyOf)
    verdict = Guard(policy).record(A)
    assert (verdict.action, verdict.detector) == (Action.NUDGE, "custom")
    both = Repeat() & always
    assert isinstance(both, AllOf)
    verdicts = verdicts_of(Guard(both), [A, A])
    assert verdicts[0].action is Action.CONTINUE
    assert verdicts[1].detector == "repeat"


def test_allow_listed_tools_are_invisible():
    """An allowed tool neither counts nor breaks a run."""
    sleep = {"tool": "Bash", "args": {"command": "sleep 5"}, "output": ""}
    guard = Guard(config=GuardConfig(allow_repeat_tools=("sleep",)))
    verdicts = verdicts_of(guard, [sleep, sleep, A, sleep, A])
    assert [v.detector for v in verdicts] == [None, None, None, None, "repeat"]


def test_stagnation_masks_digits_but_sees_measures_move():
    """attempt 3 -> attempt 4 is stagnation; 12 failing -> 2 failing is progress."""
    emb = ScriptedEmbedder()  # masked texts are identical, so their vectors are too
    config = GuardConfig(min_steps=1, detectors=("stagnation",))
    counter = [
        {**C, "args": {"path": f"{i}"}, "message": f"Retrying, attempt {i} of the same fix."}
        for i in range(4)
    ]
    at, verdict = first_fired(verdicts_of(Guard(config=config, embedder=emb), counter))
    assert (at, verdict.detector, verdict.outcome) == (3, "stagnation", "stalled")
    measure = [
        {**C, "args": {"path": f"{i}"}, "message": f"Tests: {n} failing after the change."}
        for i, n in enumerate((12, 7, 4, 2))
    ]
    assert first_fired(verdicts_of(Guard(config=config, embedder=emb), measure)) == (None, None)


def test_three_blank_messages_stagnate():
    """Three blank messages in a row are stagnation."""
    config = GuardConfig(min_steps=1, detectors=("stagnation",))
    steps = [{**C, "args": {"path": f"{i}"}, "message": " "} for i in range(3)]
    at, verdict = first_fired(verdicts_of(Guard(config=config, embedder=ScriptedEmbedder()), steps))
    assert (at, verdict.detector) == (2, "stagnation")


def test_goal_needs_similarity_and_no_negation():
    """A message like the goal reaches it; 'still not fixed' never does."""
    emb = ScriptedEmbedder(
        same=[["The login bug is fixed.", "The login bug is still not fixed.", "fix the login bug"]]
    )
    config = GuardConfig(min_steps=1, goal_threshold=0.9, detectors=("goal",))
    goal = {"goal": "fix the login bug"}
    negated = {**C, **goal, "message": "The login bug is still not fixed."}
    done = {**C, "args": {"path": "d"}, "message": "The login bug is fixed."}
    verdicts = verdicts_of(Guard(config=config, embedder=emb), [negated, done])
    assert [v.detector for v in verdicts] == [None, "goal"]
    assert verdicts[1].outcome == "goal"


def test_min_steps_holds_semantic_checks_only():
    """min_steps delays goal and stagnation, never the loop rule."""
    emb = ScriptedEmbedder(same=[["done", "goal"]])
    guard = Guard(config=GuardConfig(min_steps=3, goal_threshold=0.5), embedder=emb)
    first = guard.record({**A, "goal": "goal", "message": "done"})
    assert first.action is Action.CONTINUE
    assert guard.record(A).detector == "repeat"
