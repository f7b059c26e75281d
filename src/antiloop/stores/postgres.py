"""The PostgreSQL store (``postgresql://user@host/db``): audit log and approvals for a fleet.

Tables live in one schema (``antiloop`` unless ``?schema=`` says otherwise), created and
upgraded under an advisory lock; the schema version is in its ``meta`` table. Judging a step
is a ``SELECT … FOR UPDATE`` of the session's row inside one transaction, which also writes
the step's audit records: the audit chain head is a row locked the same way, so the chain
stays whole with many writers. Deciding an approval locks its row too.

The connection is opened on first use and opened again after it breaks, so a guard started
while the server is down, or that lost it, works again once the server is back.

Every call has a deadline, ``timeout`` (default 5 s), or the step's own when sooner (the end of
its retry window or of its request, ``antiloop.outage``): the server cancels a statement past
``timeout`` (``statement_timeout``), and a watchdog shuts the connection's socket when the
server does not answer at all (stopped, hung, a network that drops packets), so the call fails
instead of waiting; the next call opens a new connection.

URL options: ``schema``, ``audit_cap`` (bytes), ``timeout`` (seconds; also the connect timeout
unless ``connect_timeout`` is given); the rest goes to libpq.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, NoReturn, TypeVar

from antiloop.core.errors import ConfigError, MissingExtra, StoreError
from antiloop.core.history import SessionState
from antiloop.outage.retry import time_left
from antiloop.stores._common import hide_password, split_options
from antiloop.stores._sql import POSTGRES, SQLRecords, statements, tables
from antiloop.stores.codec import StateCache, encode_state

T = TypeVar("T")

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

_LOCK_ID = 0x616E746C6F6F70  # advisory lock key for schema changes ("antloop")

#: schema version -> statements (run with the schema first on the search_path)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (*tables(POSTGRES), "INSERT INTO meta (key, value) VALUES ('audit_head', '')"),
}
SCHEMA_VERSION = max(MIGRATIONS)
"""The schema version this antiloop writes."""

DEFAULT_TIMEOUT = 5.0
"""Seconds a PostgreSQL call may take before the step follows on_store_error."""
MIN_CALL = 0.05
"""Seconds a call gets at least, however close the step's deadline."""


class _Watchdog:
    """Shuts a connection's socket when a call on it outlives its deadline.

    One thread per store, started on first use and ended by ``stop``; arming and disarming
    take a lock and, only when the thread is idle, a notify. A shut socket makes the blocked
    call fail at once.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.fired = 0
        self.shut: Any = None  # the last connection shut: never used again
        self._cond = threading.Condition(threading.Lock())
        self._deadline: float | None = None
        self._conn: Any = None
        self._idle = 0  # threads waiting with no deadline
        self._thread: threading.Thread | None = None
        self._generation = 0  # a thread of an older generation ends

    @contextlib.contextmanager
    def watch(self, conn: Any) -> Iterator[None]:
        """Give the calls in this block ``timeout`` seconds on ``conn``."""
        limit = self.timeout
        left = time_left()  # the step's own deadline (antiloop.outage), when sooner
        if left is not None:
            limit = max(min(limit, left), MIN_CALL)
        with self._cond:
            self._deadline = time.monotonic() + limit
            self._conn = conn
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run,
                    args=(self._generation,),
                    name="antiloop-pg-watchdog",
                    daemon=True,
                )
                self._thread.start()
            elif self._idle:
                self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._deadline = None
                self._conn = None

    def stop(self) -> None:
        """End the thread (a later ``watch`` starts another)."""
        with self._cond:
            self._generation += 1
            self._thread = None
            self._cond.notify_all()

    def _run(self, generation: int) -> None:
        with self._cond:
            while generation == self._generation:
                deadline = self._deadline
                if deadline is None:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                    continue
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                conn, self._deadline, self._conn = self._conn, None, None
                self.fired += 1
                self.shut = conn
                _shut(conn)


def _connect_limit(seconds: float) -> int:
    """Libpq's connect_timeout (whole seconds, at least 1), within the step's own deadline."""
    left = time_left()
    if left is not None:
        seconds = min(seconds, left)
    return max(round(seconds), 1)


def _shut(conn: Any) -> None:
    """Shut a connection's socket both ways (its blocked reader sees the end at once)."""
    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


class PostgresStore(SQLRecords):
    """Sessions, audit log, approvals, cache and interventions in PostgreSQL (psycopg 3).

    Args:
        conninfo: a libpq connection string or URL (without antiloop's own options).
        schema: the schema holding antiloop's tables (created when missing).
        audit_cap: bytes of UTF-8 kept of each audit record's args, output and error.
        timeout: seconds a call may take (server-side statement timeout, and a watchdog that
            shuts the connection when the server does not answer).
        connect_timeout: seconds to wait for a connection (default: ``timeout``).
        clock: seconds since the epoch, for times and cache expiry.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "antiloop",
        audit_cap: int = 4096,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise MissingExtra("postgres", "psycopg", "the postgresql:// store") from exc
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise ConfigError(f"schema={schema!r}: use lower-case letters, digits and _")
        self._psycopg = psycopg
        self.conninfo = conninfo
        self.schema = schema
        self.audit_cap = audit_cap
        if not timeout > 0:
            raise ConfigError(f"timeout={timeout!r}: use a number of seconds above 0")
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else connect_timeout
        self._watchdog = _Watchdog(timeout)
        self._timed_out = False  # the connection dropped last was shut by the watchdog
        self.clock = clock
        self._conn: Any = None
        self._lock = threading.RLock()
        self._in_tx = False
        self._states = StateCache()

    _dialect = POSTGRES
    lost_replies = True
    """A commit may succeed while its answer is lost: the guard judges a step by an id."""
    _sql: ClassVar[dict[str, str]] = statements(POSTGRES)

    def __repr__(self) -> str:
        return f"PostgresStore({hide_password(self.conninfo)!r}, schema={self.schema!r})"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """``postgresql://user[:password]@host:port/db?schema=antiloop``."""
        base, opts = split_options(
            url,
            {"schema": str, "audit_cap": int, "timeout": float, "connect_timeout": float},
        )
        if base.startswith("postgres://"):
            base = "postgresql://" + base[len("postgres://") :]
        return cls(base.rstrip("?"), **{**opts, **options})

    @property
    def url(self) -> str:
        """The URL, without its password."""
        return hide_password(self.conninfo) + (
            "" if self.schema == "antiloop" else f"?schema={self.schema}"
        )

    # -- connection -----------------------------------------------------------------------

    def _failed(self, what: str, exc: BaseException) -> StoreError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self._timed_out:
            text = f"no answer within timeout={self.timeout:g} s ({text})"
        return StoreError(f"could not {what} in {self.url}: {text}")

    def _broken(self, exc: BaseException) -> None:
        """Drop a connection that broke, so the next call opens a new one."""
        conn = self._conn
        shut = self._timed_out = conn is not None and conn is self._watchdog.shut
        if conn is None:
            return
        if shut or conn.closed or conn.broken or isinstance(exc, self._psycopg.OperationalError):
            with contextlib.suppress(Exception):  # it is broken already
                conn.close()
            self._conn = None

    def _connect(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.closed:
            if conn is not self._watchdog.shut:
                return conn
            with contextlib.suppress(Exception):  # shut by the watchdog: never used again
                conn.close()
            self._conn = None
        psycopg = self._psycopg
        ms = max(int(self.timeout * 1000), 1)
        try:
            conn = psycopg.connect(
                self.conninfo,
                autocommit=True,
                connect_timeout=_connect_limit(self.connect_timeout),
                options=f"-c search_path={self.schema} -c statement_timeout={ms}",
            )
        except psycopg.Error as exc:
            raise self._failed("connect", exc) from exc
        try:
            with self._watchdog.watch(conn):
                self._migrate(conn)
        except psycopg.Error as exc:
            conn.close()
            raise self._failed("prepare the schema", exc) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _migrate(self, conn: Any) -> None:
        from psycopg import sql

        def found() -> int:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            return int(row[0]) if row else 0

        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", ("meta",)).fetchone()
        if row[0] and found() == SCHEMA_VERSION:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            create = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}")
            conn.execute(create.format(sql.Identifier(self.schema)))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)"
            )
            version = found()
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"schema {self.schema} in {self.url} has version {version}, written by a "
                    f"newer antiloop (this one knows up to {SCHEMA_VERSION}): upgrade antiloop"
                )
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    def _read(self, what: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        return self._do(what, lambda c: c.execute(sql, args).fetchall())

    def _write(self, what: str, fn: Callable[[Any], T]) -> T:
        return self._do(what, fn, write=True)

    def _do(self, what: str, fn: Callable[[Any], T], *, write: bool = False) -> T:
        """``fn(connection)``: in the open transaction, else in its own (``write``) or none."""
        with self._lock:
            conn = self._connect()
            try:
                with self._watchdog.watch(conn):
                    if self._in_tx or not write:
                        return fn(conn)
                    with conn.pipeline(), conn.transaction():  # sent together, up to a read
                        return fn(conn)
            except self._psycopg.Error as exc:
                self._broken(exc)
                raise self._failed(what, exc) from exc

    # -- sessions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, session: str) -> Iterator[SessionState]:
        """Lock the session's row (``SELECT … FOR UPDATE``), yield its state, save on exit.

        The audit events appended inside commit with the state; any failure saves nothing.
        """
        with self._lock:
            conn = self._connect()
            sql = self._sql
            tx: Any = conn.transaction()
            try:
                with self._watchdog.watch(conn):
                    tx.__enter__()
                    row = conn.execute(sql["lock_state"], (session,)).fetchone()
                    if row is None:
                        conn.execute(sql["new"], (session, self.clock()))
                        row = conn.execute(sql["lock_state"], (session,)).fetchone()
                state = self._states.load(session, bytes(row[0]) if row and row[0] else None)
            except BaseException as exc:
                self._abort(session, tx, exc, "judge a step")
            self._in_tx = True
            try:
                try:
                    yield state
                except BaseException as exc:  # the caller's: roll back, then it goes on
                    self._states.drop(session)
                    try:
                        tx.__exit__(type(exc), exc, exc.__traceback__)
                    except Exception as err:
                        self._broken(err)
                    raise
                try:
                    data = encode_state(state)
                    with self._watchdog.watch(conn):
                        conn.execute(sql["set_state"], (data, self.clock(), session))
                        tx, done = None, tx
                        done.__exit__(None, None, None)
                except BaseException as exc:
                    self._abort(session, tx, exc, "save a session")
                self._states.saved(session, data, state)
            finally:
                self._in_tx = False

    def _abort(self, session: str, tx: Any, exc: BaseException, what: str) -> NoReturn:
        """Roll back ``tx`` (None: ended) after ``exc``, and raise it (a driver's as StoreError)."""
        self._states.drop(session)
        if tx is not None:
            with contextlib.suppress(Exception):  # the connection is reset below if it broke
                tx.__exit__(type(exc), exc, None)
        self._broken(exc)
        if isinstance(exc, self._psycopg.Error):
            raise self._failed(what, exc) from exc
        raise exc

    def _dropped(self, session: str) -> None:
        with self._lock:
            self._states.drop(session)

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            self._watchdog.stop()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __del__(self) -> None:
        """Let go of the connection when the store is dropped unclosed (by a journal's replay)."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
