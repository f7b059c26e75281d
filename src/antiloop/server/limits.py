"""What keeps the service up: body size and read limits, store deadlines, slow-client timeouts.

A request body past ``max_body`` bytes is refused with 413 before more of it is read (its
``Content-Length`` is checked before the token, so an unauthenticated upload costs nothing); a
body that does not arrive within ``body_timeout`` gets 408. Store calls run in worker threads,
at most ``store_threads`` at a time, and each request waits ``store_timeout`` seconds for its
store at most: then ``/v1/steps`` and ``/v1/check`` answer by ``on_store_error`` and the other
routes 503, while the event loop (``/healthz``, live events) never waits for a store. A client
that does not finish its request head within ``header_timeout`` seconds, or sends a head past
``max_header_bytes``, is disconnected (uvicorn's keep-alive timeout closes idle connections).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """The service's limits (seconds and bytes); the defaults suit a fleet on one replica."""

    max_body: int = 8 * 1024 * 1024
    body_timeout: float = 30.0
    store_timeout: float = 10.0
    store_threads: int = 32
    header_timeout: float = 10.0
    max_header_bytes: int = 64 * 1024
    keep_alive: float = 5.0


class BadRequest(Exception):
    """Bad input: answered 400 with this message."""


class TooLarge(Exception):
    """The request body is larger than ``max_body``."""


class SlowBody(Exception):
    """The request body did not arrive within ``body_timeout``."""


class StoreTimeout(Exception):
    """The store did not answer within ``store_timeout``."""


def too_large(request: Request, limits: Limits) -> bool:
    """True when the request announces a body larger than the limit (``Content-Length``)."""
    length = request.headers.get("content-length")
    if length is None:
        return False
    try:
        return int(length) > limits.max_body
    except ValueError:
        return True  # unreadable: refused like an oversized one


async def read_body(request: Request, limits: Limits) -> bytes:
    """The body, read in chunks: ``TooLarge`` past ``max_body``, ``SlowBody`` past the timeout."""
    cached: bytes | None = getattr(request, "_body", None)
    if cached is not None:
        return cached
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(limits.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.max_body:
                    raise TooLarge
                chunks.append(chunk)
    except TimeoutError:
        raise SlowBody from None
    body = b"".join(chunks)
    request._body = body  # starlette's own cache: request.body() now answers it
    return body


class StoreCalls:
    """Runs store calls in worker threads with a deadline; the event loop never waits on them."""

    def __init__(self, limits: Limits) -> None:
        self.timeout = limits.store_timeout
        self._limiter: anyio.CapacityLimiter | None = None
        self._threads = limits.store_threads

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a thread; ``StoreTimeout`` when it takes too long.

        The thread is abandoned, not stopped, on the deadline: the stores' own timeouts end it.
        """
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._threads)
        call = functools.partial(within, self.timeout, fn, *args, **kwargs)
        try:
            with anyio.fail_after(self.timeout):
                return await anyio.to_thread.run_sync(
                    call, abandon_on_cancel=True, limiter=self._limiter
                )
        except TimeoutError:
            raise StoreTimeout(f"the store did not answer within {self.timeout:g} s") from None


def within(seconds: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` under a deadline: store retries end in time to answer."""
    from antiloop.outage import deadline

    with deadline(seconds):
        return fn(*args, **kwargs)


class Coalescing:
    """A connection's transport whose writes of one turn of the event loop go out as one.

    uvicorn writes a response's head and its body apart: two sends, two TCP segments, two
    wake-ups of the client. Here the first write waits for the end of the loop's turn
    (``call_soon``) and takes every write made meanwhile; ``close`` sends what waits first.
    """

    __slots__ = ("_inner", "_loop", "_parts")

    def __init__(self, inner: Any, loop: Any) -> None:
        self._inner = inner
        self._loop = loop
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Send ``data`` at the end of this turn, with the writes made until then."""
        if not self._parts:
            self._loop.call_soon(self._flush)
        self._parts.append(data)

    def _flush(self) -> None:
        parts, self._parts = self._parts, []
        if parts and not self._inner.is_closing():
            self._inner.write(parts[0] if len(parts) == 1 else b"".join(parts))

    def close(self) -> None:
        """Send what waits, then close."""
        self._flush()
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def http_protocol(limits: Limits) -> Any:
    """The httptools protocol of uvicorn, with a deadline and a size limit on each request head.

    Returns "auto" (uvicorn's default) when httptools is not installed.
    """
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return "auto"

    class HeadLimitedProtocol(HttpToolsProtocol):
        """Closes a connection whose request head is slow or too large."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: Any = None
            self._head_bytes = 0
            self._in_head = False  # between a response and the next request's head end
            self._counting = False  # inside a request head (its bytes count to the limit)

        def connection_made(self, transport: Any) -> None:
            super().connection_made(Coalescing(transport, self.loop))  # type: ignore[arg-type]
            self._await_head()

        def _await_head(self) -> None:
            self._cancel_head()
            self._in_head = True
            self._head_timer = self.loop.call_later(limits.header_timeout, self._head_expired)

        def _cancel_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self) -> None:
            self._head_timer = None
            if self._in_head and not self.transport.is_closing():
                self.transport.close()

        def on_message_begin(self) -> None:
            self._counting = True
            self._head_bytes = 0
            super().on_message_begin()

        def data_received(self, data: bytes) -> None:
            counting = self._counting
            super().data_received(data)
            if counting or self._counting:
                self._head_bytes += len(data)
            if self._counting and self._head_bytes > limits.max_header_bytes:
                self._cancel_head()
                self._in_head = self._counting = False
                if not self.transport.is_closing():
                    self.transport.write(
                        b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                        b"content-length: 0\r\nconnection: close\r\n\r\n"
                    )
                    self.transport.close()

        def on_headers_complete(self) -> None:
            self._in_head = self._counting = False
            self._cancel_head()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)
            super().on_response_complete()
            if not pipelined and not self.transport.is_closing():
                self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head()
            super().connection_lost(exc)

    return HeadLimitedProtocol


def run(app: Any, limits: Limits, **options: Any) -> None:
    """Serve ``app`` on uvicorn with the limits (``options`` go to ``uvicorn.run``)."""
    import uvicorn

    uvicorn.run(
        app,
        http=http_protocol(limits),
        timeout_keep_alive=max(round(limits.keep_alive), 1),
        h11_max_incomplete_event_size=limits.max_header_bytes,
        **options,
    )
