"""antiloop inside AutoGen AgentChat teams as a ``TerminationCondition``.

    from autogen_agentchat.conditions import MaxMessageTermination
    from antiloop.integrations.autogen import AntiloopTermination

    team = RoundRobinGroupChat([assistant], termination_condition=(
        AntiloopTermination() | MaxMessageTermination(50)))

The condition reads the ``ToolCallRequestEvent`` and ``ToolCallExecutionEvent`` messages of
each turn, records every call with its result (matched by call id), and stops the team with a
``StopMessage`` carrying the reason and the loop's fingerprint at the second identical call with
the same result. It subclasses AutoGen's ``TerminationCondition``, so ``|`` and ``&`` compose it
with AutoGen's own conditions.

An ``ask`` verdict (for example ``GuardConfig(repeat_action="ask")``) also stops the team, with
``pending`` set: answer with ``decide(...)``, then ``await team.run()`` resumes the team where it
stopped (AutoGen's own resume).

Approval before a call: with ``needs_approval`` (see ``ApprovalPolicy``) and ``ask`` (a
person's answer, sync or async), ``protect(*tools)`` wraps the agent's tools so that a risky
call waits for the answer before it runs; refused, it never runs and the model reads why::

    antiloop = AntiloopTermination(needs_approval=policy, ask=ask_on_slack)
    assistant = AssistantAgent("worker", model_client, tools=antiloop.protect(delete_file))

Written against autogen-agentchat 0.7; install with ``pip install -e '.[autogen]'``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decider,
    Decision,
    approval_needed,
    ask_person,
    denied,
    framework,
    model_text,
    parse_args,
    policy_rule,
    record_decision,
    verdict_info,
)

with framework("autogen", "autogen-agentchat", "antiloop.integrations.autogen"):
    from autogen_agentchat.base import TerminatedException, TerminationCondition
    from autogen_agentchat.messages import (
        BaseAgentEvent,
        BaseChatMessage,
        StopMessage,
        ToolCallExecutionEvent,
        ToolCallRequestEvent,
    )
    from autogen_core import CancellationToken
    from autogen_core.tools import BaseTool, FunctionTool, ToolSchema
    from pydantic import BaseModel

__all__ = ["AntiloopTermination", "ApprovedTool", "Decision"]

_KEPT_CALLS = 256


class AntiloopTermination(TerminationCondition):
    """Stops an AutoGen team when its agents loop; pauses it when a person must decide.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; a new id per condition by default.
        needs_approval: ``(tool, args) -> bool`` or an ``antiloop.approval`` policy: which
            calls of the ``protect()``-ed tools wait for a person (``"deny"`` refuses them).
        ask: ``(tool, args) -> answer`` (or an awaitable of one): the person's answer, a bool,
            ``"approve"``/``"reject"``, a ``Decision`` or a mapping. Needed with
            ``needs_approval``.

    Attributes:
        verdict: the verdict that stopped the team last, or None.
        pending: the ``ask`` verdict waiting for ``decide()``, or None.

    Example:
        >>> from autogen_agentchat.conditions import MaxMessageTermination
        >>> condition = AntiloopTermination() | MaxMessageTermination(20)
        >>> type(condition).__name__
        'OrTerminationCondition'
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session: str | None = None,
        needs_approval: ApprovalPolicy | None = None,
        ask: Decider | None = None,
    ) -> None:
        if needs_approval is not None and ask is None:
            raise ValueError("needs_approval needs ask=, the way to reach a person")
        self.guard = guard if guard is not None else Guard()
        self.session = session or uuid.uuid4().hex
        self.needs_approval = needs_approval
        self.ask = ask
        self._not_run: set[str] = set()  # ids of the calls a person or the policy refused
        self.verdict: Verdict | None = None
        self.pending: Verdict | None = None
        self._terminated = False
        self._refused: Verdict | None = None
        self._calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self._usage: dict[str, tuple[int, int]] = {}  # first call id -> its turn's tokens

    def __repr__(self) -> str:
        return f"AntiloopTermination({self.guard!r}, session={self.session!r})"

    @property
    def terminated(self) -> bool:
        """True once the condition has stopped the team (until ``reset()``)."""
        return self._terminated

    async def __call__(
        self, messages: Sequence[BaseAgentEvent | BaseChatMessage]
    ) -> StopMessage | None:
        """Record the tool calls among ``messages``; a stop message when the team must stop."""
        if self._terminated:
            raise TerminatedException("Termination condition has already been reached")
        if self._refused is not None or self.pending is not None:
            return self._stop(self._refused or self.pending)  # type: ignore[arg-type]
        for message in messages:
            if isinstance(message, ToolCallRequestEvent):
                for call in message.content:
                    self._calls[call.id] = (call.name, parse_args(call.arguments))
                usage = message.models_usage  # the model turn that made the calls: charged once
                if usage is not None and message.content:
                    self._usage[message.content[0].id] = (
                        usage.prompt_tokens,
                        usage.completion_tokens,
                    )
                while len(self._calls) > _KEPT_CALLS:
                    del self._calls[next(iter(self._calls))]
                while len(self._usage) > _KEPT_CALLS:
                    del self._usage[next(iter(self._usage))]
            elif isinstance(message, ToolCallExecutionEvent):
                for result in message.content:
                    if result.call_id in self._not_run:
                        self._not_run.discard(result.call_id)  # it never ran: no step
                        self._calls.pop(result.call_id, None)
                        self._usage.pop(result.call_id, None)
                        continue
                    name, args = self._calls.pop(result.call_id, (result.name, {}))
                    tokens_in, tokens_out = self._usage.pop(result.call_id, (None, None))
                    verdict = self.guard.record(
                        self.guard.step(
                            name,
                            args,
                            session=self.session,
                            agent=message.source,
                            output=None if result.is_error else result.content,
                            error=result.content if result.is_error else None,
                            tokens_in=tokens_in,
                            tokens_out=tokens_out,
                        )
                    )
                    if verdict.action is Action.ASK:
                        self.pending = verdict
                        return self._stop(verdict)
                    if verdict.action >= Action.BLOCK:
                        return self._stop(verdict)
        return None

    async def reset(self) -> None:
        """Ready for the next run; the guard's memory of the session is kept."""
        self._terminated = False

    def decide(self, answer: object) -> Decision:
        """Answer the pending ``ask``: approving lets ``team.run()`` resume the team.

        A refusal keeps the team stopped. ``answer`` is a bool, ``"approve"``/``"reject"``,
        a ``Decision`` or a mapping.
        """
        ask = self.pending
        if ask is None:
            raise ValueError("no approval is pending")
        decision = Decision.parse(answer)
        self.pending = None
        refusal = None if decision.approved else denied(ask.detector or "ask", decision)
        record_decision(
            self.guard,
            session=self.session,
            agent="team",
            tool=ask.detector or "ask",
            args={},
            decision=decision,
            channel="autogen",
            verdict=refusal or ask,
        )
        self._refused = refusal
        return decision

    def protect(
        self, *tools: BaseTool[Any, Any] | Callable[..., Any], agent: str = "agent"
    ) -> list[BaseTool[Any, Any]]:
        """The tools, each waiting for ``needs_approval`` (and a person) before it runs.

        Plain functions become ``FunctionTool``s first. ``agent`` names the caller in the
        approval records (the ``AssistantAgent``'s name).
        """
        wrapped: list[BaseTool[Any, Any]] = []
        for tool in tools:
            if not isinstance(tool, BaseTool):
                tool = FunctionTool(tool, description=(tool.__doc__ or tool.__name__).strip())
            wrapped.append(
                tool if isinstance(tool, ApprovedTool) else ApprovedTool(tool, self, agent)
            )
        return wrapped

    async def approve(
        self, tool: str, args: Mapping[str, Any], *, agent: str, call_id: str | None
    ) -> Verdict | None:
        """None when the call may run; else the refusal (the policy's, or a person's)."""
        needed = approval_needed(self.needs_approval, tool, args)
        if needed == "allow":
            return None
        refusal: Verdict | None
        if needed == "deny" or self.ask is None:
            refusal = denied(tool, Decision(False, "refused by policy", "policy"))
        else:
            asked_at = self.guard.clock()
            decision = await ask_person(self.ask, tool, dict(args))
            refusal = None if decision.approved else denied(tool, decision)
            record_decision(
                self.guard,
                session=self.session,
                agent=agent,
                tool=tool,
                args=args,
                decision=decision,
                verdict=refusal,
                channel="autogen-tool",
                rule=policy_rule(self.needs_approval, tool, args),
                asked_at=asked_at,
            )
        if refusal is not None and call_id:
            self._not_run.add(call_id)
        return refusal

    def _stop(self, verdict: Verdict) -> StopMessage:
        self._terminated = True
        self.verdict = verdict
        if verdict is self.pending:
            text = f"antiloop: a person must decide: {verdict.reason}"
        else:
            text = f"antiloop: {verdict.reason}"
        if verdict.fingerprint:
            text += f" [fingerprint: {verdict.fingerprint}]"
        return StopMessage(content=text, source="antiloop", metadata=_metadata(verdict))


def _metadata(verdict: Verdict) -> dict[str, str]:
    return {k: str(v) for k, v in verdict_info(verdict).items() if v is not None}


class ApprovedTool(BaseTool[BaseModel, Any]):
    """An AutoGen tool that asks ``AntiloopTermination.approve`` before it runs (``protect()``).

    A refused call does not run: its result is the refusal, the text the model reads.
    """

    def __init__(self, inner: BaseTool[Any, Any], owner: AntiloopTermination, agent: str) -> None:
        super().__init__(inner.args_type(), inner.return_type(), inner.name, inner.description)
        self.inner, self.owner, self.agent = inner, owner, agent

    @property
    def schema(self) -> ToolSchema:
        """The wrapped tool's schema, as the model sees it."""
        return self.inner.schema

    async def run(self, args: BaseModel, cancellation_token: CancellationToken) -> Any:
        """Run the wrapped tool (``run_json`` asks first)."""
        return await self.inner.run(args, cancellation_token)

    async def run_json(
        self,
        args: Mapping[str, Any],
        cancellation_token: CancellationToken,
        call_id: str | None = None,
    ) -> Any:
        """Ask first; run the wrapped tool only when the call is allowed or approved."""
        refusal = await self.owner.approve(self.name, args, agent=self.agent, call_id=call_id)
        if refusal is not None:
            return model_text(refusal)
        return await self.inner.run_json(args, cancellation_token, call_id=call_id)

    def return_value_as_string(self, value: Any) -> str:
        """The wrapped tool's text for its result."""
        return value if isinstance(value, str) else self.inner.return_value_as_string(value)
