"""The Guard for event loops: the same decisions, with the store and the people awaited.

    aguard = AsyncGuard(Guard(approvals=approvals))
    verdict = await aguard.check("Bash", {"command": "make"}, session="s1")
    verdict = await aguard.record(step)

An ``AsyncGuard`` holds a ``Guard`` and runs its own steps: the store's work (judging a step,
reading a session) in a worker thread (``asyncio.to_thread``), and a person's approval awaited
(``Approvals.agate``, ``Approvals.aescalate``), so the event loop goes on serving other tasks
while a step is judged or a request waits. The decisions are the guard's and the approvals':
nothing is decided here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from antiloop.core.errors import ApprovalDenied
from antiloop.core.step import Step
from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard

if TYPE_CHECKING:
    from antiloop.approval import Approvals, Gate
    from antiloop.config import GuardConfig
    from antiloop.stores import Store


class AsyncGuard:
    """A ``Guard`` whose ``check`` and ``record`` are awaited and never block the event loop.

    Args:
        guard: the guard to drive; by default a ``Guard(**options)``.
        **options: the ``Guard`` arguments, when no guard is given.

    Example:
        >>> import asyncio
        >>> aguard = AsyncGuard()
        >>> step = Step(tool="grep", args={"pattern": "x"}, output="a")
        >>> async def twice():
        ...     return [(await aguard.record(step)).action.wire for _ in range(2)]
        >>> asyncio.run(twice())
        ['continue', 'stop']
    """

    def __init__(self, guard: Guard | None = None, **options: Any) -> None:
        if guard is not None and options:
            raise TypeError("give a guard or the Guard's arguments, not both")
        self.guard = guard if guard is not None else Guard(**options)

    def __repr__(self) -> str:
        return f"AsyncGuard({self.guard!r})"

    @classmethod
    def from_config(cls, source: Any, **kw: Any) -> AsyncGuard:
        """An AsyncGuard over ``Guard.from_config(source, **kw)``."""
        return cls(Guard.from_config(source, **kw))

    @property
    def store(self) -> Store:
        """The guard's store."""
        return self.guard.store

    @property
    def approvals(self) -> Approvals | None:
        """The guard's approvals."""
        return self.guard.approvals

    @property
    def config(self) -> GuardConfig:
        """The guard's settings."""
        return self.guard.config

    # -- before a call ---------------------------------------------------------------------

    async def check(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        agent: str = "agent",
        paths: Sequence[str] = (),
        cwd: str | None = None,
    ) -> Verdict:
        """``Guard.check``, awaited."""
        gate = await self.gate(tool, args, session=session, agent=agent, paths=paths, cwd=cwd)
        return gate.verdict

    async def gate(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        agent: str = "agent",
        paths: Sequence[str] = (),
        cwd: str | None = None,
    ) -> Gate:
        """``Guard.gate``, awaited: a person's answer is awaited, not waited for."""
        guard = self.guard
        approvals = guard.approvals
        if approvals is None:
            return await asyncio.to_thread(
                guard.gate, tool, args, session=session, agent=agent, paths=paths, cwd=cwd
            )
        verdict = await asyncio.to_thread(
            guard._check, tool, args, session=session, agent=agent, paths=paths, cwd=cwd
        )
        call = guard._call(tool, args, session, agent, paths, cwd)
        ruling = await approvals.agate(call, verdict)
        return await asyncio.to_thread(guard.apply, ruling)

    # -- after a call ----------------------------------------------------------------------

    async def record(self, step: Step | Mapping[str, Any]) -> Verdict:
        """``Guard.record``, awaited: judged in a thread, an escalation to a person awaited."""
        guard = self.guard
        approvals = guard.approvals
        if approvals is None:
            return await asyncio.to_thread(guard.record, step)
        judged, verdict = await asyncio.to_thread(guard._recorded, step)
        if verdict.action >= Action.ASK:
            spend = await asyncio.to_thread(guard._check_in, verdict, judged)
            ruling = await approvals.aescalate(verdict, judged, spend)
            verdict = (await asyncio.to_thread(guard.apply, ruling)).verdict
        await asyncio.to_thread(guard._tell, judged, verdict)
        return verdict

    async def enforce(self, verdict: Verdict, session: str | None = None) -> Verdict:
        """``Guard.enforce``, awaited: the approver (which may ask a person) runs in a thread."""
        guard = self.guard
        approver = guard.approver
        if verdict.action is Action.ASK and approver is not None:
            if not await asyncio.to_thread(approver, verdict):
                raise ApprovalDenied(verdict, guard.session_id(session))
            return verdict
        return guard.enforce(verdict, session)

    # -- people and sessions -----------------------------------------------------------------

    async def reset(self, session: str | None = None, reason: str = "") -> None:
        """``Guard.reset``, awaited."""
        await asyncio.to_thread(self.guard.reset, session, reason)

    async def end(self, session: str, verdict: Verdict) -> None:
        """``Guard.end``, awaited."""
        await asyncio.to_thread(self.guard.end, session, verdict)

    async def ended(self, session: str | None = None) -> Verdict | None:
        """``Guard.ended``, awaited."""
        return await asyncio.to_thread(self.guard.ended, session)

    async def forget(self, session: str) -> None:
        """``Guard.forget``, awaited."""
        await asyncio.to_thread(self.guard.forget, session)

    @contextlib.contextmanager
    def session(self, session: str | None = None) -> Iterator[str]:
        """``Guard.session``: bind a session id (worker threads see it: they copy the context)."""
        with self.guard.session(session) as sid:
            yield sid

    def session_id(self, session: str | None = None) -> str:
        """``Guard.session_id``."""
        return self.guard.session_id(session)

    def step(self, tool: str, args: Mapping[str, Any] | None = None, **fields: Any) -> Step:
        """``Guard.step``."""
        return self.guard.step(tool, args, **fields)
