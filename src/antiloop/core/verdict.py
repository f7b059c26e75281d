"""Verdicts: what the guard decides about a step, with the reason and the evidence."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Self


class Action(IntEnum):
    """What happens next, ordered by severity so that combining verdicts is ``max``.

    ``NUDGE`` lets the call go on with a hint to the model; ``BLOCK`` refuses this one call;
    ``STOP`` ends the session.
    """

    CONTINUE = 0
    NUDGE = 1
    ASK = 2
    BLOCK = 3
    STOP = 4

    def __str__(self) -> str:
        """The action's name in lower case: ``print(verdict.action)`` shows ``stop``, not ``4``."""
        return self.name.lower()

    def __format__(self, spec: str) -> str:
        """``f"{action}"`` reads as ``str(action)``; ``"%d" % action`` still gives the number."""
        return format(str(self), spec)

    @property
    def wire(self) -> str:
        """The name ``antiloop check`` prints: continue, ask or stop."""
        if self <= Action.NUDGE:
            return "continue"
        return "ask" if self is Action.ASK else "stop"


OUTCOMES = {
    "repeat": "loop",
    "cycle": "loop",
    "stagnation": "stalled",
    "fail-streak": "failing",
    "max-steps": "budget",
    "goal": "goal",
}

# Among stops at one step, the verdict names the first of these (docs/protocol.md section 5).
PRECEDENCE = ("repeat", "cycle", "goal", "stagnation", "max-steps", "fail-streak", "terminated")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The guard's decision about one step.

    Attributes:
        action: what happens next.
        detector: the detector that decided (``None`` for an ordinary step).
        outcome: ``loop``, ``failing``, ``budget``, ``goal`` or ``stalled``.
        fingerprint: ``AGENT::<agent>::<op>::<context>::<result>`` for loops, else ``None``.
        reason: one sentence for people.
        hint: what the model should do instead.
        evidence: the steps (0-based indices in the session) that make the evidence.
        escalate_to: ``human`` or ``supervisor`` for stops and asks.
    """

    action: Action = Action.CONTINUE
    detector: str | None = None
    outcome: str | None = None
    fingerprint: str | None = None
    reason: str = ""
    hint: str = ""
    evidence: tuple[int, ...] = ()
    escalate_to: str | None = None

    @classmethod
    def ok(cls, reason: str = "") -> Self:
        """An ordinary step: go on."""
        return cls(reason=reason)

    @classmethod
    def _fired(cls, action: Action, detector: str, reason: str, **kw: object) -> Self:
        outcome = kw.pop("outcome", None) or OUTCOMES.get(detector)
        return cls(action, detector, outcome, reason=reason, **kw)  # type: ignore[arg-type]

    @classmethod
    def nudge(cls, detector: str, reason: str, **kw: object) -> Self:
        """Let the call go on, with a hint to the model."""
        return cls._fired(Action.NUDGE, detector, reason, **kw)

    @classmethod
    def ask(cls, detector: str, reason: str, **kw: object) -> Self:
        """Ask a person (or the supervisor) before going on."""
        return cls._fired(Action.ASK, detector, reason, **kw)

    @classmethod
    def block(cls, detector: str, reason: str, **kw: object) -> Self:
        """Refuse this one call."""
        return cls._fired(Action.BLOCK, detector, reason, **kw)

    @classmethod
    def stop(cls, detector: str, reason: str, **kw: object) -> Self:
        """End the session."""
        return cls._fired(Action.STOP, detector, reason, **kw)

    @property
    def fired(self) -> bool:
        """True when a detector decided something other than an ordinary step."""
        return self.detector is not None

    def with_action(self, action: Action) -> Verdict:
        """A copy of this verdict with another action."""
        return replace(self, action=action)

    def to_wire(self, index: int) -> dict[str, object]:
        """The JSON object ``antiloop check`` prints for this verdict (protocol section 7)."""
        return {
            "index": index,
            "action": self.action.wire,
            "detector": self.detector,
            "outcome": self.outcome,
            "fingerprint": self.fingerprint,
            "reason": self.reason,
        }


def invalid_wire(index: int, reason: str) -> dict[str, object]:
    """The ``antiloop check`` line for input that is no step (docs/protocol.md section 2)."""
    return {
        "index": index,
        "action": "invalid",
        "detector": None,
        "outcome": None,
        "fingerprint": None,
        "reason": reason,
    }


def worst(verdicts: list[Verdict]) -> Verdict:
    """Combine verdicts: the highest action wins; among equals, detector precedence decides."""
    best: Verdict | None = None
    for v in verdicts:
        if best is None or _rank(v) > _rank(best):
            best = v
    return best if best is not None else Verdict.ok()


def _rank(v: Verdict) -> tuple[int, int]:
    order = PRECEDENCE.index(v.detector) if v.detector in PRECEDENCE else len(PRECEDENCE)
    return (int(v.action), -order)
