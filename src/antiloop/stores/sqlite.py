"""The SQLite store (``sqlite:///path``): the default of the CLI, the hooks and the service.

One file holds session states, the audit log, approvals, the cache and interventions. The
database runs in WAL mode with a busy timeout, so many hook processes (one per tool call) can
share it; ``transaction()`` starts with ``BEGIN IMMEDIATE``, so two processes judging steps of
one session take turns. ``PRAGMA application_id`` marks the file as antiloop's and
``PRAGMA user_version`` holds the schema version, upgraded by the migrations below. A connection
remembers the state and the audit head it wrote last; in its next transaction
``PRAGMA data_version``, which only other connections' commits change, says whether they are
still what the file holds, so a process that keeps judging its own sessions reads neither.

A file that is not an SQLite database, or is another program's, is a ``StoreError`` and is
never touched; a missing directory is created (0700) and a new database file made 0600 (its
``-wal`` and ``-shm`` take its mode), whatever the umask; a read-only location is a
``StoreError`` saying so.

The file is never opened outside SQLite, and the stores of one process on one file share one
connection (``_sqlite_link`` says why), so the threads of the hook daemon take turns on its
lock instead of on SQLite's busy handler.

``synchronous=NORMAL`` (the default) keeps every committed step across a process crash;
``?synchronous=full`` also across a power cut, at the price of an fsync per step.

URL options: ``timeout`` (busy timeout, seconds), ``audit_cap`` (bytes), ``synchronous``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from antiloop._files import PRIVATE_FILE, make_private_dirs
from antiloop.core.errors import ConfigError, StoreError
from antiloop.core.history import SessionState
from antiloop.stores import faults
from antiloop.stores._sql import SQLITE, SQLRecords, statements, tables
from antiloop.stores._sqlite_link import Link, attach, detach
from antiloop.stores.codec import encode_state

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SQLiteStore"]

APPLICATION_ID = 0x414E4C50  # "ANLP"
"""``PRAGMA application_id`` of an antiloop database."""

#: schema version -> the statements that bring the previous version to it
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)", *tables(SQLITE)),
}
SCHEMA_VERSION = max(MIGRATIONS)
"""The schema version this antiloop writes."""

_DATA_VERSION = "PRAGMA data_version"
_SMALLEST_DATABASE = 512
"""Bytes of the smallest SQLite database file (one page); an empty file is a new database."""
_TRANSIENT = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_PROTOCOL")
"""Lock errors worth another try (``sqlite3.Error.sqlite_errorname`` prefixes)."""
T = TypeVar("T")


def _undo(link: Link) -> None:
    """Roll back the step: its savepoint inside ``batch()``, else the transaction."""
    if not link.batch:
        if link.db is not None:
            _rollback(link.db)
        return
    with contextlib.suppress(sqlite3.Error):
        link.cursor.execute("ROLLBACK TO step")
        link.cursor.execute("RELEASE step")


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def _parse_path(url: str) -> str:
    rest = url.split("://", 1)[1] if "://" in url else url.split(":", 1)[1]
    if rest.startswith(("/~", "//")):
        rest = rest[1:]
    if not rest or rest == "/":
        raise ConfigError(f"store URL {url!r} names no file: use sqlite:///path/to/antiloop.db")
    return str(Path(rest).expanduser())


class SQLiteStore(SQLRecords):
    """Sessions, audit log, approvals, cache and interventions in one SQLite file.

    Args:
        path: the database file (``~`` is expanded; missing directories are created).
        timeout: how long to wait for another process's lock, in seconds.
        audit_cap: bytes of UTF-8 kept of each audit record's args, output and error.
        synchronous: ``NORMAL`` (durable across process crashes) or ``FULL`` (also power cuts).
        clock: seconds since the epoch, for times and cache expiry.

    Example:
        >>> import tempfile, os
        >>> store = SQLiteStore(os.path.join(tempfile.mkdtemp(), "a.db"))
        >>> with store.transaction("s1") as state:
        ...     state.steps += 1
        >>> store.peek("s1").steps
        1
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        audit_cap: int = 4096,
        synchronous: str = "NORMAL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(os.fspath(path)).expanduser()
        self.timeout = timeout
        self.audit_cap = audit_cap
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA", "OFF"):
            raise ConfigError(f"synchronous={synchronous!r}: use normal or full")
        self.synchronous = synchronous.upper()
        self.clock = clock
        self._link: Link | None = None  # this process's connection to the file, once used

    _dialect = SQLITE
    _sql = statements(SQLITE)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteStore:
        """``sqlite:///abs/path``, ``sqlite:///~/rel/to/home``, ``sqlite://rel/path``."""
        from antiloop.stores._common import split_options

        base, opts = split_options(url, {"timeout": float, "audit_cap": int, "synchronous": str})
        return cls(_parse_path(base.split("?", 1)[0]), **{**opts, **options})

    @staticmethod
    def path_of(url: str) -> Path | None:
        """The file a ``sqlite:`` URL names (``:memory:`` and the like: None)."""
        path = _parse_path(url.split("?", 1)[0])
        return None if str(path).startswith(":") else Path(path)

    @property
    def url(self) -> str:
        """``sqlite:///`` and the absolute path."""
        return f"sqlite:///{str(self.path.absolute()).lstrip('/')}"

    # -- opening --------------------------------------------------------------------------

    def _failed(self, what: str, exc: BaseException) -> StoreError:
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and (
            "readonly" in text or "unable to open" in text
        ):
            return StoreError(
                f"{what} in {self.path}: the location is read-only or cannot be created ({text})"
            )
        return StoreError(f"{what} in {self.path}: {text}")

    def _hold(self) -> Link:
        """This store's link, locked (within ``timeout``) and connected; release its lock after."""
        link = self._link
        if link is None or link.pid != os.getpid():  # none yet, or the parent's (forked)
            link = self._link = attach(str(self.path), self.synchronous)
        if not link.lock.acquire(timeout=max(self.timeout, 0.001)):
            raise StoreError(
                f"could not lock the database in {self.path}: another thread of this process "
                f"held it for more than {self.timeout:g} s"
            )
        try:
            self._connect(link)
        except BaseException:
            link.lock.release()
            raise
        return link

    @contextlib.contextmanager
    def _held(self) -> Iterator[Link]:
        link = self._hold()
        try:
            yield link
        finally:
            link.lock.release()

    def _connect(self, link: Link) -> sqlite3.Connection:
        """The link's connection, opened (and the file checked and prepared) if it has none."""
        db = link.db
        if db is None:
            db = self._open()
            link.db, link.cursor = db, db.cursor()  # one cursor for the statements of every step
            link.forget()
        wanted = int(self.timeout * 1000)
        if link.busy_ms != wanted:  # stores sharing the connection may wait for different times
            db.execute(f"PRAGMA busy_timeout = {wanted}")
            link.busy_ms = wanted
        return db

    def _open(self) -> sqlite3.Connection:
        path = self.path
        try:
            make_private_dirs(path.parent)
        except OSError as exc:
            raise StoreError(
                f"cannot create the directory {path.parent} for the store: {exc.strerror or exc}"
            ) from exc
        # The file is not opened here to look at it: SQLite reads its header (see _sqlite_link).
        try:
            size: int | None = path.stat().st_size
        except FileNotFoundError:
            size = None
        except OSError as exc:
            raise StoreError(f"cannot read the store {path}: {exc.strerror or exc}") from exc
        if size is not None and 0 < size < _SMALLEST_DATABASE:  # SQLite would take it for empty
            raise StoreError(
                f"{path} is not an SQLite database ({size} bytes); antiloop leaves it as it is: "
                "move it away, or point ANTILOOP_STORE elsewhere"
            )
        new = size is None
        try:
            db = sqlite3.connect(
                path,
                timeout=self.timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=64,
            )
        except sqlite3.Error as exc:
            raise self._failed("could not open the store", exc) from exc
        try:
            if new:  # SQLite made it with the umask's mode; its -wal and -shm will copy this one
                with contextlib.suppress(FileNotFoundError):
                    path.chmod(PRIVATE_FILE)
            self._prepare(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise StoreError(
                    f"{path} is damaged or is not an SQLite database ({exc}); antiloop leaves "
                    "it as it is: move it away, or point ANTILOOP_STORE elsewhere"
                ) from exc
            raise self._failed("could not open the store", exc) from exc
        except BaseException:
            db.close()
            raise
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        # Read-only checks first: a foreign or newer file must not even be switched to WAL.
        self._check_owner(db)
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            mode = self._switch_to_wal(db)
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: could not switch to WAL mode (journal_mode={mode})")
        db.execute(f"PRAGMA synchronous = {self.synchronous}")
        if self._check_owner(db) == (APPLICATION_ID, SCHEMA_VERSION):
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            version = self._check_owner(db)[1]
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            _rollback(db)
            raise

    def _switch_to_wal(self, db: sqlite3.Connection) -> Any:
        """Switch a new file to WAL; another process doing it too is waited for (busy)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    def _check_owner(self, db: sqlite3.Connection) -> tuple[int, int]:
        """The application id and schema version; a foreign or newer database is a StoreError."""
        # One statement, one snapshot: another process may be creating the schema meanwhile.
        app, version, tables = db.execute(
            "SELECT (SELECT application_id FROM pragma_application_id),"
            " (SELECT user_version FROM pragma_user_version),"
            " (SELECT count(*) FROM sqlite_master)"
        ).fetchone()
        if app != APPLICATION_ID and (app != 0 or tables or version):
            raise StoreError(
                f"{self.path} is the SQLite database of another program "
                f"(application_id={app}, {tables} schema objects); antiloop leaves it as it "
                "is: point ANTILOOP_STORE elsewhere"
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, written by a newer antiloop "
                f"(this one knows up to {SCHEMA_VERSION}): upgrade antiloop"
            )
        return int(app), int(version)

    # -- sessions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, session: str) -> Iterator[SessionState]:
        """Lock the database (``BEGIN IMMEDIATE``), yield the state, save it on a clean exit.

        Inside ``batch()`` a step is a savepoint of the batch's transaction. The state this
        connection saved last is handed out again, unread, when no other connection committed
        since (``PRAGMA data_version``); a step that is not kept drops it.
        """
        link = self._hold()
        try:
            if link.in_tx:  # this thread's, through another store: do not roll it back
                raise StoreError(
                    f"could not lock the database in {self.path}: this thread already has a "
                    "transaction open on it"
                )
            try:
                if link.batch:
                    link.cursor.execute("SAVEPOINT step")
                else:
                    self._begin(link)
            except sqlite3.Error as exc:
                raise self._failed("could not lock the database", exc) from exc
            cur, kept = link.cursor, False
            link.in_tx = True
            try:
                try:
                    version = cur.execute(_DATA_VERSION).fetchone()[0]
                    if version != link.version:
                        link.version, link.head = version, None
                    state = link.states.take(session, version)
                    saved = state is not None  # the session has a row: an UPDATE saves it
                    if state is None:
                        row = cur.execute(self._sql["state"], (session,)).fetchone()
                        state = link.states.load(session, None if row is None else row[0])
                        saved = row is not None
                except sqlite3.Error as exc:
                    raise self._failed("could not read a session", exc) from exc
                yield state
                try:
                    data = encode_state(state)
                    args = (data, self.clock(), session) if saved else (session, data, self.clock())
                    cur.execute(self._sql["set_state" if saved else "put_state"], args)
                    cur.execute("RELEASE step" if link.batch else "COMMIT")
                except sqlite3.Error as exc:
                    raise self._failed("could not save a session", exc) from exc
                link.head_pending = False
                link.states.saved(session, data, state, link.version)
                kept = True
            finally:
                if not kept:
                    _undo(link)
                    link.states.drop(session)
                if link.head_pending:  # not committed: the head it moved to was not written
                    link.head, link.head_pending = None, False
                link.in_tx = False
        finally:
            link.lock.release()

    def _begin(self, link: Link) -> sqlite3.Connection:
        """``BEGIN IMMEDIATE`` on the held link, retried on transient lock errors until ``timeout``.

        SQLite's busy handler covers the usual wait for another writer, but some lock errors
        skip it (a stale WAL snapshot, a WAL index being rebuilt, too many retries under heavy
        contention); those are retried here for the rest of ``timeout``. A transaction left
        open on the connection (a COMMIT that failed, then a ROLLBACK that failed too) is
        rolled back first, and a connection that cannot be rolled back is replaced, so one
        failure never makes every later step fail.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            db = self._connect(link)
            if db.in_transaction:
                _rollback(db)
                if db.in_transaction:
                    link.disconnect()
                    continue
            try:
                link.cursor.execute("BEGIN IMMEDIATE")
                return db
            except sqlite3.OperationalError as exc:
                name = getattr(exc, "sqlite_errorname", "")
                if not name.startswith(_TRANSIENT) or time.monotonic() >= deadline:
                    raise
                faults.count("retry")
                time.sleep(0.002)

    def _read(self, what: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._held() as link:
            try:
                return self._connect(link).execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._failed(f"could not {what}", exc) from exc

    def _write(self, what: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` on the link's cursor in its own write transaction (or in the open one)."""
        with self._writing(what) as link:
            return fn(link.cursor)

    def batch(self) -> contextlib.AbstractContextManager[Any]:
        """Judge many steps in one write transaction, with one commit (``POST /v1/steps``).

        Each ``transaction()`` inside is a savepoint, so a step that fails is undone alone;
        none is kept (nor seen by other processes) before the end, and a failed commit keeps
        none. Other threads of this process wait for the batch; inside one, it is a no-op.
        """
        return self._writing("save a batch", batch=True)

    @contextlib.contextmanager
    def _writing(self, what: str, batch: bool = False) -> Iterator[Link]:
        """The held link in a write transaction of its own (or the one open); errors name ``what``.

        A transaction's or a batch's, when one is open; else one of its own, committed at the end.
        """
        with self._held() as link:
            if link.in_tx or link.batch:
                try:
                    yield link
                except sqlite3.Error as exc:
                    raise self._failed(f"could not {what}", exc) from exc
                return
            try:
                db = self._begin(link)
            except sqlite3.Error as exc:
                raise self._failed(
                    "could not lock the database" if batch else f"could not {what}", exc
                ) from exc
            link.batch = batch
            try:
                yield link
                link.batch = False
                db.execute("COMMIT")
            except BaseException as exc:
                link.batch = False
                _rollback(db)
                link.forget()  # what was saved in it is not
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(f"could not {what}", exc) from exc
                raise

    def _dropped(self, session: str) -> None:
        with self._held() as link:
            link.states.drop(session)

    def close(self) -> None:
        """Let go of the connection (closed when no other store of this process uses it).

        A later call opens it again.
        """
        link, self._link = self._link, None
        if link is not None:
            detach(link, self.timeout)

    # -- records (antiloop.stores._sql) -------------------------------------------------

    def _known_head(self) -> tuple[int, str] | None:
        """Inside ``transaction()``: the head this connection wrote, when nobody wrote since."""
        link = self._link
        return link.head if link is not None and link.in_tx else None

    def _moved_head(self, head: tuple[int, str]) -> None:
        link = self._link
        assert link is not None  # noqa: S101 - called by _write, which holds it
        if link.in_tx:  # the transaction's end keeps it (commit) or drops it
            link.head = head
            link.head_pending = True
        else:
            link.head = None

    def check_integrity(self) -> list[str]:
        """SQLite's own checks of the file: ``quick_check``, then ``integrity_check``.

        Returns:
            What they found, each line prefixed with the check's name; empty when both say
            ``ok``. A damaged index, a page used twice or a row missing from an index shows
            here, not in the hash chain.
        """
        found: list[str] = []
        for check in ("quick_check", "integrity_check"):
            lines = [str(row[0]) for row in self._read("check the file", f"PRAGMA {check}")]
            if lines != ["ok"]:
                found.extend(f"{check}: {line}" for line in lines)
        return found
