"""Fleet controls over many sessions and replicas: a kill switch, known loops, the fleet view.

- ``kills``: what a kill stops (the whole fleet, an agent name, a fingerprint, a session).
- ``procedure``: the op and context of a step or a fingerprint (what a known loop matches).
- ``local``: the controls in one process (memory and SQLite stores), and their logic.
- ``redis``: the same over Redis, shared by every replica: durable kills and counts, pub/sub.
- ``status``: the fleet view (live sessions, stops per hour, the costliest fingerprints).

The guard consults a ``Fleet`` before each step (``before``: a kill gives ``stop``) and after
it (``after``: stops are counted, a known procedure is nudged once per session). The pure core
never imports this package.
"""

from __future__ import annotations

from antiloop.config import FleetConfig
from antiloop.fleet._store import redis_client
from antiloop.fleet.kills import SCOPES, Kill, KillSet
from antiloop.fleet.local import Fleet

__all__ = ["SCOPES", "Fleet", "Kill", "KillSet", "open_fleet"]


def open_fleet(
    store: object | str | None,
    config: FleetConfig | None = None,
    *,
    watch: bool = True,
) -> Fleet:
    """The fleet controls over a store: shared through Redis, else in this process.

    Shared for a ``redis://`` URL or a Redis store (a split store's Redis state too).

    ``watch=False`` opens a Redis fleet without its subscriber (a command line call).
    """
    if isinstance(store, str):
        if store.split(":", 1)[0].split("+", 1)[0] in ("redis", "rediss"):
            from antiloop.fleet.redis import RedisFleet

            return RedisFleet.from_url(store, config, watch=watch)
        return Fleet(config)
    if store is not None and redis_client(store) is not None:
        from antiloop.fleet.redis import RedisFleet

        return RedisFleet.of_store(store, config, watch=watch)
    return Fleet(config)
