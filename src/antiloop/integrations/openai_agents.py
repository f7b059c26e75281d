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
``hooks`` (a ``RunHooks``) records the tools that carry no output guardrail, and the hosted
tools (web search, file search, code interpreter, image generation, hosted MCP), which run on
the model's side and pass no guardrail: it reads their calls from each model response
(``on_llm_end``). A repeated hosted call with the same result stops the session like any other:
with ``on_stop="raise"`` the run ends with ``LoopDetected``; with ``"reject"`` the model reads
the hint before its next turn when ``model_input_filter`` is the run's
``RunConfig.call_model_input_filter`` (``run()`` sets it).

Approvals use the SDK's own ``needs_approval``: the run stops with ``result.interruptions``;
``approve()`` (or ``run()``) answers them and the run resumes from ``result.to_state()``.
Written against openai-agents 0.24; install with ``pip install -e '.[openai-agents]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from antiloop.core.errors import LoopDetected
from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decider,
    Decision,
    RunningTotals,
    approval_needed,
    as_text,
    ask_person,
    denied,
    framework,
    model_text,
    parse_args,
    record_decision,
    session_of,
    verdict_info,
)

with framework("openai-agents", "openai-agents", "antiloop.integrations.openai_agents"):
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
    from agents.items import ModelResponse
    from agents.run_config import CallModelData, ModelInputData, RunConfig
    from agents.tool_context import ToolContext

_RUNS_KEPT = 64  # runs whose usage is followed at once

__all__ = ["HOSTED", "AntiloopGuardrails", "AntiloopRunHooks", "Decider", "Decision"]

#: the hosted tools' output item types, with the tool name antiloop gives each and the fields
#: that are the call (the rest, less ids and status, is its result)
HOSTED: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "web_search_call": ("web_search", ("action",)),
    "file_search_call": ("file_search", ("queries",)),
    "code_interpreter_call": ("code_interpreter", ("code", "container_id")),
    "image_generation_call": ("image_generation", ()),
    "mcp_call": ("mcp", ("server_label", "name", "arguments")),
}
_NOT_RESULT = frozenset({"id", "type", "status"})


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
        self._totals = RunningTotals(_RUNS_KEPT)  # each run's usage -> the tokens charged
        self._hints: dict[str, list[str]] = {}  # session -> hosted-tool hints not yet read

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

    def _usage(self, context: RunContextWrapper[Any]) -> tuple[int | None, int | None]:
        """The run's tokens since the last recorded call (the SDK's ``context.usage`` sums them).

        The model turn that made a call is charged to the first call recorded after it; the
        others of that turn carry none.
        """
        usage = getattr(context, "usage", None)
        return self._totals.since_last(
            usage, getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)
        )

    # -- hosted tools ----------------------------------------------------------------------

    def record_hosted(
        self, context: RunContextWrapper[Any], agent: str, response: ModelResponse
    ) -> list[Verdict]:
        """Record the hosted tool calls of one model response; their verdicts, in order.

        A stop raises ``LoopDetected`` with ``on_stop="raise"``; with ``"reject"`` its hint
        waits for ``model_input_filter``.
        """
        verdicts = []
        for item in response.output:
            call = hosted_call(item)
            if call is None:
                continue
            tool, args, output, error, call_id = call
            tokens_in, tokens_out = self._usage(context)
            session = session_of(self.guard, self.session)
            verdict = self.guard.record(
                self.guard.step(
                    tool,
                    args,
                    session=session,
                    agent=agent,
                    output=output,
                    error=error,
                    id=call_id,
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                )
            )
            verdicts.append(verdict)
            if verdict.action >= Action.BLOCK:
                if verdict.action is Action.STOP and self.on_stop == "raise":
                    raise LoopDetected(verdict, session)
                self._hints.setdefault(session, []).append(model_text(verdict))
        return verdicts

    def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the model reads hosted-tool hints first."""
        hints = self._hints.pop(session_of(self.guard, self.session), None)
        model_data = data.model_data
        if not hints:
            return model_data
        said: list[Any] = [{"role": "user", "content": text} for text in hints]
        return ModelInputData(
            input=[*model_data.input, *said], instructions=model_data.instructions
        )

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
        decision = await ask_person(decide, tool, args)
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
        """``Runner.run`` with these hooks and hints, answering every approval with ``decide``."""
        kwargs.setdefault("hooks", self.hooks)
        config = kwargs.setdefault("run_config", RunConfig())
        if config.call_model_input_filter is None:
            config.call_model_input_filter = self.model_input_filter
        result = await Runner.run(agent, input, **kwargs)
        while result.interruptions:
            state = await self.approve(result, decide)
            result = await Runner.run(agent, state, **kwargs)
        return result


class AntiloopRunHooks(RunHooks[Any]):
    """Records the tools without the output guardrail, and the hosted tools' calls.

    Hosted calls are read from each model response. Local tools without a ``ToolContext``
    (shell, computer), whose arguments these hooks cannot see, are not recorded.
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

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Any, response: ModelResponse
    ) -> None:
        """Record the hosted tool calls the model made (they ran on its side)."""
        self.owner.record_hosted(context, getattr(agent, "name", "agent"), response)


def hosted_call(
    item: object,
) -> tuple[str, dict[str, Any], str | None, str | None, str | None] | None:
    """``(tool, args, output, error, id)`` of a hosted tool call item, else None.

    Example:
        >>> from openai.types.responses import ResponseFunctionWebSearch
        >>> item = ResponseFunctionWebSearch.model_validate({"id": "ws_1", "type":
        ...     "web_search_call", "status": "completed", "action": {"type": "search",
        ...     "query": "antiloop"}})
        >>> hosted_call(item)
        ('web_search', {'type': 'search', 'query': 'antiloop'}, '{}', None, 'ws_1')
    """
    kind = getattr(item, "type", None)
    if (
        not isinstance(kind, str)
        or kind not in HOSTED
        or getattr(item, "status", "completed") not in ("completed", "failed")
    ):
        return None
    dump = getattr(item, "model_dump", None)
    data: dict[str, Any] = dump(exclude_none=True) if callable(dump) else {}
    tool, call_fields = HOSTED[kind]
    args = {k: data[k] for k in call_fields if k in data}
    result = {k: v for k, v in data.items() if k not in call_fields and k not in _NOT_RESULT}
    if kind == "web_search_call" and isinstance(args.get("action"), dict):
        args = dict(args["action"])  # the search itself: its type, query or url
        if "sources" in args:
            result["sources"] = args.pop("sources")
    if kind == "mcp_call":
        tool = f"mcp:{data.get('server_label', '')}:{data.get('name', '')}"
        args = parse_args(data.get("arguments"))
    error = result.pop("error", None)
    failed = getattr(item, "status", None) == "failed"
    if failed and error is None:
        error = f"{tool} failed"
    call_id = data.get("id")
    return (
        tool,
        args,
        None if failed else as_text(result),
        None if error is None else as_text(error),
        call_id if isinstance(call_id, str) else None,
    )
