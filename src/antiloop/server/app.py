"""The HTTP service: steps in, verdicts out; sessions, stops, feedback, approvals, live events.

Every ``/v1`` call and ``/openapi.json`` needs ``Authorization: Bearer <token>``; the one
exception is ``POST /v1/approvals/{id}/answer``, which carries an HMAC signature instead (the
webhook channel's answers). The dashboard page at ``/`` holds no data: its script calls the API
with the token, which it keeps in the tab's session storage. With no cookies there is no ambient
credential for another site to ride on (CSRF), and POSTs with a foreign ``Origin`` are refused.

The service is stateless over the store: several replicas can share one store. Live events go
to the dashboards connected to this replica.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import threading
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, is_dataclass
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
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
from antiloop.config import GuardConfig
from antiloop.errors import BadStep, ChannelError
from antiloop.events import Step, step_from_dict
from antiloop.guard import Guard
from antiloop.server.openapi import schema
from antiloop.server.views import view_routes
from antiloop.stores import Store
from antiloop.verdict import Action, Verdict, invalid_wire

log = logging.getLogger("antiloop")

MAX_BATCH = 1000
RECENT = 50
Handler = Callable[[Request], Awaitable[Response]]


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
        text = f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
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
        token: the bearer token every API call must carry.
        config: the guard's settings.
        policy: the approval policy for ``/v1/check``.
        channels: channels to deliver approval requests on (the dashboard always lists them).
        webhook_secret: the HMAC secret answers on ``/v1/approvals/{id}/answer`` are signed with.
        clock: seconds since the epoch.
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
    ) -> None:
        if not token:
            raise ValueError("the service needs a token")
        self.token = token
        self._token = f"Bearer {token}".encode()
        self.guard = Guard(config=config or GuardConfig(embedder="ngram"), store=store)
        self.store = self.guard.store
        self.approvals = Approvals(self.store, policy, channels or [], clock=clock, wait=False)
        self.ledger = self.approvals.ledger
        self.hub = EventHub()
        self.approvals.listeners.append(self._approval_event)
        self.verifier = Verifier(webhook_secret, clock=clock) if webhook_secret else None
        self.clock = clock
        self._hooks: dict[str, Any] = {}
        self._hook_lock = threading.Lock()
        self.recent: defaultdict[str, deque[dict[str, Any]]] = defaultdict(
            lambda: deque(maxlen=RECENT)
        )

    def hook(self, dialect: str, body: bytes) -> dict[str, Any]:
        """Answer one Claude Code (or Gemini, Codex) hook delivered over HTTP.

        The same normaliser, handler and answers as ``antiloop hook``, on this service's store;
        one handler per agent dialect is kept, so nothing is imported or opened per call.
        """
        from antiloop.hooks.events import DIALECTS, BadPayload, normalize, parse_payload
        from antiloop.hooks.render import render

        if dialect not in DIALECTS:
            raise _BadRequest(f"unknown agent {dialect!r} (use {', '.join(DIALECTS)})")
        try:
            event = normalize(dialect, parse_payload(body))
        except BadPayload as exc:
            raise _BadRequest(str(exc)) from None
        if event.kind == "other":
            return {}
        with self._hook_lock:
            handler = self._hooks.get(dialect)
            if handler is None:
                from antiloop.hooks.config import load_hook_config
                from antiloop.hooks.handler import HookHandler

                handler = HookHandler(load_hook_config(None, os.environ, None), self.store)
                self._hooks[dialect] = handler
        return render(event, handler.handle(event)) or {}

    def authorized(self, request: Request) -> bool:
        """True when the request carries the token."""
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, self._token)

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
            found = seen[sid] = (
                both(sid)
                if both is not None
                else (self.ledger.stop_requested(sid), self.ledger.pop_feedback(sid))
            )
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
        self._remember(step, wire)
        return wire

    def _remember(self, step: Step, wire: dict[str, Any]) -> None:
        event = {
            **wire,
            "agent": step.agent,
            "tool": step.tool,
            "at": self.clock(),
        }
        self.recent[step.session].append(event)
        self.hub.publish("verdict", event)


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


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json(request: Request) -> Any:
    body = await request.body()
    try:
        return json.loads(body)
    except ValueError as exc:
        raise _BadRequest(f"the body is not JSON: {exc}") from None


class _BadRequest(Exception):
    pass


def create_app(service: Service) -> Starlette:
    """The ASGI application for a service."""

    def api(handler: Handler, *, auth: bool = True) -> Handler:
        async def wrapped(request: Request) -> Response:
            if auth and not service.authorized(request):
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
        body = await request.body()
        answer = await run_in_threadpool(service.hook, request.path_params["dialect"], body)
        return JSONResponse(answer)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi(request: Request) -> Response:
        return JSONResponse(schema())

    async def steps(request: Request) -> Response:
        body = await _json(request)
        batch = body.get("steps") if isinstance(body, dict) and "steps" in body else body
        seen: dict[str, tuple[str | None, list[str]]] = {}
        if isinstance(batch, list):
            if len(batch) > MAX_BATCH:
                return _error(413, f"at most {MAX_BATCH} steps per request")
            return JSONResponse(
                {"verdicts": [service.judge(raw, i, seen) for i, raw in enumerate(batch)]}
            )
        return JSONResponse(service.judge(batch, 0, seen))

    async def check(request: Request) -> Response:
        body = await _json(request)
        if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
            return _error(400, "expected {'tool': ..., 'args': {...}, 'session': ...}")
        args = body.get("args") or {}
        if not isinstance(args, dict):
            return _error(400, "'args' must be an object")
        gate = await run_in_threadpool(
            service.approvals.gate,
            service.guard,
            body["tool"],
            args,
            session=str(body.get("session") or "default"),
            agent=str(body.get("agent") or "agent"),
            paths=tuple(body.get("paths") or ()),
            cwd=body.get("cwd"),
        )
        verdict = gate.verdict
        return JSONResponse(
            {
                **verdict.to_wire(0),
                "hint": verdict.hint,
                "args": dict(gate.args),
                "approval": gate.request.to_dict() if gate.request else None,
            }
        )

    async def sessions(request: Request) -> Response:
        summaries = getattr(service.store, "session_summaries", None)
        if callable(summaries):
            rows = _jsonable(summaries())
        else:
            rows = []
            for sid in service.store.sessions():
                state = service.store.peek(sid)
                ended = getattr(state, "ended", None)
                rows.append(
                    {
                        "session": sid,
                        "steps": getattr(state, "steps", 0),
                        "ended": _jsonable(ended) if ended is not None else None,
                    }
                )
        for row in rows:
            if isinstance(row, dict):
                sid = str(row.get("session") or row.get("id") or "")
                row.setdefault("session", sid)
                if "ended" not in row:
                    state = service.store.peek(sid)
                    ended = getattr(state, "ended", None)
                    row["ended"] = _jsonable(ended) if ended is not None else None
                row["stop_requested"] = service.ledger.stop_requested(sid)
                recent = service.recent.get(sid)
                row["last"] = recent[-1] if recent else None
        return JSONResponse({"sessions": rows})

    async def session(request: Request) -> Response:
        sid = request.path_params["id"]
        state = service.store.peek(sid)
        audit = getattr(service.store, "audit_records", None)
        records = _jsonable(list(audit(session=sid))[-200:]) if callable(audit) else None
        if state is None and not service.recent.get(sid) and not records:
            return _error(404, f"no session {sid!r}")
        ended = getattr(state, "ended", None)
        return JSONResponse(
            {
                "session": sid,
                "steps": getattr(state, "steps", 0),
                "ended": _jsonable(ended) if ended is not None else None,
                "stop_requested": service.ledger.stop_requested(sid),
                "recent": list(service.recent.get(sid, ())),
                "audit": records,
                "approvals": [r.to_dict() for r in service.ledger.list_approvals(session=sid)],
            }
        )

    async def stop(request: Request) -> Response:
        sid = request.path_params["id"]
        body = await _json(request) if await request.body() else {}
        by = str(body.get("by") or "dashboard") if isinstance(body, dict) else "dashboard"
        service.ledger.request_stop(sid, by)
        service.hub.publish("stop", {"session": sid, "by": by})
        return JSONResponse({"session": sid, "stop_requested": service.ledger.stop_requested(sid)})

    async def feedback(request: Request) -> Response:
        sid = request.path_params["id"]
        body = await _json(request)
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, "expected {'text': '...'}")
        service.ledger.push_feedback(sid, text.strip())
        service.hub.publish("feedback", {"session": sid, "text": text.strip()})
        return JSONResponse({"session": sid, "queued": True})

    async def approvals(request: Request) -> Response:
        status = request.query_params.get("status")
        if status is not None and status not in {s.value for s in ApprovalStatus}:
            return _error(400, f"unknown status {status!r}")
        sid = request.query_params.get("session")
        found = service.ledger.list_approvals(status=status, session=sid)
        now = service.clock()
        rows = []
        for r in found:
            if r.extra.get("vote_for"):
                continue
            if r.status is ApprovalStatus.PENDING and r.expires_at and now >= r.expires_at:
                r = service.approvals.expire(r.id)
                if status is not None and r.status != status:
                    continue
            rows.append({**r.to_dict(), "votes": sorted(service.approvals.votes(r.id))})
        return JSONResponse({"approvals": rows})

    async def approval(request: Request) -> Response:
        found = service.ledger.get_approval(request.path_params["id"])
        if found is None:
            return _error(404, "no such approval request")
        return JSONResponse(
            {
                **found.to_dict(),
                "verdict": {**verdict_of(found).to_wire(0), "hint": verdict_of(found).hint},
            }
        )

    async def decide(request: Request) -> Response:
        body = await _json(request)
        return _decide(request.path_params["id"], body, default_by="dashboard")

    def _decide(id: str, body: Any, default_by: str) -> Response:
        if not isinstance(body, dict):
            return _error(400, "expected {'decision': 'approve'|'deny', 'comment': ...}")
        decision = body.get("decision")
        comment = body.get("comment") or None
        by = str(body.get("by") or default_by)
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
            decided = service.approvals.answer(id, answer)
        except KeyError:
            return _error(404, "no such approval request")
        return JSONResponse({**decided.to_dict(), "votes": sorted(service.approvals.votes(id))})

    async def signed_answer(request: Request) -> Response:
        if service.verifier is None:
            return _error(404, "webhook answers are off (no webhook secret)")
        body = await request.body()
        try:
            service.verifier.verify(
                request.headers.get(TIMESTAMP_HEADER), request.headers.get(SIGNATURE_HEADER), body
            )
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
        return _decide(id, data, default_by="webhook")

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
        Route("/v1/sessions/{id}", api(session)),
        Route("/v1/sessions/{id}/stop", api(stop), methods=["POST"]),
        Route("/v1/sessions/{id}/feedback", api(feedback), methods=["POST"]),
        Route("/v1/approvals", api(approvals)),
        Route("/v1/approvals/{id}", api(approval)),
        Route("/v1/approvals/{id}", api(decide), methods=["POST"]),
        Route("/v1/approvals/{id}/answer", api(signed_answer, auth=False), methods=["POST"]),
        Route("/v1/events", api(events)),
        *view_routes(service, api),  # the dashboard's session page and decided approvals
    ]
    return Starlette(routes=routes, lifespan=lifespan)
