"""A Redis Cluster master SIGKILLed under a fleet, and its lagging replica promoted.

Six nodes (three masters, a replica each, ``cluster-node-timeout`` 1 s) of the test's own;
three `antiloop serve` replicas on ``redis+cluster://…?wait_replicas=1`` under the load of
``fleet.Load``. The master killed is the one holding the audit log's slot, or one holding
only sessions; its replica is stopped (SIGSTOP) and its link dropped half a second before,
so it lags behind, and resumed after; once it took over, the old master is started again
and becomes its replica (with ``wait_replicas=1`` no step is acknowledged until it does).
After the failover: nothing acknowledged lost, nothing recorded twice, every verdict the
in-process guard's, no approval changed.

Without ``wait_replicas`` the steps acknowledged while the replica lagged are lost (run
with ``WAIT = 0``: "lost 40" to "lost 191" here, and a stop missed).
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.stores.conftest import RedisCluster
from tests.stores.faults import changed, seed_approvals
from tests.stores.fleet import Load, start_replica

from antiloop.stores import open_store

pytestmark = pytest.mark.redis

WAIT = 1


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    """Three masters with a replica each, failing over after 1 s."""
    (tmp_path / "cluster").mkdir()
    made = RedisCluster(tmp_path / "cluster", replicas=1, node_timeout=1000)
    yield made
    made.stop()


@pytest.mark.parametrize("victim", ["audit", "sessions"])
def test_a_master_killed_and_its_replica_promoted(
    tmp_path: Path, cluster: RedisCluster, victim: str
) -> None:
    """The master of the audit log (or of sessions only) dies mid-load; its replica takes over."""
    prefix = f"fo{uuid.uuid4().hex[:6]}"
    url = f"{cluster.url}?prefix={prefix}&lock_ttl=3&timeout=1&wait_replicas={WAIT}"
    store = open_store(url)
    before = seed_approvals(store)
    audit = cluster.master_of(f"{prefix}:{{audit}}:log")
    masters = {cluster.master_of(f"{prefix}:{{fl{s}}}:state") for s in range(24)}
    target = audit if victim == "audit" else next(iter(sorted(masters - {audit})))
    watched = next(
        key
        for key in (f"{prefix}:{{audit}}:log", *(f"{prefix}:{{fl{s}}}:state" for s in range(24)))
        if cluster.master_of(key) == target
    )
    replicas = [start_replica(tmp_path, "--store", url) for _ in range(3)]
    load = Load([r.url for r in replicas], sessions=24, steps=14)

    lagging: list[int] = []

    def failover(load: Load) -> None:
        load.wait_for(0.3)
        lagging.append(cluster.cut_replica(target))
        time.sleep(0.5)  # steps go on meanwhile; the replica misses them
        cluster.kill(target)
        cluster.signal(lagging[0], signal.SIGCONT)
        cluster.wait_master(watched, lagging[0])  # taken over; the old master comes back
        # as its replica
        cluster.restart(target)

    try:
        load.run(failover)
    finally:
        for replica in replicas:
            replica.stop()
    store.close()
    store = open_store(f"{cluster.url}?prefix={prefix}")
    try:
        counted = load.check(store)
        counted.changed = changed(before, store)
    finally:
        store.close()
    print(
        f"cluster failover ({victim} master): {counted.steps} steps, {load.failures} retried, "
        f"lost {counted.lost}, doubled {counted.doubled}, missed {counted.missed}, "
        f"approvals changed {counted.changed}"
    )
    assert cluster.master_of(watched) == lagging[0]  # failed over (the client may hide it)
    assert counted.harm() == (0, 0, 0, 0)
