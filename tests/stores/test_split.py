"""The split store's plumbing: ``Guard(records=)``, ``open_store(records=)``, ``antiloop
serve --records`` and ``ANTILOOP_RECORDS`` for hooks, on the shared Redis and PostgreSQL.

(The contract suite runs on the split store as the ``split`` backend; faults are in
test_faults_split.py.)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module
from tests.stores.conftest import Backend

from antiloop import Guard, GuardConfig, Step
from antiloop.core.errors import ConfigError
from antiloop.core.history import SessionState
from antiloop.core.verdict import Action
from antiloop.stores import open_store
from antiloop.stores.memory import MemoryStore
from antiloop.stores.postgres import PostgresStore
from antiloop.stores.redis import RedisStore
from antiloop.stores.split import SplitStore

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")


@pytest.fixture
def split(tmp_path: Path) -> Iterator[Backend]:
    """A split backend: ``state_url`` (Redis) and ``url`` (PostgreSQL), cleaned up after."""
    made = Backend("split", tmp_path)
    yield made
    made.cleanup()


def _records(url: str, session: str = "s") -> list[str]:
    store = PostgresStore.from_url(url)
    try:
        return [r.action or "" for r in store.audit_records(session)]
    finally:
        store.close()


def _redis_steps(url: str, session: str = "s") -> int:
    store = RedisStore.from_url(url)
    try:
        found = store.peek(session)
        return 0 if found is None else found.steps
    finally:
        store.close()


def _grep(id: str) -> Step:
    return Step(tool="grep", args={"pattern": "x"}, output="a.ts:3: x", session="s", id=id)


def test_guard_with_records_keeps_state_in_redis_and_records_in_postgres(split: Backend) -> None:
    """Guard(store=redis, records=postgresql): the state in Redis, each verdict in PostgreSQL."""
    guard = Guard(config=CONFIG, store=split.state_url, records=split.url)
    assert isinstance(guard.store, SplitStore)
    assert guard.record(_grep("1")).action is Action.CONTINUE
    assert guard.record(_grep("2")).action is Action.STOP
    assert _redis_steps(split.state_url) == 2
    assert _records(split.url) == ["continue", "stop"]
    assert "records=postgresql://" in guard.store.url
    guard.store.close()


def test_approvals_and_interventions_live_in_the_records_store(split: Backend) -> None:
    """Feedback and stop requests sent through the split store are in PostgreSQL, not Redis."""
    store = open_store(split.state_url, records=split.url)
    assert isinstance(store, SplitStore)
    store.push_feedback("s", "look at b.ts")
    store.request_stop("s", "ann")
    pg = PostgresStore.from_url(split.url)
    redis = RedisStore.from_url(split.state_url)
    try:
        assert pg.stop_requested("s") == "ann"
        assert redis.stop_requested("s") is None
        assert store.pop_feedback("s") == ["look at b.ts"]
    finally:
        pg.close()
        redis.close()
        store.close()


def test_a_records_store_without_an_audit_log_is_a_config_error() -> None:
    """A records store lacking the audit log or approvals is refused with a clear message."""

    class Bare:
        url = "bare://"

        def transaction(self, session: str) -> Any:
            raise NotImplementedError

        def peek(self, session: str) -> SessionState | None:
            return None

        def forget(self, session: str) -> None:
            return None

        def sessions(self) -> list[str]:
            return []

        def close(self) -> None:
            return None

    with pytest.raises(ConfigError, match="keeps no append_audit"):
        SplitStore(MemoryStore(), Bare())  # type: ignore[arg-type]


def test_serve_records_opens_a_split_store(
    split: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``antiloop serve --store redis://… --records postgresql://…`` serves over a split store."""
    need_module("uvicorn", "server")
    from antiloop.commands import serve

    served: list[Any] = []
    monkeypatch.setattr("antiloop.server.limits.run", lambda app, limits, **kw: served.append(app))
    monkeypatch.setenv("ANTILOOP_TOKEN", "t" * 24)
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    ns = parser.parse_args(["--port", "0", "--store", split.state_url, "--records", split.url])
    assert serve.run(ns) == 0
    assert served
    err = capsys.readouterr().err
    assert f"store {split.state_url.split('?')[0]}" in err
    assert "records=postgresql://" in err


def test_hooks_read_antiloop_records(split: Backend, tmp_path: Path) -> None:
    """ANTILOOP_STORE + ANTILOOP_RECORDS: a hook keeps the state in Redis, records in PG."""
    from antiloop.hooks.runner import run_hook

    env = {
        "ANTILOOP_STORE": split.state_url,
        "ANTILOOP_RECORDS": split.url,
        "ANTILOOP_HOOKD": "0",
        "HOME": str(tmp_path),
    }
    for n in range(2):
        payload = {
            "session_id": "s",
            "transcript_path": None,
            "cwd": str(tmp_path),
            "hook_event_name": "PostToolUse",
            "tool_name": "Grep",
            "tool_input": {"pattern": "x"},
            "tool_response": {"output": "a.ts:3: x"},
            "tool_use_id": f"toolu-{n}",
        }
        answer = run_hook("claude-code", json.dumps(payload), env=env)
        assert answer.code == 0, answer
    assert _redis_steps(split.state_url) == 2
    assert len(_records(split.url)) == 2


def test_concurrent_steps_of_one_session_through_two_split_stores_each_get_one_index(
    split: Backend,
) -> None:
    """Threads on two split stores record one session's steps: no index judged twice."""
    import threading

    guards = [Guard(config=CONFIG, store=split.open(), audit=True) for _ in range(2)]

    def work(w: int) -> None:
        for n in range(15):
            step = Step(tool="read", args={"path": f"w{w}-{n}"}, output=f"{w} {n}", session="s")
            guards[w % 2].record(step)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _redis_steps(split.state_url) == 60
    store = PostgresStore.from_url(split.url)
    try:
        records = list(store.audit_records("s"))
    finally:
        store.close()
    assert sorted(r.index for r in records) == list(range(60))
    assert len({r.output for r in records}) == 60


def test_interventions_of_takes_feedback_in_order_in_one_statement(split: Backend) -> None:
    """PostgreSQL: each session's stop request and its feedback (oldest first), taken once."""
    pg = PostgresStore.from_url(split.url)
    try:
        pg.request_stop("s1", "ann")
        for session, text in [("s1", "one"), ("s2", "two"), ("s1", "three"), ("s1", "four")]:
            pg.push_feedback(session, text)
        assert pg.interventions_of(["s1", "s2", "s3"]) == {
            "s1": ("ann", ["one", "three", "four"]),
            "s2": (None, ["two"]),
            "s3": (None, []),
        }
        assert pg.interventions_of(["s1", "s2"]) == {"s1": ("ann", []), "s2": (None, [])}
    finally:
        pg.close()
