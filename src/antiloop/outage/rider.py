"""A guard's side of an outage: its retries, whether the store is down, its journal.

``Rider`` is what a ``Guard`` holds: ``ride_out`` tries a store call again within the window
(and once the window ran out, tries later calls once, with no wait, until one succeeds);
``catch_up`` adopts dead processes' journals now and then and replays the journal before a
step is judged; ``keep`` journals a step answered without the store. Recording a journaled
step is the guard's own ``put`` (it judges it into the store).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from antiloop.core.errors import StoreError
from antiloop.outage.retry import StoreOutage, replay_allowed, ride_out, time_left
from antiloop.outage.settings import OutageConfig

if TYPE_CHECKING:
    from antiloop.core.step import Step
    from antiloop.core.verdict import Verdict
    from antiloop.outage.replay import Replayer
    from antiloop.stores import Store

__all__ = ["ADOPT_EVERY", "Rider", "answered_verdict"]

T = TypeVar("T")

ADOPT_EVERY = 30.0
"""Seconds between two looks for the journals of processes that ended."""


class Rider:
    """Retries, the down state and the journal of one guard over one store.

    Args:
        config: the ``[outage]`` settings.
        store: the guard's store (its identity names the journal's folder).
        put: records a journaled entry in the store (a ``StoreError`` when it cannot).
        clock: seconds since the epoch, for the journal's times.
    """

    def __init__(
        self,
        config: OutageConfig,
        store: Store,
        put: Callable[[dict[str, Any]], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store = store
        self.put = put
        self.clock = clock
        self.replayer: Replayer | None = None  # made at the first failure (or adoption)
        self.down = False  # a retry window ran out, and no store call succeeded since
        self._adopt_at = 0.0
        self._making = threading.Lock()

    def ride_out(self, call: Callable[[], T]) -> T:
        """``call()`` tried again for ``retry_window`` seconds on a StoreError.

        Once a window ran out, the store counts as down: later calls are tried once, with no
        wait, until one succeeds (a long outage costs one window, not one per step).
        """
        o = self.config
        try:
            found = ride_out(call, 0.0 if self.down else o.retry_window, o.backoff, o.max_backoff)
        except StoreOutage:
            self.down = True
            raise
        self.down = False
        return found

    def catch_up(self) -> StoreError | None:
        """Before a step is judged: adopt dead processes' journals (now and then), replay.

        Returns the store's failure when the replay failed (the step need not try it again).
        """
        now = time.monotonic()
        if now >= self._adopt_at:
            self._adopt_at = now + ADOPT_EVERY
            folder = self.config.journal_dir
            if folder is not None and folder.is_dir() and any(folder.iterdir()):
                self.journaling().adopt()
        replayer = self.replayer
        if replayer is None or not len(replayer) or not replay_allowed():
            return None
        left = time_left()
        replayer.replay(wait=None if left is None else max(left - 1.0, 0.0))
        if not len(replayer):
            return None
        self.down = True  # the replay failed: the store is down still
        return replayer.failure

    def replay_now(self) -> int:
        """Adopt and replay now, waiting for a replay under way; how many steps went in."""
        self._adopt_at = 0.0
        before = self.replayer.replayed if self.replayer is not None else 0
        self.catch_up()
        if self.replayer is None:
            return 0
        self.replayer.replay()
        return self.replayer.replayed - before

    def journaling(self) -> Replayer:
        """The journal and its replay, made on first use.

        Raises:
            JournalFull: no journal is kept (``journal = ""``).
        """
        with self._making:  # one journal however many threads fail at once
            if self.replayer is None:
                from antiloop.outage.journal import JournalFull, store_identity
                from antiloop.outage.replay import Replayer

                folder = self.config.journal_dir
                if folder is None:
                    raise JournalFull('no journal is kept ([outage] journal = "")')
                self.replayer = Replayer(
                    folder, store_identity(self.store), self.config.journal_max_bytes, self._put
                )
            return self.replayer

    def keep(self, step: Step, step_id: str, verdict: Verdict, exc: StoreError) -> None:
        """Journal a step answered without the store (its texts redacted).

        Raises:
            JournalFull: the journal cannot take it.
        """
        from antiloop.core.redact import redact_value

        data = redact_value(step.to_dict())
        data["id"] = step_id
        entry = {
            "id": step_id,
            "at": self.clock(),
            "step": data,
            "answered": {
                "action": verdict.action.name.lower(),
                "detector": verdict.detector,
                "outcome": verdict.outcome,
                "reason": verdict.reason,
            },
            "error": str(exc),
        }
        self.journaling().keep(entry)

    def _put(self, entry: dict[str, Any]) -> None:
        self.put(entry)
        self.down = False


def answered_verdict(entry: dict[str, Any]) -> Verdict:
    """The verdict a journaled step was answered with."""
    from antiloop.core.verdict import Action, Verdict

    answered = entry.get("answered") or {}
    return Verdict(
        Action[str(answered.get("action", "continue")).upper()],
        answered.get("detector"),
        answered.get("outcome"),
        reason=str(answered.get("reason", "")),
    )
