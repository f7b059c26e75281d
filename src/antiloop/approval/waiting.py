"""Waiting for people, written once for threads and for event loops.

An approval flow is a generator: it does its store work between its ``yield``s, and each
``yield`` hands back the seconds it may pause until it looks again (a decision made in this
process wakes it earlier). ``Wakeup.run`` drives a flow in the calling thread; ``Wakeup.arun``
drives it from an event loop, each stretch of store work in a worker thread
(``asyncio.to_thread``) and each pause awaited, so the loop keeps running while a person thinks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import Generic, TypeVar

R = TypeVar("R")

#: A flow: yields pauses (seconds), returns its result.
Flow = Generator[float, None, R]


@dataclass(frozen=True, slots=True)
class _Done(Generic[R]):
    value: R


def _advance(flow: Flow[R]) -> float | _Done[R]:
    """Run the flow to its next pause: the seconds it may pause, or its result."""
    try:
        return next(flow)
    except StopIteration as done:  # not raised through a Future: asyncio refuses those
        return _Done(done.value)


class Wakeup:
    """Pauses of approval flows, ended early when something changes in this process."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._version = 0
        self._events: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def notify(self) -> None:
        """Something changed (a request was created or decided): wake every paused flow."""
        with self._changed:
            self._version += 1
            self._changed.notify_all()
            events = list(self._events)
        for loop, event in events:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits there now
                loop.call_soon_threadsafe(event.set)

    def _moved(self, seen: int) -> bool:
        return self._version != seen

    def run(self, flow: Flow[R]) -> R:
        """Drive a flow in this thread; its result."""
        while True:
            seen = self._version
            pause = _advance(flow)
            if isinstance(pause, _Done):
                return pause.value
            with self._changed:
                self._changed.wait_for(functools.partial(self._moved, seen), pause)

    async def arun(self, flow: Flow[R]) -> R:
        """Drive a flow from the running event loop without blocking it; its result."""
        loop = asyncio.get_running_loop()
        while True:
            event = asyncio.Event()
            entry = (loop, event)
            with self._changed:  # before the flow looks: a change while it looks wakes it
                self._events.add(entry)
            try:
                pause = await asyncio.to_thread(_advance, flow)
                if isinstance(pause, _Done):
                    return pause.value
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), pause)
            finally:
                with self._changed:
                    self._events.discard(entry)
