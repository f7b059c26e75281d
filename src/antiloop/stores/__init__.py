"""Stores: where the guard keeps session state (and, with issue 4, audit and approvals).

A store is chosen by URL; built-ins are found the way a third party's are::

    "memory://"                 in this process only (the library's default)
    "sqlite:///path/to/db"      the default of the CLI, hooks and service
    "redis://host:6379/0"       a fleet of guards sharing sessions
    "postgresql://…"            audit and approvals for a fleet

Judging a step is one atomic read-modify-write of its session's state: ``transaction()``.
"""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from antiloop.errors import ConfigError
from antiloop.history import SessionState

#: Built-in stores by URL scheme, as ``"module:attr"``.
BUILTIN: dict[str, str] = {
    "memory": "antiloop.stores.memory:MemoryStore",
}


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


def open_store(url: str) -> Store:
    """Open the store a URL names; an unknown scheme is a ConfigError naming it."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    target = BUILTIN.get(scheme) or BUILTIN.get(scheme.split("+", 1)[0])
    if target is None:
        raise ConfigError(
            f"unknown store URL {url!r}: use one of {', '.join(f'{s}://' for s in BUILTIN)}"
        )
    module, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    store: Store = factory.from_url(url)
    return store
