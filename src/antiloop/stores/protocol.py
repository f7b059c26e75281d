"""The ``Store`` protocol, in a module of its own (re-exported by ``antiloop.stores``).

``antiloop.stores`` opens a ``SplitStore`` and ``antiloop.stores.split`` wraps two stores: both
import the protocol from here, so neither imports the other for it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from antiloop.core.history import SessionState

__all__ = ["Store"]


@runtime_checkable
class Store(Protocol):
    """Keeps each session's state; ``transaction`` makes judging a step atomic."""

    @property
    def url(self) -> str:
        """Where the store keeps its data, as a URL (no password)."""
        ...

    def transaction(self, session: str) -> AbstractContextManager[SessionState]:
        """Lock one session, yield its state (new if unknown) and save it on a clean exit."""
        ...

    def peek(self, session: str) -> SessionState | None:
        """The session's state as last saved, without locking it; None when unknown."""
        ...

    def forget(self, session: str) -> None:
        """Drop a session's state."""
        ...

    def sessions(self) -> list[str]:
        """The ids of the sessions the store holds."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...
