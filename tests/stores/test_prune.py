"""Retention: ``prune_audit`` and ``antiloop log prune`` keep the hash chain verifiable."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard
from antiloop.stores.memory import MemoryStore
from antiloop.stores.sqlite import SQLiteStore


def _filled(store: Any, times: list[float]) -> Any:
    clock = [0.0]
    guard = Guard(store=store, audit=True, clock=lambda: clock[0])
    for i, at in enumerate(times):
        clock[0] = at
        guard.record({"tool": "Read", "args": {"path": f"f{i}"}, "output": str(i), "session": "s"})
    return store


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "a.db")
    yield _filled(made, [100.0, 110.0, 120.0, 130.0, 140.0])
    made.close()


def test_a_prune_removes_a_prefix_and_leaves_a_checkpoint(store: Any) -> None:
    assert store.prune_audit(125.0, now=500.0) == 3
    records = list(store.audit_records())
    assert [(r.seq, r.kind) for r in records] == [(4, "step"), (5, "step"), (6, "prune")]
    assert store.verify_audit() == []
    assert store.prune_audit(125.0, now=600.0) == 0  # nothing older is left
    assert store.verify_audit() == []


def test_records_after_a_prune_chain_on(store: Any) -> None:
    store.prune_audit(125.0, now=500.0)
    _filled(store, [700.0])
    assert store.verify_audit() == []
    assert store.prune_audit(10_000.0, now=800.0) == 4  # all of it, then a checkpoint again
    assert [r.kind for r in store.audit_records()] == ["prune"]
    assert store.verify_audit() == []


def test_a_record_deleted_after_a_prune_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = _filled(SQLiteStore(path), [100.0, 110.0, 120.0, 130.0, 140.0])
    store.prune_audit(115.0, now=500.0)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM audit WHERE seq = 4")
    problems = store.verify_audit()
    assert [(p.seq, p.kind) for p in problems] == [(4, "deleted")]
    store.close()


def test_a_base_moved_without_a_checkpoint_is_named(tmp_path: Path) -> None:
    """Deleting old records and forging the base is caught: no checkpoint vouches for it."""
    path = tmp_path / "a.db"
    store = _filled(SQLiteStore(path), [100.0, 110.0, 120.0, 130.0])
    with sqlite3.connect(path) as db:
        last = db.execute("SELECT hash FROM audit WHERE seq = 2").fetchone()[0]
        db.execute("DELETE FROM audit WHERE seq <= 2")
        db.execute("INSERT INTO meta (key, value) VALUES ('audit_base', ?)", (f"2 {last}",))
    problems = store.verify_audit()
    assert [(p.seq, p.kind) for p in problems] == [(2, "deleted")]
    assert "no prune checkpoint" in problems[0].message
    store.close()


def antiloop(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTILOOP_STORE", "ANTILOOP_CONFIG")}
    return subprocess.run(
        [sys.executable, "-m", "antiloop", *args],
        capture_output=True,
        text=True,
        env={**env, "HOME": str(home)},
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_log_prune_by_age_and_by_the_configs_retention(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    now = time.time()
    _filled(SQLiteStore(db), [now - 40 * 86400, now - 35 * 86400, now - 3600, now]).close()
    url = f"sqlite:///{db}"
    done = antiloop("log", "prune", "--older-than", "30d", "--store", url, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "removed 2 audit records older than 30d" in done.stdout
    assert antiloop("log", "verify", "--store", url, home=tmp_path).stdout.startswith("ok: 3 ")
    (tmp_path / "antiloop.toml").write_text('[audit]\nretention = "30m"\n')
    by_config = antiloop("log", "prune", "--store", url, home=tmp_path, cwd=tmp_path)
    assert "removed 1 audit records older than 30m" in by_config.stdout, by_config.stderr
    assert antiloop("config", "check", home=tmp_path, cwd=tmp_path).returncode == 0
    (tmp_path / "antiloop.toml").write_text('[audit]\nretention = "soon"\n')
    bad = antiloop("config", "check", home=tmp_path, cwd=tmp_path)
    assert "'soon' is no age" in bad.stderr
    none = antiloop("log", "prune", "--store", url, home=tmp_path)
    assert none.returncode == 2
    assert "log prune needs --older-than AGE" in none.stderr


def test_reading_a_log_that_is_not_there_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    proc = antiloop("log", "--store", f"sqlite:///{missing}", home=tmp_path)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"antiloop: no audit log at {missing}: nothing was recorded there yet"
    )
    assert not missing.parent.exists()
