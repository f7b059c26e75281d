"""What every route of the API shares: the checks before a handler runs, and the error answers.

``api_router()`` makes a router whose routes need the bearer token (``TokenRoute``); a module
that adds routes makes one and the app includes it. Before a handler runs, a ``TokenRoute``
refuses, in this order: a body announced past ``max_body`` (413, unread and before the token),
a missing or wrong token (401), a POST with a foreign ``Origin`` (403); then it reads the body
within the limits and parses it (400 for JSON that is not, or is nested too deeply), so FastAPI
only validates it against the route's model. A ``SignedRoute`` (the webhook channel's answers)
checks the HMAC signature of the body instead of the token; an ``OpenRoute`` (the dashboard
page, ``/healthz``) checks neither.

Every error is ``{"error": "<one line>"}``; FastAPI's validation errors become 400s naming the
first field that is wrong.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import SkipValidation
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER
from antiloop.core.errors import ChannelError, StoreError
from antiloop.core.step import MAX_DEPTH, _loads, nesting_depth, valid_unicode
from antiloop.server.limits import (
    BadRequest,
    SlowBody,
    StoreTimeout,
    TooLarge,
    read_body,
    too_large,
)
from antiloop.server.models import Error

if TYPE_CHECKING:
    from fastapi import FastAPI

    from antiloop.server.service import Service

log = logging.getLogger("antiloop")

BEARER = HTTPBearer(scheme_name="bearer", auto_error=False, description="the service's token")
ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
"""Every error's body: the ``Error`` model (``documented`` adds its schema to the document)."""
# A $ref, not ``"model": Error``: FastAPI would build a validator per route and status (136 of
# them, half of ``create_app``'s time) for bodies it never validates.
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": ERROR}
    for code, text in {
        400: "bad input (the message names it)",
        401: "no token, or a wrong one",
        403: "a POST from another origin",
        404: "no such session, request or route",
        408: "the body did not arrive in time",
        413: "the body, or the batch, is too large",
        415: "a body that is not sent as JSON",
        503: "the store failed or did not answer in time",
    }.items()
}
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def api_router() -> APIRouter:
    """A router whose routes need the bearer token (and say so in the schema)."""
    return router_of(TokenRoute, dependencies=[Security(BEARER)], responses=ERRORS)


def router_of(route_class: type[APIRoute], **options: Any) -> APIRouter:
    """A router of ``route_class`` routes; a body without a Content-Type is read as JSON."""
    return APIRouter(route_class=route_class, strict_content_type=False, **options)


def service_of(request: Request) -> Service:
    """The service the app serves."""
    service: Service = request.app.state.service
    return service


class OpenRoute(APIRoute):
    """A route anyone may call: body limits and the origin check only."""

    def get_route_handler(self) -> Handler:
        handle: Handler = _direct(self) or super().get_route_handler()
        parse = self.body_field is not None

        async def checked(request: Request) -> Response:
            service = service_of(request)
            if too_large(request, service.limits):  # before the token: refused unread
                raise TooLarge
            refused = self.refuse(request, service)
            if refused is not None:
                return refused
            if request.method == "POST":
                origin = request.headers.get("origin")
                if origin and origin.split("://", 1)[-1] != request.headers.get("host", ""):
                    return _error(403, f"cross-origin request from {origin} refused")
            if parse:
                await _parse(request, service)
            return await handle(request)

        return checked

    def refuse(self, request: Request, service: Service) -> Response | None:
        """The answer to a caller who may not call this route, or None."""
        return None


class TokenRoute(OpenRoute):
    """A route that needs ``Authorization: Bearer <token>``; the holder is ``state.identity``."""

    def refuse(self, request: Request, service: Service) -> Response | None:
        """401 without a token of the service."""
        request.state.identity = service.identity(request)
        if request.state.identity is not None:
            return None
        return JSONResponse(
            {"error": "missing or wrong token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )


class SignedRoute(OpenRoute):
    """A route whose body carries an HMAC signature instead of the token (webhook answers)."""

    def get_route_handler(self) -> Handler:
        checked = super().get_route_handler()

        async def signed(request: Request) -> Response:
            service = service_of(request)
            if too_large(request, service.limits):
                raise TooLarge
            if service.verifier is None:
                return _error(404, "webhook answers are off (no webhook secret)")
            body = await read_body(request, service.limits)
            timestamp = request.headers.get(TIMESTAMP_HEADER)
            try:
                if timestamp is not None and not _finite(timestamp):
                    raise ChannelError("bad timestamp")  # "nan" or "inf" compare as never stale
                service.verifier.verify(timestamp, request.headers.get(SIGNATURE_HEADER), body)
            except ChannelError as exc:
                log.warning("antiloop: refused a webhook answer: %s", exc)
                return _error(401, f"refused: {exc}")
            return await checked(request)

        return signed


def _direct(route: APIRoute) -> Handler | None:
    """A handler that calls the endpoint itself, when FastAPI has nothing to solve or validate.

    That is a route whose path parameters are strings, with no query, header or cookie
    parameters, no dependency but the bearer scheme (documentation: ``TokenRoute`` checks the
    token) and no body or an unvalidated one (``SkipValidation``); ``/v1/steps`` and
    ``/healthz`` are such routes. It saves FastAPI's per-request work on the busiest routes.
    """
    found = route.dependant
    bodies = found.body_params
    if (
        found.query_params
        or found.header_params
        or found.cookie_params
        or any(dep.call is not BEARER for dep in found.dependencies)
        or any(param.field_info.annotation is not str for param in found.path_params)
        or len(bodies) > 1
        or any(SkipValidation not in body.field_info.metadata for body in bodies)
        or found.call is None
    ):
        return None
    endpoint = found.call
    names = [param.name for param in found.path_params]
    body = bodies[0].name if bodies else None
    itself = found.request_param_name

    async def call(request: Request) -> Response:
        values: dict[str, Any] = {name: request.path_params[name] for name in names}
        if body is not None:
            if not hasattr(request, "_json"):
                raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": ""}])
            values[body] = request._json
        if itself is not None:
            values[itself] = request
        answer: Response = await endpoint(**values)
        return answer

    return call


async def _parse(request: Request, service: Service) -> None:
    """Read the body within the limits and parse it as JSON (Starlette keeps both)."""
    content_type = request.headers.get("content-type", "application/json").split(";")[0]
    if not content_type.strip().lower().endswith(("/json", "+json")):
        raise HTTPException(415, "the body must be JSON (Content-Type: application/json)")
    body = await read_body(request, service.limits)
    if body:
        request._json = parse_json(body)  # starlette's cache: request.json() answers it


def parse_json(body: bytes) -> Any:
    """The JSON document, or ``BadRequest`` naming what is wrong with it."""
    deep = f"the body is nested too deeply (steps: at most {MAX_DEPTH} levels)"
    try:
        data, opens, checked = _loads(body)  # orjson where it reads the body as the stdlib does
        if not checked:  # orjson refuses lone surrogates; the stdlib reads them
            data = valid_unicode(data)
    except RecursionError:
        raise BadRequest(deep) from None
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    # a batch wraps its steps in two more levels ({"steps": [...]})
    if opens > MAX_DEPTH and nesting_depth(data) > MAX_DEPTH + 2:
        raise BadRequest(deep)
    return data


def whole_number(low: int, high: int) -> Callable[[object], int]:
    """A check of a query value: a whole number from ``low`` to ``high`` (one-line error)."""

    def check(value: object) -> int:
        text = str(value)
        if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
            raise PydanticCustomError("range", f"must be a whole number from {low} to {high}")
        return int(text)

    return check


def one_line(errors: Any) -> str:
    """The first of pydantic's validation errors, in one line naming the field."""
    if not errors:
        return "bad input"
    first = errors[0]
    place = [str(part) for part in first.get("loc", ())]
    field = ".".join(place[1:])
    if not field:
        return (
            "the body is missing" if first.get("type") == "missing" else f"the body: {_msg(first)}"
        )
    if first.get("type") == "range":
        return f"{field!r} {first['msg']}"
    return f"{field!r}: {_msg(first)}"


def _msg(error: Any) -> str:
    text = str(error.get("msg", "is wrong"))
    return text[:1].lower() + text[1:]


def install_errors(app: FastAPI) -> None:
    """Answer every error as ``{"error": "<one line>"}``."""

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)  # noqa: S101 - registered for it
        return JSONResponse({"error": exc.detail}, exc.status_code, headers=exc.headers)

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)  # noqa: S101 - registered for it
        return _error(400, one_line(exc.errors()))

    async def bad(request: Request, exc: Exception) -> Response:
        return _error(400, str(exc))

    async def large(request: Request, exc: Exception) -> Response:
        return _error(413, f"the body is larger than {service_of(request).limits.max_body} bytes")

    async def slow(request: Request, exc: Exception) -> Response:
        timeout = service_of(request).limits.body_timeout
        return _error(408, f"the body did not arrive within {timeout:g} s")

    async def store(request: Request, exc: Exception) -> Response:
        log.error("antiloop: %s %s: %s", request.method, request.url.path, exc)
        return _error(503, f"the store failed: {exc}")

    for kind, handler in (
        (HTTPException, http_error),
        (RequestValidationError, invalid),
        (BadRequest, bad),
        (TooLarge, large),
        (SlowBody, slow),
        (StoreError, store),
        (StoreTimeout, store),
    ):
        app.add_exception_handler(kind, handler)


def documented(schema: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's schema with the ``Error`` model, and less its 422s (validation errors are 400s)."""
    for operations in schema["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
    models = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        models.pop(name, None)
    models["Error"] = Error.model_json_schema()
    return schema


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return True  # not a number: the verifier names it
