"""Failure injection under a fleet: three `antiloop serve` replicas under load, real processes.

A replica SIGKILLed mid-load; PostgreSQL stopped for 30 s, then hung, under the split store.
After each, ``fleet.Load.check`` and the shared tally: nothing acknowledged lost, no step
recorded twice, every verdict the one an in-process guard gives, no approval changed.
(The Redis Cluster failover and the network partition are in their own modules.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.stores.faults import changed, seed_approvals
from tests.stores.fleet import Load, Replica, start_replica
from tests.stores.test_faults_postgres import Cluster
from tests.stores.test_faults_redis import RedisServer

from antiloop.stores import open_store

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    """A PostgreSQL of the module's own; each test has its schema."""
    made = Cluster()
    made.start()
    yield made
    made.destroy()


@pytest.fixture
def stores(
    request: pytest.FixtureRequest, redis_server: RedisServer, postgres: Cluster
) -> Iterator[list[str]]:
    """The replicas' store arguments: Redis alone, or Redis with records in PostgreSQL."""
    state = redis_server.url(prefix=f"fl{uuid.uuid4().hex[:6]}", lock_ttl=3)
    if request.param == "redis":
        yield ["--store", state]
    else:
        records = f"{postgres.url}?schema=fl_{uuid.uuid4().hex[:10]}&timeout=1"
        yield ["--store", state, "--records", records]
    postgres.resume()
    if postgres.process is None or postgres.process.poll() is not None:
        postgres.start()


def _open(stores: list[str]) -> object:
    records = stores[3] if len(stores) > 3 else None
    return open_store(stores[1], records=records)


def _report(name: str, load: Load, store: object, before: list[dict[str, object]]) -> None:
    try:
        counted = load.check(store)
        counted.changed = changed(before, store)
    finally:
        store.close()  # type: ignore[attr-defined]
    print(
        f"{name}: {counted.steps} steps, {load.failures} retried after a failure, "
        f"lost {counted.lost}, doubled {counted.doubled}, missed {counted.missed}, "
        f"approvals changed {counted.changed}"
    )
    assert counted.harm() == (0, 0, 0, 0)


@pytest.mark.parametrize("stores", ["redis", "split"], indirect=True)
def test_a_replica_sigkilled_mid_load_loses_doubles_and_misses_nothing(
    tmp_path: Path, stores: list[str]
) -> None:
    """One of three replicas is SIGKILLed with requests in flight; the others carry on."""
    store = _open(stores)
    before = seed_approvals(store)
    replicas = [start_replica(tmp_path, *stores) for _ in range(3)]
    load = Load([r.url for r in replicas], sessions=24, steps=14)

    def kill_one(load: Load) -> None:
        load.wait_for(0.4)
        replicas[1].kill()

    try:
        load.run(kill_one)
    finally:
        for replica in replicas:
            replica.stop()
    assert load.failures  # the killed replica's requests were sent again
    _report(f"replica SIGKILL ({'split' if len(stores) > 2 else 'redis'})", load, store, before)


@pytest.mark.parametrize("stores", ["split"], indirect=True)
@pytest.mark.parametrize("fault", ["stopped", "hung"])
def test_postgres_stopped_or_hung_under_the_split_store(
    tmp_path: Path, stores: list[str], postgres: Cluster, fault: str
) -> None:
    """PostgreSQL down 30 s (stopped) or hung 10 s (SIGSTOP): steps wait, then all land once."""
    store = _open(stores)
    before = seed_approvals(store)
    replicas: list[Replica] = [start_replica(tmp_path, *stores) for _ in range(3)]
    load = Load([r.url for r in replicas], sessions=12, steps=12)
    outage = 30.0 if fault == "stopped" else 10.0

    def outage_of_postgres(load: Load) -> None:
        load.wait_for(0.3)
        if fault == "stopped":
            postgres.stop()
        else:
            postgres.hang()
        time.sleep(outage)  # the outage itself, not a timed assertion
        if fault == "stopped":
            postgres.start()
        else:
            postgres.resume()

    try:
        load.run(outage_of_postgres)
    finally:
        for replica in replicas:
            replica.stop()
    assert load.failures
    store.close()  # type: ignore[attr-defined]
    store = _open(stores)  # a fresh connection: the old one may have died in the outage
    _report(f"postgres {fault} {outage:.0f} s (split)", load, store, before)
