"""The session index of the console: each session's end as the audit log records it."""

from __future__ import annotations

import time

from antiloop import Guard
from antiloop.audit import AuditEvent
from antiloop.config import GuardConfig
from antiloop.server.console.index import SessionIndex
from antiloop.stores.memory import MemoryStore

GREP = {"tool": "Grep", "args": {"pattern": "needle"}, "output": "none"}


def _guard() -> Guard:
    config = GuardConfig(embedder="ngram", min_steps=1)
    return Guard(config=config, store=MemoryStore(), audit=True)


def test_a_loop_stops_a_goal_is_done_and_a_reset_reopens() -> None:
    """A loop's stop is ``stopped``; a goal reached ``done``; a person who speaks reopens it."""
    guard = _guard()
    for _ in range(2):
        guard.record({**GREP, "session": "loop", "tokens_in": 10, "tokens_out": 5, "cost_usd": 0.5})
    guard.record(
        {
            "session": "win",
            "tool": "Read",
            "args": {"p": 1},
            "output": "x",
            "goal": "ship it",
            "message": "ship it",
        }
    )
    index = SessionIndex(guard.store)
    assert index.refresh()
    loop, win = index.get("loop"), index.get("win")
    assert loop is not None
    assert win is not None
    assert (loop.state(False), loop.end and loop.end["detector"]) == ("stopped", "repeat")
    assert (loop.tokens_in, loop.tokens_out, loop.cost_usd) == (20, 10, 1.0)
    assert loop.row(0)["usage"] == {"in": 20, "out": 10, "usd": 1.0}
    assert (win.state(False), win.end and win.end["detector"]) == ("done", "goal")
    guard.reset("loop", reason="try another file")  # a hook logs the person's prompt:
    guard.store.append_audit(AuditEvent("reset", "loop", time.time(), detail={"reason": "prompt"}))
    index.refresh()
    assert loop.state(False) == "running"
    assert loop.state(True) == "waiting"
    assert [s.session for s in index.snapshot()] == ["loop", "win"]
    assert len(index.stop_times()) == 2


def test_a_person_s_stop_is_an_end_with_its_reason() -> None:
    """``Guard.end`` logs the end: the index shows who stopped the session."""
    from antiloop.core.verdict import Verdict

    guard = _guard()
    guard.record({**GREP, "session": "s"})
    guard.end("s", Verdict.stop("person", "Stopped by alice.", outcome="stopped"))
    index = SessionIndex(guard.store)
    index.refresh()
    found = index.get("s")
    assert found is not None
    assert found.end is not None
    assert (found.end["detector"], found.end["reason"]) == ("person", "Stopped by alice.")


def test_the_least_recent_sessions_go_first_past_the_bound() -> None:
    """At most ``max_sessions`` summaries are kept."""
    guard = _guard()
    for n in range(5):
        guard.record({**GREP, "session": f"s{n}"})
    index = SessionIndex(guard.store, max_sessions=3)
    index.refresh()
    assert sorted(index.sessions) == ["s2", "s3", "s4"]


def test_one_reader_at_a_time_the_others_do_not_wait() -> None:
    """While a refresh reads the log, another answers at once from what is read so far."""
    guard = _guard()
    guard.record({**GREP, "session": "s"})
    index = SessionIndex(guard.store)
    with index._reading:
        assert index.reading
        assert index.refresh() is False
        assert index.get("s") is None
    assert index.refresh() is True
    assert index.get("s") is not None
