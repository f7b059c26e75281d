"""The Redis store's compare-and-set judging: round trips, retries and the audit chain."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.audit import AuditEvent
from antiloop.core.history import SessionState

from .conftest import Backend

pytestmark = pytest.mark.redis

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")


@pytest.fixture
def redis_backend(tmp_path: Path) -> Iterator[Backend]:
    """The Redis backend (skipped when no server listens, a failure under CI=true)."""
    b = Backend("redis", tmp_path)
    yield b
    b.cleanup()


class RoundTrips:
    """Counts what redis-py sends: each command or pipeline is one send and one reply."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from redis.connection import Connection

        self.count = 0
        original = Connection.send_packed_command

        def send(conn: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            original(conn, command, check_health)

        monkeypatch.setattr(Connection, "send_packed_command", send)


def _step(n: int, session: str = "s") -> Step:
    return Step(tool="bash", args={"command": f"ls {n}"}, output=f"{n}", session=session)


def test_a_warm_step_is_one_round_trip_and_a_cold_one_two(
    redis_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that saved the session last judges in one round trip; a new one reads first."""
    guard = Guard(store=redis_backend.open(), config=CONFIG, audit=True)
    guard.record(_step(0))  # connects, reads the session and the audit head
    trips = RoundTrips(monkeypatch)
    for n in range(1, 6):
        guard.record(_step(n))
    assert trips.count == 5
    fresh = Guard(store=redis_backend.open(), config=CONFIG, audit=True)
    fresh.record(_step(9, "t"))  # connect (none counted: the pool is new), then read + save
    before = trips.count
    fresh.record(_step(10, "u"))
    assert trips.count - before == 2
    assert fresh.store.verify_audit() == []


def _judge_once(store: Any, session: str, seen: list[int]) -> None:
    def fn(state: SessionState) -> tuple[None, list[AuditEvent]]:
        seen.append(state.steps)
        state.steps += 1
        return None, [AuditEvent("step", session, float(state.steps))]

    store.judge(session, fn)


def test_a_step_is_judged_again_on_the_state_another_guard_saved(redis_backend: Backend) -> None:
    """When another store saved the session since, the step is judged again on the new state."""
    one, two = redis_backend.open(), redis_backend.open()
    seen: list[int] = []
    _judge_once(one, "s", seen)
    _judge_once(two, "s", seen)
    _judge_once(one, "s", seen)  # its cached state (1 step) is stale: judged again on 2
    assert seen == [0, 1, 1, 2]
    assert one.peek("s").steps == 3
    assert one.verify_audit() == []
    # one record per judgement kept, from the state it was saved on: the conflicting first
    # try (stamped 2.0, on the stale 1-step state) left nothing behind
    assert [(r.seq, r.session, r.kind, r.at) for r in one.audit_records()] == [
        (1, "s", "step", 1.0),
        (2, "s", "step", 2.0),
        (3, "s", "step", 3.0),
    ]


def test_records_are_chained_again_when_another_guard_appended_first(
    redis_backend: Backend,
) -> None:
    """Two stores writing other sessions keep one unbroken audit chain."""
    one, two = redis_backend.open(), redis_backend.open()
    seen: list[int] = []
    for n in range(4):
        _judge_once(one, "a", seen)
        _judge_once(two, f"b{n}", seen)
    assert one.verify_audit() == []
    assert [r.seq for r in one.audit_records()] == list(range(1, 9))


def test_judging_waits_for_a_transaction_and_then_sees_its_change(
    redis_backend: Backend,
) -> None:
    """A step judged while transaction() holds the session is saved after it, on its state."""
    one, two = redis_backend.open(), redis_backend.open()
    judged = threading.Event()
    seen: list[int] = []

    def fn(state: SessionState) -> tuple[None, list[AuditEvent]]:
        seen.append(state.steps)
        state.steps += 1
        judged.set()
        return None, []

    with one.transaction("s") as state:
        worker = threading.Thread(target=two.judge, args=("s", fn))
        worker.start()
        assert judged.wait(30)
        state.steps = 10
    worker.join(30)
    assert seen == [0, 10]
    assert one.peek("s").steps == 11


def test_threads_on_two_guards_record_every_step(redis_backend: Backend) -> None:
    """Guards on two store objects recording one session from four threads lose no step."""
    guards = [Guard(store=redis_backend.open(), config=CONFIG, audit=True) for _ in range(2)]

    def work(i: int) -> None:
        for n in range(20):
            guards[i % 2].record(_step(i * 100 + n))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = redis_backend.open()
    assert store.peek("s").steps == 80
    assert store.verify_audit() == []
    assert len(list(store.audit_records("s"))) == 80


def test_stop_and_feedback_are_read_in_one_round_trip(
    redis_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service reads a session's stop request and takes its feedback in one round trip."""
    store = redis_backend.open()
    store.push_feedback("s", "try the staging config")
    store.push_feedback("s", "and be quick")
    store.request_stop("s", "ana")
    assert store.interventions("s") == ("ana", ["try the staging config", "and be quick"])
    trips = RoundTrips(monkeypatch)
    assert store.interventions("s") == ("ana", [])
    assert trips.count == 1
    store.clear_stop("s")
    assert store.interventions("s") == (None, [])


@pytest.mark.parametrize("policy", ["allow", "block"])
@pytest.mark.parametrize("damage", [b"garbage", b"", b"7 short", "\u00e9 x".encode()])
def test_a_damaged_audit_head_is_reported_and_later_steps_still_recorded(
    redis_backend: Backend, policy: str, damage: bytes
) -> None:
    """A head that is not 'seq hash' is a problem verify names; steps go on being recorded."""
    guard = Guard(store=redis_backend.open(), config=CONFIG, audit=True, on_store_error=policy)
    guard.record(_step(0))
    guard.record(_step(1))
    head_key = f"{redis_backend.open().prefix}:{{audit}}:head"
    redis_backend.tamper(lambda c: c.set(head_key, damage))
    if damage:
        assert [p.kind for p in redis_backend.open().verify_audit()][:1] == ["head"]
    fresh = Guard(store=redis_backend.open(), config=CONFIG, audit=True, on_store_error=policy)
    for n in (2, 3):
        verdict = fresh.record(_step(n))
        assert verdict.detector != "store", verdict.reason
        assert not verdict.reason.startswith("unguarded"), verdict.reason
    store = redis_backend.open()
    assert [r.seq for r in store.audit_records("s")] == [1, 2, 3, 4]
    assert store.verify_audit() == []
