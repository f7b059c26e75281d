"""antiloop inside CrewAI crews, as its tool-call hooks (and a model-call hook).

    from crewai import Agent, Crew, Task
    from antiloop.integrations.crewai import AntiloopHooks

    with AntiloopHooks():            # registers the hooks; removed again on leaving
        Crew(agents=[worker], tasks=[task]).kickoff()

CrewAI runs every ``PRE_TOOL_CALL`` hook before a tool and every ``POST_TOOL_CALL`` hook after
it, a blocked call included. Before a call the guard refuses a procedure already stopped as a
loop; after it the call is recorded with its result, and at the second identical call with the
same result the agent reads the hint and the fingerprint instead of the result. Each call carries
the tokens the agent's LLM used since the last one (for budgets). A refused call never runs,
and the agent reads why (not CrewAI's bare "blocked by hook"). With ``on_stop="raise"`` (the
default) a stopped session ends the crew at its next model call: ``kickoff()`` raises CrewAI's
``HookAborted`` with the reason.

Approvals: ``needs_approval`` (see ``ApprovalPolicy``) asks a person before a risky call runs,
through ``decide(tool, args)``, or by default CrewAI's own prompt
(``ToolCallHookContext.request_human_input``: "approve" or "yes" runs it). The session is the
crew's id unless one is given. Written against crewai 1.15; install with
``pip install -e '.[crewai]'`` (its dependencies need a venv of their own beside our dev
set: see the extra in pyproject.toml).
"""

from __future__ import annotations

from typing import Any

from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decider,
    Decision,
    RunningTotals,
    approval_needed,
    as_text,
    denied,
    framework,
    model_text,
    policy_rule,
    record_decision,
    session_of,
)

with framework("crewai", "crewai", "antiloop.integrations.crewai"):
    from crewai.hooks import HookAborted, InterceptionPoint, register_hook, unregister_hook

__all__ = ["AntiloopHooks", "Decision"]

_BLOCKED = "Tool execution blocked by hook."  # CrewAI's result for a call a hook refused


class AntiloopHooks:
    """The guard as CrewAI hooks: ``register()`` (or ``with``) puts them in every crew.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; by default the crew's id (else the one bound with
            ``guard.session()``, else ``"default"``).
        needs_approval: ``(tool, args) -> bool`` or an ``antiloop.approval`` policy; True
            (``"ask"``) asks a person before the call runs, ``"deny"`` refuses it.
        decide: ``(tool, args) -> answer`` for those questions; by default CrewAI's prompt.
        on_stop: ``"raise"`` (default) ends the crew at its next model call once the session
            is stopped; ``"answer"`` only answers the agent with the hint.

    Example:
        >>> hooks = AntiloopHooks(on_stop="answer")
        >>> hooks.on_stop
        'answer'
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session: str | None = None,
        needs_approval: ApprovalPolicy | None = None,
        decide: Decider | None = None,
        on_stop: str = "raise",
    ) -> None:
        if on_stop not in ("raise", "answer"):
            raise ValueError(f"on_stop must be 'raise' or 'answer', not {on_stop!r}")
        self.guard = guard if guard is not None else Guard()
        self.session = session
        self.needs_approval = needs_approval
        self.decide = decide
        self.on_stop = on_stop
        self._refused: dict[int, Verdict] = {}  # id of the call's input dict -> its refusal
        self._totals = RunningTotals()  # each agent's LLM -> the tokens charged
        self._hooks = (
            (InterceptionPoint.PRE_TOOL_CALL, self.before_tool_call),
            (InterceptionPoint.POST_TOOL_CALL, self.after_tool_call),
            (InterceptionPoint.PRE_MODEL_CALL, self.before_model_call),
        )

    def __repr__(self) -> str:
        return f"AntiloopHooks({self.guard!r}, on_stop={self.on_stop!r})"

    def register(self) -> AntiloopHooks:
        """Add the hooks to CrewAI's global hooks (before the crew is built); returns self."""
        for point, hook in self._hooks:
            register_hook(point, hook)
        return self

    def unregister(self) -> None:
        """Remove the hooks again."""
        for point, hook in self._hooks:
            unregister_hook(point, hook)

    def __enter__(self) -> AntiloopHooks:
        return self.register()

    def __exit__(self, *exc: object) -> None:
        self.unregister()

    # -- the hooks -------------------------------------------------------------------------

    def before_tool_call(self, context: Any) -> bool | None:
        """``PRE_TOOL_CALL``: False (the call does not run) for a stopped or refused call."""
        tool, args = str(context.tool_name), dict(context.tool_input or {})
        session, agent = self._session(context), _agent(context)
        verdict = self.guard.check(tool, args, session=session, agent=agent)
        if verdict.action < Action.BLOCK:
            refusal = self._approve(context, tool, args, session, agent)
            if refusal is None:
                return None
            verdict = refusal
        self._refused[id(context.tool_input)] = verdict
        return False

    def after_tool_call(self, context: Any) -> str | None:
        """``POST_TOOL_CALL``: record the result; the hint replaces it when the guard says so."""
        refusal = self._refused.pop(id(context.tool_input), None)
        if refusal is not None:
            return model_text(refusal)
        result = context.tool_result
        if isinstance(result, str) and result.startswith(_BLOCKED):
            return None  # another hook refused it: the tool did not run
        tokens_in, tokens_out = self._usage(context)
        verdict = self.guard.record(
            self.guard.step(
                str(context.tool_name),
                dict(context.tool_input or {}),
                session=self._session(context),
                agent=_agent(context),
                output=as_text(result),
                tokens_in=tokens_in,
                tokens_out=tokens_out,
            )
        )
        if verdict.action >= Action.BLOCK:
            return model_text(verdict)
        return None

    def before_model_call(self, context: Any) -> None:
        """``PRE_MODEL_CALL``: with ``on_stop="raise"``, a stopped session ends the crew."""
        if self.on_stop != "raise":
            return
        ended = self.guard.ended(self._session(context))
        if ended is not None:
            raise HookAborted(reason=model_text(ended), source="antiloop")

    # -- helpers ---------------------------------------------------------------------------

    def _session(self, context: Any) -> str:
        if self.session:
            return self.session
        crew = getattr(context, "crew", None)
        crew_id = getattr(crew, "id", None)
        return str(crew_id) if crew_id is not None else session_of(self.guard, None)

    def _usage(self, context: Any) -> tuple[int | None, int | None]:
        """The tokens the agent's LLM used since the last recorded call (its running totals)."""
        llm = getattr(getattr(context, "agent", None), "llm", None)
        summary = getattr(llm, "get_token_usage_summary", None)
        if not callable(summary):
            return None, None
        usage = summary()
        return self._totals.since_last(
            llm, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
        )

    def _approve(
        self, context: Any, tool: str, args: dict[str, Any], session: str, agent: str
    ) -> Verdict | None:
        """None when the call may run, else the refusal (the policy's or a person's)."""
        needed = approval_needed(self.needs_approval, tool, args)
        if needed == "allow":
            return None
        rule = policy_rule(self.needs_approval, tool, args)
        if needed == "deny":
            return denied(tool, Decision(False, "refused by policy", "policy"))
        asked_at = self.guard.clock()
        if self.decide is not None:
            decision, channel = Decision.parse(self.decide(tool, args)), "crewai-decide"
        else:
            reply = context.request_human_input(
                prompt=f"antiloop: {agent} wants to run {tool} {as_text(args)}",
                default_message="Type 'approve' to run it, or say why not:",
            )
            decision = Decision.parse(reply)
            if not decision.approved and reply.strip():
                decision = Decision(False, reply.strip())
            channel = "crewai-human-input"
        refusal = None if decision.approved else denied(tool, decision)
        record_decision(
            self.guard,
            session=session,
            agent=agent,
            tool=tool,
            args=args,
            decision=decision,
            verdict=refusal,
            channel=channel,
            rule=rule,
            asked_at=asked_at,
        )
        return refusal


def _agent(context: Any) -> str:
    role = getattr(getattr(context, "agent", None), "role", None)
    return str(role) if role else "agent"
