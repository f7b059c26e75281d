"""Riding out a store outage: store calls retried within a deadline, then a local journal.

A store call that fails is tried again with backoff and jitter for ``retry_window`` seconds
(10 by default: a Redis restart, a Sentinel or Cluster failover), never past the deadline of
the request it serves (``retry.deadline``); only then does ``on_store_error`` apply (and
later steps try the store once, with no wait, until it answers again). A step
answered without the store is kept in a local journal (``journal``: bounded, fsync'd, mode
0600, one file per process) and replayed into the store when it is back (``replay``): in
order, once per step id, its audit record marked ``unguarded``. ``[outage]`` in antiloop.toml
sets it (``settings.OutageConfig``).
"""

from __future__ import annotations

from antiloop.outage.retry import StoreOutage, deadline, ride_out, time_left
from antiloop.outage.settings import OutageConfig

__all__ = ["OutageConfig", "StoreOutage", "deadline", "ride_out", "time_left"]
