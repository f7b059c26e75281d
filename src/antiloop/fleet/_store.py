"""The Redis client beside a store object: a RedisStore's, or a split store's Redis state's."""

from __future__ import annotations

from typing import Any


def state_store(store: object) -> object:
    """The store that holds the session state (a split store's ``state``)."""
    return getattr(store, "state", store)


def redis_client(store: object) -> Any:
    """The redis client of a RedisStore (or of a split store's state), else None."""
    state = state_store(store)
    client = getattr(state, "_client", None)
    if client is None or not hasattr(client, "pubsub"):
        return None
    return client
