"""Judged as one process would: three `antiloop serve` replicas against one in-process guard.

Interleaved sessions (distinct reads, a repeated search, an edit/test cycle, a command failing
the same way, retries of a step by its id) go round-robin over three real replicas on loopback,
sharing a Redis of the test's own (and, for ``split``, records in PostgreSQL) or the Redis
Cluster of the ``redis_cluster`` fixture. The same steps,
in the same order, go to one in-process guard; every verdict must be the same.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
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


@pytest.mark.parametrize("stores", ["redis", "split", "cluster"], indirect=True)
def test_three_replicas_judge_as_one_in_process_guard(tmp_path: Path, stores: list[str]) -> None:
    """Every verdict of the fleet equals the in-process guard's, step for step."""
    from tests.server.conftest import TOKEN, start_server, stop_server

    replicas = [start_server(tmp_path, *stores) for _ in range(3)]
    guard = Guard(config=GuardConfig(embedder="ngram"))
    actions: dict[str, int] = {}
    script = _script(sessions=12, steps=10)
    try:
        mismatched = []
        for i, (replica, step) in enumerate(script):
            got = _post(replicas[replica].url, step, TOKEN)
            actions[got["action"]] = actions.get(got["action"], 0) + 1
            verdict = guard.record(step_from_dict(dict(step)))
            want = redact_value({**verdict.to_wire(0), "hint": verdict.hint})
            if [got[f] for f in FIELDS] != [want[f] for f in FIELDS]:
                mismatched.append((i, step, {f: got[f] for f in FIELDS}, want))
    finally:
        for replica in replicas:
            stop_server(replica)
    assert mismatched == []
    states = [guard.store.peek(f"eq{s}") for s in range(12)]
    stopped = sum(1 for state in states if state is not None and state.ended is not None)
    assert stopped == 6  # the repeats and the cycles ended their sessions, in both
    assert set(actions) == {"continue", "ask", "stop"}  # the failing command asked
    kind = " ".join(stores)
    print(f"fleet equivalence ({kind}): {len(script)} steps, {actions}, all the same")
