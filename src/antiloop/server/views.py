"""Read-only views the dashboard draws: one session's page, and the decided approvals.

``GET /v1/timeline/{id}`` gathers what the session page shows in one call: the session's state
and the controls that still apply (Stop and feedback only while it runs), its latest verdict
that was not ``continue`` (fingerprint, reason, hint), the timeline of its steps and verdicts,
its audit records (``audited``: whether the store keeps an audit log at all), its approvals
and the feedback people gave it. ``GET /v1/decisions`` lists
decided approvals, newest first, with who decided, when, and how long the request waited.

Every body passes through the redactor (``antiloop.core.redact``): they carry the agent's text.
Store calls run off the event loop with the service's deadline (``service.call``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BeforeValidator
from starlette.responses import JSONResponse, Response

from antiloop.core.redact import redact_name, redact_value
from antiloop.server.routing import api_router, whole_number

if TYPE_CHECKING:
    from antiloop.approval import ApprovalRequest
    from antiloop.server.service import Service

TIMELINE_MAX = 200
"""The most audit records (and timeline steps) one session page carries."""
DECISIONS_DEFAULT, DECISIONS_MAX = 50, 500
_FEEDBACK_PREFIX = "A person says: "
_STEP_KINDS = frozenset({"step", "check"})
Limit = Annotated[
    int,
    Query(ge=1, le=DECISIONS_MAX, description="decisions to list, newest first"),
    BeforeValidator(whole_number(1, DECISIONS_MAX)),
]


def view_routes(service: Service) -> APIRouter:
    """The routes of this module (they need the token, as every ``/v1`` route)."""
    router = api_router()

    @router.get(
        "/v1/timeline/{id:path}",
        summary="One session's page: state, controls, latest verdict, timeline, audit",
        response_model=dict[str, Any],
    )
    async def timeline(id: Annotated[str, Path(description="a session id")]) -> Response:
        page = await service.call(session_page, service, redact_name(id))
        if page is None:
            return JSONResponse({"error": "no such session"}, status_code=404)
        return JSONResponse(redact_value(page))

    @router.get(
        "/v1/decisions",
        summary="Decided approvals, newest first, with who, when and how long they waited",
        response_model=dict[str, list[dict[str, Any]]],
    )
    async def decisions(limit: Limit = DECISIONS_DEFAULT) -> Response:
        rows = await service.call(decided_approvals, service, limit)
        return JSONResponse(redact_value({"decisions": rows}))

    return router


def session_page(service: Service, sid: str) -> dict[str, Any] | None:
    """Everything the session page shows, or None for a session nobody has seen."""
    state = service.store.peek(sid)
    audit = getattr(service.store, "audit_records", None)
    records = [r.to_dict() for r in audit(session=sid)][-TIMELINE_MAX:] if callable(audit) else []
    recent = list(service.recent.get(sid) or ())
    approvals = [
        _approval_row(service.fresh_approval(r))
        for r in service.ledger.list_approvals(session=sid)
        if not r.extra.get("vote_for")
    ]
    if state is None and not recent and not records and not approvals:
        return None
    ended = getattr(state, "ended", None)
    ended_wire = ended.to_wire(0) if ended is not None and hasattr(ended, "to_wire") else None
    stop_by = service.ledger.stop_requested(sid)
    status = "stopped" if ended is not None else "stopping" if stop_by else "running"
    steps = [r for r in records if r.get("kind") in _STEP_KINDS]
    return {
        "session": sid,
        "steps": getattr(state, "steps", len(steps)),
        "status": status,
        "ended": ended_wire,
        "stop_requested": stop_by,
        "controls": {"stop": status == "running", "feedback": status == "running"},
        "latest": _latest(recent, records, ended_wire),
        "timeline": steps if records else [_from_wire(w) for w in recent],
        "audit": records,
        "audited": callable(audit),
        "approvals": approvals,
        "feedback": _feedback(recent, approvals),
    }


def decided_approvals(service: Service, limit: int) -> list[dict[str, Any]]:
    """Decided approval requests, newest decision first, each with how long it waited."""
    fresh = (service.fresh_approval(r) for r in service.ledger.list_approvals())
    decided = [r for r in fresh if str(r.status) != "pending" and not r.extra.get("vote_for")]
    decided.sort(key=lambda r: r.decided_at or r.created_at, reverse=True)
    return [_approval_row(r) for r in decided[:limit]]


def _approval_row(r: ApprovalRequest) -> dict[str, Any]:
    row = r.to_dict()
    row["waited"] = round(r.decided_at - r.created_at, 3) if r.decided_at is not None else None
    return row


def _latest(
    recent: list[dict[str, Any]], records: list[dict[str, Any]], ended: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The newest verdict that was not ``continue`` (recent verdicts carry the hint)."""
    for wire in reversed(recent):
        if wire.get("action") not in (None, "continue"):
            return _pick(wire, hint=wire.get("hint"))
    for record in reversed(records):
        if record.get("action") not in (None, "continue"):
            return _pick(record, hint=ended.get("hint") if ended else None)
    return _pick(ended, hint=ended.get("hint")) if ended else None


def _pick(source: dict[str, Any], hint: object) -> dict[str, Any]:
    keys = ("action", "detector", "outcome", "fingerprint", "reason", "tool", "at")
    return {**{k: source.get(k) for k in keys}, "hint": hint if isinstance(hint, str) else ""}


def _from_wire(wire: dict[str, Any]) -> dict[str, Any]:
    """A live verdict in the shape of an audit record (for stores that keep no audit log)."""
    return {"kind": "step", **_pick(wire, hint=wire.get("hint")), "agent": wire.get("agent")}


def _feedback(recent: Iterable[dict[str, Any]], approvals: Iterable[dict[str, Any]]) -> list[Any]:
    """What people told the agent: feedback delivered with a verdict, approval comments."""
    said: list[dict[str, Any]] = []
    for wire in recent:
        hint = wire.get("hint") or ""
        if isinstance(hint, str) and hint.startswith(_FEEDBACK_PREFIX):
            text = hint[len(_FEEDBACK_PREFIX) :]
            said.append({"at": wire.get("at"), "by": "feedback", "text": text})
    said.extend(
        {"at": row.get("decided_at"), "by": row.get("decided_by"), "text": row["comment"]}
        for row in approvals
        if row.get("comment")
    )
    said.sort(key=lambda s: s.get("at") or 0)
    return said
