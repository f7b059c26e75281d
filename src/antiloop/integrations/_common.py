"""What every integration shares: approval decisions, the text shown to the model, tool outputs.

Approvals stay pluggable: an integration takes ``needs_approval(tool, args) -> bool`` (any
callable, such as the policy of ``antiloop.approval`` once it exists) and asks the person with
the framework's own mechanism; the answer comes back as a ``Decision``.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from antiloop.audit import AuditEvent
from antiloop.core.errors import MissingExtra
from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard

log = logging.getLogger("antiloop")

#: ``needs_approval(tool, args)``: True (or ``"ask"``) when a person must approve the call
#: first, ``"deny"`` to refuse it outright, False (or ``"allow"``) to let it run. An object
#: with ``decide(tool, args)`` returning something with a ``decision`` attribute (the shape of
#: ``antiloop.approval``'s policy) is accepted too.
ApprovalPolicy = Callable[[str, Mapping[str, Any]], object]

_YES = frozenset({"approve", "approved", "accept", "allow", "yes", "y", "true", "ok"})


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer to an approval request.

    Attributes:
        approved: True to run the call (or go on), False to refuse it.
        comment: the person's words, passed to the model on a refusal.
        by: who answered, when known.

    Example:
        >>> Decision.parse({"type": "reject", "message": "not on prod"})
        Decision(approved=False, comment='not on prod', by=None)
    """

    approved: bool
    comment: str | None = None
    by: str | None = None

    @classmethod
    def parse(cls, value: object) -> Decision:
        """Read an answer: a bool, ``"approve"``/``"reject"``, or a mapping.

        Mappings may be LangChain's HITL form (``{"type": "approve" | "reject", "message"}``)
        or ``{"approved": bool, "comment": str, "by": str}``. Anything else is a refusal.
        """
        if isinstance(value, Decision):
            return value
        if isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            return cls(value.strip().lower() in _YES)
        if isinstance(value, Mapping):
            comment = value.get("comment", value.get("message"))
            by = value.get("by")
            if "approved" in value:
                approved = value["approved"] is True
            else:
                approved = str(value.get("type", value.get("action", ""))).lower() in _YES
            return cls(
                approved,
                comment if isinstance(comment, str) and comment else None,
                by if isinstance(by, str) else None,
            )
        return cls(False, f"unreadable answer {value!r}")


def approval_needed(policy: object, tool: str, args: Mapping[str, Any]) -> str:
    """Ask a policy about one call: ``allow``, ``ask`` or ``deny``."""
    if policy is None:
        return "allow"
    decide = getattr(policy, "decide", None)
    answer = decide(tool, args) if callable(decide) else policy(tool, args)  # type: ignore[operator]
    answer = getattr(answer, "decision", answer)
    if answer is True:
        return "ask"
    if answer is False or answer is None:
        return "allow"
    text = str(answer).lower()
    return text if text in ("allow", "ask", "deny") else "ask"


def denied(tool: str, decision: Decision) -> Verdict:
    """The verdict for a call a person refused (it refuses this one call)."""
    said = f": {decision.comment.rstrip('.')}." if decision.comment else "."
    return Verdict.block(
        "approval",
        f"A person refused {tool}{said}",
        outcome="denied",
        hint=(
            f"A person refused this {tool} call{said} Do not retry it unless they ask; "
            "choose another way or ask them what to do."
        ),
        escalate_to="human",
    )


def model_text(verdict: Verdict) -> str:
    """What the model reads in place of a refused call or a looping result."""
    text = verdict.hint or verdict.reason
    if verdict.action is Action.STOP:
        text = f"The run is stopped: {verdict.reason} {verdict.hint}".strip()
    if verdict.fingerprint:
        text += f" [antiloop fingerprint: {verdict.fingerprint}]"
    return f"antiloop: {text}"


def verdict_info(verdict: Verdict) -> dict[str, Any]:
    """The verdict as a small JSON-ready dict, for metadata fields the model does not read."""
    return {
        "action": verdict.action.name.lower(),
        "detector": verdict.detector,
        "outcome": verdict.outcome,
        "fingerprint": verdict.fingerprint,
        "reason": verdict.reason,
        "hint": verdict.hint,
    }


def record_decision(
    guard: Guard,
    *,
    session: str | None,
    agent: str,
    tool: str,
    args: Mapping[str, Any],
    decision: Decision,
    verdict: Verdict | None = None,
    channel: str | None = None,
    rule: str | None = None,
    asked_at: float | None = None,
) -> None:
    """Put a person's decision in the audit log, when the guard's store keeps one.

    The record says how the call was decided: ``channel`` (the framework's own prompt, such
    as ``langgraph-interrupt``), the ``rule`` that asked (by default the verdict's detector,
    else ``needs_approval``) and, with ``asked_at``, how long the answer took.
    """
    sink = getattr(guard.store, "append_audit", None)
    log.info(
        "antiloop: %s %s %s in session %s",
        decision.by or "a person",
        "approved" if decision.approved else "refused",
        tool,
        session,
    )
    if sink is None:
        return
    now = guard.clock()
    if rule is None:
        rule = f"verdict:{verdict.detector}" if verdict and verdict.detector else "needs_approval"
    sink(
        AuditEvent(
            kind="approval",
            session=session_of(guard, session),
            at=now,
            agent=agent,
            tool=tool,
            args=args,
            verdict=verdict,
            detail={
                "approved": decision.approved,
                "status": "approved" if decision.approved else "denied",
                "comment": decision.comment,
                "decided_by": decision.by,
                "channel": channel,
                "rule": rule,
                "asked_at": asked_at,
                "waited_s": None if asked_at is None else round(max(0.0, now - asked_at), 3),
            },
        )
    )


def session_of(guard: Guard, session: str | None) -> str:
    """The session id the guard will use: ``session``, else the one ``guard.session()`` bound."""
    return session or guard._session_id(None)


def as_text(value: object) -> str:
    """A tool's output as the text the guard compares."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def parse_args(raw: object) -> dict[str, Any]:
    """Tool arguments as a dict: JSON text is decoded; anything else is wrapped."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except ValueError:
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": value}
    if raw is None:
        return {}
    return {"input": raw}


@contextmanager
def framework(extra: str, package: str, module: str) -> Iterator[None]:
    """Import a framework inside this block; without it, ``MissingExtra`` names the extra.

    Example:
        >>> with framework("crewai", "crewai", "antiloop.integrations.crewai"):
        ...     import json
    """
    try:
        yield
    except ImportError as exc:
        raise MissingExtra(extra, package, module) from exc


#: ``decide(tool, args)`` answers an approval: a bool, a ``Decision`` or a mapping (or an
#: awaitable of one).
Decider = Callable[[str, dict[str, Any]], object]


def policy_rule(policy: object, tool: str, args: Mapping[str, Any]) -> str:
    """The name of the policy rule that asks about a call (``needs_approval`` for a callable)."""
    decide = getattr(policy, "decide", None)
    if callable(decide):
        rule = getattr(decide(tool, args), "rule", None)
        if isinstance(rule, str) and rule:
            return rule
    return "needs_approval"


async def ask_person(decide: Decider, tool: str, args: dict[str, Any]) -> Decision:
    """``decide(tool, args)``, awaited when it returns an awaitable, read as a ``Decision``."""
    answer = decide(tool, args)
    if inspect.isawaitable(answer):
        answer = await answer
    return Decision.parse(answer)


class RunningTotals:
    """Turns a host's running token totals (per run or per model object) into per-step usage.

    Example:
        >>> totals, run = RunningTotals(), object()
        >>> totals.since_last(run, 100, 7), totals.since_last(run, 300, 14)
        ((100, 7), (200, 7))
        >>> totals.since_last(run, 300, 14)
        (None, None)
    """

    def __init__(self, kept: int = 64) -> None:
        self.kept = kept
        self._seen: dict[int, tuple[object, int, int]] = {}  # id -> (the object, in, out)

    def since_last(
        self, owner: object, now_in: object, now_out: object
    ) -> tuple[int | None, int | None]:
        """The tokens ``owner``'s totals grew by since the last call; nones for no growth."""
        if not isinstance(now_in, int) or not isinstance(now_out, int):
            return None, None
        seen = self._seen.pop(id(owner), None)
        was_in, was_out = (seen[1], seen[2]) if seen is not None and seen[0] is owner else (0, 0)
        self._seen[id(owner)] = (owner, now_in, now_out)  # the object is kept: its id stays its own
        while len(self._seen) > self.kept:
            del self._seen[next(iter(self._seen))]
        spent_in, spent_out = max(0, now_in - was_in), max(0, now_out - was_out)
        if not spent_in and not spent_out:
            return None, None
        return spent_in, spent_out
