"""The HTTP service: steps in, verdicts out; sessions, stops, feedback, approvals, live events.

Every ``/v1`` call and ``/openapi.json`` needs ``Authorization: Bearer <token>``; the one
exception is ``POST /v1/approvals/{id}/answer``, which carries an HMAC signature instead (the
webhook channel's answers). The dashboard page at ``/`` holds no data: its script calls the API
with the token, which it keeps in the tab's session storage. With no cookies there is no ambient
credential for another site to ride on (CSRF), and POSTs with a foreign ``Origin`` are refused.

The arrows point one way: ``app`` builds the application from the routes (``routes``,
``views``, ``routing``), which read the ``Service`` (``antiloop.server.service``); the service
knows no route. ``POST /v1/steps`` is answered in front of the routes (``antiloop.server.fast``)
and its requests judged in groups (``antiloop.server.groups``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from antiloop.server.fast import StepsFirst
from antiloop.server.routes import api_routes, open_routes, signed_routes
from antiloop.server.routing import documented, install_errors
from antiloop.server.service import (
    DEFAULT_IDENTITY,
    RECENT,
    RECENT_SESSIONS,
    EventHub,
    RecentVerdicts,
    Service,
    parse_tokens,
)
from antiloop.server.views import view_routes

__all__ = [
    "DEFAULT_IDENTITY",
    "RECENT",
    "RECENT_SESSIONS",
    "EventHub",
    "RecentVerdicts",
    "Service",
    "create_app",
    "parse_tokens",
]


def create_app(service: Service) -> FastAPI:
    """The ASGI application for a service; its OpenAPI schema is generated from the routes."""
    from antiloop._version import __version__

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.hub.bind(asyncio.get_running_loop())
        yield

    app = FastAPI(
        title="antiloop",
        version=__version__,
        description="Steps in, verdicts out; approvals, sessions, stops and feedback.",
        openapi_url=None,  # served by a route that needs the token
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        telemetry={"tracing": False, "metrics": False, "logs": False},  # antiloop.telemetry's job
    )
    app.state.service = service
    build = app.build_middleware_stack

    def stack() -> Any:
        """FastAPI's middleware and routes, behind ``StepsFirst`` (POST /v1/steps)."""
        return StepsFirst(build(), service)

    app.build_middleware_stack = stack  # type: ignore[method-assign]
    install_errors(app)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        """The generated schema, made once (``routing.documented``)."""
        if app.openapi_schema is None:
            app.openapi_schema = documented(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    for router in (
        open_routes(),
        api_routes(service),
        signed_routes(service),
        view_routes(service),  # the dashboard's session page and decided approvals
    ):
        # The routes themselves, not the router: one flat list to match, as Starlette's.
        app.router.routes.extend(router.routes)
    return app
