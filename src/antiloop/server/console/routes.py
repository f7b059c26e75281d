"""The console's routes: sessions, one session's steps, the fleet, whoami, /metrics, /docs.

``install(app, service)`` adds them to the application (``antiloop.server.app``), times every
request for ``/metrics`` and counts the store calls that fail. Every route but ``/docs`` (a
page that holds no data: its script reads ``/openapi.json`` with the dashboard's token) needs
the token, as every ``/v1`` route.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BeforeValidator
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from antiloop.core.redact import redact_value
from antiloop.server.console import views
from antiloop.server.console.index import STATES, SessionIndex
from antiloop.server.console.metrics import Metrics
from antiloop.server.routing import OpenRoute, api_router, router_of, whole_number

if TYPE_CHECKING:
    from fastapi import FastAPI

    from antiloop.server.service import Service

PAGE, MAX_PAGE = 50, 500
State = Literal[STATES]  # type: ignore[valid-type]
Limit = Annotated[
    int,
    Query(ge=1, le=MAX_PAGE, description=f"sessions per page (default {PAGE})"),
    BeforeValidator(whole_number(1, MAX_PAGE)),
]
Cursor = Annotated[
    int,
    Query(ge=0, description="the next_cursor of the page before"),
    BeforeValidator(whole_number(0, 10**9)),
]
Hours = Annotated[
    int,
    Query(ge=1, le=168, description="hours of stops to count (default 24)"),
    BeforeValidator(whole_number(1, 168)),
]
Top = Annotated[
    int,
    Query(ge=1, le=100, description="fingerprints to list (default 10)"),
    BeforeValidator(whole_number(1, 100)),
]
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def install(app: FastAPI, service: Service) -> None:
    """Add the console's routes, the request timing and the failed store call counts."""
    index = SessionIndex(service.store)
    metrics = Metrics(service, index)
    metrics.wrap_calls()
    app.state.console_index = index
    for router in (console_routes(service, index, metrics), open_routes()):
        app.router.routes.extend(router.routes)
    build = app.build_middleware_stack

    def timed() -> Any:
        """Every request timed, ``POST /v1/steps`` answered in front of the routes included."""
        return metrics.middleware(build())

    app.build_middleware_stack = timed  # type: ignore[method-assign]


def console_routes(service: Service, index: SessionIndex, metrics: Metrics) -> APIRouter:
    """The routes that need the token."""
    router = api_router()

    @router.get(
        "/v1/console/sessions",
        summary="Sessions as the audit log records them: search, filters, counts, pages",
        response_model=dict[str, Any],
    )
    async def sessions(
        q: Annotated[str, Query(max_length=200, description="text in the id, agent, reason")] = "",
        agent: Annotated[str | None, Query(max_length=200)] = None,
        state: State | None = None,
        detector: Annotated[str | None, Query(max_length=100)] = None,
        since: Annotated[
            float | None, Query(description="last active at or after (epoch s)")
        ] = None,
        until: Annotated[
            float | None, Query(description="last active at or before (epoch s)")
        ] = None,
        limit: Limit = PAGE,
        cursor: Cursor = 0,
    ) -> Response:
        filters = views.Filters(q.strip(), agent or None, state, detector or None, since, until)
        found = await service.call(views.session_list, service, index, filters, limit, cursor)
        return JSONResponse(redact_value(found))

    @router.get(
        "/v1/console/sessions/{id:path}",
        summary="One session: every step with its arguments and output, usage, the loop",
        response_model=dict[str, Any],
    )
    async def session(id: Annotated[str, Path(description="a session id")]) -> Response:
        found = await service.call(views.session_view, service, index, id)
        if found is None:
            return JSONResponse({"error": f"no session {id!r}"}, 404)
        return JSONResponse(redact_value(found))

    @router.get(
        "/v1/console/fleet",
        summary="Stops per hour, the costliest and the known loops, sessions by state",
        response_model=dict[str, Any],
    )
    async def fleet(hours: Hours = 24, top: Top = 10) -> Response:
        found = await service.call(views.fleet_view, service, index, hours, top)
        fleet = service.guard.fleet
        found["kills"] = (
            await service.call(lambda: [k.to_dict() for k in fleet.kills()]) if fleet else []
        )
        return JSONResponse(redact_value(found))

    @router.get(
        "/v1/whoami",
        summary="Who the caller is: the token's holder, or the person the proxy named",
        response_model=dict[str, Any],
    )
    async def who(request: Request) -> Response:
        name = request.state.identity
        return JSONResponse({"identity": name, "proxied": service.proxied(request) is not None})

    @router.get(
        "/metrics",
        summary="Prometheus metrics (text format; OpenMetrics when the Accept header asks)",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "the metrics"}},
    )
    async def prometheus(request: Request) -> Response:
        from prometheus_client.exposition import choose_encoder

        # the text format, or OpenMetrics when the scraper's Accept header prefers it
        encode, media_type = choose_encoder(request.headers.get("accept", ""))
        text = await service.call(encode, metrics.registry)
        return Response(text, headers={"Content-Type": media_type})

    return router


def open_routes() -> APIRouter:
    """``/docs``: the API reference, drawn from ``/openapi.json`` in the page (no CDN)."""
    router = router_of(OpenRoute)

    @router.get("/docs", response_class=HTMLResponse, summary="The API reference (no data in it)")
    async def docs() -> Response:
        page = resources.files("antiloop.server.console").joinpath("reference.html")
        return HTMLResponse(page.read_text("utf-8"), headers=PAGE_HEADERS)

    return router
