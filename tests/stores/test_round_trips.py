"""Redis round trips per step as a fleet makes them: two round trips, whatever replica."""

from __future__ import annotations

import pytest
from tests.stores.test_faults_redis import RedisServer

from antiloop import Guard, GuardConfig, Step
from antiloop.stores.redis import RedisStore

pytestmark = pytest.mark.redis


def _reads(client: object) -> int:
    return int(client.info("stats")["total_reads_processed"])  # type: ignore[attr-defined]


def test_a_step_costs_two_round_trips_even_when_replicas_take_turns(
    redis_server: RedisServer,
) -> None:
    """Interventions then the judgement, on three stores in turn (as `serve` replicas behind
    a round-robin balancer): each step is two Redis round trips (it was three: the session's
    state read again after another replica saved it)."""
    import redis

    stores = [RedisStore.from_url(redis_server.url()) for _ in range(3)]
    guards = [Guard(config=GuardConfig(embedder="ngram"), store=s, audit=True) for s in stores]
    client = redis.Redis(port=redis_server.port)
    try:
        for n in range(3):  # every store has seen the audit head and the sessions
            for s in range(4):
                stores[n].interventions(f"s{s}")
                guards[n].record(Step(tool="read", args={"path": f"w{n}"}, session=f"s{s}"))
        steps = 0
        before = _reads(client)
        for n in range(12):
            for s in range(4):
                replica = (n + s) % 3
                stores[replica].interventions(f"s{s}")
                step = Step(tool="read", args={"path": f"f{n}"}, output=f"{n}", session=f"s{s}")
                assert guards[replica].record(step).action.name == "CONTINUE"
                steps += 1
        trips = _reads(client) - before - 1  # the INFO call itself is one
        assert trips == 2 * steps, f"{trips / steps:.2f} round trips a step"
    finally:
        client.close()
        for store in stores:
            store.close()
