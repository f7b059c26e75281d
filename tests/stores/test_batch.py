"""A batch of steps (``POST /v1/steps`` with many) is judged as the same steps one by one.

Interleaved sessions (distinct reads, a repeated search, an edit/test cycle, a command failing
the same way, steps sent again by their id) go to a ``Service`` in batches, to another one step
at a time, and to one in-process guard: every verdict must be the same, in the same order. The
batch is grouped: on Redis (and Redis with PostgreSQL records) it costs two Redis round trips
whatever its size (all its sessions locked and read in one, saved with every record in one).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tests.stores.conftest import POSTGRES, need_server, postgres_base
from tests.stores.test_faults_redis import RedisServer
from tests.stores.test_fleet_equivalence import FIELDS, _script

from antiloop import Guard, GuardConfig
from antiloop.core.redact import redact_value
from antiloop.core.step import step_from_dict
from antiloop.server.service import Service
from antiloop.stores import open_store
from antiloop.stores.split import SplitStore

pytestmark = pytest.mark.redis

CONFIG = GuardConfig(embedder="ngram")


def _store(kind: str, redis: RedisServer, tag: str, schemas: list[str]) -> Any:
    if kind == "sqlite":
        return open_store(f"sqlite:///{redis.directory}/{tag}.db")
    state = open_store(redis.url(prefix=tag))
    if kind == "redis":
        return state
    schema = f"batch_{tag}_{uuid.uuid4().hex[:8]}"
    schemas.append(schema)
    return SplitStore(state, open_store(f"{postgres_base()}?schema={schema}"))


def _wire(verdict: dict[str, Any]) -> list[Any]:
    return [verdict[f] for f in FIELDS]


@pytest.mark.parametrize("kind", ["redis", "split", "sqlite"])
def test_a_batch_judges_as_its_steps_one_by_one(
    redis_server: RedisServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 25 (sessions repeated within a batch), single steps, one in-process guard."""
    from redis.connection import AbstractConnection

    sent = [0]  # requests sent to Redis (a pipeline, a script: one each)
    send = AbstractConnection.send_packed_command

    def counted(self: Any, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    if kind == "split":
        need_server("PostgreSQL", POSTGRES)
    schemas: list[str] = []
    batched = Service(_store(kind, redis_server, "b", schemas), "t0k3n-batch", config=CONFIG)
    single = Service(_store(kind, redis_server, "s", schemas), "t0k3n-batch", config=CONFIG)
    guard = Guard(config=CONFIG)
    steps = [step for _, step in _script(sessions=12, steps=10)]
    try:
        trips = []
        got: list[dict[str, Any]] = []
        for start in range(0, len(steps), 25):
            before = sent[0]
            got += batched.judge_all(steps[start : start + 25])
            trips.append(sent[0] - before)
        one = [single.judge_all([step])[0] for step in steps]
        want = []
        for step in steps:
            verdict = guard.record(step_from_dict(dict(step)))
            want.append(redact_value({**verdict.to_wire(0), "hint": verdict.hint}))
        assert [_wire(v) for v in got] == [_wire(v) for v in want]
        assert [_wire(v) for v in one] == [_wire(v) for v in want]
        assert {v["action"] for v in got} == {"continue", "ask", "stop"}
        records = []
        for service in (batched, single):
            assert service.store.verify_audit() == []
            found = service.store.audit_records()
            records.append([(r.session, r.index) for r in found if r.kind == "step"])
        assert records[0] == records[1]
        assert len(records[0]) == len(steps) - 24  # 24 steps were sent again by their id
        if kind != "sqlite":  # the whole batch: its sessions read in one, saved in one
            assert trips[1:] == [2] * (len(trips) - 1), trips  # the first one connects
    finally:
        for service in (batched, single):
            service.store.close()
        if schemas:
            import psycopg

            with psycopg.connect(postgres_base(), autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
