"""What the guard remembers of each stream: compact step records, counters and messages.

Nothing here keeps a whole output: a step is remembered as digests and readings (a result's
text waits for its readings in ``antiloop.core.deferred``, under one global byte budget, never in
the state). The windows are bounded by the configuration (cycle period, repeat threshold,
stagnation window).
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass, field
from typing import Any

from antiloop.core.deferred import Deferred
from antiloop.core.procedure import Procedure
from antiloop.core.redact import redact_text
from antiloop.core.result import Readings, SameResult
from antiloop.core.rules.ruleset import BUILTIN, Rules
from antiloop.core.step import Step

CONTEXT_KEPT = 120  # the fingerprint shows 80 characters of it


def kept_context(context: str) -> str:
    """The context a window keeps: redacted before it is cut, so no secret is left half-cut."""
    if len(context) <= CONTEXT_KEPT and context.isalnum():
        return context
    return redact_text(context)[:CONTEXT_KEPT]


def key_digest(key: str) -> str:
    """A short stable stand-in for a canonical procedure key: 16 hex digits of its digest.

    The stand-in is stored with the session, so it never holds the key itself (a key holds
    the call's arguments, and arguments hold secrets: ``mysql -phunter2``); two digests
    compare equal exactly when their keys do.
    """
    digest = _KEY_HASH.copy()  # a copy of a ready hash: cheaper than a new one
    digest.update(key.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


_KEY_HASH = hashlib.blake2b(digest_size=8)


class StepRecord:
    """One step of a stream, as the loop detectors need it.

    Attributes:
        index: the step's 0-based number in its session.
        tool: the tool name, lower-cased.
        operation: the operation of docs/protocol.md section 3.1.
        procedure: a digest of the canonical procedure key.
        context: the fingerprint context, or the procedure it is taken from on first use.
        readings: the result readings, read on first use from the result kept for them
            (``antiloop.core.deferred``; ``fallback`` readings once that text is gone).
        same_as: ``same_as[p - 1]`` says how this step is the same (procedure and result) as
            the visible step ``p`` places back in its stream, or ``None`` when it is not.
    """

    __slots__ = ("_context", "_result", "index", "operation", "procedure", "same_as", "tool")

    def __init__(
        self,
        index: int,
        tool: str,
        operation: str,
        procedure: str,
        context: str | Procedure,
        readings: Readings | Deferred,
        same_as: tuple[SameResult | None, ...] = (),
    ) -> None:
        self.index = index
        self.tool = tool
        self.operation = operation
        self.procedure = procedure
        self._context = context
        self._result = readings
        self.same_as = same_as

    @property
    def context(self) -> str:
        """The fingerprint context: redacted, then cut to ``CONTEXT_KEPT`` characters."""
        context = self._context
        if isinstance(context, Procedure):
            context = self._context = kept_context(context.context)
        return context

    @property
    def readings(self) -> Readings:
        """The result readings (made now if they were deferred)."""
        result = self._result
        if type(result) is Deferred:
            result = self._result = result.readings()
        return result  # type: ignore[return-value]

    @property
    def made(self) -> Readings | None:
        """The readings if they are made already, else None (nothing is read)."""
        result = self._result
        if type(result) is Deferred:
            return result.made
        return result  # type: ignore[return-value]

    @property
    def read(self) -> bool:
        """Whether the readings are made, or can still be made from the kept text."""
        result = self._result
        return type(result) is not Deferred or result.kept

    def release(self) -> None:
        """Let the kept text go: no later step compares with this one any more."""
        result = self._result
        if type(result) is Deferred:
            result.drop()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepRecord):
            return NotImplemented
        return (
            self.index == other.index
            and self.tool == other.tool
            and self.operation == other.operation
            and self.procedure == other.procedure
            and self.context == other.context
            and self.readings == other.readings
            and self.same_as == other.same_as
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"StepRecord({self.index!r}, {self.tool!r}, {self.operation!r}, "
            f"{self.procedure!r}, {self._context!r}, {self._result!r}, {self.same_as!r})"
        )


@dataclass(slots=True)
class MessageRecord:
    """A message of the agent, for the semantic checks."""

    index: int
    text: str
    masked: str
    blank: bool
    vector: array[float] | None = None


@dataclass(slots=True)
class StreamState:
    """The remembered state of one (session, agent) stream.

    ``window`` and ``messages`` are plain lists that the guard keeps to their bounds (a deque
    costs half a kilobyte even when nearly empty, and most streams are short).
    """

    window: list[StepRecord]
    messages: list[MessageRecord]
    run: int = 0
    fail_tool: str = ""
    fails: int = 0
    fail_steps: tuple[int, ...] = ()
    blanks: int = 0
    stopped: dict[str, str] = field(default_factory=dict)
    fail_errors: tuple[str, ...] = ()  # short digests of the failing steps' error lines
    # What the opt-in detectors (antiloop.core.extra.detectors) follow, by name: small tuples of
    # plain values (digests, indices), bounded; None in a stream no such detector judged.
    chains: dict[str, tuple[Any, ...]] | None = None
    # The escalation ladder (antiloop.decide): the last step's nudge or escalation, as
    # (procedure digest, rung reached, the verdict), while the next step may ignore it.
    nudged: tuple[str, int, Any] | None = None


@dataclass(slots=True)
class SessionState:
    """The remembered state of one session: its step count, goal, streams and end."""

    steps: int = 0
    goal: str | None = None
    goal_vector: array[float] | None = None
    streams: dict[str, StreamState] = field(default_factory=dict)
    ended: object | None = None  # the Verdict that ended the session
    # The ids of the session's last steps and their verdicts (None: a plain continue), so
    # that a step delivered again is answered as it was the first time (protocol section 2).
    seen: dict[str, object | None] = field(default_factory=dict)
    # Token and cost spend (antiloop.budgets): "" for the session, "a:<agent>" per agent, each
    # (tokens_in, tokens_out, cost_usd, next soft tokens, next soft usd, hard tokens, hard usd);
    # None until a step with usage meets a guard with budgets.
    spend: dict[str, tuple[Any, ...]] | None = None


class History:
    """The read-only view a detector judges: the current step and what came before it.

    Attributes:
        step: the step being judged.
        record: its compact record, or ``None`` when the step is invisible to the loop
            detectors (a tool allowed to repeat).
        procedure: its canonical procedure.
        stream: the state of its stream, the current step already included.
        session: the state of its session, the current step already counted.
        message: the step's message record, when it has a message.
        rules: the rule set the step was read by (its scrubbers' placeholders name values).
    """

    __slots__ = ("message", "procedure", "record", "rules", "session", "step", "stream")

    def __init__(
        self,
        step: Step,
        record: StepRecord | None,
        procedure: Procedure,
        stream: StreamState,
        session: SessionState,
        message: MessageRecord | None = None,
        rules: Rules = BUILTIN,
    ) -> None:
        self.rules = rules
        self.step = step
        self.record = record
        self.procedure = procedure
        self.stream = stream
        self.session = session
        self.message = message

    def __repr__(self) -> str:
        return f"History(step={self.step!r}, count={self.count})"

    @property
    def count(self) -> int:
        """The 1-based count of this step in its session."""
        return self.session.steps

    @property
    def agent(self) -> str:
        """The agent name, lower-cased."""
        return self.step.agent.lower()
