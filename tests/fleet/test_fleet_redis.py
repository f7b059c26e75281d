"""The fleet over real Redis: kills reach every fleet at once, are durable, survive a drop.

The shared Redis (127.0.0.1:6379) with a key prefix of the test's own, and a redis-server of
the test's own for the restart. Absent, the tests skip; under CI=true they fail.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.stores.conftest import REDIS, need_server
from tests.stores.test_faults_redis import RedisServer

from antiloop import Guard, GuardConfig
from antiloop.config import FleetConfig
from antiloop.core.step import Step
from antiloop.fleet import open_fleet
from antiloop.fleet.redis import RedisFleet
from antiloop.stores import open_store

pytestmark = pytest.mark.redis


def _until(ready: Callable[[], bool], what: str, limit: float = 10.0) -> float:
    """Seconds until ``ready()``; a limit for a stuck test, not a timed assertion."""
    started = time.monotonic()
    while not ready():
        assert time.monotonic() - started < limit, f"timed out waiting for {what}"
        time.sleep(0.005)
    return time.monotonic() - started


@pytest.fixture
def url() -> Iterator[str]:
    """A URL on the shared Redis with a prefix of the test's own; its keys dropped after."""
    need_server("Redis", REDIS)
    import redis

    prefix = f"fleet-test-{uuid.uuid4().hex[:10]}"
    yield f"redis://127.0.0.1:6379/0?prefix={prefix}"
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


def _fleet(url: str, **config: object) -> RedisFleet:
    fleet = open_fleet(url, FleetConfig(**config))  # type: ignore[arg-type]
    assert isinstance(fleet, RedisFleet)
    _until(fleet.listening.is_set, "the subscriber")
    return fleet


def test_a_kill_reaches_the_other_fleets_and_a_late_one_loads_it(url: str) -> None:
    a, b = _fleet(url), _fleet(url)
    try:
        a.kill("agent", "worker", by="alice", reason="spend")
        seen = _until(lambda: b.killed("s", "Worker", "Read", {}) is not None, "the kill on b")
        assert seen < 1.0  # pub/sub, not the refresh (5 s)
        late = _fleet(url)  # started after the kill: loads it from the hash
        verdict = late.killed("s", "worker", "Read", {})
        assert verdict is not None
        assert "by alice" in verdict.reason
        late.close()
        a.lift("agent", "worker")
        _until(lambda: b.killed("s", "worker", "Read", {}) is None, "the lift on b")
        cli = open_fleet(url, watch=False)  # a command line call: no subscriber
        assert cli.kills() == []
    finally:
        a.close()
        b.close()


def test_counts_are_shared_and_a_known_fingerprint_nudges_on_another_fleet(url: str) -> None:
    config = {"known_after": 2, "nudge": True}
    guards = [
        Guard(config=GuardConfig(embedder="ngram"), store=url, fleet=FleetConfig(**config))
        for _ in range(2)
    ]
    try:
        for g in guards:
            assert isinstance(g.fleet, RedisFleet)
            _until(g.fleet.listening.is_set, "the subscriber")
        grep = {"tool": "Grep", "args": {"pattern": "needle"}, "output": "a.py:3"}
        for n, sid in enumerate(("a", "b")):  # each loop's two steps on two guards
            guards[n % 2].record(Step(session=sid, tokens_out=7, **grep))  # type: ignore[arg-type]
            stop = guards[(n + 1) % 2].record(Step(session=sid, tokens_out=7, **grep))  # type: ignore[arg-type]
            assert stop.detector == "repeat"
        fp = stop.fingerprint
        other = guards[0].fleet
        assert other is not None
        _until(lambda: fp in other.known(), "the known event")  # learned from the channel
        nudged = guards[0].record(Step(session="c", **grep))  # type: ignore[arg-type]
        assert nudged.detector == "known"
        assert "stopped 2 sessions" in nudged.reason
        again = guards[1].record(Step(session="c", tool="Read", args={"path": "x"}))
        assert again.detector is None
        view = other.status()
        row = view["fingerprints"][0]
        assert (row["fingerprint"], row["sessions"], row["tokens_wasted"]) == (fp, 2, 14)
        assert view["live_sessions"] == 3
        assert view["stops_last_hour"] == 2
        assert view["shared"]
    finally:
        for g in guards:
            if g.fleet is not None:
                g.fleet.close()
            g.store.close()


def test_the_fleet_of_a_store_object_shares_its_keys(url: str) -> None:
    store = open_store(url)
    try:
        fleet = open_fleet(store, watch=False)
        assert isinstance(fleet, RedisFleet)
        assert fleet.prefix in url
        fleet.kill("session", "s9", by="x")
        assert [k.key for k in open_fleet(url, watch=False).kills()] == ["session:s9"]
    finally:
        store.close()


def test_a_fleet_cut_off_reloads_the_kills_it_missed(tmp_path: Path) -> None:
    """A kill kept while its message was missed is read again when Redis comes back."""
    server = RedisServer(tmp_path)
    server.start()
    url = server.url(prefix="drop")
    fleet = _fleet(url, refresh=1000.0)  # no periodic reload: only the resubscription
    try:
        import redis

        raw = redis.Redis(port=server.port)
        kill = {"scope": "agent", "target": "w", "by": "ops", "at": 1.0, "reason": ""}
        raw.hset("drop:{fleet}:kills", "agent:w", json.dumps(kill))  # kept, never announced
        raw.close()
        assert fleet.killed("s", "w", "Read", {}) is None
        server.kill()  # the subscriber's connection drops
        _until(lambda: not fleet.listening.is_set(), "the subscriber to notice")
        assert fleet.killed("s", "w", "Read", {}) is None  # stays as it was meanwhile
        server.start()  # the append-only file kept the kill
        _until(fleet.listening.is_set, "the subscriber to come back", limit=30)
        verdict = fleet.killed("s", "w", "Read", {})
        assert verdict is not None
        assert "by ops" in verdict.reason
        assert fleet.subscriptions == 2
    finally:
        fleet.close()
        server.stop()


def test_the_fleet_over_a_redis_cluster(tmp_path: Path) -> None:
    """Kills, counts and nudges over a 3-master Redis Cluster (one hash tag: one slot)."""
    from tests.stores.conftest import RedisCluster

    cluster = RedisCluster(tmp_path)
    try:
        url = f"{cluster.url}?prefix=fc"
        a, b = _fleet(url, known_after=1, nudge=True), _fleet(url, refresh=0.2)
        try:
            a.kill("fingerprint", "AGENT::w::read::f1::same#00000000", by="ops")
            _until(lambda: b.killed("s", "W", "Read", {"path": "f1"}) is not None, "the kill")
            assert b.killed("s", "W", "Read", {"path": "f2"}) is None
            guard = Guard(config=GuardConfig(embedder="ngram"), store=url, fleet=a)
            step = Step(tool="Grep", args={"pattern": "x"}, output="a:1", session="c1")
            guard.record(step)
            assert guard.record(step).detector == "repeat"
            nudged = guard.record(Step(tool="Grep", args={"pattern": "x"}, session="c2"))
            assert nudged.detector == "known"
            view = b.status()
            assert view["fingerprints"][0]["sessions"] == 1
            assert view["live_sessions"] == 2
            _until(lambda: b.reloads >= 4, "reloads and PINGs on the cluster")
            assert b.subscriptions == 1
            guard.store.close()
        finally:
            a.close()
            b.close()
    finally:
        cluster.stop()


def test_the_subscriber_pings_and_reloads_what_was_never_announced(url: str) -> None:
    """Every ``refresh`` seconds: a PING answered on the subscription, and the hashes read."""
    import redis

    fleet = _fleet(url, refresh=0.2)
    try:
        prefix = url.rsplit("prefix=", 1)[1]
        raw = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        kill = {"scope": "session", "target": "s1", "by": "ops", "at": 1.0, "reason": ""}
        raw.hset(f"{prefix}:{{fleet}}:kills", "session:s1", json.dumps(kill))
        raw.close()
        _until(lambda: fleet.killed("s1", "a", "Read", {}) is not None, "the periodic reload")
        reloads = fleet.reloads
        _until(lambda: fleet.reloads >= reloads + 5, "five more reloads")
        assert fleet.subscriptions == 1  # every PING was answered: never subscribed again
    finally:
        fleet.close()
