"""The Redis store on a real 3-master Redis Cluster (started by the ``redis_cluster`` fixture).

The contract suite runs on it too (the ``cluster`` backend); here: a session's keys share one
slot whatever its id, and a loop is stopped across two store objects.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action
from antiloop.stores import open_store
from antiloop.stores.redis import RedisStore

pytestmark = pytest.mark.redis

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")
SESSIONS = ["s", "", "}x", "a{b}c", "{", "ünï code"]


def _slot(client: Any, key: str) -> int:
    return int(client.execute_command("CLUSTER KEYSLOT", key))


@pytest.mark.parametrize("session", SESSIONS)
def test_a_sessions_keys_share_one_slot_and_a_loop_is_stopped_across_two_stores(
    redis_cluster: Any, session: str
) -> None:
    """Any session id: its keys hash to one slot; a repeat through a second store stops."""
    url = f"{redis_cluster.url}?prefix=cl-{uuid.uuid4().hex[:8]}"
    one, two = open_store(url), open_store(url)
    assert isinstance(one, RedisStore)
    try:
        client = redis_cluster.client()
        slots = {_slot(client, key) for key in one._keys(session)}
        assert len(slots) == 1, one._keys(session)
        step = Step(tool="grep", args={"pattern": "x"}, output="a.ts:3: x", session=session)
        first = Guard(config=CONFIG, store=one, audit=True, on_store_error="block")
        second = Guard(config=CONFIG, store=two, audit=True, on_store_error="block")
        assert first.record(step).action is Action.CONTINUE
        verdict = second.record(step)
        assert (verdict.action, verdict.detector) == (Action.STOP, "repeat")
        one.push_feedback(session, "hi")
        one.request_stop(session, "ann")
        assert two.interventions(session) == ("ann", ["hi"])
        assert [r.action for r in two.audit_records(session)] == ["continue", "stop"]
        assert two.verify_audit() == []
        client.close()
    finally:
        one.close()
        two.close()


def test_a_cluster_url_without_a_cluster_is_a_store_error() -> None:
    """redis+cluster:// to a port nobody listens on fails as a StoreError, not a hang."""
    from antiloop.core.errors import StoreError

    with pytest.raises(StoreError, match="could not reach the Redis Cluster"):
        open_store("redis+cluster://127.0.0.1:1?timeout=0.5")


def test_a_save_lost_after_the_records_is_retried_without_a_second_record(
    redis_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's master fails between the audit append and the save (a failover): the
    step is not acknowledged, and its retry by id is recorded once, not twice.

    Before the audit slot's ledger of step ids the retry appended its records again
    (indexes ``[0, 1, 2, 2]``).
    """
    from antiloop.core.errors import StoreError

    url = f"{redis_cluster.url}?prefix=cl-{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    assert isinstance(store, RedisStore)
    guard = Guard(config=CONFIG, store=store, audit=True, on_store_error="allow")
    steps = [Step(tool="read", args={"path": f"f{n}"}, session="s", id=f"c{n}") for n in range(3)]
    for step in steps[:2]:
        guard.record(step)
    real_call = store._call

    def save_fails(script: str, keys: list[str], args: list[Any], what: str, **kw: Any) -> Any:
        if what == "save":
            raise StoreError("the session's master went away")
        return real_call(script, keys, args, what, **kw)

    monkeypatch.setattr(store, "_call", save_fails)
    assert guard.record(steps[2]).reason.startswith("unguarded")
    monkeypatch.setattr(store, "_call", real_call)
    assert guard.record(steps[2]).action is Action.CONTINUE  # the retry, by the same id
    try:
        assert store.peek("s").steps == 3
        assert [r.index for r in store.audit_records("s")] == [0, 1, 2]
        assert store.verify_audit() == []
    finally:
        store.close()
