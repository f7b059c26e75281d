"""SQLite's ``batch()``: many steps in one write transaction, one commit (``POST /v1/steps``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action
from antiloop.stores.sqlite import SQLiteStore

CONFIG = GuardConfig(embedder="ngram")


def _commits(store: SQLiteStore) -> list[str]:
    """Every COMMIT the store's connection runs from now on."""
    store.peek("warm-up")  # connects
    assert store._link is not None
    assert store._link.db is not None
    seen: list[str] = []
    store._link.db.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


def _steps_in_file(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT session, count(*) FROM audit WHERE kind = 'step' GROUP BY 1")
        return dict(rows.fetchall())


def _read(session: str, i: int) -> Step:
    return Step(tool="Read", args={"file_path": f"f{i}.py"}, output=f"text {i}", session=session)


def test_a_batch_of_steps_is_one_commit_seen_by_others_only_after_it(tmp_path: Path) -> None:
    """Ten steps of two sessions in a batch: one COMMIT, nothing visible before it, all after."""
    path = tmp_path / "a.db"
    store = SQLiteStore(path)
    guard = Guard(config=CONFIG, store=store, audit=True)
    commits = _commits(store)
    with store.batch():
        for i in range(10):
            assert guard.record(_read(f"s{i % 2}", i)).action is Action.CONTINUE
        assert _steps_in_file(path) == {}  # another connection sees none of it yet
        assert commits == []
    assert commits == ["COMMIT"]
    assert _steps_in_file(path) == {"s0": 5, "s1": 5}
    other = SQLiteStore(tmp_path / "." / "a.db", timeout=5)
    assert [other.peek("s0").steps, other.peek("s1").steps] == [5, 5]  # type: ignore[union-attr]
    assert store.verify_audit() == []
    assert [r.index for r in store.audit_records("s0") if r.kind == "step"] == [0, 1, 2, 3, 4]


def test_a_step_that_fails_in_a_batch_is_undone_alone(tmp_path: Path) -> None:
    """A transaction that raises inside a batch keeps nothing; the steps around it are kept."""
    store = SQLiteStore(tmp_path / "a.db")
    guard = Guard(config=CONFIG, store=store, audit=True)

    def failing_step() -> None:
        with store.transaction("s") as state:
            state.steps = 99
            store.append_audit(guard._audit_event("step", _read("s", 9), None, 9))
            raise RuntimeError("the step failed")

    with store.batch():
        guard.record(_read("s", 0))
        with pytest.raises(RuntimeError):
            failing_step()
        guard.record(_read("s", 1))
    assert store.peek("s").steps == 2  # type: ignore[union-attr]
    assert [r.index for r in store.audit_records("s")] == [0, 1]
    assert store.verify_audit() == []


def test_a_batch_that_raises_keeps_none_of_its_steps(tmp_path: Path) -> None:
    """An error out of the batch rolls every step of it back; the store works on after."""
    store = SQLiteStore(tmp_path / "a.db")
    guard = Guard(config=CONFIG, store=store, audit=True)
    guard.record(_read("s", 0))

    def failing_batch() -> None:
        with store.batch():
            guard.record(_read("s", 1))
            guard.record(_read("t", 2))
            raise KeyError("the request went away")

    with pytest.raises(KeyError):
        failing_batch()
    assert store.peek("s").steps == 1  # type: ignore[union-attr]
    assert store.peek("t") is None
    guard.record(_read("s", 3))
    assert [r.index for r in store.audit_records()] == [0, 1]
    assert store.verify_audit() == []


def test_the_service_judges_a_posted_batch_in_one_commit(tmp_path: Path) -> None:
    """``POST /v1/steps`` with eight steps: eight verdicts, one COMMIT on SQLite."""
    from antiloop.server.app import Service

    store = SQLiteStore(tmp_path / "a.db")
    service = Service(store, "t0k3n-for-tests")
    commits = _commits(store)
    batch: list[Any] = [
        {"session": "s", "tool": "Grep", "args": {"pattern": "x"}, "output": "a.py:1: x"}
    ] * 2 + [{"session": f"s{i}", "tool": "Read", "args": {"file_path": "a"}} for i in range(6)]
    verdicts = service.judge_all(batch)
    assert [v["action"] for v in verdicts] == ["continue", "stop"] + ["continue"] * 6
    assert commits == ["COMMIT"]
    assert sorted(store.sessions()) == ["s", "s0", "s1", "s2", "s3", "s4", "s5"]


def test_interventions_of_reads_each_sessions_stop_and_takes_its_feedback(tmp_path: Path) -> None:
    """SQLite's one cursor: the stop requests read are kept while the feedback is taken."""
    store = SQLiteStore(tmp_path / "a.db")
    store.request_stop("s1", "alice")
    store.push_feedback("s1", "first")
    store.push_feedback("s2", "second")
    store.push_feedback("s1", "third")
    assert store.interventions_of(["s1", "s2", "s3"]) == {
        "s1": ("alice", ["first", "third"]),
        "s2": (None, ["second"]),
        "s3": (None, []),
    }
    assert store.interventions_of(["s1", "s2"]) == {"s1": ("alice", []), "s2": (None, [])}


def test_the_service_judges_one_step_in_one_commit_with_its_interventions(tmp_path: Path) -> None:
    """A group of one step on SQLite: one COMMIT, the stop request and feedback read in it."""
    from antiloop.server.app import Service

    store = SQLiteStore(tmp_path / "a.db")
    service = Service(store, "t0k3n-for-tests")
    step = {"session": "s", "tool": "Read", "args": {"file_path": "a"}}
    service.judge_all([step])
    store.push_feedback("s", "look at b instead")
    commits = _commits(store)
    [fed] = service.judge_all([{**step, "args": {"file_path": "b"}}])
    assert commits == ["COMMIT"]
    assert "look at b instead" in fed["reason"] + fed["hint"]
    store.request_stop("s", "alice")
    [stopped] = service.judge_all([{**step, "args": {"file_path": "c"}}])
    assert (stopped["action"], stopped["detector"]) == ("stop", "person")
