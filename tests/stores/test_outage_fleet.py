"""Outages under a fleet: three `antiloop serve` replicas under load, the stores the tests start.

Redis restarted after 1 s and 5 s, a Sentinel failover (master SIGKILLed), a replica SIGKILLed,
PostgreSQL records stopped 10 s and hung 10 s (SIGSTOP). The client takes every answer as an
agent would (``Load(retry_unguarded=False)``): it sends a step again only to another replica
when its replica gave no answer. Each fault must be ridden out by the store-call retries
(``antiloop.outage``): no step answered unguarded, every planted repeat stopped at its second
step, every answered step in the audit log once the store is back, none twice. A last test
keeps the retry window short on purpose: the steps answered unguarded are journaled and replayed,
marked unguarded, none lost or doubled.

Each test prints its figures; with ``ANTILOOP_OUTAGE_FIGURES`` set they are appended there as JSON
lines (``python -m bench outage`` writes them to bench/RESULTS.md).
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.stores.fleet import LOOP_AT, Load, Replica, start_replica
from tests.stores.sentinel import SentinelGroup
from tests.stores.test_faults_postgres import Cluster
from tests.stores.test_faults_redis import RedisServer

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action
from antiloop.outage import OutageConfig
from antiloop.stores import open_store

pytestmark = pytest.mark.redis


def _config(tmp: Path, window: float) -> list[str]:
    """The replicas' ``--config`` (the retry window) and ``--store-timeout`` above it."""
    path = tmp / f"antiloop-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(f"[outage]\nretry_window = {window}\nmax_backoff = 0.5\n")
    return ["--config", str(path), "--store-timeout", str(window + 5)]


def _fleet(tmp: Path, stores: list[str], window: float = 10.0) -> list[Replica]:
    return [start_replica(tmp, *stores, *_config(tmp, window)) for _ in range(3)]


def _stop(replicas: list[Replica]) -> None:
    for replica in replicas:
        replica.stop()


def _kept(load: Load, store: Any) -> tuple[int, int, int]:
    """(lost, doubled, marked unguarded): each sent step's args against the audit records."""
    lost = doubled = marked = 0
    for session, sent in load.sent.items():
        want = Counter(json.dumps(b["args"], sort_keys=True) for b in sent)
        records = [r for r in store.audit_records(session) if r.kind == "step"]
        got = Counter(json.dumps(json.loads(r.args or "{}"), sort_keys=True) for r in records)
        marked += sum(1 for r in records if r.detail.get("unguarded"))
        lost += sum(max(n - got[k], 0) for k, n in want.items())
        doubled += sum(max(n - want[k], 0) for k, n in got.items())
    return lost, doubled, marked


def _planted(load: Load) -> tuple[int, int]:
    """(planted repeats stopped at their second step, planted repeats)."""
    stopped = planted = 0
    for session, answers in load.answers.items():
        if int(session[2:]) % 3 == 0:
            planted += 1
            last = answers[LOOP_AT] if len(answers) > LOOP_AT else {}
            stopped += (last.get("action"), last.get("detector")) == ("stop", "repeat")
    return stopped, planted


def _keep(figures: dict[str, Any]) -> None:
    """Print the figures; append them to ``ANTILOOP_OUTAGE_FIGURES`` when it is set."""
    print(f"{figures['fault']}: {json.dumps(figures)}")
    target = os.environ.get("ANTILOOP_OUTAGE_FIGURES")
    if target:
        with Path(target).open("a", encoding="utf-8") as out:
            out.write(json.dumps(figures) + "\n")


def _report(name: str, load: Load, store: Any, *, ridden_out: bool = True) -> dict[str, Any]:
    """Print and keep the figures; the harm must be none."""
    try:
        lost, doubled, marked = _kept(load, store)
        checked = load.check(store) if ridden_out else None
    finally:
        store.close()
    stopped, planted = _planted(load)
    waits = sorted(load.waits)
    figures = {
        "fault": name,
        "steps": len(waits),
        "unguarded": load.unguarded,
        "resent": load.failures,
        "wait_p50": statistics.median(waits),
        "wait_p99": waits[min(len(waits) - 1, round(0.99 * (len(waits) - 1)))],
        "wait_max": waits[-1],
        "repeats_stopped": f"{stopped}/{planted}",
        "missing": lost,
        "doubled": doubled,
        "marked_unguarded": marked,
        "load": os.getloadavg()[0],
    }
    _keep(figures)
    assert (lost, doubled) == (0, 0)
    if ridden_out:
        assert load.unguarded == 0
        assert stopped == planted
        assert checked is not None
        assert checked.harm() == (0, 0, 0, 0)
    else:
        # each unguarded answer is in the log once (missing 0), marked, unless the attempt that
        # failed had reached the store before its connection broke: then that record stands
        # and the replay of the same step id adds none
        assert 0 < marked <= load.unguarded
    return figures


@pytest.mark.slow
@pytest.mark.parametrize("down", [1.0, 5.0])
def test_redis_restarted_under_load_is_ridden_out(
    tmp_path: Path, redis_server: RedisServer, down: float
) -> None:
    """Redis SIGKILLed and started again ``down`` seconds later, three replicas under load."""
    url = redis_server.url(prefix=f"o{uuid.uuid4().hex[:6]}")
    replicas = _fleet(tmp_path, ["--store", url])
    load = Load([r.url for r in replicas], sessions=24, steps=12, retry_unguarded=False)

    def restart(load: Load) -> None:
        load.wait_for(0.3)
        redis_server.kill()
        time.sleep(down)  # the outage itself, not a timed assertion
        redis_server.start()

    try:
        load.run(restart)
    finally:
        _stop(replicas)
    figures = _report(f"Redis restarted after {down:g} s", load, open_store(url))
    assert figures["wait_max"] >= down * 0.5  # some steps did wait for the restart


@pytest.mark.slow
def test_a_sentinel_failover_under_load_is_ridden_out(tmp_path: Path) -> None:
    """The master SIGKILLed: the sentinels promote a replica; steps wait for it, none is lost
    (``wait_replicas=1``: a step is acknowledged once a replica holds it)."""
    group = SentinelGroup(tmp_path)
    try:
        group.start()
        url = f"{group.url}?prefix=o{uuid.uuid4().hex[:6]}&wait_replicas=1&timeout=1"
        replicas = _fleet(tmp_path, ["--store", url], window=20.0)
        load = Load([r.url for r in replicas], sessions=24, steps=12, retry_unguarded=False)

        def failover(load: Load) -> None:
            load.wait_for(0.3)
            group.wait_failover(group.kill_master())

        try:
            load.run(failover)
        finally:
            _stop(replicas)
        _report("Sentinel failover (master SIGKILLed)", load, open_store(url))
    finally:
        group.stop()


def test_a_replica_sigkilled_under_load(tmp_path: Path, redis_server: RedisServer) -> None:
    """One of three replicas SIGKILLed with requests in flight: those go to another replica."""
    url = redis_server.url(prefix=f"o{uuid.uuid4().hex[:6]}")
    replicas = _fleet(tmp_path, ["--store", url])
    load = Load([r.url for r in replicas], sessions=24, steps=12, retry_unguarded=False)

    def kill_one(load: Load) -> None:
        load.wait_for(0.4)
        replicas[1].kill()

    try:
        load.run(kill_one)
    finally:
        _stop(replicas)
    assert load.failures  # the killed replica's requests went elsewhere
    _report("a replica SIGKILLed", load, open_store(url))


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    """A PostgreSQL of the module's own; each test has its schema."""
    made = Cluster()
    made.start()
    yield made
    made.destroy()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["stopped", "hung"])
def test_postgres_records_stopped_or_hung_10s_are_ridden_out(
    tmp_path: Path, redis_server: RedisServer, postgres: Cluster, fault: str
) -> None:
    """PostgreSQL (the records of a split store) stopped or SIGSTOPped for 10 s under load, with
    a retry window longer than the outage (``[outage] retry_window = 25``)."""
    state = redis_server.url(prefix=f"o{uuid.uuid4().hex[:6]}", lock_ttl=3)
    records = f"{postgres.url}?schema=o_{uuid.uuid4().hex[:10]}&timeout=2"
    stores = ["--store", state, "--records", records]
    open_store(state, records=records).close()  # the schema made before the outage
    replicas = _fleet(tmp_path, stores, window=25.0)
    load = Load([r.url for r in replicas], sessions=12, steps=12, retry_unguarded=False)

    def outage(load: Load) -> None:
        load.wait_for(0.3)
        postgres.stop() if fault == "stopped" else postgres.hang()
        time.sleep(10.0)  # the outage itself, not a timed assertion
        postgres.start() if fault == "stopped" else postgres.resume()

    try:
        load.run(outage)
    finally:
        _stop(replicas)
        postgres.resume()
        if postgres.process is None or postgres.process.poll() is not None:
            postgres.start()
    _report(f"PostgreSQL records {fault} 10 s", load, open_store(state, records=records))


@pytest.mark.postgres
def test_a_hung_postgres_holds_a_step_for_the_window_at_most(
    tmp_path: Path, postgres: Cluster
) -> None:
    """PostgreSQL SIGSTOPped: the calls (1 s ``timeout`` each) are retried for the window (3 s),
    the last one cut at its end; then the step follows on_store_error and is journaled."""
    url = f"{postgres.url}?schema=h_{uuid.uuid4().hex[:10]}&timeout=1"
    outage = OutageConfig(retry_window=3.0, journal=str(tmp_path))
    guard = Guard(store=url, config=GuardConfig(embedder="ngram"), outage=outage)
    step = Step(tool="read", args={"path": "a"}, output="x", session="h")
    assert guard.record(step).action is Action.CONTINUE
    postgres.hang()
    try:
        started = time.monotonic()
        verdict = guard.record(step)
        held = time.monotonic() - started
    finally:
        postgres.resume()
    assert "unguarded" in verdict.reason
    assert "attempts" in verdict.reason  # retried, not given up at the first timeout
    assert held < 4.0  # within the window, its last call cut at the end (not a speed figure)
    _keep({"fault": "PostgreSQL hung, one step (window 3 s, timeout 1 s)", "held": held})
    assert guard.replay_journal() == 1
    guard.store.close()


def test_past_the_window_steps_are_journaled_and_replayed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A window (0.5 s) shorter than the outage (3 s): the steps answered meanwhile are
    unguarded, journaled by their replica, replayed once Redis is back, marked, none twice."""
    url = redis_server.url(prefix=f"o{uuid.uuid4().hex[:6]}")
    replicas = _fleet(tmp_path, ["--store", url], window=0.5)
    load = Load([r.url for r in replicas], sessions=12, steps=12, retry_unguarded=False)

    def outage(load: Load) -> None:
        load.wait_for(0.3)
        redis_server.kill()
        time.sleep(3.0)  # the outage itself, not a timed assertion
        redis_server.start()

    try:
        load.run(outage)
        store = open_store(url)
        deadline = time.monotonic() + 60  # the replay threads' limit, not a timed assertion
        while _kept(load, store)[0] and time.monotonic() < deadline:  # until none is missing
            time.sleep(0.2)
    finally:
        _stop(replicas)
    assert load.unguarded  # the outage outlasted the window
    _report("Redis down 3 s, window 0.5 s (journal)", load, store, ridden_out=False)
