"""The HTTP service: steps in, verdicts out; sessions, stops, feedback, approvals, live events.

Every ``/v1`` call and ``/openapi.json`` needs ``Authorization: Bearer <token>``; the one
exception is ``POST /v1/approvals/{id}/answer``, which carries an HMAC signature instead (the
webhook channel's answers). The dashboard page at ``/`` holds no data: its script calls the API
with the token, which it keeps in the tab's session storage. With no cookies there is no ambient
credential for another site to ride on (CSRF), and POSTs with a foreign ``Origin`` are refused.

The service is stateless over the store: several replicas can share one store. Live events go
to the dashboards connected to this replica. Store calls run off the event loop with a deadline,
and request bodies and heads are bounded (``antiloop.server.limits``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, is_dataclass, replace
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from antiloop.approval import (
    Answer,
    ApprovalPolicy,
    ApprovalRequest,
    Approvals,
    ApprovalStatus,
    Channel,
    Verifier,
    verdict_of,
)
from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER
from antiloop.budgets import Budgets
from antiloop.config import GuardConfig
from antiloop.errors import BadStep, ChannelError, StoreError
from antiloop.events import MAX_DEPTH, Step, nesting_depth, step_from_dict
from antiloop.guard import Guard
from antiloop.redact import redact_text, redact_value
from antiloop.server.limits import (
    Limits,
    SlowBody,
    StoreCalls,
    StoreTimeout,
    TooLarge,
    read_body,
    too_large,
)
from antiloop.server.openapi import schema
from antiloop.server.views import view_routes
from antiloop.stores import Store
from antiloop.verdict import Action, Verdict, invalid_wire

log = logging.getLogger("antiloop")

MAX_BATCH = 1000
DEFAULT_IDENTITY = "dashboard"
"""The identity of the service token's holder."""
RECENT = 50
RECENT_SESSIONS = 1000  # sessions whose recent verdicts are kept; the least recent go first
PAGE = 100  # sessions per page of GET /v1/sessions, unless ?limit= says otherwise
MAX_PAGE = 1000
Handler = Callable[[Request], Awaitable[Response]]


class RecentVerdicts:
    """The last ``per_session`` verdict events of the ``sessions`` most recently active sessions.

    ``recent[sid]`` makes the session the most recent one (creating its deque, and forgetting
    the least recent session past the bound); ``recent.get(sid)`` only reads. Thread-safe.
    """

    def __init__(self, sessions: int = RECENT_SESSIONS, per_session: int = RECENT) -> None:
        self.sessions = sessions
        self.per_session = per_session
        self._items: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, session: str) -> deque[dict[str, Any]]:
        with self._lock:
            items = self._items
            found = items.get(session)
            if found is None:
                found = items[session] = deque(maxlen=self.per_session)
                while len(items) > self.sessions:
                    items.popitem(last=False)
            else:
                items.move_to_end(session)
            return found

    def get(
        self, session: str, default: deque[dict[str, Any]] | tuple[()] | None = None
    ) -> deque[dict[str, Any]] | tuple[()] | None:
        """The session's recent events, or ``default``."""
        with self._lock:
            return self._items.get(session, default)

    def __len__(self) -> int:
        return len(self._items)


class EventHub:
    """Fans live events out to the connected dashboards (bounded queues; slow ones lose events)."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[str]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the event loop that serves the subscribers."""
        self._loop = loop
        self._thread = threading.get_ident()

    def subscribe(self) -> asyncio.Queue[str]:
        """A new subscriber's queue."""
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1000)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        """Forget a subscriber."""
        self._queues.discard(queue)

    def publish(self, kind: str, data: Mapping[str, Any]) -> None:
        """Send an event to every subscriber; safe from any thread."""
        if not self._queues:
            return
        clean = redact_value(data)  # every live event, approvals included, leaves redacted
        text = f"event: {kind}\ndata: {json.dumps(clean, ensure_ascii=False)}\n\n"
        if self._loop is not None and threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._put, text)
        else:
            self._put(text)

    def _put(self, text: str) -> None:
        for queue in list(self._queues):
            if not queue.full():
                queue.put_nowait(text)


class Service:
    """What the routes share: the guard, the approvals, the live events and recent verdicts.

    Args:
        store: the store (or its URL) every replica shares.
        token: the bearer token every API call must carry (its holder's identity, the voter
            in k-of-n approvals, is ``dashboard``).
        tokens: more tokens, by the identity of their holder (``{"alice": "t0k3n"}``): each
            holder answers approvals as that identity, and counts once in k-of-n.
        config: the guard's settings.
        policy: the approval policy for ``/v1/check``.
        channels: channels to deliver approval requests on (the dashboard always lists them).
        webhook_secret: the HMAC secret answers on ``/v1/approvals/{id}/answer`` are signed with.
        clock: seconds since the epoch.
        limits: body, header and store limits (``antiloop.server.limits.Limits``).
    """

    def __init__(
        self,
        store: Store | str,
        token: str,
        *,
        config: GuardConfig | None = None,
        policy: ApprovalPolicy | None = None,
        channels: list[Channel] | None = None,
        webhook_secret: str | None = None,
        clock: Callable[[], float] = time.time,
        tokens: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        if not token:
            raise ValueError("the service needs a token")
        self.token = token
        self._token = f"Bearer {token}".encode()
        self._identities = [(f"Bearer {t}".encode(), name) for name, t in (tokens or {}).items()]
        if any(not name.strip() or len(t) < 8 for name, t in (tokens or {}).items()):
            raise ValueError("each named token needs a name and at least 8 characters")
        self.guard = Guard(
            config=config or GuardConfig(embedder="ngram"), store=store, budgets=budgets
        )
        self.store = self.guard.store
        self.approvals = Approvals(self.store, policy, channels or [], clock=clock, wait=False)
        self.ledger = self.approvals.ledger
        self.hub = EventHub()
        self.approvals.listeners.append(self._approval_event)
        self.verifier = Verifier(webhook_secret, clock=clock) if webhook_secret else None
        self.clock = clock
        self._hooks: dict[str, Any] = {}
        self._hook_lock = threading.Lock()
        self.recent = RecentVerdicts()
        self.limits = limits or Limits()
        self.call = StoreCalls(self.limits)

    def hook(self, dialect: str, body: bytes) -> dict[str, Any]:
        """Answer one Claude Code (or Gemini, Codex) hook delivered over HTTP.

        The same normaliser, handler and answers as ``antiloop hook``, on this service's store;
        one handler per agent dialect is kept, so nothing is imported or opened per call. A
        store that fails gets the hook's own answer for that (``ANTILOOP_FAIL``: open warns,
        closed refuses the call).
        """
        from antiloop.hooks.handler import StoreFailed
        from antiloop.hooks.render import render

        event = self._hook_event(dialect, body)
        if event is None:
            return {}
        try:
            outcome = self._hook_handler(dialect).handle(event)
        except (StoreError, StoreFailed) as exc:
            return self.hook_failed(dialect, body, str(exc))
        return render(event, outcome) or {}

    def _hook_event(self, dialect: str, body: bytes) -> Any:
        """The normalised hook event, None for one antiloop has no opinion on."""
        from antiloop.hooks.events import DIALECTS, BadPayload, normalize, parse_payload

        if dialect not in DIALECTS:
            raise _BadRequest(f"unknown agent {dialect!r} (use {', '.join(DIALECTS)})")
        try:
            event = normalize(dialect, parse_payload(body))
        except BadPayload as exc:
            raise _BadRequest(str(exc)) from None
        return None if event.kind == "other" else event

    def hook_failed(self, dialect: str, body: bytes, problem: str) -> dict[str, Any]:
        """The hook's answer when the store failed or did not answer (``ANTILOOP_FAIL``)."""
        from antiloop.hooks.config import fail_mode, load_hook_config
        from antiloop.hooks.runner import _failed

        event = self._hook_event(dialect, body)
        if event is None:
            return {}
        handler = self._hooks.get(dialect)  # not made here: making one opens the store
        config = handler.config if handler is not None else load_hook_config(None, os.environ, None)
        answer = _failed(event, problem, fail_mode(os.environ, config))
        log.error("antiloop: %s", answer.stderr.strip())
        found: dict[str, Any] = json.loads(answer.stdout) if answer.stdout.strip() else {}
        return found

    def _hook_handler(self, dialect: str) -> Any:
        with self._hook_lock:
            handler = self._hooks.get(dialect)
            if handler is None:
                from antiloop.hooks.config import load_hook_config
                from antiloop.hooks.handler import HookHandler

                handler = HookHandler(load_hook_config(None, os.environ, None), self.store)
                self._hooks[dialect] = handler
        return handler

    def authorized(self, request: Request) -> bool:
        """True when the request carries a token of the service."""
        return self.identity(request) is not None

    def identity(self, request: Request) -> str | None:
        """Who the request's token belongs to (``dashboard`` for the service token), or None."""
        given = request.headers.get("authorization", "").encode()
        found = DEFAULT_IDENTITY if hmac.compare_digest(given, self._token) else None
        for expected, name in self._identities:  # every one compared: no timing tells which
            if hmac.compare_digest(given, expected) and found is None:
                found = name
        return found

    def _approval_event(self, event: str, request: ApprovalRequest) -> None:
        self.hub.publish("approval", {"event": event, "request": request.to_dict()})

    # -- steps -----------------------------------------------------------------------------

    def judge(
        self, raw: Any, index: int, seen: dict[str, tuple[str | None, list[str]]]
    ) -> dict[str, Any]:
        """The wire verdict for one step event: stop request, guard, feedback."""
        try:
            step = step_from_dict(raw)
        except BadStep as exc:
            return {**invalid_wire(index, f"step {index}: {exc}"), "hint": ""}
        sid = step.session
        found = seen.get(sid)
        if found is None:
            both = getattr(self.store, "interventions", None)  # one round trip where it can
            try:
                found = (
                    both(sid)
                    if both is not None
                    else (self.ledger.stop_requested(sid), self.ledger.pop_feedback(sid))
                )
            except StoreError as exc:  # the guard's own store call below applies on_store_error
                log.error("antiloop: could not read stop requests and feedback: %s", exc)
                found = (None, [])
            seen[sid] = found
        by, feedback = found
        if by is not None:
            verdict = self.approvals.stopped(self.guard, sid)
            assert verdict is not None  # noqa: S101 - a stop was requested just above
        else:
            verdict = self.guard.record(step)
        if feedback:
            verdict = _with_feedback(verdict, feedback)
            seen[sid] = (by, [])
        wire = verdict.to_wire(index)
        wire["hint"] = verdict.hint
        wire["session"] = sid
        wire["escalate_to"] = verdict.escalate_to
        wire = redact_value(wire)
        self._remember(step, wire)
        return wire  # type: ignore[no-any-return]

    def judge_all(self, batch: list[Any]) -> list[dict[str, Any]]:
        """The wire verdicts of a batch, judged in order (one intervention read per session).

        A store with ``batch()`` (SQLite) judges the batch in one transaction: one commit.
        """
        seen: dict[str, tuple[str | None, list[str]]] = {}
        together = getattr(self.store, "batch", None)
        if not callable(together):
            return [self.judge(raw, i, seen) for i, raw in enumerate(batch)]
        try:
            with together():
                return [self.judge(raw, i, seen) for i, raw in enumerate(batch)]
        except StoreError as exc:  # the commit failed: no step of the batch was kept
            return [self.store_failed(raw, i, exc) for i, raw in enumerate(batch)]

    def store_failed(self, raw: Any, index: int, exc: Exception) -> dict[str, Any]:
        """The wire verdict ``on_store_error`` gives a step the store did not judge in time."""
        sid = raw.get("session") if isinstance(raw, dict) else None
        sid = sid if isinstance(sid, str) else "default"
        verdict = self.guard._store_failed(StoreError(str(exc)), sid)
        wire = verdict.to_wire(index)
        wire["hint"] = verdict.hint
        wire["session"] = sid
        wire["escalate_to"] = verdict.escalate_to
        return wire

    def session_rows(self, limit: int, offset: int) -> tuple[list[dict[str, Any]], int | None]:
        """One page of sessions, in the store's order, and the next page's offset.

        A store with ``sessions_page(offset, limit)`` (Redis, PostgreSQL) reads only the page.
        """
        page = getattr(self.store, "sessions_page", None)
        if callable(page):
            ids: list[str] = page(offset, limit + 1)
            more = len(ids) > limit
        else:
            ids = self.store.sessions()[offset:]
            more = len(ids) > limit
        rows = []
        for sid in ids[:limit]:
            state = self.store.peek(sid)
            ended = getattr(state, "ended", None)
            recent = self.recent.get(sid)
            rows.append(
                {
                    "session": sid,
                    "steps": getattr(state, "steps", 0),
                    "ended": _jsonable(ended) if ended is not None else None,
                    "stop_requested": self.ledger.stop_requested(sid),
                    "last": recent[-1] if recent else None,
                }
            )
        return rows, (offset + limit if more else None)

    def fresh_approval(self, request: ApprovalRequest) -> ApprovalRequest:
        """The request, expired first when it is still pending past its ``expires_at``."""
        expires = request.expires_at
        if request.status is ApprovalStatus.PENDING and expires and self.clock() >= expires:
            return self.approvals.expire(request.id)
        return request

    def _remember(self, step: Step, wire: dict[str, Any]) -> None:
        event = {
            **wire,
            "agent": redact_text(step.agent),
            "tool": redact_text(step.tool),
            "at": self.clock(),
        }
        self.recent[step.session].append(event)
        self.hub.publish("verdict", event)


def _finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return True  # not a number: the verifier names it


def _with_feedback(verdict: Verdict, texts: list[str]) -> Verdict:
    from dataclasses import replace

    said = " ".join(f"A person says: {t.strip()}" for t in texts if t.strip())
    if not said:
        return verdict
    hint = f"{said} {verdict.hint}".strip()
    if verdict.action is Action.CONTINUE:
        return replace(
            verdict,
            action=Action.NUDGE,
            detector=verdict.detector or "feedback",
            outcome=verdict.outcome or "feedback",
            reason=verdict.reason or "Feedback from a person.",
            hint=hint,
        )
    return replace(verdict, hint=hint)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Verdict):
        return value.to_wire(0)
    if is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return _jsonable(to_dict() if callable(to_dict) else asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | deque):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _redacted(body: Any) -> JSONResponse:
    """A JSON response with every string passed through the redactor."""
    return JSONResponse(redact_value(body))


def parse_tokens(text: str) -> dict[str, str]:
    """Named tokens from ``name=token,name=token`` (``ANTILOOP_TOKENS``).

    Example:
        >>> parse_tokens("alice=t0k3n-alice, bob=t0k3n-bob")
        {'alice': 't0k3n-alice', 'bob': 't0k3n-bob'}
    """
    tokens: dict[str, str] = {}
    for number, item in enumerate(text.split(","), 1):
        if not item.strip():
            continue
        name, sep, token = item.partition("=")
        if not sep or not name.strip() or not token.strip():
            raise ValueError(f"ANTILOOP_TOKENS: item {number} is not name=token")
        tokens[name.strip()] = token.strip()
    return tokens


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json(request: Request, limits: Limits) -> Any:
    body = await read_body(request, limits)
    deep = f"the body is nested too deeply (steps: at most {MAX_DEPTH} levels)"
    try:
        data = json.loads(body)
    except RecursionError:
        raise _BadRequest(deep) from None
    except ValueError as exc:
        raise _BadRequest(f"the body is not JSON: {exc}") from None
    # a batch wraps its steps in two more levels ({"steps": [...]})
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and nesting_depth(data) > MAX_DEPTH + 2:
        raise _BadRequest(deep)
    return data


def _cursor(request: Request) -> tuple[int, int]:
    """``(limit, offset)`` of ``GET /v1/sessions?limit=&cursor=``."""
    limit_text = request.query_params.get("limit", str(PAGE))
    cursor = request.query_params.get("cursor") or "0"
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= MAX_PAGE:
        raise _BadRequest(f"'limit' must be an integer from 1 to {MAX_PAGE}")
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 12:
        raise _BadRequest("'cursor' must be the next_cursor of an earlier page")
    return int(limit_text), int(cursor)


def _optional_str(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise _BadRequest(f"{key!r} must be a string")
    return value


class _BadRequest(Exception):
    pass


def create_app(service: Service) -> Starlette:
    """The ASGI application for a service."""
    limits = service.limits

    def api(handler: Handler, *, auth: bool = True) -> Handler:
        async def wrapped(request: Request) -> Response:
            if too_large(request, limits):  # before the token: an upload is refused unread
                return _error(413, f"the body is larger than {limits.max_body} bytes")
            if auth:
                request.state.identity = service.identity(request)
            if auth and request.state.identity is None:
                return JSONResponse(
                    {"error": "missing or wrong token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            if request.method == "POST":
                origin = request.headers.get("origin")
                host = request.headers.get("host", "")
                if origin and origin.split("://", 1)[-1] != host:
                    return _error(403, f"cross-origin request from {origin} refused")
            try:
                return await handler(request)
            except _BadRequest as exc:
                return _error(400, str(exc))
            except TooLarge:
                return _error(413, f"the body is larger than {limits.max_body} bytes")
            except SlowBody:
                return _error(408, f"the body did not arrive within {limits.body_timeout:g} s")
            except (StoreError, StoreTimeout) as exc:
                log.error("antiloop: %s %s: %s", request.method, request.url.path, exc)
                return _error(503, f"the store failed: {exc}")

        return wrapped

    async def dashboard(request: Request) -> Response:
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

    async def hook(request: Request) -> Response:
        body = await read_body(request, limits)
        dialect = request.path_params["dialect"]
        try:
            answer = await service.call(service.hook, dialect, body)
        except StoreTimeout as exc:  # the hook's own answer to a store that does not answer
            answer = service.hook_failed(dialect, body, str(exc))
        return JSONResponse(answer)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi(request: Request) -> Response:
        return JSONResponse(schema())

    async def steps(request: Request) -> Response:
        body = await _json(request, limits)
        batch = body.get("steps") if isinstance(body, dict) and "steps" in body else body
        many = isinstance(batch, list)
        items: list[Any] = batch if isinstance(batch, list) else [batch]
        if len(items) > MAX_BATCH:
            return _error(413, f"at most {MAX_BATCH} steps per request")
        try:
            verdicts = await service.call(service.judge_all, items)
        except StoreTimeout as exc:  # the store hung: each step follows on_store_error
            verdicts = [service.store_failed(raw, i, exc) for i, raw in enumerate(items)]
        return JSONResponse({"verdicts": verdicts} if many else verdicts[0])

    async def check(request: Request) -> Response:
        body = await _json(request, limits)
        if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
            return _error(400, "expected {'tool': ..., 'args': {...}, 'session': ...}")
        args = body.get("args") or {}
        if not isinstance(args, dict):
            return _error(400, "'args' must be an object")
        paths = body.get("paths") or []
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            return _error(400, "'paths' must be a list of strings")
        session = _optional_str(body, "session") or "default"
        try:
            gate = await service.call(
                service.approvals.gate,
                service.guard,
                body["tool"],
                args,
                session=session,
                agent=_optional_str(body, "agent") or "agent",
                paths=tuple(paths),
                cwd=_optional_str(body, "cwd"),
            )
        except StoreTimeout as exc:  # the store hung: the call follows on_store_error
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

    async def sessions(request: Request) -> Response:
        limit, offset = _cursor(request)
        rows, after = await service.call(service.session_rows, limit, offset)
        return JSONResponse(
            {"sessions": redact_value(rows), "next_cursor": None if after is None else str(after)}
        )

    def session_detail(sid: str) -> dict[str, Any] | None:
        state = service.store.peek(sid)
        audit = getattr(service.store, "audit_records", None)
        records = _jsonable(list(audit(session=sid))[-200:]) if callable(audit) else None
        if state is None and not service.recent.get(sid) and not records:
            return None
        ended = getattr(state, "ended", None)
        found = service.ledger.list_approvals(session=sid)
        return dict(
            redact_value(
                {
                    "session": sid,
                    "steps": getattr(state, "steps", 0),
                    "ended": _jsonable(ended) if ended is not None else None,
                    "stop_requested": service.ledger.stop_requested(sid),
                    "recent": list(service.recent.get(sid, ()) or ()),
                    "audit": records,
                    "approvals": [service.fresh_approval(r).to_dict() for r in found],
                }
            )
        )

    async def session(request: Request) -> Response:
        sid = request.path_params["id"]
        detail = await service.call(session_detail, sid)
        if detail is None:
            return _error(404, f"no session {sid!r}")
        return JSONResponse(detail)

    def request_stop(sid: str, by: str) -> str | None:
        service.ledger.request_stop(sid, by)
        service.hub.publish("stop", {"session": sid, "by": by})
        return service.ledger.stop_requested(sid)

    async def stop(request: Request) -> Response:
        sid = request.path_params["id"]
        body = await _json(request, limits) if await read_body(request, limits) else {}
        by = str(body.get("by") or "dashboard") if isinstance(body, dict) else "dashboard"
        stopped = await service.call(request_stop, sid, by)
        return JSONResponse({"session": sid, "stop_requested": stopped})

    def push_feedback(sid: str, text: str) -> None:
        service.ledger.push_feedback(sid, text)
        service.hub.publish("feedback", {"session": sid, "text": text})

    async def feedback(request: Request) -> Response:
        sid = request.path_params["id"]
        body = await _json(request, limits)
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, "expected {'text': '...'}")
        said = redact_text(text.strip())  # stored, then sent to the agent and the dashboards
        await service.call(push_feedback, sid, said)
        return JSONResponse({"session": sid, "queued": True})

    def approval_rows(status: str | None, sid: str | None) -> list[dict[str, Any]]:
        rows = []
        for found in service.ledger.list_approvals(status=status, session=sid):
            if found.extra.get("vote_for"):
                continue
            r = service.fresh_approval(found)
            if status is not None and r.status != status:
                continue
            rows.append({**r.to_dict(), "votes": sorted(service.approvals.votes(r.id))})
        return rows

    async def approvals(request: Request) -> Response:
        status = request.query_params.get("status")
        if status is not None and status not in {s.value for s in ApprovalStatus}:
            return _error(400, f"unknown status {status!r}")
        sid = request.query_params.get("session")
        return _redacted({"approvals": await service.call(approval_rows, status, sid)})

    def approval_detail(id: str) -> dict[str, Any] | None:
        found = service.ledger.get_approval(id)
        if found is None:
            return None
        found = service.fresh_approval(found)  # polled past its deadline: expired, not pending
        verdict = verdict_of(found)
        return dict(
            redact_value(
                {**found.to_dict(), "verdict": {**verdict.to_wire(0), "hint": verdict.hint}}
            )
        )

    async def approval(request: Request) -> Response:
        detail = await service.call(approval_detail, request.path_params["id"])
        if detail is None:
            return _error(404, "no such approval request")
        return JSONResponse(detail)

    async def decide(request: Request) -> Response:
        body = await _json(request, limits)
        # The voter is who the token belongs to; a "by" in the body is not believed.
        return await service.call(_decide, request.path_params["id"], body, request.state.identity)

    def _decide(id: str, body: Any, by: str, channel: str = "web") -> Response:
        if not isinstance(body, dict):
            return _error(400, "expected {'decision': 'approve'|'deny', 'comment': ...}")
        decision = body.get("decision")
        comment = body.get("comment") or None
        if comment is not None and not isinstance(comment, str):
            return _error(400, "'comment' must be a string")
        if decision == "approve":
            answer = Answer.approve(by, comment)
        elif decision == "deny":
            answer = Answer.deny(by, comment)
        elif decision == "edit" and isinstance(body.get("args"), dict):
            answer = Answer.edit(by, body["args"], comment)
        else:
            return _error(400, "'decision' must be approve, deny or edit (with 'args')")
        try:
            decided = service.approvals.answer(id, replace(answer, channel=channel))
        except KeyError:
            return _error(404, "no such approval request")
        return _redacted({**decided.to_dict(), "votes": sorted(service.approvals.votes(id))})

    async def signed_answer(request: Request) -> Response:
        if service.verifier is None:
            return _error(404, "webhook answers are off (no webhook secret)")
        body = await read_body(request, limits)
        timestamp = request.headers.get(TIMESTAMP_HEADER)
        try:
            if timestamp is not None and not _finite(timestamp):
                raise ChannelError("bad timestamp")  # "nan" or "inf" compare as never stale
            service.verifier.verify(timestamp, request.headers.get(SIGNATURE_HEADER), body)
        except ChannelError as exc:
            log.warning("antiloop: refused a webhook answer: %s", exc)
            return _error(401, f"refused: {exc}")
        try:
            data = json.loads(body)
        except ValueError:
            return _error(400, "the body is not JSON")
        id = request.path_params["id"]
        if not isinstance(data, dict) or data.get("id") != id:
            return _error(400, "the answer names another request")
        # The relay signed the body: its "by" is the user the relay authenticated.
        user = data.get("by")
        by = user if isinstance(user, str) and user.strip() else "webhook"
        return await service.call(_decide, id, data, by, "webhook")

    async def events(request: Request) -> Response:
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

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        service.hub.bind(asyncio.get_running_loop())
        yield

    routes = [
        Route("/", dashboard),
        Route("/healthz", health),
        Route("/openapi.json", api(openapi)),
        Route("/v1/steps", api(steps), methods=["POST"]),
        Route("/v1/check", api(check), methods=["POST"]),
        Route("/v1/hooks/{dialect}", api(hook), methods=["POST"]),
        Route("/v1/sessions", api(sessions)),
        # {id:path}: a session id may hold "/" (sent URL-encoded as %2F)
        Route("/v1/sessions/{id:path}/stop", api(stop), methods=["POST"]),
        Route("/v1/sessions/{id:path}/feedback", api(feedback), methods=["POST"]),
        Route("/v1/sessions/{id:path}", api(session), methods=["GET"]),
        Route("/v1/approvals", api(approvals)),
        Route("/v1/approvals/{id}", api(approval)),
        Route("/v1/approvals/{id}", api(decide), methods=["POST"]),
        Route("/v1/approvals/{id}/answer", api(signed_answer, auth=False), methods=["POST"]),
        Route("/v1/events", api(events)),
        *view_routes(service, api),  # the dashboard's session page and decided approvals
    ]
    return Starlette(routes=routes, lifespan=lifespan)
