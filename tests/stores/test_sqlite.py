"""The SQLite store: its file, its schema, and many processes at once."""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.core.errors import ConfigError, StoreError
from antiloop.core.verdict import Action
from antiloop.stores import DEFAULT_STORE, default_store_url, open_store
from antiloop.stores.sqlite import APPLICATION_ID, SCHEMA_VERSION, SQLiteStore

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram", max_steps=100_000)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_url_is_sqlite_in_home_unless_env_says_otherwise(monkeypatch: Any) -> None:
    """default_store_url expands ~ in the default and honours ANTILOOP_STORE."""
    monkeypatch.delenv("ANTILOOP_STORE", raising=False)
    monkeypatch.setenv("HOME", "/home/ann")
    assert DEFAULT_STORE == "sqlite:///~/.antiloop/antiloop.db"
    assert default_store_url() == "sqlite:///home/ann/.antiloop/antiloop.db"
    assert open_store(default_store_url()).path == Path("/home/ann/.antiloop/antiloop.db")
    monkeypatch.setenv("ANTILOOP_STORE", "redis://h:6379/0")
    assert default_store_url() == "redis://h:6379/0"


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///abs/a.db", "/abs/a.db"),
        ("sqlite:////abs/a.db", "/abs/a.db"),
        ("sqlite:///abs/a.db?timeout=2", "/abs/a.db"),
        ("sqlite://rel/a.db", "rel/a.db"),
    ],
)
def test_url_forms(url: str, path: str) -> None:
    """sqlite URLs name absolute or relative files; options are taken out of the path."""
    assert SQLiteStore.from_url(url).path == Path(path)


def test_url_without_a_file_is_a_config_error() -> None:
    """sqlite:/// alone names no file."""
    with pytest.raises(ConfigError, match="names no file"):
        SQLiteStore.from_url("sqlite:///")


def test_missing_directory_is_created_and_database_is_marked(tmp_path: Path) -> None:
    """A store in a missing directory creates it, in WAL mode, with antiloop's ids."""
    path = tmp_path / "a" / "b" / "antiloop.db"
    store = SQLiteStore(path)
    assert store.sessions() == []
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()
    store.close()


def test_read_only_location_is_a_clear_error() -> None:
    """A directory that cannot be created gives a StoreError naming it."""
    store = SQLiteStore("/proc/antiloop-test/antiloop.db")
    with pytest.raises(StoreError, match="cannot create the directory /proc/antiloop-test"):
        store.peek("s")


def test_garbage_file_is_refused_and_untouched(tmp_path: Path) -> None:
    """A file that is not an SQLite database is a StoreError and keeps its bytes."""
    path = tmp_path / "antiloop.db"
    path.write_bytes(b"my thesis, chapter 3\n" * 200)
    before = _digest(path)
    with pytest.raises(StoreError, match="is not an SQLite database"):
        SQLiteStore(path).sessions()
    assert _digest(path) == before


@pytest.mark.parametrize("content", [b"x", b"notes", b"SQLite format 3\x00"])
def test_a_file_too_small_to_be_a_database_is_refused_and_untouched(
    tmp_path: Path, content: bytes
) -> None:
    """A few bytes (SQLite would take one byte for an empty database) are not a store."""
    path = tmp_path / "antiloop.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="is not an SQLite database"):
        SQLiteStore(path).sessions()
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["antiloop.db"]


def test_damaged_sqlite_file_is_refused_and_untouched(tmp_path: Path) -> None:
    """An SQLite header over garbage pages is a StoreError and keeps its bytes."""
    path = tmp_path / "antiloop.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 8000)
    before = _digest(path)
    with pytest.raises(StoreError, match="damaged or is not an SQLite database"):
        SQLiteStore(path).sessions()
    assert _digest(path) == before


def test_foreign_database_is_refused_and_untouched(tmp_path: Path) -> None:
    """Another program's SQLite database is a StoreError and is not switched to WAL."""
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.execute("INSERT INTO users VALUES ('ann')")
    db.commit()
    db.close()
    before = _digest(path)
    with pytest.raises(StoreError, match="another program"):
        SQLiteStore(path).sessions()
    assert _digest(path) == before


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database written by a newer antiloop (higher user_version) is a StoreError."""
    path = tmp_path / "antiloop.db"
    SQLiteStore(path).sessions()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer antiloop"):
        SQLiteStore(path).sessions()


def test_state_written_by_a_newer_codec_is_a_store_error(tmp_path: Path) -> None:
    """A session state in an unknown format version is a StoreError the guard can follow."""
    path = tmp_path / "antiloop.db"
    store = SQLiteStore(path)
    with store.transaction("s") as state:
        state.steps = 1
    raw = sqlite3.connect(path)
    raw.execute("UPDATE sessions SET state = x'09' WHERE id = 's'")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="format version 9"):
        store.peek("s")
    verdict = Guard(store=SQLiteStore(path), config=CONFIG, on_store_error="block").record(
        Step(tool="read", args={"file_path": "a"}, session="s")
    )
    assert verdict.action is Action.BLOCK


class _FlakyBegin:
    """A cursor whose first ``fails`` BEGINs raise the given SQLite lock error."""

    def __init__(self, inner: Any, fails: int, name: str) -> None:
        self.inner, self.fails, self.name = inner, fails, name

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "BEGIN IMMEDIATE" and self.fails:
            self.fails -= 1
            exc = sqlite3.OperationalError("database is locked")
            exc.sqlite_errorname = self.name
            raise exc
        return self.inner.execute(sql, *args)


@pytest.mark.parametrize("name", ["SQLITE_BUSY_SNAPSHOT", "SQLITE_PROTOCOL", "SQLITE_BUSY"])
def test_transient_lock_errors_are_retried(tmp_path: Path, name: str) -> None:
    """Lock errors that skip SQLite's busy handler are retried, and the step counts once."""
    store = SQLiteStore(tmp_path / "antiloop.db")
    store.sessions()
    assert store._link is not None
    store._link.cursor = _FlakyBegin(store._link.cursor, 3, name)
    with store.transaction("s") as state:
        state.steps += 1
    assert store._link.cursor.fails == 0
    assert SQLiteStore(tmp_path / "antiloop.db").peek("s").steps == 1  # type: ignore[union-attr]


def test_a_lock_held_past_the_timeout_is_a_store_error(tmp_path: Path) -> None:
    """Another process holding the write lock longer than ``timeout`` is a StoreError."""
    path = tmp_path / "antiloop.db"
    SQLiteStore(path).sessions()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        store = SQLiteStore(path, timeout=0.2)
        with pytest.raises(StoreError, match="could not lock the database"), store.transaction("s"):
            pass
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_other_errors_are_not_retried(tmp_path: Path) -> None:
    """A read-only or damaged file fails at once, without waiting out the timeout."""
    store = SQLiteStore(tmp_path / "antiloop.db", timeout=60)
    store.sessions()
    assert store._link is not None
    store._link.cursor = _FlakyBegin(store._link.cursor, 1, "SQLITE_IOERR")
    with pytest.raises(StoreError, match="could not lock"), store.transaction("s"):
        pass


def test_a_transaction_left_open_does_not_fail_every_later_step(tmp_path: Path) -> None:
    """A connection left inside a transaction is rolled back before the next one begins."""
    store = SQLiteStore(tmp_path / "antiloop.db")
    store.sessions()
    assert store._link is not None
    assert store._link.db is not None
    store._link.db.execute("BEGIN IMMEDIATE")  # as after a COMMIT that failed
    store._link.db.execute("DELETE FROM sessions")
    with store.transaction("s") as state:
        state.steps += 1
    assert SQLiteStore(tmp_path / "antiloop.db").peek("s").steps == 1  # type: ignore[union-attr]


class _StuckConnection:
    """A connection that stays in its transaction whatever it is told."""

    in_transaction = True

    def __init__(self) -> None:
        self.closed = False

    def execute(self, sql: str, *args: Any) -> Any:
        raise sqlite3.OperationalError("cannot rollback - SQL statements in progress")

    def close(self) -> None:
        self.closed = True


def test_a_connection_that_cannot_roll_back_is_replaced(tmp_path: Path) -> None:
    """A connection stuck in a transaction is closed and a new one opened: the step is saved."""
    store = SQLiteStore(tmp_path / "antiloop.db")
    store.sessions()
    stuck = _StuckConnection()
    assert store._link is not None
    store._link.db = stuck  # type: ignore[assignment]
    with store.transaction("s") as state:
        state.steps += 1
    assert stuck.closed
    assert SQLiteStore(tmp_path / "antiloop.db").peek("s").steps == 1  # type: ignore[union-attr]


_OPEN_AND_CLOSE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("SELECT count(*) FROM sessions").fetchall()
db.close()  # the last connection of the system checkpoints and deletes the WAL
"""


def test_a_new_store_keeps_the_locks_of_the_connections_already_open(tmp_path: Path) -> None:
    """Opening a second store does not drop the first one's locks: no process deletes the WAL.

    Closing any descriptor of the file drops all the process's POSIX locks on it; a store
    that opened the file to read its header let another process take itself for the last.
    """
    path = tmp_path / "antiloop.db"
    first = SQLiteStore(path)
    with first.transaction("s") as state:
        state.steps += 1
    second = SQLiteStore(path)
    assert second.peek("s") is not None
    subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(path)], check=True, timeout=60)
    assert Path(f"{path}-wal").exists(), "another process deleted the WAL under open connections"
    with second.transaction("s") as state:
        state.steps += 1
    first.close()
    second.close()
    assert SQLiteStore(path).peek("s").steps == 2  # type: ignore[union-attr]


def test_stores_of_one_process_share_one_connection_per_file(tmp_path: Path) -> None:
    """Two stores on one file (one named through a symlink) use one connection until both close."""
    path = tmp_path / "antiloop.db"
    (tmp_path / "link.db").symlink_to(path)
    one, two = SQLiteStore(path), SQLiteStore(tmp_path / "link.db")
    one.sessions()
    two.sessions()
    assert one._link is two._link
    assert one._link is not None
    db = one._link.db
    one.close()
    assert two._link.db is db  # type: ignore[union-attr]
    two.close()
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")  # type: ignore[union-attr]
    full = SQLiteStore(path, synchronous="full")  # another setting: a connection of its own
    full.sessions()
    assert full._link is not one._link
    full.close()


def test_a_transaction_inside_another_on_the_same_file_is_refused_not_rolled_back(
    tmp_path: Path,
) -> None:
    """Two stores share a connection: the inner transaction fails, the outer one commits."""
    path = tmp_path / "antiloop.db"
    outer, inner = SQLiteStore(path), SQLiteStore(path, timeout=0.1)
    with outer.transaction("a") as state:
        state.steps += 1
        with pytest.raises(StoreError, match="already has a transaction open"):  # noqa: SIM117
            with inner.transaction("b"):
                pass
    assert outer.peek("a").steps == 1  # type: ignore[union-attr]
    assert inner.peek("b") is None
    outer.close()
    inner.close()


def test_a_transaction_left_running_by_another_thread_bounds_the_wait(tmp_path: Path) -> None:
    """A thread stuck in a transaction: the others' calls and closes give up after ``timeout``."""
    import threading
    import time

    path = tmp_path / "antiloop.db"
    stuck, other = SQLiteStore(path), SQLiteStore(path, timeout=0.2)
    other.sessions()
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with stuck.transaction("s") as state:
            state.steps += 1
            inside.set()
            release.wait(30)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        assert inside.wait(30)
        with pytest.raises(StoreError, match="another thread of this process held it"):
            other.peek("s")
        started = time.monotonic()
        other.close()
        assert time.monotonic() - started < 5
    finally:
        release.set()
        worker.join(30)
    assert stuck.peek("s").steps == 1  # type: ignore[union-attr]
    stuck.close()


def test_threads_sharing_a_store_file_lose_no_step(tmp_path: Path) -> None:
    """16 threads, a store each, on one file: every step counted, the chain intact."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "antiloop.db"

    def work(me: int) -> None:
        store = SQLiteStore(path)
        try:
            for n in range(10):
                with store.transaction(f"s{me % 4}") as state:
                    state.steps += 1
                    store.append_audit(_event(f"s{me % 4}", n))
        finally:
            store.close()

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(16)))
    store = SQLiteStore(path)
    assert sum(store.peek(f"s{k}").steps for k in range(4)) == 160  # type: ignore[union-attr]
    assert store.verify_audit() == []
    assert len(list(store.audit_records())) == 160
    store.close()


def test_a_new_database_and_its_directory_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 000 the directories made are 0700, the file and its -wal and -shm 0600."""
    path = tmp_path / "home" / ".antiloop" / "antiloop.db"
    old = os.umask(0)
    try:
        store = SQLiteStore(path)
        with store.transaction("s") as state:
            state.steps += 1
    finally:
        os.umask(old)
    for directory in (path.parent, path.parent.parent):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    for name in ("antiloop.db", "antiloop.db-wal", "antiloop.db-shm"):
        assert (path.parent / name).stat().st_mode & 0o777 == 0o600, name
    store.close()


# -- many processes --------------------------------------------------------------------------


def _worker(url: str, me: int, barrier: Any, out: Any) -> None:
    guard = Guard(store=url, config=CONFIG, on_store_error="block")
    barrier.wait()
    actions: list[str] = []
    reasons: list[str] = []
    for i in range(8):
        step = Step(tool="read", args={"file_path": f"f{i}.py"}, output=str(i), session=f"own{me}")
        shared = Step(
            tool="read", args={"file_path": f"p{me}-{i}.py"}, output="x", session="shared"
        )
        for one in (step, shared):
            verdict = guard.record(one)
            actions.append(verdict.action.name)
            if verdict.action.name != "CONTINUE":
                reasons.append(verdict.reason)
    last = Step(tool="read", args={"file_path": "f7.py"}, output="7", session=f"own{me}")
    actions.append(guard.record(last).action.name)
    out.put((me, (actions, reasons)))


@pytest.mark.slow
def test_32_processes_lose_nothing_and_verdicts_stay_right(tmp_path: Path) -> None:
    """32 processes recording at once: every step counted and logged, each repeat stopped."""
    url = f"sqlite:///{tmp_path / 'antiloop.db'}"
    made = SQLiteStore.from_url(url)  # create it once, as the CLI would
    made.sessions()
    made.close()  # no connection to the file crosses the fork (SQLite's rule, not a workaround)
    gc.collect()
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(32)
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, me, barrier, out)) for me in range(32)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for actions, reasons in results.values():
        assert actions[:-1] == ["CONTINUE"] * 16, reasons
        assert actions[-1] == "STOP"
    store = SQLiteStore.from_url(url)
    assert store.peek("shared").steps == 32 * 8
    for me in range(32):
        assert store.peek(f"own{me}").steps == 9
    records = list(store.audit_records())
    assert len(records) == 32 * 17
    assert [r.seq for r in records] == list(range(1, 32 * 17 + 1))
    assert store.verify_audit() == []


_KILLED_WORKER = """
import sys
from antiloop import Guard, GuardConfig, Step
guard = Guard(store=sys.argv[1], config=GuardConfig(detectors=("repeat",), embedder="ngram",
              max_steps=10**9), on_store_error="block")
i = 0
while True:
    step = Step(tool="read", args={"file_path": f"f{i}.py"}, output="x" * 3000, session="k")
    if guard.record(step).action.name != "CONTINUE":
        raise SystemExit(f"unexpected verdict at {i}")
    print(i, flush=True)
    i += 1
"""


@pytest.mark.slow
def test_sigkill_mid_writes_leaves_a_store_that_opens_and_verifies(tmp_path: Path) -> None:
    """A process killed with SIGKILL while writing loses no acknowledged step; the log verifies."""
    url = f"sqlite:///{tmp_path / 'antiloop.db'}"
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_WORKER, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        assert proc.stdout is not None
        acknowledged = -1
        for line in proc.stdout:
            acknowledged = int(line)
            if acknowledged >= 150:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert acknowledged >= 150
    assert proc.returncode == -signal.SIGKILL
    store = SQLiteStore.from_url(url)
    assert store.verify_audit() == []
    state = store.peek("k")
    assert state is not None
    assert state.steps >= acknowledged + 1
    indexes = {r.index for r in store.audit_records("k")}
    assert set(range(acknowledged + 1)) <= indexes
    assert (
        Guard(store=store, config=CONFIG)
        .record(Step(tool="read", args={"file_path": "after.py"}, session="k"))
        .action
        is Action.CONTINUE
    )


def _event(session: str, n: int) -> Any:
    from antiloop.audit import AuditEvent

    return AuditEvent("step", session, float(n), output=f"out {n}")


def test_a_store_sees_what_another_connection_wrote_between_its_transactions(
    tmp_path: Path,
) -> None:
    """The state and audit head a store wrote last are reused only while nobody else wrote."""
    path = tmp_path / "a.db"
    # Another synchronous setting: a connection of its own, as in another process.
    one, two = SQLiteStore(path), SQLiteStore(path, synchronous="full")
    for n in range(6):
        writer = one if n % 3 else two  # runs of one writer, then the other
        with writer.transaction("s") as state:
            state.steps += 1
            writer.append_audit(_event("s", n))
        if n == 3:
            one.close()  # a reopened connection numbers its data versions afresh
    with one.transaction("s") as state:
        assert state.steps == 6
    assert one.verify_audit() == []
    assert [r.seq for r in one.audit_records()] == [1, 2, 3, 4, 5, 6]
    one.close()
    two.close()


def test_an_append_rolled_back_leaves_the_head_where_it_was(tmp_path: Path) -> None:
    """A transaction that appends and then fails does not move the head the next one chains on."""
    store = SQLiteStore(tmp_path / "a.db")
    with store.transaction("s") as state:
        state.steps += 1
        store.append_audit(_event("s", 1))

    def fail() -> None:
        with store.transaction("s") as state:
            state.steps += 1
            store.append_audit(_event("s", 2))
            raise RuntimeError("judging failed")

    with pytest.raises(RuntimeError):
        fail()
    store.append_audit(_event("s", 3))  # outside a transaction: reads the head
    with store.transaction("s") as state:
        assert state.steps == 1
        store.append_audit(_event("s", 4))
    assert store.verify_audit() == []
    assert [r.at for r in store.audit_records()] == [1.0, 3.0, 4.0]
    store.close()


def test_a_store_open_across_a_fork_is_refused_in_the_child(tmp_path: Path) -> None:
    """Forked with a connection open, a child gets a clear error for that file, not a
    connection that would share lock bookkeeping it does not own; another file works."""
    path = tmp_path / "a.db"
    store = SQLiteStore(path)
    store.sessions()  # the connection is open
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()

    def child() -> None:
        try:
            SQLiteStore(path).sessions()
            out.put("opened")
        except StoreError as exc:
            out.put(str(exc))
        other = SQLiteStore(tmp_path / "b.db")
        other.sessions()
        other.close()
        out.put("other ok")

    proc = ctx.Process(target=child)
    proc.start()
    said = [out.get(timeout=60), out.get(timeout=60)]
    proc.join(timeout=60)
    assert "SQLite connections cannot cross a fork" in said[0]
    assert said[1] == "other ok"
    with store.transaction("s") as state:  # the parent's connection is untouched
        state.steps += 1
    assert store.verify_audit() == []
    store.close()
