"""Group commit: the steps of requests that arrive together are judged as one batch.

``POST /v1/steps`` requests do not each take a worker thread and a store round of their own:
they queue, and one drainer at a time takes every request waiting (up to ``MAX_GROUP`` steps)
and judges their steps in order as one batch (``Service.judge_all``: on SQLite one transaction
and one commit, on Redis one read and one save script, on split one PostgreSQL transaction for
the records). Under no load a group is one request, judged at once; under load the group is
whatever arrived while the one before was judged, so the store's cost per step falls as the
load rises. The store serialises a replica's steps anyway (one connection, one lock), so no
parallelism is lost.

Each request waits ``store_timeout`` at most, queued or judged: then its steps follow
``on_store_error``, as when the store hangs (``StoreTimeout``). A request whose deadline passed
while it was queued is not judged. A group the store does not judge in time is abandoned to its
thread (the stores' own timeouts end it) and the next group goes on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from antiloop.server.limits import StoreTimeout

if TYPE_CHECKING:
    from antiloop.server.service import Service

__all__ = ["MAX_GROUP", "StepGroups"]

MAX_GROUP = 256
"""Steps one group takes at most (a request larger than that is a group of its own)."""

Waiting = tuple[list[Any], "asyncio.Future[list[dict[str, Any]]]"]


class StepGroups:
    """Judges the steps of concurrent requests in groups, one group at a time."""

    def __init__(self, service: Service, most: int = MAX_GROUP) -> None:
        self.service = service
        self.most = most
        self._queue: deque[Waiting] = deque()
        self._draining: asyncio.Task[None] | None = None  # the drainer, while it runs

    async def judge(self, steps: list[Any]) -> list[dict[str, Any]]:
        """The wire verdicts of one request's steps (``StoreTimeout`` past the deadline)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        self._queue.append((steps, future))
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        timeout = self.service.call.timeout
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            future.cancel()  # not judged if still queued
            raise StoreTimeout(f"the store did not answer within {timeout:g} s") from None

    async def _drain(self) -> None:
        try:
            while self._queue:
                group = self._take()
                if group:
                    await self._judge(group)
        finally:
            self._draining = None

    def _take(self) -> list[Waiting]:
        """The requests waiting, in order, up to ``most`` steps (at least one request)."""
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

    async def _judge(self, group: list[Waiting]) -> None:
        flat = [step for steps, _ in group for step in steps]
        indexes = [index for steps, _ in group for index in range(len(steps))]
        try:
            verdicts = await self.service.call(self.service.judge_all, flat, indexes)
        except BaseException as exc:  # StoreTimeout, or a fault: every waiter hears it
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        start = 0
        for steps, future in group:
            mine = verdicts[start : start + len(steps)]
            start += len(steps)
            if not future.done():
                future.set_result(mine)
