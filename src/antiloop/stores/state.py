"""The state contract: load, compare-and-set save, forget; and judging a step on top of it.

A state store keeps one ``SessionState`` per session under a *version*, an opaque token that
changes at every save (``None``: the session is unknown)::

    load(session) -> (state, version)          a new state and None when unknown
    save(session, state, version, events=())   kept, with the audit events, atomically, when
        -> None | (state, version)             the session is still at ``version``; else the
                                               current state and version (a conflict)
    forget(session)                            drop it
    sessions()                                 the ids held

``judge`` (below) is the one compare-and-set retry loop over it: ``fn`` judges the state,
``save`` keeps the result; on a conflict ``fn`` runs again on the state another writer saved.
Redis judges every step this way (one round trip when its store object saved the session
last); the stores that lock (SQLite, PostgreSQL, memory) judge in ``transaction()`` instead,
where no other writer can come between the read and the save, in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from antiloop.core.errors import StoreError
from antiloop.core.history import SessionState

if TYPE_CHECKING:
    from antiloop.audit import AuditEvent

__all__ = ["ATTEMPTS", "StateStore", "judge"]

V = TypeVar("V")

Loaded = tuple[SessionState, object]
"""A state and the version it was saved under."""

ATTEMPTS = 1000
"""Conflicts ``judge`` takes before it gives up (each one is another writer's saved step)."""


@runtime_checkable
class StateStore(Protocol):
    """Session states by version: the smallest contract a store of session state keeps."""

    def load(self, session: str) -> Loaded:
        """The session's state and version; a new state and None when the session is unknown."""
        ...

    def save(
        self,
        session: str,
        state: SessionState,
        version: object,
        events: Sequence[AuditEvent] = (),
    ) -> Loaded | None:
        """Keep ``state`` and ``events`` if the session is still at ``version``.

        Returns:
            None when kept; else (nothing kept) the state and version it now has.
        """
        ...

    def forget(self, session: str) -> None:
        """Drop a session's state."""
        ...

    def sessions(self) -> list[str]:
        """The ids of the sessions held."""
        ...


def judge(
    store: StateStore,
    session: str,
    fn: Callable[[SessionState], tuple[V, Sequence[AuditEvent]]],
    loaded: Loaded | None = None,
) -> V:
    """Run ``fn`` on the session's state and save what it made, by compare-and-set.

    ``fn`` changes the state it is given and returns its result and the audit events to keep;
    when another writer saved the session first, it runs again on the state that writer saved,
    so it must depend on nothing but the state (and what it was built with). ``loaded`` is a
    state and version the caller already holds (Redis: the ones it saved last).

    Raises:
        StoreError: the store failed, or ``ATTEMPTS`` conflicts in a row.
    """
    state, version = store.load(session) if loaded is None else loaded
    for _ in range(ATTEMPTS):
        result, events = fn(state)
        current = store.save(session, state, version, events)
        if current is None:
            return result
        state, version = current
    raise StoreError(f"session {session!r}: {ATTEMPTS} conflicting saves in a row")
