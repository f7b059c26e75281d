"""Store faults this process saw, counted for ``/metrics`` (``antiloop.server.console.metrics``).

``count("error")``: a store call failed and ``on_store_error`` answered instead;
``count("retry")``: a store retried a transient error (SQLite's lock errors that skip its busy
handler). Thread-safe; only the fault paths call it.
"""

from __future__ import annotations

import threading

KINDS = ("error", "retry")
_lock = threading.Lock()
_counts = dict.fromkeys(KINDS, 0)


def count(kind: str) -> None:
    """Count one fault of ``kind`` (one of ``KINDS``)."""
    with _lock:
        _counts[kind] = _counts.get(kind, 0) + 1


def counts() -> dict[str, int]:
    """The counts so far, by kind."""
    with _lock:
        return dict(_counts)
