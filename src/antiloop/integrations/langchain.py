"""antiloop inside LangChain v1 agents (``create_agent``) as an ``AgentMiddleware``.

    from langchain.agents import create_agent
    from antiloop.integrations.langchain import AntiloopMiddleware

    agent = create_agent(model, tools, middleware=[AntiloopMiddleware()])

Every tool call passes the guard before it runs and is recorded after it. A loop answers the
model with a ``ToolMessage`` (``status="error"``) carrying the hint and the fingerprint instead
of the result; a stopped session ends the run (``jump_to: "end"``) before the next model call.
Approvals use LangGraph's ``interrupt()``, so ``Command(resume=...)`` continues the run (a
checkpointer and a ``thread_id`` are needed, as for any interrupt). Written against
langchain 1.x and langgraph 1.x; install with ``pip install -e '.[langchain]'``.

An async agent (``ainvoke``, ``astream``) goes through ``AsyncGuard``: the store's work runs in
a worker thread and a person's approval (``Guard(approvals=...)``) is awaited, so the event loop
serves other tasks while a step is judged or a request waits.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from antiloop.async_guard import AsyncGuard
from antiloop.core.errors import MissingExtra
from antiloop.core.step import Step
from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decision,
    approval_needed,
    as_text,
    denied,
    model_text,
    record_decision,
    session_of,
    verdict_info,
)

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ToolCallRequest,
        hook_config,
    )
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.runtime import Runtime
    from langgraph.types import Command, interrupt
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("langchain", "langchain", "antiloop.integrations.langchain") from exc

__all__ = ["AntiloopMiddleware", "Decision"]


@dataclass(frozen=True, slots=True)
class _Call:
    tool: str
    args: dict[str, Any]
    call_id: str
    session: str | None
    tokens_in: int | None = None
    tokens_out: int | None = None


class AntiloopMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Checks each tool call before it runs, records it after, and ends looping runs.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; by default the LangGraph ``thread_id`` (else the
            session bound with ``guard.session()``, else ``"default"``).
        agent: the agent name in fingerprints.
        needs_approval: ``(tool, args) -> bool`` (see ``ApprovalPolicy``); True pauses the run
            with ``interrupt()`` before the call, and the resume value decides (``True``/``False``,
            ``{"type": "approve" | "reject", "message": ...}`` or
            ``{"approved": bool, "comment": ...}``).
        end_on_stop: end the run (``jump_to: "end"``) once the session is stopped.
        reset_on_user_message: a new run that starts with a person's message opens a fresh
            window (``guard.reset``), so an old stop does not end the new request.

    A verdict of ``ask`` (for example ``GuardConfig(repeat_action="ask")``) pauses the run with
    ``interrupt()`` before the next model call; approving goes on, refusing ends the run.

    Example:
        >>> mw = AntiloopMiddleware(needs_approval=lambda tool, args: tool == "delete_file")
        >>> mw.name
        'AntiloopMiddleware'
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session: str | None = None,
        agent: str = "agent",
        needs_approval: ApprovalPolicy | None = None,
        end_on_stop: bool = True,
        reset_on_user_message: bool = True,
    ) -> None:
        super().__init__()
        self.guard = guard if guard is not None else Guard()
        self.aguard = AsyncGuard(self.guard)
        self.session = session
        self.agent = agent
        self.needs_approval = needs_approval
        self.end_on_stop = end_on_stop
        self.reset_on_user_message = reset_on_user_message
        self._asks: dict[str, Verdict] = {}

    def __repr__(self) -> str:
        return f"AntiloopMiddleware({self.guard!r}, agent={self.agent!r})"

    # -- tool calls ------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Check before the tool runs, record after; answer a loop with an error ToolMessage."""
        call = self._call(request)
        refused = self._before(call)
        if refused is not None:
            return refused
        return self._after(call, handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The async twin of ``wrap_tool_call``: the guard's work is awaited, off the loop."""
        call = self._call(request)
        verdict = await self.aguard.check(
            call.tool, call.args, session=call.session, agent=self.agent
        )
        refused, decided = self._asked(call, verdict)
        if decided is not None:
            await asyncio.to_thread(functools.partial(record_decision, self.guard, **decided))
        if refused is not None:
            return refused
        result = await handler(request)
        step = self._step(call, result)
        if step is None:
            return result
        return self._answer(call, result, await self.aguard.record(step))

    def _call(self, request: ToolCallRequest) -> _Call:
        tool_call = request.tool_call
        args = tool_call.get("args") or {}
        info = getattr(request.runtime, "execution_info", None)
        call_id = str(tool_call.get("id") or "")
        tokens_in, tokens_out = _usage(request.state, call_id)
        return _Call(
            tool=str(tool_call["name"]),
            args=dict(args) if isinstance(args, Mapping) else {"input": args},
            call_id=call_id,
            session=self.session or getattr(info, "thread_id", None),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
        )

    def _before(self, call: _Call) -> ToolMessage | None:
        verdict = self.guard.check(call.tool, call.args, session=call.session, agent=self.agent)
        refused, decided = self._asked(call, verdict)
        if decided is not None:
            record_decision(self.guard, **decided)
        return refused

    def _asked(
        self, call: _Call, verdict: Verdict
    ) -> tuple[ToolMessage | None, dict[str, Any] | None]:
        """The refusal, if any, and the person's decision to log (``record_decision``), if any.

        A call ``needs_approval`` asks about pauses the run here (``interrupt()``).
        """
        if verdict.action >= Action.BLOCK:
            return _refusal(call, verdict), None
        need = approval_needed(self.needs_approval, call.tool, call.args)
        if need == "deny":
            refused = denied(call.tool, Decision(False, "refused by policy", "policy"))
            return _refusal(call, refused), None
        if need != "ask":
            return None, None
        answer = interrupt(
            {
                "type": "antiloop_approval",
                "tool": call.tool,
                "args": call.args,
                "tool_call_id": call.call_id,
                "session": call.session,
                "reason": f"{call.tool} needs a person's approval before it runs.",
            }
        )
        decision = Decision.parse(answer)
        refusal = None if decision.approved else denied(call.tool, decision)
        decided: dict[str, Any] = {
            "session": call.session,
            "agent": self.agent,
            "tool": call.tool,
            "args": call.args,
            "decision": decision,
            "channel": "langgraph-interrupt",
            "verdict": refusal,
        }
        return (None if refusal is None else _refusal(call, refusal)), decided

    def _after(self, call: _Call, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        step = self._step(call, result)
        if step is None:
            return result
        return self._answer(call, result, self.guard.record(step))

    def _step(self, call: _Call, result: ToolMessage | Command[Any]) -> Step | None:
        """The step to record for a tool's result; None for a Command (nothing to compare)."""
        if not isinstance(result, ToolMessage):
            return None
        failed = result.status == "error"
        text = as_text(result.content)
        return self.guard.step(
            call.tool,
            call.args,
            session=session_of(self.guard, call.session),
            agent=self.agent,
            output=None if failed else text,
            error=text if failed else None,
            tokens_in=call.tokens_in,
            tokens_out=call.tokens_out,
        )

    def _answer(
        self, call: _Call, result: ToolMessage | Command[Any], verdict: Verdict
    ) -> ToolMessage | Command[Any]:
        """What the model reads for a recorded result: a refusal, a nudge, or the result."""
        assert isinstance(result, ToolMessage)  # noqa: S101 - only results are recorded
        if verdict.action >= Action.BLOCK:
            return _refusal(call, verdict)
        if verdict.action is Action.ASK:
            self._asks[self._key(call.session)] = verdict
        if verdict.action in (Action.NUDGE, Action.ASK) and isinstance(result.content, str):
            return result.model_copy(
                update={"content": f"{result.content}\n\n{model_text(verdict)}"}
            )
        return result

    # -- between steps ---------------------------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A run that starts with a person's message opens a fresh window."""
        if self.reset_on_user_message:
            messages = state.get("messages") or []
            if messages and isinstance(messages[-1], HumanMessage):
                self.guard.reset(self._session(runtime), reason="user message")
                self._asks.pop(self._key(self._session(runtime)), None)
        return None

    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """The async twin of ``before_agent``: the reset is awaited, off the loop."""
        if self.reset_on_user_message:
            messages = state.get("messages") or []
            if messages and isinstance(messages[-1], HumanMessage):
                await self.aguard.reset(self._session(runtime), reason="user message")
                self._asks.pop(self._key(self._session(runtime)), None)
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End a stopped run; pause for a person on an ``ask`` verdict."""
        session = self._session(runtime)
        ended = self.guard.ended(session) if self.end_on_stop else None
        over, decided = self._between(session, ended)
        if decided is not None:
            record_decision(self.guard, **decided)
        return over

    def _between(
        self, session: str | None, ended: Verdict | None
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """End a stopped run; pause on an ``ask``: the update, and the decision to log."""
        if ended is not None:
            return _end(f"antiloop stopped the run: {ended.reason}{_fp(ended)}"), None
        ask = self._asks.get(self._key(session))
        if ask is None:
            return None, None
        answer = interrupt(
            {
                "type": "antiloop_ask",
                "session": session,
                "reason": ask.reason,
                "fingerprint": ask.fingerprint,
                "detector": ask.detector,
            }
        )
        decision = Decision.parse(answer)
        self._asks.pop(self._key(session), None)
        decided: dict[str, Any] = {
            "session": session,
            "agent": self.agent,
            "tool": ask.detector or "ask",
            "args": {},
            "decision": decision,
            "channel": "langgraph-interrupt",
            "verdict": ask,
        }
        if decision.approved:
            return None, decided
        said = f": {decision.comment}" if decision.comment else "."
        return _end(f"antiloop: a person stopped the run ({ask.reason}){said}"), decided

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """The async twin of ``before_model``: the store is read off the loop."""
        session = self._session(runtime)
        ended = await self.aguard.ended(session) if self.end_on_stop else None
        over, decided = self._between(session, ended)
        if decided is not None:
            await asyncio.to_thread(functools.partial(record_decision, self.guard, **decided))
        return over

    def _session(self, runtime: Runtime[Any]) -> str | None:
        info = getattr(runtime, "execution_info", None)
        return self.session or getattr(info, "thread_id", None)

    def _key(self, session: str | None) -> str:
        return session_of(self.guard, session)


def _usage(state: object, call_id: str) -> tuple[int | None, int | None]:
    """The ``usage_metadata`` of the model message that made the call, on its first call only.

    A message's tokens are charged once: its other tool calls carry none.
    """
    messages = state.get("messages") if isinstance(state, Mapping) else None
    for message in reversed(messages or ()):
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        ids = [str(c.get("id") or "") for c in message.tool_calls]
        if call_id not in ids:
            continue
        usage = message.usage_metadata
        if ids[0] != call_id or not usage:
            return None, None
        return usage.get("input_tokens"), usage.get("output_tokens")
    return None, None


def _refusal(call: _Call, verdict: Verdict) -> ToolMessage:
    return ToolMessage(
        content=model_text(verdict),
        tool_call_id=call.call_id,
        name=call.tool,
        status="error",
        response_metadata={"antiloop": verdict_info(verdict)},
    )


def _fp(verdict: Verdict) -> str:
    return f" [fingerprint: {verdict.fingerprint}]" if verdict.fingerprint else ""


def _end(text: str) -> dict[str, Any]:
    return {"jump_to": "end", "messages": [AIMessage(content=text)]}
