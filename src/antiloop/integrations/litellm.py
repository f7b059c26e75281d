"""antiloop at the LiteLLM proxy: a custom guardrail that protects any agent behind the gateway.

    # config.yaml of `litellm --config config.yaml`
    guardrails:
      - guardrail_name: antiloop
        litellm_params:
          guardrail: antiloop.integrations.litellm.AntiloopGuardrail
          mode: [pre_call, post_call]
          default_on: true
          antiloop_config: antiloop.toml     # optional: Guard.from_config

Every chat request carries the agent's conversation: its tool calls and their results. Before
the request goes to the model (``pre_call``) the guardrail records each result it has not seen,
with the tool call's id as step id (a conversation sent again is not counted twice) and the
tokens and cost of the response that asked for it. At the second identical call with the same
result, the model reads the hint and the fingerprint in place of that result. After the model
answers (``post_call``), a tool call of a procedure already stopped as a loop never reaches the
agent: the answer becomes a plain message with the reason (``finish_reason="stop"``), so the
agent's loop ends without a change to the agent.

The session is the request's ``litellm_session_id`` (or ``metadata.antiloop_session``), else a
digest of the conversation's first messages. Approvals need a host that can pause a call; the
gateway cannot, so a policy answering ``ask`` refuses like ``deny``. Written against litellm
1.110; install with ``pip install -e '.[litellm]'``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar

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
    verdict_info,
)

with framework("litellm", "litellm", "antiloop.integrations.litellm"):
    from litellm.integrations.custom_guardrail import CustomGuardrail

__all__ = ["AntiloopGuardrail"]

_KEPT = 4096


class AntiloopGuardrail(CustomGuardrail):
    """A LiteLLM proxy guardrail that records tool results and refuses looping tool calls.

    Args:
        guard: the guard to use; else one from ``antiloop_config`` (a config file), else a
            fresh in-memory ``Guard()``.
        antiloop_config: a config file for ``Guard.from_config`` (from the proxy's YAML).
        agent: the agent name in fingerprints; by default the request's ``user``, else
            ``"agent"``.
        needs_approval: ``(tool, args) -> bool`` (see ``ApprovalPolicy``); a call it does not
            allow is refused before it reaches the agent.
        **kwargs: LiteLLM's guardrail settings (``guardrail_name``, ``event_hook``,
            ``default_on``), as the proxy passes them.
    """

    use_native_lifecycle_hooks: ClassVar[bool] = True

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        antiloop_config: str | None = None,
        agent: str | None = None,
        needs_approval: ApprovalPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("guardrail_name", "antiloop")
        kwargs.setdefault("event_hook", ["pre_call", "post_call"])
        super().__init__(**kwargs)
        if guard is None:
            guard = Guard.from_config(antiloop_config) if antiloop_config else Guard()
        self.guard = guard
        self.agent = agent
        self.needs_approval = needs_approval
        self._usage: dict[str, dict[str, Any]] = {}
        # results recorded already (a conversation is sent again with each request): the
        # text that replaced each, or None when it went to the model as it was
        self._recorded: dict[tuple[str, str], str | None] = {}

    def __repr__(self) -> str:
        return f"AntiloopGuardrail({self.guard!r})"

    # -- before the model ------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Record the conversation's new tool results; a looping result becomes the hint."""
        messages = data.get("messages")
        if not isinstance(messages, list):
            return None
        session, agent = self._session(data), self._agent(data)
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        for message in messages:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                if call.get("id") and function.get("name"):
                    calls[call["id"]] = (function["name"], parse_args(function.get("arguments")))
            if message.get("role") != "tool" or message.get("tool_call_id") not in calls:
                continue
            call_id = message["tool_call_id"]
            key = (session, call_id)
            if key not in self._recorded:
                tool, args = calls[call_id]
                self._recorded[key] = self._judge(session, agent, tool, args, call_id, message)
                while len(self._recorded) > _KEPT:
                    del self._recorded[next(iter(self._recorded))]
            if self._recorded[key] is not None:
                message["content"] = self._recorded[key]
        return data

    def _judge(
        self,
        session: str,
        agent: str,
        tool: str,
        args: dict[str, Any],
        call_id: str,
        message: dict[str, Any],
    ) -> str | None:
        """Record one tool result; the text the model reads instead, if any."""
        output = _content_text(message.get("content"))
        verdict = self.guard.record(
            self.guard.step(
                tool,
                args,
                session=session,
                agent=agent,
                id=call_id,
                output=output,
                **self._usage.pop(call_id, {}),
            )
        )
        if verdict.action >= Action.BLOCK:
            return model_text(verdict)
        if verdict.action in (Action.NUDGE, Action.ASK):
            return f"{output}\n\n{model_text(verdict)}"
        return None

    # -- after the model -------------------------------------------------------------------

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """Refuse a tool call of a stopped procedure; keep the response's usage for its calls."""
        choices = getattr(response, "choices", None) or ()
        session, agent = self._session(data), self._agent(data)
        for choice in choices:
            message = getattr(choice, "message", None)
            calls = list(getattr(message, "tool_calls", None) or ())
            if message is None or not calls:
                continue
            refusal = self._refusal(calls, session, agent)
            if refusal is not None:
                message.content = model_text(refusal)
                message.tool_calls = None
                choice.finish_reason = "stop"
                response._hidden_params = {
                    **(getattr(response, "_hidden_params", None) or {}),
                    "antiloop": verdict_info(refusal),
                }
                continue
            self._keep_usage(calls[0].id, response)
        return response

    def _refusal(self, calls: list[Any], session: str, agent: str) -> Verdict | None:
        for call in calls:
            tool = call.function.name or "tool"
            args = parse_args(call.function.arguments)
            verdict = self.guard.check(tool, args, session=session, agent=agent)
            if verdict.action >= Action.BLOCK:
                return verdict
            if approval_needed(self.needs_approval, tool, args) != "allow":
                return denied(tool, Decision(False, "refused by policy at the gateway", "policy"))
        return None

    def _keep_usage(self, call_id: str | None, response: Any) -> None:
        usage = getattr(response, "usage", None)
        if not call_id or usage is None:
            return
        kept: dict[str, Any] = {
            "tokens_in": getattr(usage, "prompt_tokens", None),
            "tokens_out": getattr(usage, "completion_tokens", None),
        }
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            kept["cost_usd"] = float(cost)
        self._usage[call_id] = {k: v for k, v in kept.items() if v is not None}
        while len(self._usage) > _KEPT:
            del self._usage[next(iter(self._usage))]

    # -- who is asking ---------------------------------------------------------------------

    def _session(self, data: Mapping[str, Any]) -> str:
        metadata = data.get("metadata") or {}
        for value in (
            metadata.get("antiloop_session") if isinstance(metadata, Mapping) else None,
            data.get("litellm_session_id"),
        ):
            if isinstance(value, str) and value:
                return value
        messages = data.get("messages") or []
        head = [m for m in messages if isinstance(m, dict) and m.get("role") != "assistant"][:2]
        text = json.dumps(
            [(m.get("role"), _content_text(m.get("content"))) for m in head], sort_keys=True
        )
        return "litellm-" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def _agent(self, data: Mapping[str, Any]) -> str:
        if self.agent:
            return self.agent
        user = data.get("user")
        return user if isinstance(user, str) and user else "agent"


def _content_text(content: object) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    if content is None:
        return ""
    return as_text(content)
