"""Group commit: the steps of requests that arrive together are judged as one batch.

``POST /v1/steps`` requests do not each take a worker thread and a store round of their own:
they queue, and one group at a time takes every request waiting (up to ``MAX_GROUP`` steps)
and judges their steps in order as one batch (``Service.judge_all``: on SQLite one transaction
and one commit, on Redis one read and one save script, on split one PostgreSQL transaction for
the records). Under no load a group is one request, judged at once; under load the group is
whatever arrived while the one before was judged, so the store's cost per step falls as the
load rises. The store serialises a replica's steps anyway (one connection, one lock), so no
parallelism is lost.

Each request waits ``store_timeout`` at most, queued or judged: then its steps follow
``on_store_error``, as when the store hangs (``StoreTimeout``). A request whose deadline passed
while it was queued is not judged. A group the store does not judge in time is abandoned to its
thread (the stores' own timeouts end it) and the next group goes on. A group that fails on
anything else kept nothing (a store's batch is kept whole or not at all): its requests are
judged again one by one, so a fault is only its own request's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from antiloop.server.limits import Limits, StoreCalls, StoreTimeout, within

__all__ = ["MAX_GROUP", "StepGroups"]

MAX_GROUP = 256
"""Steps one group takes at most (a request larger than that is a group of its own)."""

Waiting = tuple[list[Any], asyncio.Future[list[dict[str, Any]]]]


class Service(Protocol):
    """What a group needs of ``antiloop.server.service.Service`` (which holds the groups)."""

    call: StoreCalls
    limits: Limits
    store: Any

    def judge_all(
        self, batch: list[Any], indexes: list[int] | None = None
    ) -> list[dict[str, Any]]: ...


class StepGroups:
    """Judges the steps of concurrent requests in groups, one group at a time.

    All of it runs in callbacks of the event loop (no task per request or group): a request
    queues with a deadline, and the group's thread, when done, starts the next group.
    """

    def __init__(self, service: Service, most: int = MAX_GROUP) -> None:
        self.service = service
        self.most = most
        self._queue: deque[Waiting] = deque()
        self._alone: deque[Waiting] = deque()  # judged one request a group (after a fault)
        self._running: object | None = None  # the group being judged (None: idle)
        self._pool: ThreadPoolExecutor | None = None
        self.judged = 0  # groups started

    async def judge(self, steps: list[Any]) -> list[dict[str, Any]]:
        """The wire verdicts of one request's steps (``StoreTimeout`` past the deadline)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        self._queue.append((steps, future))
        deadline = loop.call_later(self.service.call.timeout, self._expire, future)
        if self._running is None:
            self._next(loop)
        try:
            return await future
        finally:
            deadline.cancel()

    def _expire(self, future: asyncio.Future[list[dict[str, Any]]]) -> None:
        """A request's deadline: its steps follow on_store_error (not judged if still queued)."""
        if not future.done():
            timeout = self.service.call.timeout
            future.set_exception(StoreTimeout(f"the store did not answer within {timeout:g} s"))

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start judging the requests waiting, if any, in a worker thread."""
        group = self._take()
        if not group:
            self._running = None
            return
        if self._pool is None:
            threads = self.service.limits.store_threads
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="antiloop-steps")
        flat = [step for steps, _ in group for step in steps]
        indexes = [index for steps, _ in group for index in range(len(steps))]
        token = self._running = object()
        self.judged += 1
        timeout = self.service.call.timeout  # its store retries end in time (antiloop.outage)
        judge = self.service.judge_all
        judged = loop.run_in_executor(self._pool, within, timeout, judge, flat, indexes)
        # A group the store does not judge in time is left to its thread; the next one goes.
        late = loop.call_later(self.service.call.timeout, self._moved_on, loop, token)

        def done(judged: asyncio.Future[list[dict[str, Any]]]) -> None:
            late.cancel()
            if self._faulted(group, judged):  # kept nothing: each request again, alone
                self._alone.extend(group)
            else:
                _answer(group, judged)
            if self._running is token:
                self._next(loop)

        judged.add_done_callback(done)

    def _moved_on(self, loop: asyncio.AbstractEventLoop, token: object) -> None:
        if self._running is token:
            self._next(loop)

    def _faulted(self, group: list[Waiting], judged: asyncio.Future[list[dict[str, Any]]]) -> bool:
        """True when a group of requests failed on something else than the store's deadline.

        Only in a store that keeps a batch whole or not at all: one request's fault is its own.
        """
        if len(group) < 2 or judged.cancelled():
            return False
        error = judged.exception()
        batched = callable(getattr(self.service.store, "batch", None))
        return error is not None and not isinstance(error, StoreTimeout) and batched

    def _take(self) -> list[Waiting]:
        """The requests waiting, in order, up to ``most`` steps (at least one request)."""
        while self._alone:
            alone = self._alone.popleft()
            if not alone[1].done():
                return [alone]
        group: list[Waiting] = []
        count = 0
        queue = self._queue
        while queue and (not group or count + len(queue[0][0]) <= self.most):
            steps, future = queue.popleft()
            if future.done():  # its deadline passed while it waited
                continue
            group.append((steps, future))
            count += len(steps)
        return group


def _answer(group: list[Waiting], judged: asyncio.Future[list[dict[str, Any]]]) -> None:
    """Hand each request its verdicts, or the group's error."""
    error = judged.exception() if not judged.cancelled() else StoreTimeout("cancelled")
    if error is not None:
        for _, future in group:
            if not future.done():
                future.set_exception(error)
        return
    verdicts = judged.result()
    start = 0
    for steps, future in group:
        if not future.done():
            future.set_result(verdicts[start : start + len(steps)])
        start += len(steps)
