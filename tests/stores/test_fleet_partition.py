"""A replica cut off from Redis by a network partition, and healed, under a fleet's load.

Two network namespaces of the test's own (``tests/stores/netns.py``): Redis, two replicas
and the client in ``hub``; the third replica in ``cut``, reaching Redis over one veth pair
and answering the client over another. Mid-load the Redis link goes down for 3 s (packets
dropped: the cut replica's Redis calls hang until their 1 s timeout, and any commit whose
reply was lost is sent again by the client to another replica), then comes back. After:
nothing acknowledged lost, nothing recorded twice, every verdict the in-process guard's, no
approval changed, and the cut replica serves again once healed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.stores.faults import Tally, changed, seed_approvals
from tests.stores.fleet import Load, Replica, start_replica
from tests.stores.netns import CUT_API, HUB_DATA, Namespaces, enter, inside
from tests.stores.test_faults_redis import RedisServer

from antiloop.stores import open_store

pytestmark = pytest.mark.redis


@pytest.fixture
def spaces() -> Iterator[Namespaces]:
    """The hub and cut namespaces, deleted afterwards."""
    made = Namespaces()
    yield made
    made.destroy()


def test_a_replica_partitioned_from_redis_and_healed(tmp_path: Path, spaces: Namespaces) -> None:
    """The cut replica's steps fail over to the others; once healed it serves again."""
    redis = RedisServer(tmp_path)
    redis.bind = ["127.0.0.1", HUB_DATA]
    prefix = f"pt{uuid.uuid4().hex[:6]}"
    replicas: list[Replica] = []

    def start() -> list[dict[str, object]]:
        redis.start()
        store = open_store(redis.url(prefix=prefix))
        try:
            before = seed_approvals(store)
        finally:
            store.close()
        options = {"prefix": prefix, "timeout": 1, "lock_ttl": 3}
        replicas.extend(start_replica(tmp_path, "--store", redis.url(**options)) for _ in range(2))
        far = redis.url(**options).replace("127.0.0.1", HUB_DATA)
        replicas.append(
            start_replica(
                tmp_path, "--store", far, host=CUT_API, prefix=("ip", "netns", "exec", spaces.cut)
            )
        )
        return before

    healed: list[float] = []

    def partition(load: Load) -> None:
        load.wait_for(0.2)
        spaces.partition()
        time.sleep(3)  # the partition itself, not a timed assertion
        spaces.heal()
        healed.append(time.monotonic())

    try:
        before = inside(spaces.hub, start)
        # paced: a worker's 134 steps take 6.7 s at least, so steps remain after the heal
        load = Load([r.url for r in replicas], steps=30, pace=0.05, setup=lambda: enter(spaces.hub))
        load.run(partition)

        def read() -> Tally:
            store = open_store(redis.url(prefix=prefix))
            try:
                counted = load.check(store)
                counted.changed = changed(before, store)
                return counted
            finally:
                store.close()

        counted = inside(spaces.hub, read)
    finally:
        for replica in replicas:
            replica.stop()
        redis.stop()
    cut = [when for url, when in load.acked if url == replicas[2].url]

    after = sum(1 for when in cut if when > healed[0])
    print(
        f"partition 3 s (redis): {counted.steps} steps, {load.failures} retried, "
        f"lost {counted.lost}, doubled {counted.doubled}, missed {counted.missed}, "
        f"approvals changed {counted.changed}; the cut replica acknowledged {after} after"
    )
    assert load.failures
    assert len(cut) > after > 0  # it served before the partition and after the heal
    assert counted.harm() == (0, 0, 0, 0)
