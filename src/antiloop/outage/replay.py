"""Putting journaled steps into the store once it is back: in order, once per step id.

A ``Replayer`` owns a guard's journal. ``keep`` journals a step the guard answered without
the store; ``replay`` hands each pending entry, oldest first, to the guard's ``put`` (which
judges it into the store under its step id, its audit record marked unguarded) and stops at
the first store failure. A thread tries again with backoff while anything is pending, so a
replica that receives no more steps still replays; a step the guard judges replays the
journal first, so a session's journaled steps come before its next one.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from antiloop.core.errors import StoreError
from antiloop.outage.journal import Journal

__all__ = ["Replayer"]

log = logging.getLogger("antiloop")

PAUSE = 0.2
"""Seconds the replay thread waits first; it doubles up to ``MAX_PAUSE`` while the store fails."""
MAX_PAUSE = 5.0


class Replayer:
    """A guard's journal and the replay of it.

    Args:
        directory: the journal directory (``OutageConfig.journal_dir``).
        store_url: the store the steps belong to.
        max_bytes: the journal's bound.
        put: records one entry in the store (a ``StoreError`` when it cannot).
    """

    def __init__(
        self,
        directory: Path,
        store_url: str,
        max_bytes: int,
        put: Callable[[dict[str, Any]], None],
    ) -> None:
        self.journal = Journal(directory, store_url, max_bytes)
        self.put = put
        self.replayed = 0
        self.failure: StoreError | None = None  # why the last replay stopped, if it did
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._wake = threading.Event()  # set by close(): the thread ends

    def __len__(self) -> int:
        return len(self.journal)

    def keep(self, entry: dict[str, Any]) -> None:
        """Journal an entry (fsync'd) and make sure a replay will follow."""
        self.journal.append(entry)
        self._start()

    def adopt(self) -> int:
        """Take over the journals of dead processes of this store (once); replay them soon."""
        taken = self.journal.adopt()
        if taken:
            log.warning(
                "antiloop: adopted %d unrecorded steps from the journal of a process that ended",
                taken,
            )
            self._start()
        return taken

    def replay(self, wait: float | None = None) -> int:
        """Put the pending entries into the store, oldest first; how many went in.

        Stops at the first store failure (the rest wait for the next replay). ``wait``: the
        seconds to wait for a replay already running (None: as long as it takes).
        """
        if not self._lock.acquire(timeout=-1 if wait is None else max(wait, 0.0)):
            return 0
        put = 0
        self.failure = None
        try:
            for entry in self.journal.pending():
                try:
                    self.put(entry)
                except StoreError as exc:
                    log.warning("antiloop: replaying the journal stopped: %s", exc)
                    self.failure = exc
                    break
                self.journal.done(str(entry["id"]))
                put += 1
        finally:
            self._lock.release()
        if put:
            self.replayed += put
            log.warning(
                "antiloop: replayed %d unrecorded steps into the store (%d pending)",
                put,
                len(self.journal),
            )
        return put

    def close(self) -> None:
        """Stop the replay thread and release the journal file."""
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=1)
        self.journal.close()

    def _start(self) -> None:
        with self._starting:
            if self._thread is not None or self._wake.is_set():
                return
            self._thread = threading.Thread(
                target=_run, args=(weakref.ref(self),), name="antiloop-journal-replay", daemon=True
            )
            self._thread.start()


def _run(ref: weakref.ref[Replayer]) -> None:
    """Replay with backoff while entries are pending; end when the replayer is dropped."""
    pause = PAUSE
    while True:
        replayer = ref()
        if replayer is None:
            return
        with replayer._starting:  # an entry kept after this check starts a new thread
            if not len(replayer.journal):
                replayer._thread = None
                return
        wake = replayer._wake
        del replayer  # only the weak reference while waiting: a dropped guard ends the thread
        if wake.wait(pause):
            return
        replayer = ref()
        if replayer is None:
            return
        before = len(replayer.journal)
        replayer.replay(wait=0)
        pause = PAUSE if len(replayer.journal) < before else min(pause * 2, MAX_PAUSE)
        del replayer
