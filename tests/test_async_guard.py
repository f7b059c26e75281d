"""AsyncGuard: the Guard's decisions, awaited; the store in worker threads, people awaited."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from antiloop import Action, AsyncGuard, Guard, GuardConfig, Listener, Step, Verdict
from antiloop.approval import Answer, ApprovalPolicy, Approvals, ApprovalStatus
from antiloop.budgets import Budgets, Limit, spent
from antiloop.core.errors import ApprovalDenied
from antiloop.stores.memory import MemoryStore

RM = {"command": "rm -rf build"}


class Silent:
    """A channel that tells nobody: the answer comes from another task."""

    name = "web"

    def deliver(self, request: Any, answer: Any) -> None:
        """Deliver nothing; the store holds the request."""


def _guard(**kw: Any) -> Guard:
    return Guard(config=GuardConfig(embedder="ngram"), **kw)


def _stream() -> list[Step]:
    grep = {"tool": "Grep", "args": {"pattern": "x"}, "session": "s"}
    return [
        Step(**grep, output="nothing"),
        Step(tool="Read", args={"file_path": "a.py"}, output="1", session="s"),
        Step(**grep, output="nothing"),
        Step(**grep, output="nothing"),
        Step(tool="Read", args={"file_path": "b.py"}, output="2", session="s"),
    ]


async def _answer_when_asked(approvals: Approvals, answer: Callable[[Any], Answer]) -> int:
    """Another task: wait (ticking) until a request is pending, then answer it; the ticks."""
    ticks = 0
    while True:
        ticks += 1
        pending = approvals.ledger.list_approvals(status="pending")
        if pending:
            approvals.answer(pending[0].id, answer(pending[0]))
            return ticks
        await asyncio.sleep(0.005)


def test_the_verdicts_are_the_guards():
    """Over one stream, AsyncGuard.record and .check give exactly Guard's verdicts."""
    plain = _guard()
    expected = [plain.record(s) for s in _stream()]
    expected.append(plain.check("Grep", {"pattern": "x"}, session="s"))

    async def run() -> list[Verdict]:
        aguard = AsyncGuard(_guard())
        got = [await aguard.record(s) for s in _stream()]
        got.append(await aguard.check("Grep", {"pattern": "x"}, session="s"))
        return got

    got = asyncio.run(run())
    assert got == expected
    assert got[3].action is Action.STOP


def test_the_store_is_worked_off_the_event_loop():
    """Judging (and the listeners) run in a worker thread, never on the loop's thread."""
    threads: list[int] = []

    class Where(Listener):
        def on_verdict(self, step: Step, verdict: Verdict) -> None:
            threads.append(threading.get_ident())

    async def run() -> int:
        aguard = AsyncGuard(_guard(listeners=[Where()]))
        await aguard.record(_stream()[0])
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert threads
    assert loop_thread not in threads


def test_a_person_is_awaited_and_edits_the_call():
    """gate() awaits the person: another task answers the pending request with an edit."""
    store = MemoryStore()
    approvals = Approvals(store, channels=[Silent()], poll=0.05)
    aguard = AsyncGuard(_guard(store=store, approvals=approvals))
    edit = Answer.edit("bob", {"command": "rm -rf build/tmp"})

    async def run() -> tuple[Any, int]:
        answering = asyncio.create_task(_answer_when_asked(approvals, lambda r: edit))
        gate = await aguard.gate("Bash", RM, session="s")
        return gate, await answering

    gate, ticks = asyncio.run(run())
    assert ticks >= 1
    assert gate.allowed
    assert gate.args == {"command": "rm -rf build/tmp"}
    assert gate.request.status is ApprovalStatus.EDITED


def test_a_denied_call_is_blocked_and_a_stop_ends_the_session():
    """A deny with ``stop`` blocks the call; the next check stops, the session has ended."""
    store = MemoryStore()
    approvals = Approvals(store, channels=[Silent()], poll=0.05)
    aguard = AsyncGuard(_guard(store=store, approvals=approvals))
    no = Answer.deny("carol", "not now", stop=True)

    async def run() -> tuple[Verdict, Verdict, Verdict | None]:
        answering = asyncio.create_task(_answer_when_asked(approvals, lambda r: no))
        denied = await aguard.check("Bash", RM, session="s")
        await answering
        stopped = await aguard.check("Read", {"file_path": "a.py"}, session="s")
        return denied, stopped, await aguard.ended("s")

    denied, stopped, ended = asyncio.run(run())
    assert (denied.action, denied.outcome) == (Action.BLOCK, "denied")
    assert "not now" in denied.hint
    assert (stopped.action, stopped.detector) == (Action.STOP, "person")
    assert ended == stopped
    with pytest.raises(ApprovalDenied):
        asyncio.run(aguard.enforce(denied, "s"))


def test_an_escalated_loop_stop_is_awaited_and_the_windows_reset():
    """record() brings the loop stop to a person; their yes resets the session's windows."""
    store = MemoryStore()
    approvals = Approvals(store, ApprovalPolicy(escalate_to="human"), [Silent()], poll=0.05)
    aguard = AsyncGuard(_guard(store=store, approvals=approvals))
    yes = Answer.approve("al", "ok, once more")
    grep = Step(tool="Grep", args={"pattern": "x"}, output="nothing", session="s")

    async def run() -> tuple[Verdict, Verdict | None, Verdict]:
        await aguard.record(grep)
        answering = asyncio.create_task(_answer_when_asked(approvals, lambda r: yes))
        escalated = await aguard.record(grep)
        await answering
        return escalated, await aguard.ended("s"), await aguard.record(grep)

    escalated, ended, again = asyncio.run(run())
    assert (escalated.action, escalated.hint) == (Action.NUDGE, "A person says: ok, once more")
    assert ended is None
    assert again.action is Action.CONTINUE  # the windows started over
    (request,) = approvals.ledger.list_approvals(session="s")
    assert (request.risk, request.decided_by) == ("loop", "al")


def test_a_budget_check_in_is_awaited_and_the_edit_raises_the_limit():
    """A soft limit's check-in waits for the person; their edited limit is the guard's now."""
    store = MemoryStore()
    approvals = Approvals(store, channels=[Silent()], poll=0.05)
    budgets = Budgets(session=Limit(soft_usd=1.0, hard_usd=10.0))
    aguard = AsyncGuard(_guard(store=store, approvals=approvals, budgets=budgets))

    def step(n: int) -> Step:
        return Step(tool="Read", args={"file_path": f"{n}.py"}, output=str(n), session="s")

    def raise_to_4(request: Any) -> Answer:
        assert request.args["session_spent_usd"] == pytest.approx(1.2)
        return Answer.edit("carol", {**request.args, "session_soft_usd": 4.0})

    async def run() -> list[Verdict]:
        out = [await aguard.record({**step(0).to_dict(), "cost_usd": 0.8})]
        answering = asyncio.create_task(_answer_when_asked(approvals, raise_to_4))
        out.append(await aguard.record({**step(1).to_dict(), "cost_usd": 0.4}))
        await answering
        out.extend(
            [await aguard.record({**step(n).to_dict(), "cost_usd": 0.4}) for n in range(2, 8)]
        )
        return out

    verdicts = asyncio.run(run())
    assert {v.action for v in verdicts} == {Action.CONTINUE}
    assert "Approved by carol" in verdicts[1].reason
    assert round(spent(store, "s").cost_usd, 6) == 3.6


def test_it_takes_a_guard_or_the_guards_arguments():
    """AsyncGuard(guard) drives that guard; AsyncGuard(**options) makes one; not both."""
    guard = _guard()
    assert AsyncGuard(guard).guard is guard
    assert AsyncGuard(mode="shadow").guard.mode == "shadow"
    with pytest.raises(TypeError):
        AsyncGuard(guard, mode="shadow")
