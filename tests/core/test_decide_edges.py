"""The decision core at its edges: the policy a config describes, windows, streaks, refusals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from antiloop import Action, GuardConfig, Step, Verdict
from antiloop.core import decide
from antiloop.core.deferred import BUDGET
from antiloop.core.history import History, SessionState
from antiloop.core.step import FileState
from antiloop.defaults import policy_of

LEAKED = "OPENAI_API_KEY=sk-proj-a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2"


def _none(history: History) -> Verdict | None:
    return None


def _policy(detector=_none, **changes: object) -> decide.Policy:  # type: ignore[no-untyped-def]
    return decide.Policy(detector, **changes)  # type: ignore[arg-type]


def test_the_policy_without_the_cycle_detector_looks_back_one_step():
    policy = policy_of(GuardConfig(detectors=("repeat",), cycle_max_period=6), _none)
    assert policy.lookback == 1
    assert policy.window == 2


def test_the_policy_windows_follow_the_config():
    config = GuardConfig(cycle_max_period=4, repeat_threshold=2, stagnation_window=5)
    policy = policy_of(config, _none)
    assert (policy.lookback, policy.window, policy.messages) == (4, 8, 6)
    config = GuardConfig(cycle_max_period=2, repeat_threshold=10, mode="shadow")
    policy = policy_of(config, _none)
    assert (policy.lookback, policy.window, policy.mode) == (2, 10, "shadow")


def test_an_unchecked_config_still_keeps_one_step():
    """A cycle period of 0 looks back one step; an unchecked repeat threshold keeps one."""
    policy = policy_of(GuardConfig(cycle_max_period=0, repeat_threshold=1), _none)
    assert (policy.lookback, policy.window) == (1, 1)
    policy = policy_of(GuardConfig(cycle_max_period=0, repeat_threshold=0), _none)
    assert (policy.lookback, policy.window) == (1, 1)


def test_the_budgets_see_the_session_the_step_and_the_detectors_verdict():
    def budgets(state: SessionState, step: Step, verdict: Verdict | None) -> Verdict:
        seen = verdict.detector if verdict is not None else None
        return Verdict.nudge("max-steps", f"{state.steps} {step.tool} {seen}")

    def repeat(history: History) -> Verdict:
        return Verdict.nudge("repeat", "again")

    policy = _policy(repeat, budgets=budgets)
    verdict = decide.judge(SessionState(), Step(tool="Read", args={"p": 1}), policy)[0]
    assert (verdict.action, verdict.detector, verdict.reason) == (
        Action.NUDGE,
        "max-steps",
        "1 Read repeat",
    )


def test_a_nudge_keeps_the_detectors_own_escalation():
    def nudge(history: History) -> Verdict:
        return Verdict.nudge("repeat", "again", escalate_to="human")

    verdict = decide.judge(SessionState(), Step(tool="Read"), _policy(nudge))[0]
    assert verdict.escalate_to == "human"


def test_a_verdicts_reason_and_hint_are_redacted():
    def leaky(history: History) -> Verdict:
        return Verdict.nudge("repeat", f"saw {LEAKED}", hint=f"drop {LEAKED}")

    verdict = decide.judge(SessionState(), Step(tool="Read"), _policy(leaky))[0]
    assert verdict.reason == "saw OPENAI_API_KEY=[REDACTED]"
    assert verdict.hint == "drop OPENAI_API_KEY=[REDACTED]"


def _block(history: History) -> Verdict:
    return Verdict.block("repeat", "again")  # no fingerprint


def test_a_stopped_procedure_without_a_fingerprint_is_refused_with_an_empty_one():
    state = SessionState()
    policy = _policy(_block)
    decide.judge(state, Step(tool="Edit", args={"f": "a"}), policy)
    refused = decide.refuse(state, "Edit", {"f": "a"}, "agent", (), None, policy)
    assert (refused.action, refused.outcome, refused.fingerprint) == (Action.BLOCK, "loop", "")


def test_a_refusal_in_shadow_mode_is_only_reported():
    state = SessionState()
    decide.judge(state, Step(tool="Edit", args={"f": "a"}), _policy(_block))
    shadow = _policy(_block, mode="shadow")
    refused = decide.refuse(state, "Edit", {"f": "a"}, "agent", (), None, shadow)
    assert refused.action is Action.CONTINUE
    assert refused.reason.startswith("[shadow: would block] edit ")


def test_a_success_clears_the_failing_tool():
    state, policy = SessionState(), _policy()
    decide.observe(state, Step(tool="Bash", args={"command": "make"}, error="E: x"), policy)
    history = decide.observe(state, Step(tool="Read", args={"p": 1}, output="ok"), policy)
    assert (history.stream.fail_tool, history.stream.fails) == ("", 0)


def test_a_streaks_evidence_keeps_the_last_sixteen_failures():
    state, policy = SessionState(), _policy(failure_streak=3)
    for i in range(20):
        step = Step(tool="Bash", args={"command": f"make {i}"}, error="Error: boom")
        history = decide.observe(state, step, policy)
    assert history.stream.fails == 20
    assert history.stream.fail_steps == tuple(range(4, 20))
    assert len(history.stream.fail_errors) == 16


def test_a_tool_that_runs_nothing_fails_by_its_error_alone():
    """The output of a tool that runs nothing does not make its failures differ."""
    state, policy = SessionState(), _policy()
    for i, text in enumerate(("Error: first", "Error: second")):
        step = Step(tool="Read", args={"p": i}, output=text, exit_code=1)
        history = decide.observe(state, step, policy)
    errors = history.stream.fail_errors
    assert len(errors) == 2
    assert errors[0] == errors[1]


def test_a_shell_command_of_read_only_parts_none_allowed_is_not_allowed():
    proc = decide.procedure_of("Bash", {"command": "cat a | grep b"}, (), None)
    assert decide.allowed("bash", proc, frozenset({"make"})) is False


@pytest.fixture
def small_budget() -> Iterator[None]:
    """A text budget of 2 KiB: a few small texts push the oldest out."""
    limit = BUDGET.limit
    BUDGET.clear()
    BUDGET.limit = 2048
    yield
    BUDGET.clear()
    BUDGET.limit = limit


def _evicted_then(old: Step, new: Step) -> object:
    """How ``new`` is the same as ``old`` once ``old``'s text is pushed out of the budget."""
    state, policy = SessionState(), _policy()
    first = decide.observe(state, old, policy).record
    assert first is not None
    noise = [SessionState() for _ in range(40)]  # kept alive: their texts stay in the budget
    for i, other in enumerate(noise):
        decide.observe(other, Step(tool="noise", args={"i": i}, output="n" * 60), policy)
    assert not first.read
    record = decide.observe(state, new, policy).record
    assert record is not None
    return record.same_as[0]


def test_a_gone_text_with_the_same_output_but_another_exit_code_is_not_the_same(small_budget):
    make = {"command": "make"}
    old = Step(tool="Bash", args=make, output="boom\n", exit_code=1)
    assert _evicted_then(old, replace(old, exit_code=1)) is not None
    assert _evicted_then(old, replace(old, exit_code=2)) is None


def test_a_gone_text_with_the_same_output_but_a_changed_file_is_not_the_same(small_budget):
    edit = {"file_path": "/w/a.py"}
    old = Step(tool="Edit", args=edit, output="ok", file_states={"/w/a.py": FileState("1")})
    assert _evicted_then(old, old) is not None
    assert _evicted_then(old, replace(old, file_states={"/w/a.py": FileState("2")})) is None
