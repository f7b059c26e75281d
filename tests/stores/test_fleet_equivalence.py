"""Judged as one process would: three `antiloop serve` replicas against one in-process guard.

Interleaved sessions (distinct reads, a repeated search, an edit/test cycle, a command failing
the same way, retries of a step by its id) go round-robin over three real replicas on loopback,
sharing a Redis of the test's own (and, for ``split``, records in PostgreSQL) or the Redis
Cluster of the ``redis_cluster`` fixture. The same steps,
in the same order, go to one in-process guard; every verdict must be the same.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.stores.conftest import POSTGRES, need_server, postgres_base
from tests.stores.test_faults_redis import RedisServer

from antiloop import Guard, GuardConfig
from antiloop.core.redact import redact_value
from antiloop.core.step import step_from_dict

pytestmark = pytest.mark.redis

FIELDS = ("action", "detector", "outcome", "fingerprint", "reason", "hint")


def _step(s: int, n: int) -> dict[str, Any]:
    """Step ``n`` of session ``s``: the session's kind is ``s % 4``."""
    session = f"eq{s}"
    kind = s % 4
    if kind == 0:  # distinct reads: never a loop
        return {"session": session, "tool": "Read", "args": {"path": f"f{n}"}, "output": f"{n}"}
    if kind == 1:  # the same search again and again
        return {"session": session, "tool": "Grep", "args": {"pattern": "x"}, "output": "a.ts:3"}
    if kind == 2:  # edit, run the failing test, edit back, run it: a cycle
        if n % 2:
            return {
                "session": session,
                "tool": "Bash",
                "args": {"command": "pytest -q"},
                "output": "1 failed",
                "exit_code": 1,
            }
        return {
            "session": session,
            "tool": "Edit",
            "args": {
                "file_path": "a.py",
                "old": "x" if n % 4 else "y",
                "new": "y" if n % 4 else "x",
            },
            "output": "ok",
        }
    return {  # the same command failing the same way, with different arguments
        "session": session,
        "tool": "Bash",
        "args": {"command": f"make build -j{n}"},
        "error": "make: *** No rule to make target 'build'.",
        "exit_code": 2,
    }


def _script(sessions: int, steps: int) -> list[tuple[int, dict[str, Any]]]:
    """``(replica, step)``, round-robin over sessions; a session's next step goes to the next
    replica, and every fifth step has an id and is sent again, to the replica after."""
    out = []
    for n in range(steps):
        for s in range(sessions):
            step = _step(s, n)
            out.append(((s + n) % 3, step))
            if (s + n) % 5 == 0:
                step["id"] = f"call-{s}-{n}"
                out.append(((s + n + 1) % 3, dict(step)))
    return out


def _post(url: str, step: dict[str, Any], token: str) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - plain HTTP to the loopback replicas
        f"{url}/v1/steps",
        data=json.dumps(step).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        answer: dict[str, Any] = json.loads(response.read())
        return answer


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """The replicas' store arguments: a Redis of the test's own (``redis``), the same with
    records in a PostgreSQL schema of the test's own (``split``), or the Redis Cluster."""
    if request.param == "sqlite":  # three processes on one file
        yield ["--store", f"sqlite:///{tmp_path / 'fleet.db'}"]
        return
    if request.param == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        yield ["--store", f"{cluster.url}?prefix=eq-{uuid.uuid4().hex[:8]}"]
        return
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        if request.param != "split":
            yield ["--store", redis.url(prefix="eq")]
            return
        need_server("PostgreSQL", POSTGRES)
        base = postgres_base()
        schema = f"eq_{uuid.uuid4().hex[:12]}"
        yield ["--store", redis.url(prefix="eq"), "--records", f"{base}?schema={schema}"]
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        redis.stop()


@pytest.mark.parametrize("stores", ["sqlite", "redis", "split", "cluster"], indirect=True)
def test_three_replicas_judge_as_one_in_process_guard(tmp_path: Path, stores: list[str]) -> None:
    """Every verdict of the fleet equals the in-process guard's, step for step."""
    from tests.server.conftest import TOKEN, start_server, stop_server

    replicas = [start_server(tmp_path, *stores) for _ in range(3)]
    guard = Guard(config=GuardConfig(embedder="ngram"))
    actions: dict[str, int] = {}
    script = _script(sessions=12, steps=10)
    reads = _ReadCounter(stores)
    try:
        mismatched = []
        for i, (replica, step) in enumerate(script):
            url = replicas[replica].url
            # counted from the second half on: every replica has seen every session
            got = reads.post(lambda u=url, s=step: _post(u, s, TOKEN), i >= len(script) // 2)
            actions[got["action"]] = actions.get(got["action"], 0) + 1
            verdict = guard.record(step_from_dict(dict(step)))
            want = redact_value({**verdict.to_wire(0), "hint": verdict.hint})
            if [got[f] for f in FIELDS] != [want[f] for f in FIELDS]:
                mismatched.append((i, step, {f: got[f] for f in FIELDS}, want))
    finally:
        for replica in replicas:
            stop_server(replica)
    assert mismatched == []
    said = reads.check(len(replicas))
    states = [guard.store.peek(f"eq{s}") for s in range(12)]
    stopped = sum(1 for state in states if state is not None and state.ended is not None)
    assert stopped == 6  # the repeats and the cycles ended their sessions, in both
    assert set(actions) == {"continue", "ask", "stop"}  # the failing command asked
    kind = " ".join(stores)
    print(f"fleet equivalence ({kind}): {len(script)} steps, {actions}, all the same{said}")


class _ReadCounter:
    """Redis's read events (round trips) of each step sent, on a server of the test's own.

    Steps answered ``continue`` are counted: the store's own round trips, as a stop adds the
    fleet's count of stops (``antiloop.fleet``, one script). A replica's fleet subscriber
    also sends a PING every ``refresh`` (5) seconds, which may fall in a step's count.
    """

    def __init__(self, stores: list[str]) -> None:
        url = stores[1]
        self.client: Any = None
        if url.startswith("redis://"):
            import redis

            self.client = redis.Redis.from_url(url.split("?")[0])
        self.counts: list[int] = []
        self.started = time.monotonic()

    def _reads(self) -> int:
        return int(self.client.info("stats")["total_reads_processed"])

    def post(self, send: Callable[[], dict[str, Any]], counted: bool) -> dict[str, Any]:
        """``send()``, counting its round trips when ``counted`` and its verdict continues."""
        if self.client is None or not counted:
            return send()
        if not self.counts:
            self.started = time.monotonic()
        before = self._reads()
        got = send()
        after = self._reads()
        if got["action"] == "continue":
            self.counts.append(after - before - 1)  # the second INFO is a read too
        return got

    def check(self, replicas: int) -> str:
        """The round trips a step (asserted: two, but for the subscribers' PINGs)."""
        if self.client is None:
            return ""
        self.client.close()
        pings = replicas * ((time.monotonic() - self.started) / 5 + 2)
        excess = sum(max(0, n - 2) for n in self.counts)
        assert excess <= pings, f"round trips of continued steps: {self.counts}"
        return f", {sum(self.counts) / len(self.counts):.2f} Redis round trips a step"


@pytest.mark.parametrize("stores", ["sqlite", "redis", "split"], indirect=True)
def test_three_replicas_under_concurrent_clients_judge_as_one_guard(
    tmp_path: Path, stores: list[str]
) -> None:
    """Six clients at once, each with two sessions, round-robin over three replicas: requests
    in flight together are judged in groups (``antiloop.server.groups``); each session's
    verdicts are the in-process guard's for that session's steps."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.server.conftest import TOKEN, start_server, stop_server

    replicas = [start_server(tmp_path, *stores) for _ in range(3)]
    script = _script(sessions=12, steps=10)
    mine: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for replica, step in script:  # client c sends the steps of sessions c and c + 6, in order
        mine.setdefault(int(step["session"][2:]) % 6, []).append((replica, step))

    def client(steps: list[tuple[int, dict[str, Any]]]) -> list[tuple[str, list[Any]]]:
        return [
            (step["session"], [got[f] for f in FIELDS])
            for replica, step in steps
            for got in [_post(replicas[replica].url, step, TOKEN)]
        ]

    try:
        with ThreadPoolExecutor(6) as pool:
            answers = [row for rows in pool.map(client, mine.values()) for row in rows]
    finally:
        for replica in replicas:
            stop_server(replica)
    guard = Guard(config=GuardConfig(embedder="ngram"))
    want: dict[str, list[list[Any]]] = {}
    for _, step in script:
        verdict = guard.record(step_from_dict(dict(step)))
        wire = redact_value({**verdict.to_wire(0), "hint": verdict.hint})
        want.setdefault(step["session"], []).append([wire[f] for f in FIELDS])
    got: dict[str, list[list[Any]]] = {}
    for session, fields in answers:
        got.setdefault(session, []).append(fields)
    assert got == want
