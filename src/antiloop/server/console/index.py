"""Each session as the audit log records it: its agent, steps, usage and end, read incrementally.

The index reads the records appended since it last looked (``audit_records(since_seq=...)``),
so a new replica or a restarted server rebuilds it from the store and every writer of the
store (hooks, the library, the demo, other replicas) is in it. A session's *end* is the first
``stop`` verdict after its last ``reset`` (a person who speaks to it opens it again): a goal
reached ends it ``done``, any other stop ``stopped``. At most ``MAX_SESSIONS`` sessions are
kept, the least recently active forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from antiloop.stores.auditlog import AuditRecord

MAX_SESSIONS = 100_000
MAX_STOPS = 100_000
CHUNK = 1000  # records applied at a time: readers of the summaries wait for no more
STATES = ("running", "waiting", "stopping", "stopped", "done", "ended")
"""``waiting``: a pending approval; ``stopping``: a stop was asked; ``ended``: the agent's own
session end (a hook's ``end`` event) without a stop."""


@dataclass
class Summary:
    """One session as its audit records show it."""

    session: str
    agent: str | None = None
    first_at: float = 0.0
    last_at: float = 0.0
    steps: int = 0
    checks: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    last_tool: str | None = None
    last_action: str | None = None
    detectors: set[str] = field(default_factory=set)
    end: dict[str, Any] | None = None
    last: dict[str, Any] | None = None  # the latest verdict that was not continue
    stop: dict[str, Any] | None = None
    closed: float | None = None

    def state(self, waiting: bool) -> str:
        """One of ``STATES``."""
        if self.end is not None:
            return "done" if self.end.get("detector") == "goal" else "stopped"
        if waiting:
            return "waiting"
        if self.stop is not None:
            return "stopping"
        return "ended" if self.closed is not None else "running"

    def row(self, pending: int) -> dict[str, Any]:
        """The wire form the sessions list shows."""
        return {
            "session": self.session,
            "agent": self.agent,
            "state": self.state(pending > 0),
            "first_at": self.first_at,
            "last_at": self.last_at,
            "steps": self.steps,
            "checks": self.checks,
            "usage": usage(self.tokens_in, self.tokens_out, self.cost_usd),
            "last_tool": self.last_tool,
            "last_action": self.last_action,
            "detectors": sorted(self.detectors),
            "end": self.end,
            "last": self.last,
            "stop_requested": self.stop,
            "pending_approvals": pending,
        }


def usage(tokens_in: int, tokens_out: int, cost_usd: float) -> dict[str, Any]:
    """Model tokens in and out and dollars, as the console's answers carry them.

    The keys name no "token": the redactor hides the value of a key that does.
    """
    return {"in": tokens_in, "out": tokens_out, "usd": round(cost_usd, 6)}


def usage_of(record: AuditRecord) -> tuple[int, int, float]:
    """The model tokens (in, out) and dollars a record's step reported (0 where it did not)."""
    found = (record.detail or {}).get("usage")
    if not isinstance(found, dict):
        return 0, 0, 0.0
    tokens = [found.get(k) for k in ("in", "out")]
    counts = [n if isinstance(n, int) and not isinstance(n, bool) else 0 for n in tokens]
    cost = found.get("usd")
    dollars = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0
    return counts[0], counts[1], dollars if dollars == dollars else 0.0


def verdict_of(record: AuditRecord) -> dict[str, Any]:
    """The verdict a record holds, as the console shows it."""
    return {
        "action": record.action,
        "detector": record.detector,
        "outcome": record.outcome,
        "reason": record.reason,
        "fingerprint": record.fingerprint,
        "evidence": list(record.evidence),
        "index": record.index,
        "tool": record.tool,
        "at": record.at,
    }


class SessionIndex:
    """Session summaries kept up to date from a store's audit log (thread-safe)."""

    def __init__(self, store: Any, max_sessions: int = MAX_SESSIONS) -> None:
        self.store = store
        self.max_sessions = max_sessions
        self.seq = 0
        self.sessions: OrderedDict[str, Summary] = OrderedDict()
        self.stops: deque[tuple[float, str | None, str | None]] = deque(maxlen=MAX_STOPS)
        self.listeners: list[Callable[[AuditRecord], None]] = []  # told of every record read
        self._lock = threading.Lock()  # the summaries
        self._reading = threading.Lock()  # one reader of the log at a time

    @property
    def audited(self) -> bool:
        """True when the store keeps an audit log."""
        return callable(getattr(self.store, "audit_records", None))

    def refresh(self) -> bool:
        """Read the records appended since the last call; False while another call reads them.

        One call reads at a time; the others answer at once from what is read so far (a first
        read after a start takes a while on a long log: they do not queue behind it).
        """
        if not self.audited:
            return True
        if not self._reading.acquire(blocking=False):
            return False
        try:
            chunk: list[AuditRecord] = []
            for record in self.store.audit_records(since_seq=self.seq):
                chunk.append(record)
                if len(chunk) >= CHUNK:
                    self._apply(chunk)
                    chunk = []
            self._apply(chunk)
        finally:
            self._reading.release()
        return True

    @property
    def reading(self) -> bool:
        """True while a call reads the log (the summaries may be behind it)."""
        return self._reading.locked()

    def _apply(self, records: list[AuditRecord]) -> None:
        with self._lock:
            for record in records:
                self.seq = max(self.seq, record.seq)
                self._add(record)
                for listener in self.listeners:
                    listener(record)

    def snapshot(self) -> list[Summary]:
        """The summaries, the most recently active first."""
        with self._lock:
            return sorted(self.sessions.values(), key=lambda s: s.last_at, reverse=True)

    def get(self, session: str) -> Summary | None:
        """One session's summary, or None."""
        with self._lock:
            return self.sessions.get(session)

    def stop_times(self) -> list[tuple[float, str | None, str | None]]:
        """When sessions stopped (the last ``MAX_STOPS``): (at, detector, fingerprint)."""
        with self._lock:
            return list(self.stops)

    def _add(self, record: AuditRecord) -> None:
        if record.kind == "prune":
            return
        sid = record.session
        found = self.sessions.get(sid)
        if found is None:
            found = self.sessions[sid] = Summary(sid, first_at=record.at)
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
        else:
            self.sessions.move_to_end(sid)
        found.last_at = max(found.last_at, record.at)
        if found.agent is None and record.agent:
            found.agent = record.agent
        kind = record.kind
        if kind in ("step", "check"):
            self._step(found, record)
        elif kind == "session" and record.action == "stop":  # a person (or kill) ended it
            self._ended(found, record)
        elif kind == "reset":
            found.end = found.stop = None
            found.closed = None
        elif kind == "session":
            event = (record.detail or {}).get("event")
            if event == "end":
                found.closed = record.at
            elif event == "stop":
                detail = record.detail
                found.stop = {
                    "by": detail.get("decided_by"),
                    "reason": detail.get("reason") or "",
                    "at": record.at,
                }

    def _step(self, found: Summary, record: AuditRecord) -> None:
        if record.kind == "step":
            found.steps += 1
            tokens_in, tokens_out, cost = usage_of(record)
            found.tokens_in += tokens_in
            found.tokens_out += tokens_out
            found.cost_usd += cost
        else:
            found.checks += 1
        found.last_tool = record.tool
        found.last_action = record.action
        if record.action not in (None, "continue"):
            found.last = verdict_of(record)
            if record.detector:
                found.detectors.add(record.detector)
        if record.action == "stop":
            self._ended(found, record)

    def _ended(self, found: Summary, record: AuditRecord) -> None:
        if found.end is None and record.detector != "terminated":
            found.end = verdict_of(record)
            found.end["state"] = "done" if record.detector == "goal" else "stopped"
            if record.detector:
                found.detectors.add(record.detector)
            self.stops.append((record.at, record.detector, record.fingerprint))
