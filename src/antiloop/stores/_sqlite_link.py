"""One SQLite connection per database file and process, shared by every ``SQLiteStore`` on it.

Closing any descriptor of a file drops every POSIX lock the process holds on it, those of its
SQLite connections included ("How To Corrupt An SQLite Database File", section 2.2); another
process then takes itself for the last one and deletes the WAL under them. SQLite guards its
own descriptors against that, so antiloop never opens a database file outside SQLite, and the
stores of one process on one file (the hook daemon opens one per event, in a thread each)
share one connection: a ``Link``, found by the file's real path and the ``synchronous``
setting. Its lock makes the threads take turns; it also holds what belongs to the connection
rather than to a store: the data version read last, the audit head written at it, the states
saved at it, and whether a transaction is open.

A forked child never uses its parent's links (SQLite connections must not cross a fork), nor
closes them: right after the fork they are set aside, kept for the child's life.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from typing import Any

from antiloop.core.errors import StoreError
from antiloop.stores.codec import StateCache

__all__ = ["Link", "attach", "detach"]


class Link:
    """The connection of this process to one database file, and what belongs to it."""

    __slots__ = (
        "__weakref__",
        "batch",
        "busy_ms",
        "cursor",
        "db",
        "head",
        "head_pending",
        "in_tx",
        "key",
        "lock",
        "pid",
        "states",
        "users",
        "version",
    )

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.users = 0
        self.db: sqlite3.Connection | None = None
        self.cursor: Any = None
        self.busy_ms = -1
        self.in_tx = False
        self.batch = False  # a write transaction open for many steps (SQLiteStore.batch)
        self.forget()

    def forget(self) -> None:
        """Drop what was read at the connection's data versions (a new connection restarts them)."""
        # The data version read in the last transaction, and the audit head as written at it
        # (None: read it). head_pending: appended, not committed yet.
        self.version: int | None = None
        self.head: tuple[int, str] | None = None
        self.head_pending = False
        self.states = StateCache(4096)  # as many sessions as a Redis store keeps

    def disconnect(self) -> None:
        """Close the connection (the next use opens a new one)."""
        db, self.db, self.cursor = self.db, None, None
        self.busy_ms = -1
        self.in_tx = False
        self.forget()
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()


# A link lives as long as a store refers to it: one never closed goes with its last store.
_LINKS: weakref.WeakValueDictionary[tuple[str, str], Link] = weakref.WeakValueDictionary()
_TABLE_LOCK = threading.Lock()
_OWNER = [os.getpid()]
# A forked child keeps its parent's links, unused, for as long as it lives: closing one there
# would close the child's copy of the parent's descriptors of the file, and with them the POSIX
# locks the child's own connection holds on it (section 2.2 again), or let SQLite take the
# child for the file's last user and delete the WAL the others are writing.
_INHERITED: list[Link] = []


def _forked() -> None:
    """In a forked child: the parent's links are set aside (kept, never used nor closed)."""
    _INHERITED.extend(_LINKS.values())
    _LINKS.clear()
    _OWNER[0] = os.getpid()


os.register_at_fork(after_in_child=_forked)


def attach(path: str, synchronous: str) -> Link:
    """The link of this process to ``path`` (made if none), counted as used once more."""
    key = (os.path.realpath(path), synchronous)
    with _TABLE_LOCK:
        if _OWNER[0] != os.getpid():  # a forked child: the parent's connections are not ours
            _LINKS.clear()
            _OWNER[0] = os.getpid()
        link = _LINKS.get(key)
        if link is None:
            if any(kept.key[0] == key[0] and kept.db is not None for kept in _INHERITED):
                # A new connection here would share SQLite's lock bookkeeping with the one
                # inherited, which says locks are held that the child does not hold.
                raise StoreError(
                    f"this process was forked while a store on {key[0]} was open: SQLite "
                    "connections cannot cross a fork; close the store before forking, or "
                    "open it in the parent after the fork"
                )
            link = _LINKS[key] = Link(key)
        link.users += 1
        return link


def detach(link: Link, timeout: float) -> None:
    """One use fewer; the last one closes the connection once its transaction is over.

    A transaction of another thread that outlasts ``timeout`` (one left running past a hook's
    deadline) keeps the connection: it closes with the last store that refers to it.
    """
    if link.pid != os.getpid():
        return  # the parent's: neither used nor closed here
    locked = link.lock.acquire(timeout=max(timeout, 0.001))
    try:
        with _TABLE_LOCK:
            link.users -= 1
            if link.users > 0:
                return
            if _LINKS.get(link.key) is link:
                del _LINKS[link.key]
        if locked:
            link.disconnect()
    finally:
        if locked:
            link.lock.release()
