"""antiloop inside PydanticAI agents as a capability (its tool-execution hooks).

    from pydantic_ai import Agent
    from antiloop.integrations.pydantic_ai import AntiloopCapability

    agent = Agent(model, tools=[job_status], capabilities=[AntiloopCapability()])

Every tool call passes the guard before it runs (``wrap_tool_execute``) and is recorded after,
with the call's ``tool_call_id`` as step id and the tokens of the model response that asked for
it. A procedure already stopped as a loop is not run: the model reads the hint and the
fingerprint as the tool's result; at the second identical call with the same result the model
reads them instead of the result, and with ``on_stop="raise"`` (the default) a stopped session
ends the run with ``LoopDetected``.

Approvals use PydanticAI's deferred tools: ``needs_approval`` raises ``ApprovalRequired`` before
the call, the run ends with ``DeferredToolRequests`` (put it in the agent's ``output_type``),
``approve()`` answers them and the next ``agent.run(..., deferred_tool_results=...)`` resumes
(``run()`` does both). Written against pydantic-ai 2.66; install with
``pip install -e '.[pydantic-ai]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decider,
    Decision,
    approval_needed,
    as_text,
    ask_person,
    denied,
    framework,
    model_text,
    parse_args,
    record_decision,
    session_of,
)

with framework("pydantic-ai", "pydantic-ai", "antiloop.integrations.pydantic_ai"):
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ApprovalRequired
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import (
        DeferredToolRequests,
        DeferredToolResults,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
    )

__all__ = ["AntiloopCapability", "Decision"]


@dataclass(init=False)
class AntiloopCapability(AbstractCapability[Any]):
    """Checks each tool call before it runs and records it after, inside a PydanticAI agent.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; by default the run's ``conversation_id`` (else the one
            bound with ``guard.session()``, else ``"default"``).
        agent: the agent name in fingerprints; by default the PydanticAI agent's name.
        needs_approval: ``(tool, args) -> bool`` (see ``ApprovalPolicy``); True defers the call
            for a person's approval (``ApprovalRequired``), ``"deny"`` refuses it.
        on_stop: ``"raise"`` (default) ends the run with ``LoopDetected`` when the session
            stops; ``"answer"`` only answers the model with the hint.

    Example:
        >>> AntiloopCapability(on_stop="answer").on_stop
        'answer'
    """

    guard: Guard
    session: str | None
    agent: str | None
    needs_approval: ApprovalPolicy | None
    on_stop: str

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session: str | None = None,
        agent: str | None = None,
        needs_approval: ApprovalPolicy | None = None,
        on_stop: str = "raise",
    ) -> None:
        if on_stop not in ("raise", "answer"):
            raise ValueError(f"on_stop must be 'raise' or 'answer', not {on_stop!r}")
        self.id = "antiloop"
        self.description = None
        self.defer_loading = False
        self.guard = guard if guard is not None else Guard()
        self.session = session
        self.agent = agent
        self.needs_approval = needs_approval
        self.on_stop = on_stop

    def __repr__(self) -> str:
        return f"AntiloopCapability({self.guard!r}, on_stop={self.on_stop!r})"

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not built from agent specs (it holds a guard)."""
        return None

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Callable[[dict[str, Any]], Any],
    ) -> Any:
        """Refuse a looping call, ask for approval, else run it and record its result."""
        tool, agent, session = call.tool_name, self._agent(ctx), self._session(ctx)
        step_args = parse_args(args)
        verdict = self.guard.check(tool, step_args, session=session, agent=agent)
        if verdict.action < Action.BLOCK and not ctx.tool_call_approved:
            need = approval_needed(self.needs_approval, tool, step_args)
            if need == "deny":
                verdict = denied(tool, Decision(False, "refused by policy", "policy"))
            elif need == "ask":
                raise ApprovalRequired(
                    {"antiloop": f"{tool} needs a person's approval before it runs."}
                )
        if verdict.action >= Action.BLOCK:
            return self._answer(verdict, session)
        try:
            result = await handler(args)
        except Exception as exc:
            self._record(ctx, call, step_args, agent, session, error=f"{type(exc).__name__}: {exc}")
            raise
        verdict = self._record(ctx, call, step_args, agent, session, output=as_text(result))
        if verdict.action >= Action.BLOCK:
            return self._answer(verdict, session)
        if verdict.action in (Action.NUDGE, Action.ASK) and isinstance(result, str):
            return f"{result}\n\n{model_text(verdict)}"
        return result

    def _record(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        args: dict[str, Any],
        agent: str,
        session: str | None,
        **result: Any,
    ) -> Verdict:
        usage = _usage_of(ctx, call.tool_call_id)
        return self.guard.record(
            self.guard.step(
                call.tool_name,
                args,
                session=session_of(self.guard, session),
                agent=agent,
                id=call.tool_call_id or None,
                **usage,
                **result,
            )
        )

    def _answer(self, verdict: Verdict, session: str | None) -> str:
        if verdict.action is Action.STOP and self.on_stop == "raise":
            self.guard.enforce(verdict, session)
        return model_text(verdict)

    def _agent(self, ctx: RunContext[Any]) -> str:
        if self.agent:
            return self.agent
        name = getattr(ctx.agent, "name", None)
        return name if isinstance(name, str) and name else "agent"

    def _session(self, ctx: RunContext[Any]) -> str | None:
        return self.session or ctx.conversation_id or None

    # -- approvals -------------------------------------------------------------------------

    async def approve(
        self, result: AgentRunResult[Any], decide: Decider, *, session: str | None = None
    ) -> DeferredToolResults:
        """Answer each approval in ``result.output`` (``DeferredToolRequests``) with ``decide``.

        Returns the ``DeferredToolResults`` to pass to the next ``agent.run``; a refusal
        reaches the model as the denial message, with the person's comment.
        """
        requests = result.output
        if not isinstance(requests, DeferredToolRequests):
            raise ValueError("the run did not end with DeferredToolRequests: nothing to approve")
        answers: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call in requests.approvals:
            tool, args = call.tool_name, parse_args(call.args_as_dict())
            decision = await ask_person(decide, tool, args)
            refusal = None if decision.approved else denied(tool, decision)
            record_decision(
                self.guard,
                session=session or self.session or result.conversation_id,
                agent=self.agent or "agent",
                tool=tool,
                args=args,
                decision=decision,
                verdict=refusal,
            )
            answers[call.tool_call_id] = (
                ToolApproved() if refusal is None else ToolDenied(model_text(refusal))
            )
        return requests.build_results(approvals=answers)

    async def run(
        self, agent: Agent[Any, Any], prompt: str | None, decide: Decider, **kwargs: Any
    ) -> AgentRunResult[Any]:
        """``agent.run`` answering every approval with ``decide`` until the run ends."""
        result = await agent.run(prompt, **kwargs)
        while isinstance(result.output, DeferredToolRequests) and result.output.approvals:
            answers = await self.approve(result, decide)
            kwargs["message_history"] = result.all_messages()
            result = await agent.run(None, deferred_tool_results=answers, **kwargs)
        return result


def _usage_of(ctx: RunContext[Any], call_id: str) -> Mapping[str, Any]:
    """The tokens of the model response that asked for ``call_id``, on its first call only."""
    for message in reversed(ctx.messages):
        if not isinstance(message, ModelResponse):
            continue
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if not any(p.tool_call_id == call_id for p in calls):
            continue
        if calls[0].tool_call_id != call_id:
            return {}  # one response's tokens count once, on its first call
        usage = message.usage
        return {"tokens_in": usage.input_tokens, "tokens_out": usage.output_tokens}
    return {}
