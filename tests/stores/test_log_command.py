"""``antiloop log``: sessions, timeline, JSONL export, follow, and verify on a SQLite store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.cli import main

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A SQLite store with two sessions: one stopped as a loop, one going on."""
    url = f"sqlite:///{tmp_path / 'antiloop.db'}"
    guard = Guard(store=url, config=CONFIG)
    step = Step(
        tool="bash",
        args={"command": "pytest -x", "api_key": "sk-" + "z" * 30},
        output="1 failed",
        exit_code=1,
        session="s1",
    )
    guard.record(step)
    guard.record(step)
    guard.record(Step(tool="read", args={"file_path": "a.py"}, output="x", session="s2"))
    guard.store.close()
    return url


def test_lists_sessions(url: str, capsys: Any) -> None:
    """Without a session, the sessions are listed with their counts and how they stand."""
    assert main(["log", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "SESSION" in out
    assert "s1" in out
    assert "s2" in out
    assert "stopped: repeat" in out


def test_shows_a_timeline_with_secrets_redacted(url: str, capsys: Any) -> None:
    """A session's timeline has one row per record and no secret."""
    assert main(["log", "s1", "--store", url]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["SEQ", "TIME", "(UTC)"]
    assert len(lines) == 3
    assert "[repeat]" in lines[2]
    assert "zzzz" not in out


def test_exports_jsonl(url: str, capsys: Any) -> None:
    """--jsonl prints one JSON object per record, with its hash chain."""
    assert main(["log", "--jsonl", "--store", url]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[1]["prev"] == records[0]["hash"]
    assert records[1]["detector"] == "repeat"


def test_follow_prints_new_records_then_stops_at_the_poll_bound(url: str, capsys: Any) -> None:
    """-f prints the timeline, then polls for new records (bounded by --max-polls)."""
    assert main(["log", "s2", "-f", "--interval", "0", "--max-polls", "2", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.count("read") == 1


def test_unknown_session_is_an_error(url: str, capsys: Any) -> None:
    """A session without records exits 2 with a message."""
    assert main(["log", "nobody", "--store", url]) == 2
    assert "no audit records" in capsys.readouterr().err


def test_verify_passes_then_catches_a_hand_edited_row(url: str, capsys: Any) -> None:
    """verify exits 0 on an intact chain and 1 naming the row changed with SQL UPDATE."""
    assert main(["log", "verify", "--store", url]) == 0
    assert "chain intact" in capsys.readouterr().out
    db = sqlite3.connect(url[len("sqlite:///") :])
    db.execute("UPDATE audit SET body = replace(body, '1 failed', '0 failed') WHERE seq = 2")
    db.commit()
    db.close()
    assert main(["log", "verify", "--store", url]) == 1
    out = capsys.readouterr().out
    assert "TAMPERED" in out
    assert "record 2 was edited" in out


def test_verify_catches_an_edited_index_column(url: str, capsys: Any) -> None:
    """Changing only an indexed column (the session of a row) is also reported as an edit."""
    db = sqlite3.connect(url[len("sqlite:///") :])
    db.execute("UPDATE audit SET session = 's2' WHERE seq = 1")
    db.commit()
    db.close()
    assert main(["log", "verify", "--store", url]) == 1
    assert "record 1 was edited" in capsys.readouterr().out


def test_verify_runs_sqlites_integrity_check_and_names_what_it_found(url: str, capsys: Any) -> None:
    """A damaged index (the chain itself intact) fails verify, with SQLite's own words."""
    assert main(["log", "verify", "--store", url]) == 0
    assert "SQLite integrity_check ok" in capsys.readouterr().out
    db = sqlite3.connect(url[len("sqlite:///") :])
    db.execute("PRAGMA writable_schema = ON")  # the index now claims to cover another column
    db.execute(
        "UPDATE sqlite_master SET sql = 'CREATE INDEX audit_session ON audit (kind, seq)'"
        " WHERE name = 'audit_session'"
    )
    db.commit()
    db.close()
    assert main(["log", "verify", "--store", url]) == 1
    out = capsys.readouterr().out
    assert out.startswith("DAMAGED: SQLite found")
    assert "integrity_check: " in out
    assert "audit_session" in out
    assert "chain intact" in out  # the chain was not what broke


def test_store_error_is_reported_not_raised(tmp_path: Path, capsys: Any) -> None:
    """A file that is not a database gives exit 2 and the store's message."""
    bad = tmp_path / "x.db"
    bad.write_text("not a database at all")
    assert main(["log", "--store", f"sqlite:///{bad}"]) == 2
    assert "not an SQLite database" in capsys.readouterr().err
