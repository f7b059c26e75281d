"""The in-process store: live state objects behind one lock; nothing is copied or encoded.

It has every optional capability (audit log, approvals, cache, interventions), in memory.
Unlike the other stores it hands out the live state: a transaction that raises keeps the
changes made before the raise (audit events appended in it are dropped, as elsewhere).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from antiloop.core.history import SessionState
from antiloop.stores._common import Records, approval_from_json, approval_to_json

if TYPE_CHECKING:
    from antiloop.approval.request import ApprovalRequest
    from antiloop.audit import AuditEvent
    from antiloop.stores.auditlog import AuditRecord, AuditRow, Problem


class _Transaction:
    """The store's one transaction context: set to a session's state while the lock is held."""

    __slots__ = ("_state", "_store")

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._state: SessionState | None = None  # let go at the end: a forgotten session goes

    def __enter__(self) -> SessionState:
        return self._state  # type: ignore[return-value]  # set by transaction()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._state = None
        store = self._store
        pending = store._pending
        store._pending = None
        try:
            if pending and kind is None:
                for event in pending:
                    store._append(event)
        finally:
            store._lock.release()


class MemoryStore(Records):
    """Session state in this process only: fast, and gone when the process ends.

    Args:
        audit_cap: bytes of UTF-8 kept of each record's args, output and error.
        clock: seconds since the epoch, for cache expiry.

    Example:
        >>> store = MemoryStore()
        >>> with store.transaction("s1") as state:
        ...     state.steps += 1
        >>> store.peek("s1").steps
        1
    """

    def __init__(self, *, audit_cap: int = 4096, clock: Callable[[], float] = time.time) -> None:
        self._states: dict[str, SessionState] = {}
        # Of the sessions read by load(): bumped by save() and by transaction() (which hands
        # out the live state), so that a save at a version loaded before is a conflict.
        self._versions: dict[str, int] = {}
        self._lock = threading.RLock()
        self._pending: list[AuditEvent] | None = None
        self.audit_cap = audit_cap
        self.clock = clock
        self._rows: list[AuditRow] = []
        self._head: tuple[int, str] | None = None
        self._base: tuple[int, str] | None = None  # the last record a prune removed
        self._approvals: dict[str, str] = {}
        self._cache: dict[str, tuple[float, str]] = {}
        self._feedback: dict[str, list[str]] = {}
        self._stops: dict[str, str] = {}
        # one context for every transaction, its state set under the lock (a nested one in the
        # same thread has its state already): no object made per step
        self._transaction = _Transaction(self)

    def __repr__(self) -> str:
        return "MemoryStore()"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryStore:
        """``memory://`` (anything after the scheme is ignored)."""
        return cls(**options)

    @property
    def url(self) -> str:
        """Always ``memory://``."""
        return "memory://"

    def transaction(self, session: str) -> _Transaction:
        """Lock the store and yield the session's live state."""
        self._lock.acquire()
        if session in self._versions:  # read by load(): the live state may change now
            self._versions[session] += 1
        state = self._states.get(session)
        if state is None:
            state = self._states[session] = SessionState()
        self._pending = []
        transaction = self._transaction
        transaction._state = state
        return transaction

    def load(self, session: str) -> tuple[SessionState, object]:
        """A copy of the state (the live one stays the store's) and its version, or None."""
        with self._lock:
            state = self._states.get(session)
            if state is None:
                return SessionState(), None
            return copy.deepcopy(state), self._versions.setdefault(session, 0)

    def save(
        self,
        session: str,
        state: SessionState,
        version: object,
        events: Sequence[AuditEvent] = (),
    ) -> tuple[SessionState, object] | None:
        """Keep ``state`` (it becomes the live one) and ``events`` if still at ``version``."""
        with self._lock:
            known = session in self._states
            current = self._versions.get(session, 0) if known else None
            if current != version:
                return self.load(session)
            self._states[session] = state
            self._versions[session] = (current or 0) + 1
            for event in events:
                self._append(event)
            return None

    def peek(self, session: str) -> SessionState | None:
        """The live state, or None."""
        return self._states.get(session)

    def forget(self, session: str) -> None:
        """Drop the session."""
        with self._lock:
            self._states.pop(session, None)
            self._versions.pop(session, None)
            self._feedback.pop(session, None)
            self._stops.pop(session, None)

    def sessions(self) -> list[str]:
        """Every session id held."""
        with self._lock:
            return list(self._states)

    def close(self) -> None:
        """Nothing to release."""

    # -- audit ----------------------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> None:
        """Keep an event; inside a transaction, when the transaction ends cleanly."""
        with self._lock:
            if self._pending is not None:
                self._pending.append(event)
            else:
                self._append(event)

    def _append(self, event: AuditEvent) -> None:
        from antiloop.stores.auditlog import GENESIS, build_record

        seq, prev = self._head or (0, GENESIS)
        row = build_record(event, seq + 1, prev, self.audit_cap)
        self._rows.append(row)
        self._head = (row.seq, row.hash)

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq``, of one session or all."""
        from antiloop.stores.auditlog import parse_rows

        with self._lock:
            rows = [r for r in self._rows if r.seq > since_seq]
        for record in parse_rows(rows):
            if session is None or record.session == session:
                yield record

    def verify_audit(self) -> list[Problem]:
        """Check the chain."""
        from antiloop.stores.auditlog import verify_chain

        with self._lock:
            rows = sorted(self._rows, key=lambda r: r.seq)
            return verify_chain(rows, self._head, self._base)

    def prune_audit(self, before: float, now: float | None = None) -> int:
        """Remove the records older than ``before`` from the start of the chain (see SQLite)."""
        from antiloop.stores.auditlog import prune_event

        with self._lock:
            rows = sorted(self._rows, key=lambda r: r.seq)
            times = [json.loads(r.body)["at"] for r in rows]
            keep = next((i for i, at in enumerate(times) if at >= before), len(rows))
            if keep == 0:
                return 0
            last = rows[keep - 1]
            self._rows = rows[keep:]
            self._base = (last.seq, last.hash)
            at = self.clock() if now is None else now
            self._append(prune_event(last.seq, last.hash, keep, before, at))
            return keep

    # -- approvals ------------------------------------------------------------------------

    def put_approval(self, request: ApprovalRequest) -> None:
        """Keep a request."""
        with self._lock:
            self._approvals[request.id] = approval_to_json(request)

    def _approval_body(self, id: str) -> str | None:
        return self._approvals.get(id)

    def _approvals_of(self, status: str | None, session: str | None) -> list[str | bytes]:
        with self._lock:
            return list(self._approvals.values())

    def _swap_approval(
        self, id: str, change: Callable[[ApprovalRequest], ApprovalRequest | None]
    ) -> ApprovalRequest:
        with self._lock:
            text = self._approvals.get(id)
            if text is None:
                raise KeyError(id)
            current = approval_from_json(text)
            changed = change(current)
            if changed is None:
                return current
            self._approvals[id] = approval_to_json(changed)
            return changed

    # -- cache ----------------------------------------------------------------------------

    def cache_get(self, key: str) -> str | None:
        """The cached value, or None."""
        expires, value = self._cache.get(key, (0.0, None))
        if expires > self.clock():
            return value
        self._cache.pop(key, None)
        return None

    def cache_put(self, key: str, value: str, ttl_seconds: float) -> None:
        """Keep a value for ``ttl_seconds``."""
        with self._lock:
            self._cache[key] = (self.clock() + ttl_seconds, value)

    # -- people ---------------------------------------------------------------------------

    def push_feedback(self, session: str, text: str) -> None:
        """Queue a message for the session."""
        with self._lock:
            self._feedback.setdefault(session, []).append(text)

    def pop_feedback(self, session: str) -> list[str]:
        """Take every queued message."""
        with self._lock:
            return self._feedback.pop(session, [])

    def request_stop(self, session: str, by: str) -> None:
        """Ask the session to stop."""
        with self._lock:
            self._stops[session] = by

    def stop_requested(self, session: str) -> str | None:
        """Who asked the session to stop, or None."""
        return self._stops.get(session)

    def clear_stop(self, session: str) -> None:
        """Withdraw a stop request."""
        with self._lock:
            self._stops.pop(session, None)
