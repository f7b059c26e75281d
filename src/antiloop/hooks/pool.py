"""The hook daemon's stores: each opened once, before or beside the events, and kept open.

A hook process opens its store for its one event; the daemon answers thousands, so it opens
each store (``ANTILOOP_STORE``, with ``ANTILOOP_RECORDS`` when set) once and lends it to every
event of a caller with that environment. This class is the one place the daemon opens, lends
and drops stores: wrap :meth:`StorePool.open` to give every daemon store more behaviour.

A store that cannot be opened is not kept: the event then opens it itself, as a hook process
does, and answers with the store's error (``antiloop.hooks.runner``). A store whose event failed
is dropped, so the next event opens it afresh.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from antiloop.stores import Store

__all__ = ["StorePool"]

KEPT = 8
"""Stores kept open at most; the one used least recently is closed first."""


class StorePool:
    """Open stores by (store URL, records URL)."""

    def __init__(self) -> None:
        self._stores: dict[tuple[str, str], Store] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(env: Mapping[str, str]) -> tuple[str, str]:
        """What tells two callers' stores apart."""
        from antiloop.hooks.runner import store_url

        return store_url(env), env.get("ANTILOOP_RECORDS") or ""

    def get(self, env: Mapping[str, str]) -> Store | None:
        """The open store of ``env``'s caller, opened now if need be; None if it cannot be."""
        key = self.key(env)
        with self._lock:
            store = self._stores.pop(key, None)
            if store is None:
                try:
                    store = self.open(env)
                except Exception:
                    return None
            self._stores[key] = store  # the most recently used last
            while len(self._stores) > KEPT:
                oldest = next(iter(self._stores))
                with contextlib.suppress(Exception):
                    self._stores.pop(oldest).close()
            return store

    def open(self, env: Mapping[str, str]) -> Store:
        """Open and connect the store of ``env`` (raises what opening it raises)."""
        from antiloop.hooks.runner import open_split, store_url
        from antiloop.stores import open_store

        store = open_split(env) or open_store(store_url(env))
        try:
            store.peek("")  # connect, and check the file or server, now
        except BaseException:
            store.close()
            raise
        return store

    def drop(self, env: Mapping[str, str]) -> None:
        """Close and forget the store of ``env`` (the next event opens it again)."""
        with self._lock:
            store = self._stores.pop(self.key(env), None)
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()

    def close(self) -> None:
        """Close every store."""
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            with contextlib.suppress(Exception):
                store.close()

    def __len__(self) -> int:
        return len(self._stores)
