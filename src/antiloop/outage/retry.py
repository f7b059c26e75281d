"""Store calls tried again with backoff and jitter, within a window and the request's deadline.

``deadline(seconds)`` says by when the work in this context must be answered (``antiloop
serve`` sets it for each request's store work, the hooks for each event); ``ride_out`` never
starts an attempt it could not finish before it, judging by the longest failed attempt so far.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from antiloop.core.errors import StoreError

__all__ = [
    "RESERVE",
    "StoreOutage",
    "deadline",
    "paused_replay",
    "replay_allowed",
    "ride_out",
    "time_left",
]

T = TypeVar("T")

RESERVE = 0.25
"""Seconds kept before the deadline to answer by ``on_store_error`` and journal the step."""

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "antiloop_deadline", default=None
)


_paused: contextvars.ContextVar[bool] = contextvars.ContextVar("antiloop_paused", default=False)


class StoreOutage(StoreError):
    """The store kept failing for the whole retry window (or up to the request's deadline).

    Attributes:
        attempts: calls made.
        waited: seconds from the first attempt to the giving up.
    """

    def __init__(self, cause: StoreError, attempts: int, waited: float) -> None:
        tries = f"{attempts} attempts" if attempts != 1 else "1 attempt"
        super().__init__(f"{cause} (for {waited:.1f} s, {tries})")
        self.attempts = attempts
        self.waited = waited


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Answer the work in this block within ``seconds`` (or an earlier deadline already set).

    Yields the deadline, in ``time.monotonic()`` seconds.
    """
    at = time.monotonic() + seconds
    outer = _deadline.get()
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    try:
        yield at
    finally:
        _deadline.reset(token)


def time_left() -> float | None:
    """Seconds left before this context's deadline (may be negative); None when there is none."""
    at = _deadline.get()
    return None if at is None else at - time.monotonic()


def ride_out(
    call: Callable[[], T],
    window: float,
    backoff: float = 0.05,
    max_backoff: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, tried again on a ``StoreError`` for ``window`` seconds at most.

    The waits double from ``backoff`` up to ``max_backoff``, each drawn between half and all
    of it. An attempt is started only when the time left (in the window, and before the
    deadline less ``RESERVE``) exceeds the wait plus the longest failed attempt so far. The
    first attempt is bounded by the store's own timeout; the retries also by the window's end
    (``deadline``), so a call waits ``max(window, the store's timeout)`` at most.

    Raises:
        StoreOutage: the last failure, once no attempt fits any more (``window`` 0: the first).
    """
    start = time.monotonic()
    end = start + window
    outer = _deadline.get()
    if outer is not None:
        end = min(end, outer - RESERVE)
    longest = 0.0
    attempts = 0
    wait = backoff
    while True:
        began = time.monotonic()
        attempts += 1
        try:
            if attempts == 1 or end <= began:  # the first: the store's own timeout bounds it
                return call()
            with deadline(end - began):  # a retry a store that honours it (PostgreSQL) cuts
                return call()
        except StoreOutage:
            raise
        except StoreError as exc:
            import random  # only on a failure: the hook path starts a process per call

            now = time.monotonic()
            longest = max(longest, now - began)
            pause = random.uniform(wait / 2, wait)  # noqa: S311 - jitter, not a secret
            if now + pause + longest > end:
                raise StoreOutage(exc, attempts, now - start) from exc
            sleep(pause)
            wait = min(wait * 2, max_backoff)


@contextlib.contextmanager
def paused_replay() -> Iterator[None]:
    """No journal replay in this block (a batch of steps judged on states read in advance)."""
    token = _paused.set(True)
    try:
        yield
    finally:
        _paused.reset(token)


def replay_allowed() -> bool:
    """False inside ``paused_replay``."""
    return not _paused.get()
