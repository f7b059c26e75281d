"""antiloop inside Google ADK agents, as the agent's tool and model callbacks.

    from google.adk.agents import LlmAgent
    from antiloop.integrations.google_adk import AntiloopCallbacks

    antiloop = AntiloopCallbacks()
    agent = LlmAgent(name="worker", model=model, tools=[job_status], **antiloop.callbacks())

``before_tool_callback`` checks each call before it runs: a procedure already stopped as a loop
is not run and the model reads ``{"error": hint}`` instead. ``after_tool_callback`` records the
call with its result, ADK's ``function_call_id`` as step id and the tokens of the model response
that asked for it (``after_model_callback``); at the second identical call with the same result
the model reads the hint and the fingerprint instead of the result. Once the session is
stopped, ``before_model_callback`` answers in place of the model, so the run ends with the
reason.

Approvals use ADK's tool confirmation: ``needs_approval`` calls ``request_confirmation()``, the
run pauses with an ``adk_request_confirmation`` call; ``approval_requests(events)`` lists them
and ``answer(request, decision)`` is the message that resumes the run. Written against
google-adk 2.13; install with ``pip install -e '.[google-adk]'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decision,
    approval_needed,
    as_text,
    denied,
    framework,
    model_text,
    parse_args,
    record_decision,
    session_of,
)

with framework("google-adk", "google-adk", "antiloop.integrations.google_adk"):
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.events import Event
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types

__all__ = ["AntiloopCallbacks", "ApprovalRequest", "Decision"]

CONFIRMATION = "adk_request_confirmation"
_KEPT_USAGE = 256


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call waiting for a person: ADK's ``adk_request_confirmation`` call."""

    id: str
    tool: str
    args: dict[str, Any]
    call_id: str | None


class AntiloopCallbacks:
    """The guard as an ADK agent's ``before/after_tool`` and ``before/after_model`` callbacks.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; by default the ADK session's id.
        needs_approval: ``(tool, args) -> bool`` (see ``ApprovalPolicy``); True asks a person
            with ADK's tool confirmation before the call, ``"deny"`` refuses it.
        end_on_stop: answer in place of the model once the session is stopped (the run ends).

    Example:
        >>> sorted(AntiloopCallbacks().callbacks())  # doctest: +NORMALIZE_WHITESPACE
        ['after_model_callback', 'after_tool_callback', 'before_model_callback',
         'before_tool_callback']
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session: str | None = None,
        needs_approval: ApprovalPolicy | None = None,
        end_on_stop: bool = True,
    ) -> None:
        self.guard = guard if guard is not None else Guard()
        self.session = session
        self.needs_approval = needs_approval
        self.end_on_stop = end_on_stop
        self._usage: dict[str, dict[str, int]] = {}
        self._answered: set[str] = set()  # calls before_tool answered: nothing ran

    def __repr__(self) -> str:
        return f"AntiloopCallbacks({self.guard!r})"

    def callbacks(self) -> dict[str, Any]:
        """The keyword arguments for ``LlmAgent(...)``: the four callbacks."""
        return {
            "before_tool_callback": self.before_tool,
            "after_tool_callback": self.after_tool,
            "before_model_callback": self.before_model,
            "after_model_callback": self.after_model,
        }

    # -- tools -----------------------------------------------------------------------------

    def before_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Refuse a stopped procedure or a refused call; ask a person when the policy says so."""
        answer = self._before(tool.name, args, tool_context)
        if answer is not None and tool_context.function_call_id:
            self._answered.add(tool_context.function_call_id)
        return answer

    def _before(
        self, name: str, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        agent, session = tool_context.agent_name, self._session(tool_context)
        step_args = parse_args(args)
        verdict = self.guard.check(name, step_args, session=session, agent=agent)
        if verdict.action >= Action.BLOCK:
            return _refusal(verdict)
        need = approval_needed(self.needs_approval, name, step_args)
        if need == "deny":
            return _refusal(denied(name, Decision(False, "refused by policy", "policy")))
        if need != "ask":
            return None
        confirmation = tool_context.tool_confirmation
        if confirmation is None:
            tool_context.request_confirmation(
                hint=f"antiloop: {name} needs a person's approval before it runs.",
                payload={"tool": name, "args": step_args},
            )
            tool_context.actions.skip_summarization = True
            return {"error": f"{name} is waiting for a person's approval."}
        payload = confirmation.payload if isinstance(confirmation.payload, dict) else {}
        decision = Decision(
            confirmation.confirmed,
            payload.get("comment") if isinstance(payload.get("comment"), str) else None,
            payload.get("by") if isinstance(payload.get("by"), str) else None,
        )
        refusal = None if decision.approved else denied(name, decision)
        record_decision(
            self.guard,
            session=session,
            agent=agent,
            tool=name,
            args=step_args,
            decision=decision,
            verdict=refusal,
        )
        return None if refusal is None else _refusal(refusal)

    def after_tool(
        self,
        tool: BaseTool,
        args: dict[str, Any],
        tool_context: ToolContext,
        tool_response: Any,
    ) -> dict[str, Any] | None:
        """Record the call and its result; the hint replaces a looping result."""
        call_id = tool_context.function_call_id
        if call_id in self._answered:
            self._answered.discard(call_id)
            return None
        error = tool_response.get("error") if isinstance(tool_response, dict) else None
        failed = isinstance(error, str) and len(tool_response) == 1
        verdict = self.guard.record(
            self.guard.step(
                tool.name,
                parse_args(args),
                session=session_of(self.guard, self._session(tool_context)),
                agent=tool_context.agent_name,
                id=call_id,
                output=None if failed else as_text(tool_response),
                error=error if failed else None,
                **self._usage.pop(call_id or "", {}),
            )
        )
        if verdict.action >= Action.BLOCK:
            return _refusal(verdict)
        if verdict.action in (Action.NUDGE, Action.ASK):
            result = dict(tool_response) if isinstance(tool_response, dict) else {}
            if not isinstance(tool_response, dict):
                result["result"] = tool_response
            result["antiloop"] = model_text(verdict)
            return result
        return None

    # -- the model -------------------------------------------------------------------------

    def before_model(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Answer in place of the model once the session is stopped."""
        if not self.end_on_stop:
            return None
        ended = self.guard.ended(self._session(callback_context))
        if ended is None:
            return None
        text = f"antiloop stopped the run: {ended.reason}"
        if ended.fingerprint:
            text += f" [fingerprint: {ended.fingerprint}]"
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))

    def after_model(
        self, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """Keep the response's tokens for its first tool call (one response counts once)."""
        usage = llm_response.usage_metadata
        parts = llm_response.content.parts if llm_response.content else None
        calls = [p.function_call for p in parts or () if p.function_call and p.function_call.id]
        if usage is not None and calls:
            self._usage[calls[0].id or ""] = {
                "tokens_in": usage.prompt_token_count or 0,
                "tokens_out": usage.candidates_token_count or 0,
            }
            while len(self._usage) > _KEPT_USAGE:
                del self._usage[next(iter(self._usage))]
        return None

    def _session(self, context: CallbackContext | ToolContext) -> str | None:
        return self.session or context.session.id

    # -- approvals -------------------------------------------------------------------------

    @staticmethod
    def approval_requests(events: Iterable[Event]) -> list[ApprovalRequest]:
        """The ``adk_request_confirmation`` calls among ``events`` (a run's output)."""
        found = []
        for event in events:
            for call in event.get_function_calls():
                if call.name != CONFIRMATION or not call.id:
                    continue
                original = (call.args or {}).get("originalFunctionCall") or {}
                found.append(
                    ApprovalRequest(
                        id=call.id,
                        tool=str(original.get("name", "tool")),
                        args=parse_args(original.get("args")),
                        call_id=original.get("id"),
                    )
                )
        return found

    @staticmethod
    def answer(request: ApprovalRequest, answer: object) -> types.Content:
        """The user message that answers ``request`` (pass it as ``new_message``).

        ``answer`` is a bool, ``"approve"``/``"reject"``, a ``Decision`` or a mapping; the
        comment of a refusal reaches the model.
        """
        decision = Decision.parse(answer)
        payload = {"comment": decision.comment, "by": decision.by}
        response = types.FunctionResponse(
            id=request.id,
            name=CONFIRMATION,
            response={"confirmed": decision.approved, "payload": payload},
        )
        return types.Content(role="user", parts=[types.Part(function_response=response)])


def _refusal(verdict: Verdict) -> dict[str, Any]:
    return {"error": model_text(verdict)}
