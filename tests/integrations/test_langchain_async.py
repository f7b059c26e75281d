"""An async LangChain agent keeps its event loop free while antiloop judges a step or a person
decides: a task beside the agent goes on ticking (``awrap_tool_call`` through ``AsyncGuard``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests.conftest import need_module

need_module("langchain.agents", "langchain")

from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from tests.integrations.test_langchain import ScriptedChatModel, script

from antiloop import Guard, GuardConfig
from antiloop.approval import Answer, ApprovalPolicy, Approvals, ApprovalStatus, CallbackChannel
from antiloop.core.history import SessionState
from antiloop.integrations.langchain import AntiloopMiddleware
from antiloop.stores.memory import MemoryStore

pytestmark = pytest.mark.integration

#: How long the old, blocking code held the loop before giving up: a safety limit that makes
#: it fail instead of hanging, not a timing assertion (the new code never waits for it).
LIMIT = 10.0


def shell_tool(ran: list[str]) -> Any:
    @tool
    def Bash(command: str) -> str:  # the tool name the approval policy knows
        """Run a shell command."""
        ran.append(command)
        return "removed"

    return Bash


async def tick_until(done: asyncio.Event, each: Any) -> list[int]:
    """A task beside the agent: ticks until ``done``, calling ``each(tick)``; the ticks."""
    ticks: list[int] = []
    while not done.is_set():
        await asyncio.sleep(0.005)
        ticks.append(len(ticks))
        each(len(ticks))
    return ticks


def test_a_pending_approval_leaves_the_loop_free_and_the_answer_goes_on():
    """The call waits for a person; meanwhile another task ticks, sees the pending request and
    approves it; the tool then runs. The old code waited on the loop: no tick, and the
    request expired (denied)."""
    store = MemoryStore()
    silent = CallbackChannel(lambda request: None, name="dashboard")  # a person answers later
    approvals = Approvals(store, ApprovalPolicy(timeout=LIMIT), [silent], poll=0.05)
    guard = Guard(config=GuardConfig(embedder="ngram"), store=store, approvals=approvals)
    ran: list[str] = []
    agent = create_agent(
        ScriptedChatModel(messages=script("Bash", {"command": "rm -rf build"}, 1)),
        [shell_tool(ran)],
        middleware=[AntiloopMiddleware(guard)],
    )
    seen_pending: list[int] = []

    def each(tick: int) -> None:
        pending = approvals.ledger.list_approvals(status="pending")
        if pending:
            seen_pending.append(tick)
            if len(seen_pending) == 3:  # the loop ran three times while the request waited
                approvals.answer(pending[0].id, Answer.approve("alice", "go ahead"))

    async def main() -> dict[str, Any]:
        done = asyncio.Event()
        ticker = asyncio.create_task(tick_until(done, each))
        try:
            return await agent.ainvoke({"messages": [{"role": "user", "content": "clean up"}]})
        finally:
            done.set()
            await ticker

    out = asyncio.run(main())
    assert len(seen_pending) >= 3
    assert ran == ["rm -rf build"]
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == ["success"]
    (request,) = approvals.ledger.list_approvals(session="default")
    assert (request.status, request.decided_by) == (ApprovalStatus.APPROVED, "alice")


class SlowStore(MemoryStore):
    """A memory store whose transactions wait for the event loop to tick once (or the limit)."""

    def __init__(self) -> None:
        super().__init__()
        self.ticked = threading.Event()
        self.loop_ran: list[bool] = []

    @contextmanager
    def transaction(self, session: str) -> Iterator[SessionState]:
        self.ticked.clear()
        self.loop_ran.append(self.ticked.wait(LIMIT))
        with super().transaction(session) as state:
            yield state


def test_judging_a_step_leaves_the_loop_free():
    """Each step is judged in a worker thread: while the store works, the loop still ticks.
    The old code judged on the loop: the store waited its limit out and saw no tick."""
    store = SlowStore()
    guard = Guard(config=GuardConfig(embedder="ngram"), store=store)
    ran: list[str] = []
    agent = create_agent(
        ScriptedChatModel(messages=script("Bash", {"command": "ls"}, 2)),
        [shell_tool(ran)],
        middleware=[AntiloopMiddleware(guard)],
    )

    async def main() -> dict[str, Any]:
        done = asyncio.Event()
        ticker = asyncio.create_task(tick_until(done, lambda tick: store.ticked.set()))
        try:
            return await agent.ainvoke({"messages": [{"role": "user", "content": "list"}]})
        finally:
            done.set()
            await ticker

    out = asyncio.run(main())
    assert ran == ["ls", "ls"]
    assert store.loop_ran
    assert all(store.loop_ran)  # every judgement: the loop ticked meanwhile
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == ["success", "error"]  # the repeat is still a loop
    assert results[1].response_metadata["antiloop"]["detector"] == "repeat"
