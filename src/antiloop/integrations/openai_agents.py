"""antiloop inside the OpenAI Agents SDK: tool guardrails, run hooks and approvals.

    from agents import Agent, Runner
    from antiloop.integrations.openai_agents import AntiloopGuardrails

    antiloop = AntiloopGuardrails()
    agent = Agent(name="worker", tools=antiloop.protect(my_tool, other_tool))
    result = await Runner.run(agent, "task", hooks=antiloop.hooks)

Before a function tool runs, the input guardrail refuses a procedure already stopped as a loop
(``reject_content`` with the hint and fingerprint). After it runs, the output guardrail records
the result; at the second identical call with the same result the model gets the hint instead
of the result, and a session stop trips the guardrail
(``ToolOutputGuardrailTripwireTriggered``, whose ``output.output_info`` holds the verdict).
``hooks`` (a ``RunHooks``) records the tools that carry no output guardrail.

Approvals use the SDK's own ``needs_approval``: the run stops with ``result.interruptions``;
``approve()`` (or ``run()``) answers them and the run resumes from ``result.to_state()``.
Written against openai-agents 0.24; install with ``pip install 'antiloop[openai-agents]'``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from antiloop.errors import MissingExtra
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decision,
    approval_needed,
    as_text,
    denied,
    model_text,
    parse_args,
    record_decision,
    session_of,
    verdict_info,
)
from antiloop.verdict import Action, Verdict

try:
    from agents import (
        Agent,
        FunctionTool,
        RunContextWrapper,
        RunHooks,
        Runner,
        RunResult,
        RunState,
        Tool,
        ToolApprovalItem,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra(
        "openai-agents", "openai-agents", "antiloop.integrations.openai_agents"
    ) from exc

_RUNS_KEPT = 64  # runs whose usage is followed at once

__all__ = ["AntiloopGuardrails", "AntiloopRunHooks", "Decision"]

#: ``decide(tool, args)`` answers a pending approval: a bool, a ``Decision`` or a mapping
#: (or an awaitable of one).
Decider = Callable[[str, dict[str, Any]], object]


class AntiloopGuardrails:
    """The guard as Agents SDK tool guardrails, run hooks and an approval policy.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; by default the one bound with ``guard.session()``,
            else ``"default"`` (bind one per run: ``with guard.session(run_id): ...``).
        needs_approval: ``(tool, args) -> bool`` (see ``ApprovalPolicy``); ``protect()`` turns
            it into each tool's ``needs_approval``. ``"deny"`` refuses without asking.
        on_stop: ``"raise"`` (default) trips the guardrail when the session stops, ending the
            run with ``Tool{Input,Output}GuardrailTripwireTriggered``; ``"reject"`` only
            answers the model with the hint.

    Attributes:
        input_guardrail: a ``ToolInputGuardrail`` refusing stopped procedures.
        output_guardrail: a ``ToolOutputGuardrail`` recording results and answering loops.
        hooks: an ``AntiloopRunHooks`` for ``Runner.run(..., hooks=...)``.

    Example:
        >>> antiloop = AntiloopGuardrails()
        >>> antiloop.input_guardrail.get_name()
        'antiloop_input'
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session: str | None = None,
        needs_approval: ApprovalPolicy | None = None,
        on_stop: str = "raise",
    ) -> None:
        if on_stop not in ("raise", "reject"):
            raise ValueError(f"on_stop must be 'raise' or 'reject', not {on_stop!r}")
        self.guard = guard if guard is not None else Guard()
        self.session = session
        self.needs_approval = needs_approval
        self.on_stop = on_stop
        self.input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            self._before, name="antiloop_input"
        )
        self.output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            self._after, name="antiloop_output"
        )
        self.hooks = AntiloopRunHooks(self)
        self._recorded: set[str] = set()
        self._charged: dict[int, tuple[object, int, int]] = {}  # run usage -> tokens charged

    def __repr__(self) -> str:
        return f"AntiloopGuardrails({self.guard!r}, on_stop={self.on_stop!r})"

    # -- wiring ----------------------------------------------------------------------------

    def protect(self, *tools: Tool) -> list[Tool]:
        """Attach the guardrails (and the approval policy) to function tools; returns them all.

        Tools of other kinds are returned unchanged; ``hooks`` still records them.
        """
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                continue
            inputs = tool.tool_input_guardrails = list(tool.tool_input_guardrails or [])
            outputs = tool.tool_output_guardrails = list(tool.tool_output_guardrails or [])
            if self.input_guardrail not in inputs:
                inputs.insert(0, self.input_guardrail)
            if self.output_guardrail not in outputs:
                outputs.insert(0, self.output_guardrail)
            if self.needs_approval is not None and tool.needs_approval is False:
                tool.needs_approval = self._approval_check(tool.name)
        return list(tools)

    def _approval_check(
        self, name: str
    ) -> Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]:
        async def needs_approval(
            context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return approval_needed(self.needs_approval, name, params) == "ask"

        return needs_approval

    # -- guardrails ------------------------------------------------------------------------

    def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        tool, args, agent = context.tool_name, parse_args(context.tool_arguments), data.agent.name
        verdict = self.guard.check(tool, args, session=self.session, agent=agent)
        if verdict.action < Action.BLOCK and approval_needed(self.needs_approval, tool, args) == (
            "deny"
        ):
            verdict = denied(tool, Decision(False, "refused by policy", "policy"))
        return self._answer(verdict)

    def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        self._recorded.add(context.tool_call_id)
        verdict = self._record(context, data.agent.name, data.output)
        return self._answer(verdict)

    def _answer(self, verdict: Verdict) -> ToolGuardrailFunctionOutput:
        info = verdict_info(verdict)
        if verdict.action is Action.STOP and self.on_stop == "raise":
            return ToolGuardrailFunctionOutput.raise_exception(output_info=info)
        if verdict.action >= Action.BLOCK:
            return ToolGuardrailFunctionOutput.reject_content(model_text(verdict), info)
        return ToolGuardrailFunctionOutput.allow(info if verdict.fired else None)

    def _record(self, context: ToolContext[Any], agent: str, output: object) -> Verdict:
        tokens_in, tokens_out = self._usage(context)
        return self.guard.record(
            self.guard.step(
                context.tool_name,
                parse_args(context.tool_arguments),
                session=session_of(self.guard, self.session),
                agent=agent,
                output=as_text(output),
                tokens_in=tokens_in,
                tokens_out=tokens_out,
            )
        )

    def _usage(self, context: ToolContext[Any]) -> tuple[int | None, int | None]:
        """The run's tokens since the last recorded call (the SDK's ``context.usage`` sums them).

        The model turn that made a call is charged to the first call recorded after it; the
        others of that turn carry none.
        """
        usage = getattr(context, "usage", None)
        now_in, now_out = (
            getattr(usage, "input_tokens", None),
            getattr(usage, "output_tokens", None),
        )
        if not isinstance(now_in, int) or not isinstance(now_out, int):
            return None, None
        charged = self._charged
        seen = charged.get(id(usage))
        was_in, was_out = (seen[1], seen[2]) if seen is not None and seen[0] is usage else (0, 0)
        charged.pop(id(usage), None)
        charged[id(usage)] = (usage, now_in, now_out)  # the object is kept: its id stays its own
        while len(charged) > _RUNS_KEPT:
            del charged[next(iter(charged))]
        spent_in, spent_out = max(0, now_in - was_in), max(0, now_out - was_out)
        if not spent_in and not spent_out:
            return None, None
        return spent_in, spent_out

    # -- approvals -------------------------------------------------------------------------

    async def approve(self, result: RunResult, decide: Decider) -> RunState[Any]:
        """Answer each of ``result.interruptions`` with ``decide(tool, args)``.

        Returns the run state to resume with ``Runner.run(agent, state, hooks=...)``. A refusal
        reaches the model as the rejection message, with the person's comment.
        """
        state = result.to_state()
        for item in result.interruptions:
            await self._decide(state, item, decide)
        return state

    async def _decide(self, state: RunState[Any], item: ToolApprovalItem, decide: Decider) -> None:
        tool, args = item.name or "tool", parse_args(item.arguments)
        answer = decide(tool, args)
        if inspect.isawaitable(answer):
            answer = await answer
        decision = Decision.parse(answer)
        refusal = None if decision.approved else denied(tool, decision)
        record_decision(
            self.guard,
            session=self.session,
            agent=item.agent.name,
            tool=tool,
            args=args,
            decision=decision,
            verdict=refusal,
            channel="agents-sdk-interruption",
        )
        if refusal is None:
            state.approve(item)
        else:
            state.reject(item, rejection_message=model_text(refusal))

    async def run(
        self, agent: Agent[Any], input: str | list[Any], decide: Decider, **kwargs: Any
    ) -> RunResult:
        """``Runner.run`` with these hooks, answering every approval with ``decide``."""
        kwargs.setdefault("hooks", self.hooks)
        result = await Runner.run(agent, input, **kwargs)
        while result.interruptions:
            state = await self.approve(result, decide)
            result = await Runner.run(agent, state, **kwargs)
        return result


class AntiloopRunHooks(RunHooks[Any]):
    """Records each tool's result with the guard (tools without the output guardrail).

    Tools without a ``ToolContext`` (hosted or shell tools, whose arguments the hooks cannot
    see) are not recorded.
    """

    def __init__(self, owner: AntiloopGuardrails) -> None:
        self.owner = owner

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Any, tool: Tool, result: object
    ) -> None:
        """Record the call and its result, unless the output guardrail already did."""
        if not isinstance(context, ToolContext):
            return
        recorded = self.owner._recorded
        if context.tool_call_id in recorded:
            recorded.discard(context.tool_call_id)
            return
        self.owner._record(context, getattr(agent, "name", "agent"), result)
