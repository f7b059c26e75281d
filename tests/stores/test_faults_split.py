"""State in Redis, records in PostgreSQL, under faults: each server down, and a lost save.

A Redis and a PostgreSQL of the test's own (the shared ones are never stopped). A step counts
as acknowledged when its verdict is not the store-failure one; an acknowledged step must have
both its state (the step count) and its audit record, and no step may be recorded twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from tests.stores.test_faults_postgres import Cluster
from tests.stores.test_faults_redis import RedisServer

from antiloop import Guard, GuardConfig, Step
from antiloop.core.errors import StoreError
from antiloop.core.verdict import Action, Verdict
from antiloop.stores.postgres import PostgresStore
from antiloop.stores.redis import RedisStore
from antiloop.stores.split import SplitStore

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    """A PostgreSQL of the module's own (initdb takes seconds); each test has its schema."""
    made = Cluster()
    made.start()
    yield made
    made.destroy()


class Split:
    """Opens split stores on the test's Redis and PostgreSQL, and reads what they hold."""

    def __init__(self, redis: RedisServer, postgres: Cluster, schema: str) -> None:
        self.redis = redis
        self.postgres = postgres
        self.records_url = f"{postgres.url}?schema={schema}&timeout=2"
        self.opened: list[SplitStore] = []

    def open(self) -> SplitStore:
        store = SplitStore(
            # a save lost with Redis leaves the session locked until lock_ttl: keep it short
            RedisStore.from_url(self.redis.url(timeout=1, lock_ttl=2)),
            PostgresStore.from_url(self.records_url),
        )
        self.opened.append(store)
        return store

    def guard(self, on_store_error: str = "allow") -> Guard:
        return Guard(config=CONFIG, store=self.open(), audit=True, on_store_error=on_store_error)

    def indexes(self, session: str = "s") -> list[int | None]:
        """The step indexes of the session's audit records, read by a fresh records store."""
        records = PostgresStore.from_url(self.records_url)
        try:
            return [r.index for r in records.audit_records(session) if r.kind == "step"]
        finally:
            records.close()

    def steps(self, session: str = "s") -> int:
        """The session's step count as Redis holds it."""
        state = RedisStore.from_url(self.redis.url())
        try:
            found = state.peek(session)
            return 0 if found is None else found.steps
        finally:
            state.close()

    def close(self) -> None:
        for store in self.opened:
            with contextlib.suppress(StoreError):
                store.close()


@pytest.fixture
def split(
    redis_server: RedisServer, postgres: Cluster, request: pytest.FixtureRequest
) -> Iterator[Split]:
    """Split stores over the test's servers; PostgreSQL is up again afterwards."""
    made = Split(redis_server, postgres, f"split_{abs(hash(request.node.nodeid)) % 10**9}")
    yield made
    made.close()
    if postgres.process is None or postgres.process.poll() is not None:
        postgres.start()


def _step(n: int, session: str = "s") -> Step:
    return Step(
        tool="read", args={"path": f"f{n}"}, output=f"contents {n}", session=session, id=f"c{n}"
    )


def _failed(verdict: Verdict, mode: str) -> bool:
    """The verdict a store failure gives under ``mode``."""
    if mode == "block":
        return verdict.action is Action.BLOCK and verdict.detector == "store"
    return verdict.action is Action.CONTINUE and verdict.reason.startswith("unguarded")


@pytest.mark.parametrize("mode", ["allow", "block"])
def test_postgres_down_saves_no_state_and_follows_on_store_error(split: Split, mode: str) -> None:
    """PostgreSQL stopped: the step is not acknowledged, Redis keeps no state of it."""
    guard = split.guard(mode)
    for n in range(3):
        assert not _failed(guard.record(_step(n)), mode)
    split.postgres.stop()
    verdict = guard.record(_step(3))
    assert _failed(verdict, mode), verdict
    assert split.steps() == 3  # the state of step 3 was not saved
    split.postgres.start()
    again = guard.record(_step(3))  # the retry, once PostgreSQL is back
    assert again.action is Action.CONTINUE
    assert not _failed(again, mode)
    assert split.steps() == 4
    assert split.indexes() == [0, 1, 2, 3]


@pytest.mark.parametrize("mode", ["allow", "block"])
def test_redis_down_writes_no_record_and_follows_on_store_error(split: Split, mode: str) -> None:
    """Redis killed: the step is not acknowledged and PostgreSQL gets no record of it."""
    guard = split.guard(mode)
    for n in range(3):
        assert not _failed(guard.record(_step(n)), mode)
    split.redis.kill()
    verdict = guard.record(_step(3))
    assert _failed(verdict, mode), verdict
    assert split.indexes() == [0, 1, 2]
    split.redis.start()  # the append-only file brings back the three steps
    assert not _failed(guard.record(_step(3)), mode)
    assert split.steps() == 4
    assert split.indexes() == [0, 1, 2, 3]


def test_a_save_lost_after_the_record_is_retried_without_a_second_record(
    split: Split, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis dies between the record and the save: not acknowledged; the retry writes once."""
    guard = split.guard("allow")
    for n in range(2):
        guard.record(_step(n))
    store = guard.store
    assert isinstance(store, SplitStore)
    state: Any = store.state
    real_save = state._save

    def die_then_save(*args: Any) -> None:
        split.redis.kill()  # the record is committed in PostgreSQL by now
        real_save(*args)

    monkeypatch.setattr(state, "_save", die_then_save)
    assert _failed(guard.record(_step(2)), "allow")
    assert split.indexes() == [0, 1, 2]  # the record was kept...
    split.redis.start()
    assert split.steps() == 2  # ...and the state was not: the step is unacknowledged
    monkeypatch.setattr(state, "_save", real_save)
    retried = guard.record(_step(2))  # the same step id, delivered again
    assert not _failed(retried, "allow")
    assert split.steps() == 3
    assert split.indexes() == [0, 1, 2]  # judged again on the same state, recorded once
    repeat = guard.record(replace(_step(2), id="c9"))
    assert (repeat.action, repeat.detector) == (Action.STOP, "repeat")
    assert split.indexes() == [0, 1, 2, 3]


def test_a_loop_is_stopped_across_two_split_stores_and_recorded_in_postgres(split: Split) -> None:
    """Two guards on two split stores: the repeat reached through the second is stopped."""
    one, two = split.guard(), split.guard()
    assert one.record(_step(0)).action is Action.CONTINUE
    verdict = two.record(replace(_step(0), id="again"))
    assert (verdict.action, verdict.detector) == (Action.STOP, "repeat")
    records = PostgresStore.from_url(split.records_url)
    try:
        assert [r.action for r in records.audit_records("s")] == ["continue", "stop"]
        assert records.verify_audit() == []
    finally:
        records.close()
