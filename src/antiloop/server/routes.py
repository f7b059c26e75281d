"""The routes of the API: steps, checks, hooks, sessions, stops, feedback, approvals, events.

Each handler answers the wire format of ``docs/protocol.md`` as a plain dict (sent as it is);
the models of ``antiloop.server.models`` describe it in the schema. Store calls run off the
event loop with the service's deadline (``service.call``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BeforeValidator, SkipValidation

from antiloop.approval import Answer, ApprovalStatus, verdict_of
from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER
from antiloop.core.errors import StoreError
from antiloop.core.redact import redact_name, redact_text, redact_value
from antiloop.hooks.events import DIALECTS
from antiloop.server import models
from antiloop.server.fast import steps_answer
from antiloop.server.limits import BadRequest, StoreTimeout
from antiloop.server.routing import (
    ERRORS,
    OpenRoute,
    SignedRoute,
    api_router,
    router_of,
    whole_number,
)

if TYPE_CHECKING:
    from antiloop.fleet import Fleet
    from antiloop.server.service import Service

PAGE = 100  # sessions per page of GET /v1/sessions, unless ?limit= says otherwise
MAX_PAGE = 1000
SessionId = Annotated[str, Path(description="a session id (a '/' in it sent as %2F)")]
Dialect = Literal[DIALECTS]  # type: ignore[valid-type]


def _cursor(value: object) -> int:
    text = str(value)
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        from pydantic_core import PydanticCustomError

        raise PydanticCustomError("range", "must be the next_cursor of an earlier page")
    return int(text)


# Query first, then the check: the schema shows the bounds, the error reads as one line.
PageLimit = Annotated[
    int,
    Query(ge=1, le=MAX_PAGE, description=f"sessions per page (default {PAGE})"),
    BeforeValidator(whole_number(1, MAX_PAGE)),
]
Cursor = Annotated[
    int,
    Query(ge=0, description="the next_cursor of the page before"),
    BeforeValidator(_cursor),
]


def open_routes() -> APIRouter:
    """The dashboard page (it holds no data) and the liveness probe."""
    router = router_of(OpenRoute)

    @router.get("/", response_class=HTMLResponse, summary="The dashboard page (no data in it)")
    async def dashboard() -> Response:
        page = resources.files("antiloop.server").joinpath("dashboard.html").read_text("utf-8")
        return HTMLResponse(
            page,
            headers={
                "Content-Security-Policy": (
                    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                    "connect-src 'self'; frame-ancestors 'none'; form-action 'none'"
                ),
                "X-Frame-Options": "DENY",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
            },
        )

    @router.get(
        "/healthz",
        response_model=models.Health,
        summary="Liveness: answers without touching the store",
    )
    async def health() -> Response:
        return JSONResponse({"ok": True})

    return router


def signed_routes(service: Service) -> APIRouter:
    """``POST /v1/approvals/{id}/answer``: the webhook channel's answers, HMAC-signed."""
    router = router_of(SignedRoute, responses=ERRORS)

    @router.post(
        "/v1/approvals/{id}/answer",
        response_model=models.Voted,
        summary="A webhook answer, HMAC-signed instead of the token",
    )
    async def signed_answer(
        id: str,
        answer: models.SignedDecision,
        timestamp: Annotated[
            str | None,
            Header(alias=TIMESTAMP_HEADER, description="seconds since the epoch, as signed"),
        ] = None,
        signature: Annotated[
            str | None,
            Header(
                alias=SIGNATURE_HEADER,
                description="sha256=<hex HMAC-SHA256 of timestamp '.' body>",
            ),
        ] = None,
    ) -> Response:
        if answer.id != id:
            raise BadRequest("the answer names another request")
        # The relay signed the body: its "by" is the user the relay authenticated.
        by = answer.by if answer.by and answer.by.strip() else "webhook"
        return await service.call(_decide, service, id, answer, by, "webhook")

    return router


def api_routes(service: Service) -> APIRouter:
    """The routes that need the token."""
    router = api_router()

    @router.get("/openapi.json", response_model=dict[str, Any], summary="This schema")
    async def openapi(request: Request) -> Response:
        return JSONResponse(request.app.openapi())

    @router.post(
        "/v1/steps",
        response_model=models.Verdict | models.Verdicts,
        summary="Record one step, or a batch (a list or {steps: [...]}), get verdicts",
    )
    async def steps(body: Annotated[models.StepsBody, Body()]) -> Response:
        # Most requests are answered by StepsFirst (antiloop.server.fast) before they get here.
        status, answer = await steps_answer(service, body)
        return JSONResponse(answer, status)

    @router.post(
        "/v1/check",
        response_model=models.CheckAnswer,
        summary="Before a call: stop request, guard, approval policy",
    )
    async def check(call: models.CheckRequest) -> Response:
        args = call.args or {}
        session = call.session or "default"
        try:
            gate = await service.call(
                service.gate,
                call.tool,
                args,
                session=session,
                agent=call.agent or "agent",
                paths=tuple(call.paths or ()),
                cwd=call.cwd,
            )
        except (StoreTimeout, StoreError) as exc:  # down or hung: the call follows on_store_error
            failed = service.guard._store_failed(StoreError(str(exc)), session)
            return JSONResponse(
                {**failed.to_wire(0), "hint": failed.hint, "args": args, "approval": None}
            )
        verdict = gate.verdict
        answer = redact_value(
            {
                **verdict.to_wire(0),
                "hint": verdict.hint,
                "approval": gate.request.to_dict() if gate.request else None,
            }
        )
        answer["args"] = dict(gate.args)  # the caller's own call (or the person's edit), to run
        return JSONResponse(answer)

    @router.post(
        "/v1/hooks/{dialect}",
        response_model=dict[str, Any],
        summary="One agent hook delivered over HTTP (the answer antiloop hook prints)",
    )
    async def hook(
        request: Request,
        dialect: Dialect,
        payload: Annotated[dict[str, Any], SkipValidation, Body()],
    ) -> Response:
        body: bytes = await request.body()  # the hook's own parser reads the bytes
        try:
            answer = await service.call(_hook, service, dialect, body)
        except StoreTimeout as exc:  # the hook's own answer to a store that does not answer
            answer = service.hook_failed(dialect, body, str(exc))
        return JSONResponse(answer)

    @router.get(
        "/v1/sessions",
        response_model=models.SessionPage,
        summary="A page of sessions, most recently updated first",
    )
    async def sessions(limit: PageLimit = PAGE, cursor: Cursor = 0) -> Response:
        rows, after = await service.call(service.session_rows, limit, cursor)
        return JSONResponse(
            {"sessions": redact_value(rows), "next_cursor": None if after is None else str(after)}
        )

    # {id:path}: a session id may hold "/" (sent URL-encoded as %2F)
    @router.post(
        "/v1/sessions/{id:path}/stop",
        response_model=models.Stopped,
        summary="Stop the session at its next step",
    )
    async def stop(id: SessionId, body: models.StopRequest | None = None) -> Response:
        by = (body.by if body is not None else None) or "dashboard"
        id = redact_name(id)  # the id a session holding a secret is kept by
        stopped = await service.call(_request_stop, service, id, by)
        return JSONResponse({"session": id, "stop_requested": stopped})

    @router.post(
        "/v1/sessions/{id:path}/feedback",
        response_model=models.Queued,
        summary="Queue text for the agent's next step (the verdict's hint)",
    )
    async def feedback(id: SessionId, body: models.Feedback) -> Response:
        said = redact_text(body.text)  # stored, then sent to the agent and the dashboards
        id = redact_name(id)  # the id a session holding a secret is kept by
        await service.call(_push_feedback, service, id, said)
        return JSONResponse({"session": id, "queued": True})

    @router.get(
        "/v1/sessions/{id:path}",
        response_model=models.SessionDetail,
        summary="One session: state, recent verdicts, audit",
    )
    async def session(id: SessionId) -> Response:
        id = redact_name(id)  # the id a session holding a secret is kept by
        detail = await service.call(service.session_detail, id)
        if detail is None:
            return JSONResponse({"error": f"no session {id!r}"}, 404)
        return JSONResponse(detail)

    @router.get("/v1/approvals", response_model=models.Approvals, summary="Approval requests")
    async def approvals(
        status: ApprovalStatus | None = None, session: str | None = None
    ) -> Response:
        rows = await service.call(_approval_rows, service, status, session)
        return JSONResponse(redact_value({"approvals": rows}))

    @router.get("/v1/approvals/{id}", response_model=models.ApprovalDetail, summary="One request")
    async def approval(id: str) -> Response:
        detail = await service.call(_approval_detail, service, id)
        if detail is None:
            return JSONResponse({"error": "no such approval request"}, 404)
        return JSONResponse(detail)

    @router.post("/v1/approvals/{id}", response_model=models.Voted, summary="Approve, deny or edit")
    async def decide(request: Request, id: str, body: models.Decision) -> Response:
        # The voter is who the token belongs to; a "by" in the body is not believed.
        return await service.call(_decide, service, id, body, request.state.identity)

    @router.get("/v1/fleet", response_model=models.FleetStatus, summary="The fleet view")
    async def fleet(top: Annotated[int, Query(ge=1, le=100)] = 10) -> Response:
        return JSONResponse(await service.call(lambda: _fleet(service).status(top)))

    @router.get("/v1/fleet/kills", response_model=models.Kills, summary="The active kills")
    async def kills() -> Response:
        found = await service.call(lambda: [k.to_dict() for k in _fleet(service).kills()])
        return JSONResponse({"kills": found})

    @router.post(
        "/v1/fleet/kill",
        response_model=models.Kill,
        summary="Stop every session of the fleet, an agent, a fingerprint or a session",
    )
    async def kill(request: Request, body: models.KillRequest) -> Response:
        scope, target = _target(body)
        by = (body.by or "").strip() or request.state.identity
        try:
            made = await service.call(
                lambda: _fleet(service).kill(scope, target, by=by, reason=body.reason or "")
            )
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        service.hub.publish("kill", made.to_dict())
        return JSONResponse(made.to_dict())

    @router.post("/v1/fleet/lift", response_model=models.Lifted, summary="Lift a kill")
    async def lift(body: models.KillTarget) -> Response:
        from antiloop.fleet.kills import key_of

        scope, target = _target(body)
        found = await service.call(lambda: _fleet(service).lift(scope, target))
        key = key_of(scope, target.strip())
        return JSONResponse({"key": key, "lifted": found.to_dict() if found else None})

    @router.get(
        "/v1/events",
        response_class=StreamingResponse,
        summary="Live events (text/event-stream): verdict, approval, stop, feedback",
        responses={200: {"content": {"text/event-stream": {}}, "description": "the stream"}},
    )
    async def events() -> Response:
        queue = service.hub.subscribe()

        async def stream() -> AsyncIterator[str]:
            try:
                yield ": antiloop live events\n\n"
                while True:
                    try:
                        yield await asyncio.wait_for(queue.get(), timeout=15)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
            finally:
                service.hub.unsubscribe(queue)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return router


def _hook(service: Service, dialect: str, body: bytes) -> dict[str, Any]:
    """``service.hook``, its handler's guard sharing the service's fleet controls (kills)."""
    fleet = service.guard.fleet
    if fleet is not None:
        guard = service._hook_handler(dialect).guard
        if guard.fleet is None:
            guard.fleet = fleet
    return service.hook(dialect, body)


def _fleet(service: Service) -> Fleet:
    """The guard's fleet controls; a service opened without them gets one-process ones."""
    found = service.guard.fleet
    if found is None:
        from antiloop.fleet import Fleet

        found = service.guard.fleet = Fleet()
    return found


def _target(body: models.KillTarget) -> tuple[str, str]:
    """The scope and target a kill body names (exactly one), or a 400."""
    named = [
        (s, v)
        for s, v in (
            ("agent", body.agent),
            ("fingerprint", body.fingerprint),
            ("session", body.session),
        )
        if v is not None
    ]
    if body.all:
        named.insert(0, ("all", ""))
    if len(named) != 1:
        raise BadRequest("name exactly one of 'all', 'agent', 'fingerprint', 'session'")
    scope, target = named[0]
    if scope != "all" and not target.strip():
        raise BadRequest(f"{scope!r} must not be empty")
    return scope, target


def _request_stop(service: Service, sid: str, by: str) -> str | None:
    service.ledger.request_stop(sid, by)
    service.hub.publish("stop", {"session": sid, "by": by})
    return service.ledger.stop_requested(sid)


def _push_feedback(service: Service, sid: str, text: str) -> None:
    service.ledger.push_feedback(sid, text)
    service.hub.publish("feedback", {"session": sid, "text": text})


def _approval_rows(
    service: Service, status: ApprovalStatus | None, sid: str | None
) -> list[dict[str, Any]]:
    rows = []
    wanted = None if status is None else str(status)
    for found in service.ledger.list_approvals(status=wanted, session=sid):
        if found.extra.get("vote_for"):
            continue
        r = service.fresh_approval(found)
        if wanted is not None and r.status != wanted:
            continue
        rows.append({**r.to_dict(), "votes": sorted(service.approvals.votes(r.id))})
    return rows


def _approval_detail(service: Service, id: str) -> dict[str, Any] | None:
    found = service.ledger.get_approval(id)
    if found is None:
        return None
    found = service.fresh_approval(found)  # polled past its deadline: expired, not pending
    verdict = verdict_of(found)
    return dict(
        redact_value({**found.to_dict(), "verdict": {**verdict.to_wire(0), "hint": verdict.hint}})
    )


def _decide(
    service: Service, id: str, body: models.Decision, by: str, channel: str = "web"
) -> Response:
    comment = body.comment or None
    if body.decision == "approve":
        answer = Answer.approve(by, comment)
    elif body.decision == "deny":
        answer = Answer.deny(by, comment)
    elif body.args is not None:
        answer = Answer.edit(by, body.args, comment)
    else:
        raise BadRequest("'decision' edit needs the edited 'args'")
    try:
        decided = service.approvals.answer(id, replace(answer, channel=channel))
    except KeyError:
        return JSONResponse({"error": "no such approval request"}, 404)
    body_out = {**decided.to_dict(), "votes": sorted(service.approvals.votes(id))}
    return JSONResponse(redact_value(body_out))
