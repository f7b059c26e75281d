"""What the routes share: the guard, the approvals, the live events and the recent verdicts.

The routes (``antiloop.server.routes``) read the ``Service``; it knows no route. The service is
stateless over the store: several replicas can share one store. Live events go to the
dashboards connected to this replica. Store calls run off the event loop with a deadline, and
request bodies and heads are bounded (``antiloop.server.limits``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from typing import Any

from starlette.requests import Request

from antiloop.approval import (
    ApprovalPolicy,
    ApprovalRequest,
    Approvals,
    ApprovalStatus,
    Call,
    Channel,
    Gate,
    Verifier,
)
from antiloop.approval.approvals import feedback_verdict
from antiloop.budgets import Budgets
from antiloop.config import GuardConfig
from antiloop.core.errors import BadStep, StoreError
from antiloop.core.redact import (
    _weak_key,
    is_sensitive_key,
    redact_name,
    redact_text,
    redact_value,
)
from antiloop.core.step import Step, step_from_dict, valid_unicode
from antiloop.core.verdict import Verdict, invalid_wire
from antiloop.guard import Guard
from antiloop.outage import OutageConfig
from antiloop.outage.retry import paused_replay
from antiloop.server.groups import StepGroups
from antiloop.server.limits import BadRequest, Limits, StoreCalls
from antiloop.stores import Store
from antiloop.stores.split import batch_of

log = logging.getLogger("antiloop")

DEFAULT_IDENTITY = "dashboard"
"""The identity of the service token's holder."""
RECENT = 50
RECENT_SESSIONS = 1000  # sessions whose recent verdicts are kept; the least recent go first


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
        identity_header: the header a trusted reverse proxy names the signed-in person in
            (``X-Forwarded-User``); off (None) by default. A request from one of
            ``trusted_proxies`` that carries it needs no token: its holder is that person.
        trusted_proxies: the addresses the identity header is believed from.
        outage: how a failing store is ridden out and journaled (``antiloop.outage``).
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
        identity_header: str | None = None,
        trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1"),
        outage: OutageConfig | None = None,
    ) -> None:
        if not token:
            raise ValueError("the service needs a token")
        self.token = token
        self._token = f"Bearer {token}".encode()
        self._identities = [(f"Bearer {t}".encode(), name) for name, t in (tokens or {}).items()]
        if any(not name.strip() or len(t) < 8 for name, t in (tokens or {}).items()):
            raise ValueError("each named token needs a name and at least 8 characters")
        self.guard = Guard(
            config=config or GuardConfig(embedder="ngram"),
            store=store,
            budgets=budgets,
            outage=outage,
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
        self.identity_header = identity_header.lower() if identity_header else None
        self.trusted_proxies = frozenset(trusted_proxies)
        self.call = StoreCalls(self.limits)
        self.groups = StepGroups(self)  # POST /v1/steps: requests judged together

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
            raise BadRequest(f"unknown agent {dialect!r} (use {', '.join(DIALECTS)})")
        try:
            event = normalize(dialect, parse_payload(body))
        except BadPayload as exc:
            raise BadRequest(str(exc)) from None
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
        """Who the request's token belongs to (``dashboard`` for the service token), or None.

        With an ``identity_header``, the person a trusted proxy names in it comes first.
        """
        if self.identity_header is not None:
            person = self.proxied(request)
            if person is not None:
                return person
        return self.identity_of(request.headers.get("authorization", "").encode())

    def identity_of(self, given: bytes) -> str | None:
        """Who an ``Authorization`` header's token belongs to, or None."""
        found = DEFAULT_IDENTITY if hmac.compare_digest(given, self._token) else None
        for expected, name in self._identities:  # every one compared: no timing tells which
            if hmac.compare_digest(given, expected) and found is None:
                found = name
        return found

    def proxied(self, request: Request) -> str | None:
        """The person named in the identity header by a trusted proxy, or None."""
        if self.identity_header is None:
            return None
        client = request.client
        if client is None or client.host not in self.trusted_proxies:
            return None
        name = request.headers.get(self.identity_header, "").strip()
        return name if name and len(name) <= 200 and name.isprintable() else None

    def _approval_event(self, event: str, request: ApprovalRequest) -> None:
        self.hub.publish("approval", {"event": event, "request": request.to_dict()})

    # -- calls and steps ---------------------------------------------------------------------

    def gate(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        session: str,
        agent: str = "agent",
        paths: tuple[str, ...] = (),
        cwd: str | None = None,
    ) -> Gate:
        """Before a call (``/v1/check``): stop request, guard, approval policy, feedback.

        The guard judges, the approvals rule (without waiting: a request is left pending for
        the caller to come back to), and the guard applies the ruling.
        """
        tool, args, session, agent, paths, cwd = valid_unicode(
            (tool, args, session, agent, paths, cwd)
        )
        tool, session, agent = redact_name(tool), redact_name(session), redact_name(agent)
        verdict = self.guard.check(tool, args, session=session, agent=agent, paths=paths, cwd=cwd)
        call = Call(tool, dict(args), session, agent, paths, cwd)
        return self.guard.apply(self.approvals.gate(call, verdict))

    def judge(
        self, raw: Any, index: int, seen: dict[str, tuple[str | None, list[str]]]
    ) -> dict[str, Any]:
        """The wire verdict for one step event (or Step): stop request, guard, feedback."""
        try:
            step = raw if isinstance(raw, Step) else step_from_dict(raw)
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
            verdict = self.approvals.stopped(sid)
            assert verdict is not None  # noqa: S101 - a stop was requested just above
            self.guard.end(sid, verdict)
        else:
            verdict = self.guard.record(step)
        if feedback:
            verdict = feedback_verdict(verdict, feedback)
            seen[sid] = (by, [])
        wire = verdict.to_wire(index)
        wire["hint"] = verdict.hint
        wire["session"] = sid
        wire["escalate_to"] = verdict.escalate_to
        wire = _redacted(wire)
        self._remember(step, wire)
        return wire

    def judge_all(self, batch: list[Any], indexes: list[int] | None = None) -> list[dict[str, Any]]:
        """The wire verdicts of a batch, judged in order (one intervention read per session).

        A store with ``batch()`` judges the batch as one: SQLite in one transaction (one
        commit); Redis (and Redis + PostgreSQL) with one read of all its sessions and one save
        of them all with every record (``antiloop.stores.redis.RedisStore.batch``).
        ``indexes``: each step's index in its own request (a group of requests,
        ``antiloop.server.groups``); by default its place in ``batch``.
        """
        at = indexes or range(len(batch))
        seen: dict[str, tuple[str | None, list[str]]] = {}
        store = self.store
        # An SQL store (SQLite) reads every session's interventions in one statement pair,
        # inside the batch's transaction: a group of one step is judged as a batch too.
        many = getattr(store, "interventions_of", None)
        if (len(batch) < 2 and many is None) or not callable(getattr(store, "batch", None)):
            return [self.judge(raw, i, seen) for i, raw in zip(at, batch, strict=True)]
        steps: list[Any] = []
        for raw in batch:
            try:
                steps.append(step_from_dict(raw))
            except BadStep:
                steps.append(raw)  # judge() answers it as invalid
        sessions = [s.session for s in steps if isinstance(s, Step)]
        guard = self.guard
        guard.rider.catch_up()  # steps journaled in an outage go in before this batch

        def attempt() -> list[dict[str, Any]]:
            with paused_replay(), batch_of(store, sessions):
                if many is not None and sessions:
                    seen.update(_interventions(many, sessions))
                return [self.judge(step, i, seen) for i, step in zip(at, steps, strict=True)]

        try:
            return guard.ride_out(attempt)
        except StoreError as exc:  # the commit failed: no step of the batch was kept
            return [
                self.store_failed(raw, i, exc, step)
                for i, raw, step in zip(at, batch, steps, strict=True)
            ]

    def store_failed(
        self, raw: Any, index: int, exc: Exception, step: Step | None = None
    ) -> dict[str, Any]:
        """The wire verdict ``on_store_error`` gives a step the store did not judge in time.

        With ``step`` (the store failed, nothing of it was kept) the step is journaled; without
        (the request's deadline passed) the worker still judging it records or journals it.
        """
        sid = raw.get("session") if isinstance(raw, dict) else None
        sid = sid if isinstance(sid, str) else "default"
        error = exc if isinstance(exc, StoreError) else StoreError(str(exc))
        if isinstance(step, Step):
            verdict = self.guard.unrecorded(step, error)
        else:
            verdict = self.guard._store_failed(error, sid)
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

    def session_detail(self, sid: str) -> dict[str, Any] | None:
        """One session's state, recent verdicts, audit records and approvals; None if unseen."""
        state = self.store.peek(sid)
        audit = getattr(self.store, "audit_records", None)
        records = _jsonable(list(audit(session=sid))[-200:]) if callable(audit) else None
        if state is None and not self.recent.get(sid) and not records:
            return None
        ended = getattr(state, "ended", None)
        found = self.ledger.list_approvals(session=sid)
        return dict(
            redact_value(
                {
                    "session": sid,
                    "steps": getattr(state, "steps", 0),
                    "ended": _jsonable(ended) if ended is not None else None,
                    "stop_requested": self.ledger.stop_requested(sid),
                    "recent": list(self.recent.get(sid, ()) or ()),
                    "audit": records,
                    "approvals": [self.fresh_approval(r).to_dict() for r in found],
                }
            )
        )

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


def _interventions(
    many: Callable[[list[str]], dict[str, tuple[str | None, list[str]]]], sessions: list[str]
) -> dict[str, tuple[str | None, list[str]]]:
    """Each session's stop request and feedback (taken); none read when the store fails."""
    try:
        return many(sessions)
    except StoreError as exc:  # each step's own read, then the guard's, meet it again
        log.error("antiloop: could not read stop requests and feedback: %s", exc)
        return {}


_PLAIN_KEYS: dict[str, bool] = {}
"""A verdict's keys, and whether ``redact_value`` treats the key as it treats any other."""


def _redacted(wire: dict[str, Any]) -> dict[str, Any]:
    """``redact_value(wire)`` for a flat verdict: each key's checks made once per process."""
    out: dict[str, Any] = {}
    for key, value in wire.items():
        plain = _PLAIN_KEYS.get(key)
        if plain is None:
            plain = not is_sensitive_key(key) and not _weak_key(key)
            if len(_PLAIN_KEYS) < 64:
                _PLAIN_KEYS[key] = plain
        if isinstance(value, str) and plain:
            out[key] = redact_text(value) if value else value
        elif value is None or (plain and isinstance(value, int | float)):
            out[key] = value
        else:  # a secret-looking key, a list (evidence): as redact_value does it
            out[key] = redact_value({key: value})[key]
    return out


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
