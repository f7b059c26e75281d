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
stopped (AutoGen's own resume). Written against autogen-agentchat 0.7; install with
``pip install 'antiloop[autogen]'``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from antiloop.errors import MissingExtra
from antiloop.guard import Guard
from antiloop.integrations._common import (
    Decision,
    denied,
    parse_args,
    record_decision,
    verdict_info,
)
from antiloop.verdict import Action, Verdict

try:
    from autogen_agentchat.base import TerminatedException, TerminationCondition
    from autogen_agentchat.messages import (
        BaseAgentEvent,
        BaseChatMessage,
        StopMessage,
        ToolCallExecutionEvent,
        ToolCallRequestEvent,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("autogen", "autogen-agentchat", "antiloop.integrations.autogen") from exc

__all__ = ["AntiloopTermination", "Decision"]

_KEPT_CALLS = 256


class AntiloopTermination(TerminationCondition):
    """Stops an AutoGen team when its agents loop; pauses it when a person must decide.

    Args:
        guard: the guard to use; a fresh in-memory ``Guard()`` by default.
        session: the antiloop session; a new id per condition by default.

    Attributes:
        verdict: the verdict that stopped the team last, or None.
        pending: the ``ask`` verdict waiting for ``decide()``, or None.

    Example:
        >>> from autogen_agentchat.conditions import MaxMessageTermination
        >>> condition = AntiloopTermination() | MaxMessageTermination(20)
        >>> type(condition).__name__
        'OrTerminationCondition'
    """

    def __init__(self, guard: Guard | None = None, *, session: str | None = None) -> None:
        self.guard = guard if guard is not None else Guard()
        self.session = session or uuid.uuid4().hex
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
