"""A service that stays up: hung stores, big and slow requests, many sessions, odd input.

The service runs in this process on uvicorn (in a thread, on a free loopback port) with small
limits, so each limit is reached in a fraction of a second.
"""

# ruff: noqa: S105  (a fixed test token)

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from antiloop import GuardConfig
from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from antiloop.core.history import SessionState
from antiloop.server import Service, create_app
from antiloop.server.app import RECENT_SESSIONS
from antiloop.server.limits import Limits, http_protocol
from antiloop.stores.memory import MemoryStore

TOKEN = "limits-token"
SECRET = "limits-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMITS = Limits(
    max_body=64 * 1024,
    body_timeout=1.0,
    store_timeout=0.5,
    header_timeout=1.0,
    max_header_bytes=8 * 1024,
)


class HangingStore(MemoryStore):
    """A memory store whose session calls block while ``hung`` is set (a stalled database)."""

    def __init__(self) -> None:
        super().__init__()
        self.hung = threading.Event()
        self.released = threading.Event()

    def _wait(self) -> None:
        if self.hung.is_set():
            self.released.wait(30)

    def peek(self, session: str) -> SessionState | None:
        self._wait()
        return super().peek(session)

    def transaction(self, session: str) -> Any:
        self._wait()
        return super().transaction(session)

    def sessions(self) -> list[str]:
        self._wait()
        return super().sessions()


class Live:
    """A service on uvicorn in a thread."""

    def __init__(self, service: Service, limits: Limits) -> None:
        import uvicorn

        self.service = service
        config = uvicorn.Config(
            create_app(service),
            host="127.0.0.1",
            port=0,
            http=http_protocol(limits),
            timeout_keep_alive=1,
            log_level="critical",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20  # a start-up limit, not a timed assertion
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, headers=AUTH, timeout=10)

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def store() -> HangingStore:
    return HangingStore()


@pytest.fixture(params=["allow"])
def live(request: pytest.FixtureRequest, store: HangingStore) -> Iterator[Live]:
    """The service on a hanging memory store, with small limits."""
    config = GuardConfig(embedder="ngram", on_store_error=request.param)
    service = Service(store, TOKEN, config=config, webhook_secret=SECRET, limits=LIMITS)
    running = Live(service, LIMITS)
    yield running
    store.released.set()
    running.stop()


def _raw(port: int, data: bytes, wait: float = 5.0) -> bytes:
    """Send raw bytes, then read until the server closes or ``wait`` seconds pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(data)
        got = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while chunk := s.recv(65536):
                got += chunk
        return got


def _step(session: str, n: int = 0, **extra: Any) -> dict[str, Any]:
    return {"session": session, "tool": "Read", "args": {"path": f"f{n}"}, "output": "x", **extra}


# -- the store off the event loop -----------------------------------------------------------


@pytest.mark.parametrize("live", ["allow", "block"], indirect=True)
def test_a_hung_store_costs_a_step_the_store_timeout_and_healthz_nothing(
    live: Live, store: HangingStore
) -> None:
    """With the store stalled, a step follows on_store_error after 0.5 s; /healthz answers."""
    policy = live.service.guard.on_store_error
    assert live.client.post("/v1/steps", json=_step("s")).json()["action"] == "continue"
    store.hung.set()
    results: dict[str, Any] = {}

    def step() -> None:
        started = time.monotonic()
        results["step"] = live.client.post("/v1/steps", json=_step("s", 1)).json()
        results["took"] = time.monotonic() - started

    worker = threading.Thread(target=step)
    worker.start()
    time.sleep(0.1)
    started = time.monotonic()
    assert live.client.get("/healthz").json() == {"ok": True}
    assert time.monotonic() - started < 0.3
    listing = live.client.get("/v1/sessions")
    worker.join(10)
    assert listing.status_code == 503
    assert "did not answer within 0.5 s" in listing.json()["error"]
    verdict = results["step"]
    assert verdict["action"] == ("continue" if policy == "allow" else "stop")
    assert verdict["detector"] == (None if policy == "allow" else "store")
    assert results["took"] < 2
    checked = live.client.post("/v1/check", json={"tool": "Read", "session": "s"}).json()
    assert checked["action"] == ("continue" if policy == "allow" else "stop")


@pytest.mark.parametrize("fail", ["open", "closed"])
def test_a_hook_over_http_gets_the_hook_answer_for_a_hung_store(
    live: Live, store: HangingStore, fail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook route follows ANTILOOP_FAIL when the store stalls: warn (open), deny (closed)."""
    monkeypatch.setenv("ANTILOOP_FAIL", fail)
    pre = {
        "session_id": "h",
        "hook_event_name": "PreToolUse",
        "cwd": "/work",
        "transcript_path": "/tmp/none.jsonl",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    }
    store.hung.set()
    started = time.monotonic()
    response = live.client.post("/v1/hooks/claude-code", json=pre)
    assert time.monotonic() - started < 2
    assert response.status_code == 200, response.text
    answer = response.json()
    if fail == "open":
        assert "was not checked" in answer["systemMessage"]
    else:
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"


# -- request size and speed ---------------------------------------------------------------------


def test_a_body_past_the_limit_is_refused_unread_even_without_the_token(live: Live) -> None:
    """413 from Content-Length alone: the 300 MB are never sent, let alone read."""
    head = (
        b"POST /v1/approvals/x/answer HTTP/1.1\r\nHost: t\r\n"
        b"Content-Type: application/json\r\nContent-Length: 300000000\r\n\r\n"
    )
    started = time.monotonic()
    answer = _raw(live.port, head + b"{", wait=3)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert time.monotonic() - started < 2
    no_token = _raw(live.port, head.replace(b"/v1/approvals/x/answer", b"/v1/steps"), wait=3)
    assert no_token.startswith(b"HTTP/1.1 413")


def test_a_chunked_body_is_cut_at_the_limit(live: Live) -> None:
    """No Content-Length: reading stops at the limit with 413, for signed answers too."""

    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b" " * 4096

    for path in ("/v1/steps", "/v1/approvals/x/answer"):
        response = live.client.post(path, content=chunks())
        assert response.status_code == 413, path


def test_a_body_that_does_not_arrive_gets_408(live: Live) -> None:
    """A client that announces 100 bytes and sends 10 is answered 408 after the body timeout."""
    head = (
        f"POST /v1/steps HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Length: 100\r\n\r\n"
    ).encode()
    started = time.monotonic()
    answer = _raw(live.port, head + b'{"tool": "', wait=5)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < 3


def test_a_slow_request_head_is_disconnected(live: Live) -> None:
    """A head not finished within header_timeout: the server closes the connection."""
    started = time.monotonic()
    answer = _raw(live.port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ", wait=5)
    took = time.monotonic() - started
    assert answer == b""
    assert 0.8 < took < 3


def test_a_huge_request_head_is_refused(live: Live) -> None:
    """A head past max_header_bytes gets 431 and the connection closes."""
    answer = _raw(live.port, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20000, wait=5)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]


def test_keep_alive_connections_serve_several_requests(live: Live) -> None:
    """The head deadline is armed again per request, not once per connection."""
    with httpx.Client(base_url=live.url, headers=AUTH) as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
            time.sleep(0.4)


# -- bounded memory and pagination ------------------------------------------------------


def test_recent_verdicts_are_kept_for_a_bounded_number_of_sessions(tmp_path: Path) -> None:
    """Past RECENT_SESSIONS sessions the least recently active one's verdicts are dropped."""
    service = Service(MemoryStore(), TOKEN, config=GuardConfig(embedder="ngram"))
    total = RECENT_SESSIONS + 500
    for n in range(total):
        service.judge_all([_step(f"s{n}")])
    assert len(service.recent) == RECENT_SESSIONS
    assert service.recent.get("s0") is None
    assert service.recent.get(f"s{total - 1}") is not None


def test_sessions_come_in_pages(live: Live) -> None:
    """?limit= and ?cursor=: every session once, in the store's order; bad values are 400."""
    for n in range(7):
        live.client.post("/v1/steps", json=_step(f"p{n}"))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        page = live.client.get("/v1/sessions", params=params).json()
        seen += [row["session"] for row in page["sessions"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == [f"p{n}" for n in range(7)]
    for bad in ({"limit": "0"}, {"limit": "x"}, {"limit": "5000"}, {"cursor": "-1"}):
        assert live.client.get("/v1/sessions", params=bad).status_code == 400


# -- step ids, session ids, odd input -------------------------------------------------------


def test_a_retried_step_returns_the_first_verdict_and_counts_once(live: Live) -> None:
    """The same step id twice: the same verdict, one step; a new id for the same call repeats."""
    first = live.client.post("/v1/steps", json=_step("r", id="call-1")).json()
    again = live.client.post("/v1/steps", json=_step("r", id="call-1")).json()
    assert first == again
    assert live.client.get("/v1/sessions/r").json()["steps"] == 1
    repeat = live.client.post("/v1/steps", json=_step("r", id="call-2")).json()
    assert (repeat["action"], repeat["detector"]) == ("stop", "repeat")


def test_a_session_id_with_a_slash_is_reachable(live: Live) -> None:
    """team/a, URL-encoded: detail, stop and feedback reach it."""
    live.client.post("/v1/steps", json=_step("team/a"))
    quoted = urllib.parse.quote("team/a", safe="")
    detail = live.client.get(f"/v1/sessions/{quoted}")
    assert (detail.status_code, detail.json()["session"]) == (200, "team/a")
    fed = live.client.post(f"/v1/sessions/{quoted}/feedback", json={"text": "hi"})
    assert fed.json() == {"session": "team/a", "queued": True}
    stopped = live.client.post(f"/v1/sessions/{quoted}/stop", json={"by": "ana"})
    assert stopped.json() == {"session": "team/a", "stop_requested": "ana"}


@pytest.mark.parametrize(
    "body",
    [
        {"tool": "Read", "paths": 5},
        {"tool": "Read", "paths": [1]},
        {"tool": "Read", "session": 5},
        {"tool": "Read", "agent": []},
        {"tool": "Read", "cwd": 1},
    ],
)
def test_check_answers_400_for_wrong_types(live: Live, body: dict[str, Any]) -> None:
    """/v1/check names a field of the wrong type with 400, never 500."""
    response = live.client.post("/v1/check", json=body)
    assert response.status_code == 400, response.text


@pytest.mark.parametrize("depth", [900, 30000])
@pytest.mark.parametrize("path", ["/v1/steps", "/v1/check"])
def test_deeply_nested_json_is_400(live: Live, path: str, depth: int) -> None:
    """Args nested past 200 levels are bad input (900: was a 500 from the engine's recursion)."""
    body = '{"tool": "x", "args": {"a": ' + "[" * depth + "]" * depth + "}}"
    response = live.client.post(path, content=body.encode())
    assert response.status_code == 400, response.text
    assert "nested too deeply" in response.json()["error"]
    shallow = '{"tool": "x", "args": {"a": ' + "[" * 150 + "]" * 150 + "}}"
    assert live.client.post(path, content=shallow.encode()).status_code == 200


@pytest.mark.parametrize("stamp", ["nan", "NaN", "inf", "-inf"])
def test_a_signed_non_finite_timestamp_is_refused(live: Live, stamp: str) -> None:
    """A correctly signed answer whose timestamp is not a finite number is refused (401)."""
    body = json.dumps({"id": "x", "decision": "approve"}).encode()
    headers = {TIMESTAMP_HEADER: stamp, SIGNATURE_HEADER: sign(SECRET, stamp, body)}
    response = httpx.post(f"{live.url}/v1/approvals/x/answer", content=body, headers=headers)
    assert response.status_code == 401, response.text


def test_an_expired_approval_never_reads_pending() -> None:
    """Polled past its deadline, a request reads expired (it denies), not pending."""
    from starlette.testclient import TestClient

    now = [1000.0]
    service = Service(
        MemoryStore(), TOKEN, config=GuardConfig(embedder="ngram"), clock=lambda: now[0]
    )
    with TestClient(create_app(service), headers=AUTH) as client:
        client.post("/v1/steps", json=_step("default"))
        asked = client.post(
            "/v1/check", json={"tool": "Bash", "args": {"command": "rm -rf build"}}
        ).json()
        rid = asked["approval"]["id"]
        assert client.get(f"/v1/approvals/{rid}").json()["status"] == "pending"
        now[0] += 10_000
        polled = client.get(f"/v1/approvals/{rid}").json()
        assert polled["status"] == "expired"
        assert polled["verdict"]["action"] != "continue"
        detail = client.get("/v1/sessions/default").json()
        assert [a["status"] for a in detail["approvals"]] == ["expired"]


@pytest.mark.parametrize(
    "kind",
    [
        "memory",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
def test_pages_of_sessions_on_every_store(kind: str, tmp_path: Path) -> None:
    """Redis and PostgreSQL read one page (sessions_page); every store pages the same way."""
    from tests.stores.conftest import Backend

    backend = Backend(kind, tmp_path)
    try:
        service = Service(backend.open(), TOKEN, config=GuardConfig(embedder="ngram"))
        for n in range(5):
            service.judge_all([_step(f"q{n}")])
        pages = []
        offset: int | None = 0
        while offset is not None:
            rows, offset = service.session_rows(2, offset)
            pages.append([r["session"] for r in rows])
        assert [len(p) for p in pages] == [2, 2, 1]
        assert sorted(s for page in pages for s in page) == [f"q{n}" for n in range(5)]
        if kind != "memory":  # most recently updated first
            assert pages[0][0] == "q4"
            assert all(r["steps"] == 1 for r in service.session_rows(5, 0)[0])
    finally:
        backend.cleanup()


def test_the_writes_of_one_loop_turn_go_out_as_one_send() -> None:
    """A response's head and body are one write; close sends what waits, then closes."""
    import asyncio

    from antiloop.server.limits import Coalescing

    class Transport:
        def __init__(self) -> None:
            self.sent: list[bytes] = []
            self.closed = False

        def write(self, data: bytes) -> None:
            self.sent.append(data)

        def is_closing(self) -> bool:
            return self.closed

        def close(self) -> None:
            self.closed = True

        def get_extra_info(self, name: str) -> Any:
            return ("127.0.0.1", 8000) if name == "sockname" else None

    async def run() -> Transport:
        inner = Transport()
        transport = Coalescing(inner, asyncio.get_running_loop())
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"{}")
        assert inner.sent == []
        await asyncio.sleep(0)
        assert inner.sent == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
        transport.write(b"last")
        transport.close()
        assert transport.get_extra_info("sockname") == ("127.0.0.1", 8000)
        return inner

    inner = asyncio.run(run())
    assert inner.sent[1:] == [b"last"]
    assert inner.closed
