"""What people do to a session, kept in the audit log with their name: stops and feedback.

Approval decisions are logged by ``antiloop.approval`` (``decided_by``); a stop request and
feedback are logged here, as ``session`` records whose detail names the event, the person
(``decided_by``) and what they said. A store that keeps no audit log (or a guard told to keep
none) logs nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from antiloop.audit import AuditEvent
from antiloop.core.errors import StoreError

if TYPE_CHECKING:
    from antiloop.server.service import Service

log = logging.getLogger("antiloop")


def record(service: Service, session: str, event: str, by: str, **said: Any) -> None:
    """Append ``event`` (``stop`` or ``feedback``) by ``by`` to the session's audit records."""
    if getattr(service.guard, "_audit", None) is None:
        return
    sink = getattr(service.store, "append_audit", None)
    if sink is None:
        return
    detail = {"event": event, "decided_by": by, **said}
    try:
        sink(AuditEvent("session", session, service.clock(), detail=detail))
    except StoreError:  # the request itself was kept: say so, do not undo it
        log.exception("antiloop: could not log the %s of session %s by %s", event, session, by)
