"""The Guard: record, check, enforce, sessions, shadow mode, the decorator."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from antiloop import (
    Action,
    BudgetExceeded,
    GoalReached,
    Guard,
    GuardConfig,
    LoopDetected,
    Step,
)
from antiloop.core.errors import ApprovalDenied, BadStep
from antiloop.testing import CallbackApprover, RecordingListener, ScriptedEmbedder

GREP = {"tool": "grep", "args": {"pattern": "doubleJump", "path": "src"}, "output": "a.ts:1:x\n"}


def test_second_identical_step_stops_with_fingerprint():
    """The same procedure with the same result twice in a row stops at the second."""
    guard = Guard()
    first = guard.record(GREP)
    second = guard.record(GREP)
    assert first.action is Action.CONTINUE
    assert second.action is Action.STOP
    assert second.detector == "repeat"
    assert second.outcome == "loop"
    assert second.fingerprint.startswith("AGENT::agent::grep::double jump@src::")
    assert second.evidence == (0, 1)
    assert "same result" in second.reason
    assert second.hint


def test_changed_result_is_progress():
    """The same call with another result is not a loop."""
    guard = Guard()
    guard.record({**GREP, "output": "a\n"})
    assert guard.record({**GREP, "output": "b\n"}).action is Action.CONTINUE


def test_stopped_session_answers_terminated():
    """After a stop, the session's later steps answer terminated; other sessions go on."""
    guard = Guard()
    guard.record(GREP)
    guard.record(GREP)
    later = guard.record({"tool": "read", "args": {"path": "x"}})
    assert (later.action, later.detector) == (Action.STOP, "terminated")
    other = guard.record({**GREP, "session": "s2"})
    assert other.action is Action.CONTINUE
    assert guard.ended().detector == "repeat"


def test_check_refuses_a_stopped_procedure_when_the_session_goes_on():
    """With repeat_action=block the session goes on but check() refuses the stopped procedure."""
    guard = Guard(config=GuardConfig(repeat_action="block"))
    guard.record(GREP)
    blocked = guard.record(GREP)
    assert blocked.action is Action.BLOCK
    again = guard.check("Grep", {"pattern": "double.*Jump", "path": "./src"})
    assert again.action is Action.BLOCK
    assert again.fingerprint == blocked.fingerprint
    assert guard.check("read", {"path": "src/a.ts"}).action is Action.CONTINUE


def test_check_on_a_fresh_session_continues():
    """Nothing recorded yet: check() lets the call run."""
    assert Guard().check("grep", {"pattern": "x"}).action is Action.CONTINUE


def test_reset_opens_a_fresh_window():
    """A person speaking resets the windows: the next identical step is no repeat."""
    listener = RecordingListener()
    guard = Guard(listeners=[listener])
    guard.record(GREP)
    guard.reset("default", "user prompt")
    assert guard.record(GREP).action is Action.CONTINUE
    assert listener.resets == [("default", "user prompt")]
    assert len(listener.verdicts) == 2


def test_shadow_mode_judges_but_never_blocks():
    """Shadow mode reports what it would do and lets everything through."""
    guard = Guard(mode="shadow")
    guard.record(GREP)
    verdict = guard.record(GREP)
    assert verdict.action is Action.CONTINUE
    assert verdict.detector == "repeat"
    assert verdict.reason.startswith("[shadow: would stop]")
    assert guard.record(GREP).action is Action.CONTINUE
    assert guard.ended() is None


def test_enforce_raises_loop_detected_with_context():
    """enforce() turns a stop into LoopDetected carrying the verdict and fingerprint."""
    guard = Guard()
    guard.record(GREP)
    verdict = guard.record(GREP)
    with pytest.raises(LoopDetected) as info:
        guard.enforce(verdict)
    assert info.value.verdict is verdict
    assert info.value.fingerprint == verdict.fingerprint
    assert info.value.evidence == (0, 1)


def test_enforce_budget_and_goal():
    """Max steps raises BudgetExceeded; the goal raises GoalReached, which is no failure."""
    guard = Guard(config=GuardConfig(max_steps=1))
    with pytest.raises(BudgetExceeded):
        guard.enforce(guard.record({"tool": "read", "args": {"path": "a"}}))
    emb = ScriptedEmbedder(same=[["fix the bug", "fixed the bug"]])
    guard = Guard(config=GuardConfig(min_steps=1, goal_threshold=0.9), embedder=emb)
    verdict = guard.record(
        {"tool": "read", "args": {"path": "a"}, "goal": "fix the bug", "message": "fixed the bug"}
    )
    assert verdict.detector == "goal"
    with pytest.raises(GoalReached):
        guard.enforce(verdict)


def test_ask_goes_to_the_approver():
    """A failure streak asks; the approver's no raises ApprovalDenied."""
    approver = CallbackApprover(lambda verdict: False)
    guard = Guard(approver=approver)
    fail = {"tool": "bash", "exit_code": 1}
    verdicts = [
        guard.record({**fail, "args": {"command": f"make t{i}"}, "output": f"e{i}"})
        for i in range(3)
    ]
    assert verdicts[2].action is Action.ASK
    with pytest.raises(ApprovalDenied):
        guard.enforce(verdicts[2])
    assert approver.asked == [verdicts[2]]


def test_record_rejects_bad_steps():
    """A mapping that is no step raises BadStep naming the problem."""
    with pytest.raises(BadStep, match="'tool'"):
        Guard().record({"args": {}})


def test_session_binds_the_id():
    """Inside guard.session(), steps built with guard.step() land in that session."""
    guard = Guard()
    with guard.session("task-7") as sid:
        assert sid == "task-7"
        step = guard.step("grep", {"pattern": "x"}, output="a")
        guard.record(step)
        guard.record(step)
        assert guard.ended().detector == "repeat"
    assert step.session == "task-7"
    assert guard.ended() is None


def test_wrap_raises_on_the_second_identical_call():
    """A wrapped tool runs once, and the identical second call raises LoopDetected."""
    guard = Guard()
    calls = []

    @guard.wrap
    def search(pattern: str, path: str = ".") -> str:
        calls.append(pattern)
        return "no matches"

    assert search("x") == "no matches"
    with pytest.raises(LoopDetected) as info:
        search("x", path=".")
    assert info.value.fingerprint.startswith("AGENT::agent::search::")
    with pytest.raises(LoopDetected):
        search("y")  # the session is over: refused before running
    assert calls == ["x", "x"]


def test_wrap_records_exceptions_as_errors():
    """A wrapped tool that raises is recorded as a failed step and the error is re-raised."""
    listener = RecordingListener()
    guard = Guard(listeners=[listener])

    @guard.wrap(tool="fetch_page", agent="researcher")
    def fetch(url: str) -> str:
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        fetch("http://a")
    step, _ = listener.verdicts[0]
    assert step.tool == "fetch_page"
    assert step.agent == "researcher"
    assert step.error == "TimeoutError: slow"


def test_wrap_supports_async_functions():
    """An async tool is guarded the same way."""
    guard = Guard()

    @guard.wrap
    async def lookup(key: str) -> dict[str, int]:
        return {"hits": 0}

    async def run() -> None:
        assert await lookup("k") == {"hits": 0}
        with pytest.raises(LoopDetected):
            await lookup("k")

    asyncio.run(run())


def test_a_wrapped_async_tool_is_checked_and_recorded_off_the_event_loop():
    """The check and the record (store calls, a person's approval) run in a worker thread."""
    import threading

    guard = Guard()
    threads: dict[str, int] = {}
    check, record = guard.check, guard.record

    def checking(*args: object, **kwargs: object) -> object:
        threads["check"] = threading.get_ident()
        return check(*args, **kwargs)  # type: ignore[arg-type]

    def recording(*args: object, **kwargs: object) -> object:
        threads["record"] = threading.get_ident()
        return record(*args, **kwargs)  # type: ignore[arg-type]

    guard.check, guard.record = checking, recording  # type: ignore[method-assign,assignment]

    @guard.wrap
    async def lookup(key: str) -> dict[str, int]:
        threads["tool"] = threading.get_ident()
        return {"hits": 0}

    assert asyncio.run(lookup("k")) == {"hits": 0}
    assert threads["check"] != threads["tool"]
    assert threads["record"] != threads["tool"]


def test_equal_loops_give_equal_fingerprints_in_separate_processes():
    """The same loop fingerprinted in two fresh processes gives the same string."""
    code = (
        "import json,sys;from antiloop import Guard;g=Guard();"
        "s=json.loads(sys.argv[1]);g.record(s);print(g.record(s).fingerprint)"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(GREP)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1
    guard = Guard()
    guard.record(GREP)
    assert guard.record(GREP).fingerprint + "\n" in runs


def test_repr_reads_like_the_policy():
    """The guard's repr shows its detector tree."""
    text = repr(Guard())
    assert "Repeat(threshold=2)" in text
    assert "Cycle(max_period=4)" in text


def test_step_defaults():
    """A bare step belongs to the default session and agent and has not failed."""
    step = Step(tool="x")
    assert (step.session, step.agent, step.failed) == ("default", "agent", False)


def test_secrets_never_reach_the_fingerprint_or_the_reason():
    """A token in a repeated command is redacted in the fingerprint, the reason and the hint."""
    step = {
        "tool": "Bash",
        "args": {
            "command": "curl -H 'Authorization: Bearer sk-ant-abcdefghijklmnopqrstuv' https://x"
        },
        "output": "error: 401 for token sk-ant-abcdefghijklmnopqrstuv",
        "exit_code": 22,
    }
    guard = Guard()
    guard.record(step)
    verdict = guard.record(step)
    assert verdict.detector == "repeat"
    for text in (verdict.fingerprint, verdict.reason, verdict.hint):
        assert "sk-ant-abcdefghijklmnopqrstuv" not in text
        assert "[REDACTED]" in text
    assert len(verdict.fingerprint.split("::")) == 5
