"""``wait_replicas``: a step is acknowledged only once that many Redis replicas hold it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.stores.faults import store_failed
from tests.stores.test_faults_redis import RedisServer

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action

pytestmark = pytest.mark.redis

CONFIG = GuardConfig(detectors=("repeat",), embedder="ngram")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A Redis and a second one, not yet its replica."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    master, replica = RedisServer(tmp_path / "a"), RedisServer(tmp_path / "b")
    master.start()
    replica.start()
    yield master, replica
    master.stop()
    replica.stop()


def test_without_a_replica_no_step_is_acknowledged_then_with_one_each_is(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    """No replica: each step is a store failure naming wait_replicas; one attached: acknowledged."""
    import redis

    master, replica = pair
    url = master.url(prefix=f"w{uuid.uuid4().hex[:6]}", wait_replicas=1, timeout=0.4)
    guard = Guard(config=CONFIG, store=url, audit=True, on_store_error="block")
    step = Step(tool="read", args={"path": "a"}, output="1", session="s", id="c0")
    refused = guard.record(step)
    assert store_failed(refused)
    assert "0 of wait_replicas=1 replicas held the write" in refused.reason
    client = redis.Redis(port=replica.port)
    client.replicaof("127.0.0.1", master.port)
    client.close()
    again = guard.record(step)  # once the replica caught up (WAIT waits for it)
    for _ in range(50):  # the first sync may take longer than one WAIT
        if not store_failed(again):
            break
        again = guard.record(step)
    assert again.action is Action.CONTINUE
    repeat = guard.record(Step(tool="read", args={"path": "a"}, output="1", session="s", id="c1"))
    assert (repeat.action, repeat.detector) == (Action.STOP, "repeat")
    copy = Guard(store=replica.url(prefix=url.split("prefix=")[1].split("&")[0])).store
    try:
        state = copy.peek("s")
        assert state is not None
        assert state.steps == 2  # the replica holds both acknowledged steps
    finally:
        copy.close()
        guard.store.close()
