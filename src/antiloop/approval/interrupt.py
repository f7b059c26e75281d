"""Ctrl+C in a guarded run: finish the current step, then stop cleanly; twice quits at once.

    with Interruptible(guard.store, session="s1") as run:
        while not run.stopping:
            gate = guard.gate(tool, args, session="s1")   # with approvals: STOP after a Ctrl+C
            if not gate.allowed:
                break
            guard.record(run_tool(gate.args))

The first Ctrl+C does not raise: it sets ``stopping`` and asks the session to stop in the
store (so a guard with approvals answers STOP, the same as ``antiloop stop SESSION``). A second
one raises ``KeyboardInterrupt`` at once. On leaving, the store's audit log is flushed.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import IO, Any

from antiloop.approval.ledger import ledger_of

log = logging.getLogger("antiloop")


class Interruptible:
    """A context manager that turns the first Ctrl+C into a clean stop.

    Args:
        store: the guard's store (a stop request is written there); None: only ``stopping``.
        session: the session to stop.
        out: where to tell the person what happens (standard error by default).

    Example:
        >>> with Interruptible() as run:
        ...     run.stopping
        False
    """

    def __init__(
        self, store: object | None = None, session: str = "default", out: IO[str] | None = None
    ) -> None:
        self.store = store
        self.session = session
        self.out = out
        self.stopping = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> Interruptible:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        else:
            log.warning("antiloop: Ctrl+C handling needs the main thread; not installed")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._restore()
        flush = getattr(self.store, "flush", None)
        if callable(flush):
            flush()

    def request(self, by: str = "ctrl-c") -> None:
        """Stop after the current step, as a first Ctrl+C does."""
        self.stopping = True
        if self.store is not None:
            ledger_of(self.store).request_stop(self.session, by)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            self._restore()
            raise KeyboardInterrupt
        out = self.out or sys.stderr
        out.write("\nantiloop: stopping after the current step (Ctrl+C again to quit at once)\n")
        out.flush()
        self.request()

    def _restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
