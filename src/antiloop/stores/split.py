"""State in one store, records in another: hot state in Redis, the records in PostgreSQL.

The system of record (audit log, approvals, interventions) belongs in a database.

``SplitStore(state, records)`` delegates the session methods (``transaction``, ``peek``,
``sessions``, the result cache) to ``state`` and the audit log, approvals, feedback and stop
requests to ``records``. Open one with ``open_store(state_url, records=records_url)``,
``Guard(store=…, records=…)``, ``antiloop serve --store … --records …`` or, for hooks,
``ANTILOOP_STORE`` and ``ANTILOOP_RECORDS``.

Acknowledged means recorded in both. Judging a step (``judge``, which ``Guard.record`` uses):

1. lock the session in ``state`` (``transaction()``: a token with a TTL) and read its state;
2. judge the step on it;
3. in one ``records`` transaction, append the step's audit record and note its step id in the
   session's ledger (a row of ``records``' sessions table holding the last step ids recorded),
   unless the ledger already holds the id: then nothing is written (a retry);
4. save the state and unlock (compare-and-set on the lock token).

The verdict is returned (the step acknowledged) only after 4. So:

- an acknowledged step has its state saved and its audit record kept;
- a failure at 1 or 3 saves nothing anywhere; a failure at 4 leaves the record without the
  state, and the step is not acknowledged: a retry with the same step id (``Step.id``) is
  judged on the same state, finds its id in the ledger and writes no second record, then
  saves the state. (A step sent without an id that is retried is a new step; the record of
  the failed attempt stays, marked by no state.)
- either store failing is a ``StoreError``, which the guard answers by ``on_store_error``
  (``allow``: go on unguarded; ``block``: refuse the call).

Events kept inside ``transaction()`` (``append_audit`` there) are written to ``records`` in
one transaction before the state is saved, in the same order. Steps of one session are
serialised by the session lock, so two replicas never judge a session's steps on the same
state.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from antiloop.core.errors import ConfigError
from antiloop.core.history import SessionState

if TYPE_CHECKING:
    from antiloop.audit import AuditEvent
    from antiloop.stores.protocol import Store

__all__ = ["SplitStore"]

V = TypeVar("V")

LEDGER_KEPT = 256
"""Step ids the ledger remembers per session (more than the guard's own window)."""

_RECORDS = ("append_audit", "audit_records", "put_approval", "decide_approval", "push_feedback")


class SplitStore:
    """Session state in ``state``, audit log, approvals and interventions in ``records``.

    Args:
        state: where sessions live (``transaction``, ``peek``, ``sessions``, the cache).
        records: where the audit log, approvals, feedback and stop requests live; it keeps
            a ledger of recorded step ids per session in its own sessions table.
    """

    def __init__(self, state: Store, records: Store) -> None:
        missing = [m for m in _RECORDS if not callable(getattr(records, m, None))]
        if missing:
            raise ConfigError(
                f"the records store {records.url} keeps no {', '.join(missing)}: use "
                "postgresql:// (or another built-in store)"
            )
        self.state = state
        self.records = records
        self._lock = threading.RLock()
        self._pending: list[AuditEvent] | None = None
        self._queue: list[tuple[str, Sequence[str], list[AuditEvent]]] | None = None  # batch()
        self._said: dict[str, tuple[str | None, list[str]]] | None = None  # batch()

    def __repr__(self) -> str:
        return f"SplitStore({self.state!r}, records={self.records!r})"

    @property
    def url(self) -> str:
        """Both URLs, without passwords: ``<state> records=<records>``."""
        return f"{self.state.url} records={self.records.url}"

    @property
    def timeout(self) -> float:
        """The records store's call deadline in seconds (``inf`` when it has none)."""
        return float(getattr(self.records, "timeout", math.inf))

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        if hasattr(self.records, "timeout"):
            self.records.timeout = seconds

    # -- sessions: the state store ---------------------------------------------------------

    @contextmanager
    def transaction(self, session: str) -> Iterator[SessionState]:
        """Lock the session in ``state``, yield its state; on a clean exit, record, then save."""
        with self._lock, self.state.transaction(session) as state:
            self._pending = []
            try:
                yield state
                events = self._pending
            finally:
                self._pending = None
            if events:
                self._keep([(session, (), events)])

    def judge(
        self, session: str, fn: Callable[[SessionState], tuple[V, Sequence[AuditEvent]]]
    ) -> V:
        """Judge a step under the session's lock: its record (once per step id), then its state."""
        with self._lock, self.state.transaction(session) as state:
            before = set(state.seen)
            result, events = fn(state)
            if events:
                self._keep([(session, [i for i in state.seen if i not in before], list(events))])
        return result

    @contextmanager
    def batch(self, sessions: Sequence[str] = ()) -> Iterator[None]:
        """Judge many steps together, the records of them all kept before any state.

        The state store's ``batch`` (Redis: one read and one save of every session), the
        sessions' stop requests and feedback read in one ``records`` transaction, and every
        record written in one more (one multi-row INSERT, one commit).
        """
        names = list(dict.fromkeys(sessions))
        with self._lock, batch_of(self.state, names):
            many = getattr(self.records, "interventions_of", None)
            self._said = many(names) if callable(many) and names else {}
            self._queue = []
            try:
                yield
                queue = self._queue
            finally:
                self._queue = self._said = None
            if queue:
                self._keep(queue)

    def interventions(self, session: str) -> tuple[str | None, list[str]]:
        """The session's stop request and its feedback (taken); in ``batch()``, as read."""
        with self._lock:
            if self._said and session in self._said:
                return self._said.pop(session)
        many = getattr(self.records, "interventions_of", None)
        if callable(many):
            found: tuple[str | None, list[str]] = many([session])[session]
            return found
        return self.records.stop_requested(session), self.records.pop_feedback(session)  # type: ignore[attr-defined]

    def _keep(self, items: list[tuple[str, Sequence[str], list[AuditEvent]]]) -> None:
        """Append the steps' events and note their ids in the ledger, in one transaction.

        In ``batch()``: at its end, with the whole batch's. A step whose ids are all in the
        ledger already (a retry) writes nothing.
        """
        if self._queue is not None:
            self._queue += items
            return
        many = getattr(self.records, "keep_steps", None)
        if callable(many):
            many(items, LEDGER_KEPT)
            return
        records = self.records
        for session, ids, events in items:
            with records.transaction(session) as ledger:
                if ids and all(i in ledger.seen for i in ids):
                    continue
                for event in events:
                    records.append_audit(event)  # type: ignore[attr-defined]
                for i in ids:
                    ledger.seen[i] = None
                while len(ledger.seen) > LEDGER_KEPT:
                    del ledger.seen[next(iter(ledger.seen))]

    def peek(self, session: str) -> SessionState | None:
        """The saved state, or None."""
        return self.state.peek(session)

    def forget(self, session: str) -> None:
        """Drop the session's state, its ledger, feedback and stop flag (records stay)."""
        self.state.forget(session)
        self.records.forget(session)

    def sessions(self) -> list[str]:
        """The state store's session ids."""
        return self.state.sessions()

    def sessions_page(self, offset: int, limit: int) -> list[str]:
        """``limit`` session ids from ``offset`` on."""
        page = getattr(self.state, "sessions_page", None)
        if page is not None:
            found: list[str] = page(offset, limit)
            return found
        return self.state.sessions()[offset : offset + limit]

    def close(self) -> None:
        """Close both stores (the records store even when closing the state store fails)."""
        try:
            self.state.close()
        finally:
            self.records.close()

    # -- audit: the records store ---------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> None:
        """Keep an event in ``records``; inside ``transaction()`` it is written before the save."""
        with self._lock:
            if self._pending is not None:
                self._pending.append(event)
                return
        self.records.append_audit(event)  # type: ignore[attr-defined]

    def prune_audit(self, before: float, now: float | None = None) -> int:
        """Prune the records store's log, when it can."""
        pruning = getattr(self.records, "prune_audit", None)
        if pruning is None:
            raise ConfigError(f"the store {self.records.url} cannot prune its log yet")
        done: int = pruning(before, now)
        return done


def batch_of(store: Any, sessions: Sequence[str]) -> AbstractContextManager[Any]:
    """``store.batch(sessions)`` (Redis, split), ``store.batch()`` (SQLite), or nothing."""
    together = getattr(store, "batch", None)
    if not callable(together):
        return nullcontext()
    method = getattr(together, "__func__", together)
    takes = _TAKES_SESSIONS.get(method)
    if takes is None:  # read once per store class: a signature costs more than a batch's step
        takes = _TAKES_SESSIONS[method] = "sessions" in inspect.signature(together).parameters
    if takes:
        return together(sessions)  # type: ignore[no-any-return]
    return together()  # type: ignore[no-any-return]


_TAKES_SESSIONS: dict[Any, bool] = {}


def _delegate(to: str, name: str) -> Callable[..., Any]:
    def call(self: SplitStore, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(self, to), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{to}.{name}``."
    return call


for _name in ("cache_get", "cache_put"):
    setattr(SplitStore, _name, _delegate("state", _name))
for _name in (
    "audit_records",
    "session_summaries",
    "verify_audit",
    "put_approval",
    "get_approval",
    "decide_approval",
    "list_approvals",
    "push_feedback",
    "pop_feedback",
    "request_stop",
    "stop_requested",
    "clear_stop",
):
    setattr(SplitStore, _name, _delegate("records", _name))
