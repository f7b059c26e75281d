"""``POST /v1/steps`` without the framework's per-request work: the busiest route, answered first.

``StepsFirst`` is an ASGI middleware in front of the routes. A ``POST /v1/steps`` whose head
passes every check a ``TokenRoute`` makes before the body (a ``Content-Length`` within
``max_body``, a token of the service, no ``Origin``, a JSON content type) is read, parsed and
judged here, with the same limits, the same errors and the same answer as the route
(``steps_answer``), skipping FastAPI's routing, dependencies and exception middleware. Any
other request, or one whose head fails a check, goes on to the routes unread, which answer it
as before (and document ``/v1/steps`` in the schema).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from antiloop.server.limits import BadRequest, StoreTimeout
from antiloop.server.routing import parse_json

if TYPE_CHECKING:
    from antiloop.server.service import Service

__all__ = ["MAX_BATCH", "StepsFirst", "steps_answer"]

MAX_BATCH = 1000
"""Steps one ``POST /v1/steps`` may carry."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def steps_answer(service: Service, raw: Any) -> tuple[int, Any]:
    """The status and body answering a parsed ``POST /v1/steps`` body (one step or a batch)."""
    batch = raw.get("steps") if isinstance(raw, dict) and "steps" in raw else raw
    many = isinstance(batch, list)
    items: list[Any] = batch if isinstance(batch, list) else [batch]
    if len(items) > MAX_BATCH:
        return 413, {"error": f"at most {MAX_BATCH} steps per request"}
    try:
        verdicts = await service.groups.judge(items)  # with the requests in flight
    except StoreTimeout as exc:  # the store hung: each step follows on_store_error
        verdicts = [service.store_failed(raw, i, exc) for i, raw in enumerate(items)]
    return 200, ({"verdicts": verdicts} if many else verdicts[0])


def dumps(body: Any) -> bytes:
    """Compact JSON as Starlette's ``JSONResponse`` writes it (through orjson when there)."""
    fast = _orjson()
    if fast is not None:
        try:
            return fast.dumps(body)  # type: ignore[no-any-return]
        except TypeError:  # a lone surrogate, an int past 64 bits: the stdlib writes those
            pass
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _orjson() -> Any:
    from antiloop.core.step import _fast_json

    return _fast_json()


class _Gone(Exception):
    """The client went away before its body arrived: nothing to answer."""


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message


class StepsFirst:
    """The ASGI middleware that answers ``POST /v1/steps`` itself (the module says which)."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != "/v1/steps"
            or scope["method"] != "POST"
            or scope.get("root_path")
            or not self._head_passes(scope)
        ):
            await self.app(scope, receive, send)
            return
        try:
            status, answer = await steps_answer(self.service, parse_json(await self._body(receive)))
        except _Gone:
            return
        except _Refused as exc:
            status, answer = exc.status, {"error": exc.message}
        except BadRequest as exc:
            status, answer = 400, {"error": str(exc)}
        data = dumps(answer)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-length", str(len(data)).encode()),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})

    def _head_passes(self, scope: Scope) -> bool:
        """True when the head passes every check the route makes before reading the body."""
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            found.setdefault(name, value)  # the first of each, as Starlette reads them
        if b"origin" in found or b"transfer-encoding" in found:
            return False
        length = found.get(b"content-length")
        if not (length and length.isdigit() and 0 < int(length) <= self.service.limits.max_body):
            return False  # none (chunked), empty or too large: the route answers
        kind = found.get(b"content-type", b"application/json").split(b";")[0].strip().lower()
        if not kind.endswith((b"/json", b"+json")):
            return False
        token = found.get(b"authorization", b"")
        return token.isascii() and self.service.identity_of(token) is not None

    async def _body(self, receive: Receive) -> bytes:
        """The body within ``max_body`` and ``body_timeout``, as ``limits.read_body`` reads it."""
        limits = self.service.limits
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(limits.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Gone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limits.max_body:
                        raise _Refused(413, f"the body is larger than {limits.max_body} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise _Refused(
                408, f"the body did not arrive within {limits.body_timeout:g} s"
            ) from None
        return b"".join(chunks)
