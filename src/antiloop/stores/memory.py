"""The in-process store: live state objects behind one lock; nothing is copied or encoded."""

from __future__ import annotations

import threading
from types import TracebackType

from antiloop.history import SessionState


class _Transaction:
    __slots__ = ("_lock", "_state")

    def __init__(self, lock: threading.RLock, state: SessionState) -> None:
        self._lock = lock
        self._state = state

    def __enter__(self) -> SessionState:
        return self._state

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()


class MemoryStore:
    """Session state in this process only: fast, and gone when the process ends.

    Example:
        >>> store = MemoryStore()
        >>> with store.transaction("s1") as state:
        ...     state.steps += 1
        >>> store.peek("s1").steps
        1
    """

    def __init__(self) -> None:
        self._states: dict[str, SessionState] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return "MemoryStore()"

    @classmethod
    def from_url(cls, url: str) -> MemoryStore:
        """``memory://`` (anything after the scheme is ignored)."""
        return cls()

    @property
    def url(self) -> str:
        """Always ``memory://``."""
        return "memory://"

    def transaction(self, session: str) -> _Transaction:
        """Lock the store and yield the session's live state."""
        self._lock.acquire()
        state = self._states.get(session)
        if state is None:
            state = self._states[session] = SessionState()
        return _Transaction(self._lock, state)

    def peek(self, session: str) -> SessionState | None:
        """The live state, or None."""
        return self._states.get(session)

    def forget(self, session: str) -> None:
        """Drop the session."""
        with self._lock:
            self._states.pop(session, None)

    def sessions(self) -> list[str]:
        """Every session id held."""
        with self._lock:
            return list(self._states)

    def close(self) -> None:
        """Nothing to release."""
