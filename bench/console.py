"""What the operator's console costs: the request timing of ``/metrics``, and the session index.

Timing: the ASGI application called in process (no network) for ``GET /healthz`` on a memory
store, with and without the middleware that times requests for ``/metrics`` (the floor: the
same routes, no middleware), interleaved rounds (each first in every other), the median per
request: what the timing adds to every request, ``POST /v1/steps`` included. Index:
``SessionIndex.refresh`` reading an SQLite store's whole audit log (the first look after a
start) and then one new record (each later look), and the sessions list
(``views.session_list``) over every session, filtered and paged.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _app(timed: bool) -> Any:
    import antiloop.server.console.routes as console
    from antiloop.server import Service, create_app

    install = console.install
    if not timed:

        def untimed(app: Any, service: Any) -> None:
            index = console.SessionIndex(service.store)
            metrics = console.Metrics(service, index)
            for router in (console.console_routes(service, index, metrics), console.open_routes()):
                app.router.routes.extend(router.routes)

        console.install = untimed  # type: ignore[assignment]
    try:
        return create_app(Service("memory://", "bench-token-123"))
    finally:
        console.install = install  # type: ignore[assignment]


def _scope(method: str, path: str, body: bytes) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer bench-token-123")]
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }


async def _per_request(app: Any, method: str, path: str, body: bytes, n: int) -> float:
    scope = _scope(method, path, body)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
        return None

    started = time.perf_counter()
    for _ in range(n):
        await app(dict(scope), receive, send)
    return (time.perf_counter() - started) / n * 1e6


async def _timing(n: int, rounds: int) -> list[tuple[str, float, float]]:
    floor, timed = _app(False), _app(True)
    rows = []
    # Only a route answered on the event loop: a step's time is a worker thread's hand-off, whose
    # spread (2x between two apps alike) hides a few microseconds either way.
    for method, path, body in (("GET", "/healthz", b""),):
        found: dict[str, list[float]] = {"floor": [], "timed": []}
        for app in (floor, timed):  # warm up
            await _per_request(app, method, path, body, 50)
        for r in range(rounds):  # each goes first in every other round
            order = (
                (("floor", floor), ("timed", timed))
                if r % 2
                else (("timed", timed), ("floor", floor))
            )
            for name, app in order:
                found[name].append(await _per_request(app, method, path, body, n))
        rows.append(
            (
                f"{method} {path}",
                statistics.median(found["floor"]),
                statistics.median(found["timed"]),
            )
        )
    return rows


def _index(sessions: int, per_session: int) -> dict[str, float]:
    from antiloop import Guard
    from antiloop.server import Service
    from antiloop.server.console import views
    from antiloop.server.console.index import SessionIndex

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        service = Service(url, "bench-token-123")
        guard: Guard = service.guard
        with service.store.batch():
            for s in range(sessions):
                for i in range(per_session):
                    guard.record(
                        {"session": f"s{s}", "tool": "Read", "args": {"p": i % 3}, "output": "x"}
                    )
        index = SessionIndex(service.store)
        started = time.perf_counter()
        index.refresh()
        first = time.perf_counter() - started
        guard.record({"session": "s0", "tool": "Read", "args": {"p": 9}, "output": "y"})
        started = time.perf_counter()
        index.refresh()
        later = time.perf_counter() - started
        started = time.perf_counter()
        page = views.session_list(service, index, views.Filters(q="s1", state="stopped"), 50, 0)
        listed = time.perf_counter() - started
        service.store.close()
    assert page["counts"]["total"] == sessions  # the bench checks what it measured
    return {"first": first, "later": later, "list": listed, "records": sessions * per_session}


def run(quick: bool = False) -> str:
    """Measure, print the table and return the section."""
    n, rounds = (200, 3) if quick else (2000, 7)
    sessions, per_session = (200, 5) if quick else (2000, 10)
    timing = asyncio.run(_timing(n, rounds))
    index = _index(sessions, per_session)
    lines = [
        "## Console",
        "",
        "What the operator's console adds (`antiloop.server.console`). Request timing for "
        "`/metrics` (it times every request, `POST /v1/steps` included): the ASGI app called "
        "in process, no network, `GET /healthz` on a memory store, "
        f"{n} requests a round, {rounds} interleaved rounds, the median per request, against "
        "the same routes without the timing middleware. Session index: an SQLite store with "
        f"{sessions:,} sessions of {per_session} steps ({sessions * per_session:,} audit records).",
        "",
        "| request | floor | with request timing | against the floor |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, floor, timed in timing:
        lines.append(
            f"| {name} | {floor:.1f} µs | {timed:.1f} µs | "
            f"{timed - floor:+.1f} µs ({timed / floor:.2f}x) |"
        )
    lines += [
        "",
        "| session index | time |",
        "| --- | ---: |",
        f"| first read of {index['records']:,} records (a start) | {index['first'] * 1e3:.0f} ms |",
        f"| a later read of 1 new record | {index['later'] * 1e3:.2f} ms |",
        f"| the sessions list over {sessions:,} sessions, searched, filtered and paged "
        f"| {index['list'] * 1e3:.1f} ms |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    return text
