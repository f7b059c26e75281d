"""Audit events: what the guard saw and decided, handed to the store to keep.

The guard builds one ``AuditEvent`` per recorded step, refused call, reset and approval
decision, and gives it to ``store.append_audit`` inside the same transaction as the state
change, so an acknowledged step is never missing from the log. Redaction, size caps and the
hash chain are the store's business (``antiloop.stores``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from antiloop.core.verdict import Verdict


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One thing that happened to a session.

    Attributes:
        kind: ``step`` (a recorded step), ``check`` (a call refused or asked about before it
            ran), ``reset`` (a person spoke), ``session`` (opened or closed), ``approval``
            (a person decided), ``cache`` (a cached result was served).
        session: the session id.
        at: when, in seconds since the epoch (the guard's clock).
        agent: the agent name as given.
        index: the step's 0-based number in the session, for ``step`` events.
        tool: the tool name.
        args: the tool's arguments as sent (before redaction).
        output: the tool's output text (before redaction and capping).
        error: the error text.
        exit_code: the exit code.
        verdict: the verdict given, if any.
        detail: anything else worth keeping (reason of a reset, who approved, ...).
    """

    kind: str
    session: str
    at: float
    agent: str | None = None
    index: int | None = None
    tool: str | None = None
    args: Mapping[str, Any] | None = None
    output: str | None = None
    error: str | None = None
    exit_code: int | None = None
    verdict: Verdict | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
