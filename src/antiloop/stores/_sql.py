"""The records of the SQL stores, written once for SQLite and PostgreSQL.

Audit log, approvals, cache, feedback and stop requests are the same tables in both (see each
store's ``MIGRATIONS``); their statements are written here with ``?`` placeholders, and a
``Dialect`` says what differs: the placeholder, and how a read locks the row it reads
(``FOR UPDATE``; SQLite's write transactions lock the whole file). A store provides
``_read(what, sql, args)``, ``_write(what, fn)`` (``fn(db)`` in a write transaction, or in the
one open) and may keep the audit head it wrote last (``_known_head``, ``_moved_head``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

from antiloop.core.history import SessionState
from antiloop.stores._common import (
    Records,
    approval_from_json,
    approval_to_json,
    chain,
    check_chain,
    head_of,
)
from antiloop.stores.codec import decode_state, encode_state

if TYPE_CHECKING:
    from antiloop.approval.request import ApprovalRequest
    from antiloop.audit import AuditEvent
    from antiloop.stores.auditlog import AuditRecord, AuditRow, Problem

T = TypeVar("T")


class Dialect(NamedTuple):
    """What the SQL of records differs in: placeholder, row lock, column types.

    (SQLite's ``INTEGER PRIMARY KEY`` is the rowid: the audit log is its primary index.)
    """

    param: str
    lock: str
    int: str
    real: str
    blob: str
    serial: str


SQLITE = Dialect("?", "", "INTEGER", "REAL", "BLOB", "INTEGER PRIMARY KEY AUTOINCREMENT")
POSTGRES = Dialect(
    "%s", " FOR UPDATE", "bigint", "double precision", "bytea", "bigserial PRIMARY KEY"
)

_TABLES = (
    "CREATE TABLE sessions (id text PRIMARY KEY, state {blob} NOT NULL, updated {real} NOT NULL)",
    "CREATE TABLE audit (seq {int} PRIMARY KEY, session text NOT NULL, kind text NOT NULL,"
    " at {real} NOT NULL, body text NOT NULL, hash text NOT NULL)",
    "CREATE INDEX audit_session ON audit (session, seq)",
    "CREATE TABLE approvals (id text PRIMARY KEY, session text NOT NULL,"
    " status text NOT NULL, created_at {real} NOT NULL, body text NOT NULL)",
    "CREATE INDEX approvals_status ON approvals (status, created_at)",
    "CREATE TABLE cache (key text PRIMARY KEY, value text NOT NULL, expires {real} NOT NULL)",
    "CREATE TABLE feedback (id {serial}, session text NOT NULL, text text NOT NULL,"
    " at {real} NOT NULL)",
    "CREATE TABLE stops (session text PRIMARY KEY, by text NOT NULL, at {real} NOT NULL)",
)


def tables(dialect: Dialect) -> tuple[str, ...]:
    """The statements that make schema version 1's tables (``meta`` apart) in a dialect."""
    return tuple(t.format(**dialect._asdict()) for t in _TABLES)


def _upsert(table: str, key: str, columns: str) -> str:
    names = [key, *columns.split(", ")]
    sets = ", ".join(f"{c} = excluded.{c}" for c in names[1:])
    return (
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"  # noqa: S608
        f" ON CONFLICT ({key}) DO UPDATE SET {sets}"
    )


_ROWS = "SELECT seq, body, hash, session, kind, at FROM audit WHERE seq > ?"
_SESSIONS = "SELECT id FROM sessions WHERE state <> '' ORDER BY updated DESC, id"
STATEMENTS = {
    "state": "SELECT state FROM sessions WHERE id = ?",
    "lock_state": "SELECT state FROM sessions WHERE id = ?{lock}",
    "put_state": _upsert("sessions", "id", "state, updated"),
    "set_state": "UPDATE sessions SET state = ?, updated = ? WHERE id = ?",
    "drop_state": "DELETE FROM sessions WHERE id = ?",
    "new": "INSERT INTO sessions (id, state, updated) VALUES (?, '', ?) ON CONFLICT DO NOTHING",
    "sessions": _SESSIONS,
    "sessions_page": _SESSIONS + " LIMIT ? OFFSET ?",
    "head": "SELECT value FROM meta WHERE key = 'audit_head'{lock}",
    "base": "SELECT value FROM meta WHERE key = 'audit_base'",
    "meta": _upsert("meta", "key", "value"),
    "tail": "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
    "audit": "INSERT INTO audit (seq, session, kind, at, body, hash) VALUES (?, ?, ?, ?, ?, ?)",
    "rows": _ROWS + " ORDER BY seq",
    "session_rows": _ROWS + " AND session = ? ORDER BY seq",
    "put_approval": _upsert("approvals", "id", "session, status, created_at, body"),
    "approval": "SELECT body FROM approvals WHERE id = ?",
    "lock_approval": "SELECT body FROM approvals WHERE id = ?{lock}",
    "set_approval": "UPDATE approvals SET status = ?, body = ? WHERE id = ?",
    "cache_get": "SELECT value, expires FROM cache WHERE key = ?",
    "cache_put": _upsert("cache", "key", "value, expires"),
    "cache_sweep": "DELETE FROM cache WHERE expires <= ?",
    "push": "INSERT INTO feedback (session, text, at) VALUES (?, ?, ?)",
    "pop": "DELETE FROM feedback WHERE session = ? RETURNING id, text",
    "stop": _upsert("stops", "session", "by, at"),
    "stopped": "SELECT by FROM stops WHERE session = ?",
    "unstop": "DELETE FROM stops WHERE session = ?",
    "unfeed": "DELETE FROM feedback WHERE session = ?",
    "first_kept": "SELECT MIN(seq) FROM audit WHERE at >= ?",
    "last_seq": "SELECT MAX(seq) FROM audit",
    "hash_of": "SELECT hash FROM audit WHERE seq = ?",
    "prune": "DELETE FROM audit WHERE seq < ?",
}


def statements(dialect: Dialect) -> dict[str, str]:
    """``STATEMENTS`` in a dialect."""
    return {
        name: sql.format(lock=dialect.lock).replace("?", dialect.param)
        for name, sql in STATEMENTS.items()
    }


class SQLRecords(Records):
    """Audit log, approvals, cache, feedback and stop requests over the tables above."""

    _dialect: ClassVar[Dialect]
    _sql: ClassVar[dict[str, str]]
    audit_cap: int

    @property
    def url(self) -> str:
        """The store's URL (each store says)."""
        raise NotImplementedError

    def _read(self, what: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        raise NotImplementedError

    def _write(self, what: str, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError

    def _known_head(self) -> tuple[int, str] | None:
        """The audit head this store wrote last when it is surely still the head, else None."""
        return None

    def _moved_head(self, head: tuple[int, str]) -> None:
        """The audit head is now ``head`` (written, not yet committed)."""

    def _dropped(self, session: str) -> None:
        """The session's row changes outside ``transaction()``: drop what is cached of it.

        Called inside the write, under the store's lock, so no transaction takes it meanwhile.
        """

    # -- sessions (antiloop.stores.state) ----------------------------------------------------

    def peek(self, session: str) -> SessionState | None:
        """The saved state, or None."""
        state, version = self.load(session)
        return None if version is None else state

    def load(self, session: str) -> tuple[SessionState, object]:
        """The saved state and its version (the stored bytes); a new state and None."""
        rows = self._read("read a session", self._sql["state"], (session,))
        data = bytes(rows[0][0]) if rows and rows[0][0] else None
        return (SessionState(), None) if data is None else (decode_state(data), data)

    def save(
        self,
        session: str,
        state: SessionState,
        version: object,
        events: Sequence[AuditEvent] = (),
    ) -> tuple[SessionState, object] | None:
        """Keep ``state`` and ``events`` in one write transaction if still at ``version``.

        The row is read (and locked) inside the transaction and compared with the bytes
        ``load`` read; None when kept, else the current state and version.
        """
        data = encode_state(state)

        def put(db: Any) -> bytes | bool | None:
            self._dropped(session)
            row = db.execute(self._sql["lock_state"], (session,)).fetchone()
            current = bytes(row[0]) if row is not None and row[0] else None
            if current != version:
                return current
            db.execute(self._sql["put_state"], (session, data, self.clock()))
            self._append(db, events)
            return True

        found = self._write("save a session", put)
        if found is True:
            return None
        return (SessionState(), None) if not found else (decode_state(found), found)

    def forget(self, session: str) -> None:
        """Drop the session's state, feedback and stop flag (its audit records stay)."""

        def drop(db: Any) -> None:
            self._dropped(session)
            for name in ("drop_state", "unfeed", "unstop"):
                db.execute(self._sql[name], (session,))

        self._write("forget a session", drop)

    def sessions(self) -> list[str]:
        """Session ids, most recently updated first."""
        return [r[0] for r in self._read("list sessions", self._sql["sessions"])]

    def sessions_page(self, offset: int, limit: int) -> list[str]:
        """``limit`` session ids from ``offset`` on, most recently updated first."""
        rows = self._read("list sessions", self._sql["sessions_page"], (limit, offset))
        return [r[0] for r in rows]

    # -- audit ----------------------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> None:
        """Redact, cap, chain and keep an event; inside ``transaction()`` it commits with it."""
        self._write("append to the audit log", lambda db: self._append(db, [event]))

    def keep_steps(
        self, items: Sequence[tuple[str, Sequence[str], Sequence[AuditEvent]]], kept: int
    ) -> None:
        """Keep judged steps' records, once per step id, in one write transaction.

        ``items``: (session, step ids, events). Each session's ledger is its row of the
        sessions table (a state of its last ``kept`` ids), its rows locked in id order; a step
        whose ids the ledger holds (a retry) is skipped; the records go in one multi-row
        INSERT (``SplitStore``: many steps of a batch, one commit).
        """
        names = sorted({i[0] for i in items})
        new = ", ".join([f"({self._dialect.param}, '', {self._dialect.param})"] * len(names))
        lock = (  # one statement: the missing rows made, every row locked and read
            f"INSERT INTO sessions (id, state, updated) VALUES {new} ON CONFLICT (id)"  # noqa: S608
            " DO UPDATE SET updated = sessions.updated RETURNING id, state"
        )

        def put(db: Any) -> None:
            now = self.clock()
            locked = db.execute(lock, [a for n in names for a in (n, now)])
            head = None  # PostgreSQL: the audit head read in the same round trip
            if self._dialect is not SQLITE and self._known_head() is None:
                head = db.execute(self._sql["head"]) if any(i[2] for i in items) else None
            found = locked.fetchall()
            ledgers = {r[0]: decode_state(bytes(r[1])) if r[1] else SessionState() for r in found}
            events: list[AuditEvent] = []
            changed = set()
            for session, ids, evs in items:
                seen = ledgers[session].seen
                if ids and all(i in seen for i in ids):
                    continue
                events += evs
                changed.add(session)
                seen.update(dict.fromkeys(ids))
                while len(seen) > kept:
                    del seen[next(iter(seen))]
            self._append(db, events, head)
            rows = [(encode_state(ledgers[n]), now, n) for n in names if n in changed]
            if self._dialect is SQLITE or len(rows) < 2:
                _many(db, self._sql["set_state"], rows)
            else:  # one statement: a query of a psycopg pipeline costs more than its row
                _states(db, rows)

        self._write("record steps", put)

    def _append(self, db: Any, events: Sequence[AuditEvent], sent: Any = None) -> None:
        """Chain the events after the head and move the head, in the caller's transaction.

        ``sent``: the cursor of the head's query when the caller sent it already.
        """
        if not events:
            return
        sql = self._sql
        head = self._known_head()
        if head is None:
            found = (db.execute(sql["head"]) if sent is None else sent).fetchone()
            head = head_of(self, found[0] if found else "", lambda: _tail(db, sql))
        rows = []
        for i, row in enumerate(chain(head, events, self.audit_cap)):
            event = events[i]  # callgrind: zip(strict=True) here cost 2.4k instructions more
            rows.append((row.seq, event.session, event.kind, event.at, row.body, row.hash))
            head = (row.seq, row.hash)
        if self._dialect is SQLITE or len(rows) < 2:
            _many(db, sql["audit"], rows)
        else:  # one statement: a query of a psycopg pipeline costs more than its row
            _insert(db, sql["audit"], rows)
        db.execute(sql["meta"], ("audit_head", f"{head[0]} {head[1]}"))
        self._moved_head(head)

    def _rows(self, session: str | None, since_seq: int, db: Any = None) -> list[AuditRow]:
        from antiloop.stores.auditlog import AuditRow

        sql, args = (
            (self._sql["rows"], (since_seq,))
            if session is None
            else (self._sql["session_rows"], (since_seq, session))
        )
        found = (
            self._read("read the audit log", sql, args)
            if db is None
            else db.execute(sql, args).fetchall()
        )
        return [
            AuditRow(r[0], r[1], r[2], {"session": r[3], "kind": r[4], "at": r[5]}) for r in found
        ]

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq`` in chain order, of one session or all."""
        from antiloop.stores.auditlog import parse_rows

        return parse_rows(self._rows(session, since_seq))

    def verify_audit(self) -> list[Problem]:
        """Check the chain from its base (after a prune) to the head, in one transaction.

        The head is read (and locked) first, so no record is appended meanwhile.
        """

        def read(db: Any) -> tuple[Any, Any, list[AuditRow]]:
            head = db.execute(self._sql["head"]).fetchone()
            base = db.execute(self._sql["base"]).fetchone()
            return head, base, self._rows(None, 0, db)

        head, base, rows = self._write("read the audit log", read)
        return check_chain(rows, head[0] if head else "", base[0] if base else "")

    def prune_audit(self, before: float, now: float | None = None) -> int:
        """Remove the records older than ``before`` from the start of the chain; how many.

        Only a prefix goes (up to the first record at or after ``before``), so the chain stays
        whole: a checkpoint record is appended that names the last record removed and its hash,
        and ``verify_audit`` checks the rest from there.
        """
        from antiloop.stores.auditlog import prune_event

        sql = self._sql

        def prune(db: Any) -> int:
            keep = db.execute(sql["first_kept"], (before,)).fetchone()[0]
            if keep is None:
                last = db.execute(sql["last_seq"]).fetchone()[0]
                if last is None:
                    return 0
                keep = last + 1
            found = db.execute(sql["hash_of"], (keep - 1,)).fetchone()
            if found is None:
                return 0
            removed = int(db.execute(sql["prune"], (keep,)).rowcount)
            db.execute(sql["meta"], ("audit_base", f"{keep - 1} {found[0]}"))
            at = self.clock() if now is None else now
            self._append(db, [prune_event(keep - 1, found[0], removed, before, at)])
            return removed

        return self._write("prune the audit log", prune)

    # -- approvals ------------------------------------------------------------------------

    def put_approval(self, request: ApprovalRequest) -> None:
        """Keep a request (args redacted); an existing id is replaced."""
        args = (request.id, request.session, str(request.status), request.created_at)
        body = approval_to_json(request)
        self._write(
            "keep an approval", lambda db: db.execute(self._sql["put_approval"], (*args, body))
        )

    def _approval_body(self, id: str) -> str | None:
        rows = self._read("read an approval", self._sql["approval"], (id,))
        return str(rows[0][0]) if rows else None

    def _approvals_of(self, status: str | None, session: str | None) -> list[str | bytes]:
        sql, args = "SELECT body FROM approvals WHERE 1 = 1", []
        for column, value in (("status", status), ("session", session)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        sql = sql.replace("?", self._dialect.param)
        return [r[0] for r in self._read("list approvals", sql, tuple(args))]

    def _swap_approval(
        self, id: str, change: Callable[[ApprovalRequest], ApprovalRequest | None]
    ) -> ApprovalRequest:
        def apply(db: Any) -> ApprovalRequest:
            row = db.execute(self._sql["lock_approval"], (id,)).fetchone()
            if row is None:
                raise KeyError(id)
            current = approval_from_json(row[0])
            changed = change(current)
            if changed is None:
                return current
            body = approval_to_json(changed)
            db.execute(self._sql["set_approval"], (str(changed.status), body, id))
            return changed

        return self._write("decide an approval", apply)

    # -- cache ----------------------------------------------------------------------------

    _puts = 0

    def cache_get(self, key: str) -> str | None:
        """The cached value, or None when absent or expired."""
        rows = self._read("read the cache", self._sql["cache_get"], (key,))
        return str(rows[0][0]) if rows and rows[0][1] > self.clock() else None

    def cache_put(self, key: str, value: str, ttl_seconds: float) -> None:
        """Keep a value for ``ttl_seconds`` (expired entries are swept now and then)."""
        now = self.clock()
        self._puts += 1
        sweep = self._puts % 256 == 1

        def put(db: Any) -> None:
            if sweep:
                db.execute(self._sql["cache_sweep"], (now,))
            db.execute(self._sql["cache_put"], (key, value, now + ttl_seconds))

        self._write("write the cache", put)

    # -- people ---------------------------------------------------------------------------

    def push_feedback(self, session: str, text: str) -> None:
        """Queue a message from a person for the session's agent."""
        args = (session, text, self.clock())
        self._write("queue feedback", lambda db: db.execute(self._sql["push"], args))

    def pop_feedback(self, session: str) -> list[str]:
        """Take every queued message, oldest first (``DELETE … RETURNING``)."""
        rows = self._write(
            "take feedback", lambda db: db.execute(self._sql["pop"], (session,)).fetchall()
        )
        return [r[1] for r in sorted(rows)]

    def interventions_of(self, sessions: Sequence[str]) -> dict[str, tuple[str | None, list[str]]]:
        """Each session's stop request and its feedback (taken), in one write transaction.

        On PostgreSQL one statement (the DELETE in a ``WITH``), atomic on its own: one round
        trip, no BEGIN nor COMMIT of ours.
        """
        names = list(dict.fromkeys(sessions))
        where = f"session IN ({', '.join([self._dialect.param] * len(names))})"
        stopped = f"SELECT session, by FROM stops WHERE {where}"  # noqa: S608
        said = f"DELETE FROM feedback WHERE {where} RETURNING id, session, text"  # noqa: S608
        if self._dialect is not SQLITE:
            both = (
                f"WITH fed AS ({said}) SELECT 0, 0::bigint, session, by FROM stops"  # noqa: S608
                f" WHERE {where} UNION ALL SELECT 1, id, session, text FROM fed"
            )
            rows = self._read("read interventions", both, (*names, *names))
            stops = [r[2:] for r in rows if r[0] == 0]
            fed = [r[1:] for r in rows if r[0] == 1]
        else:

            def take(db: Any) -> tuple[list[Any], list[Any]]:
                return db.execute(stopped, names).fetchall(), db.execute(said, names).fetchall()

            stops, fed = self._write("read interventions", take)
        found: dict[str, tuple[str | None, list[str]]] = {n: (None, []) for n in names}
        found |= {r[0]: (str(r[1]), []) for r in stops}
        for _, session, text in sorted(fed):
            found[session][1].append(text)
        return found

    def request_stop(self, session: str, by: str) -> None:
        """Ask the session to stop; ``by`` says who asked."""
        args = (session, by, self.clock())
        self._write("ask a session to stop", lambda db: db.execute(self._sql["stop"], args))

    def stop_requested(self, session: str) -> str | None:
        """Who asked the session to stop, or None."""
        rows = self._read("read a stop request", self._sql["stopped"], (session,))
        return str(rows[0][0]) if rows else None

    def clear_stop(self, session: str) -> None:
        """Withdraw a stop request."""
        self._write("clear a stop request", lambda db: db.execute(self._sql["unstop"], (session,)))


def _tail(db: Any, sql: dict[str, str]) -> tuple[int, str]:
    """The last audit record's seq and hash (``GENESIS`` when the log is empty)."""
    from antiloop.stores.auditlog import GENESIS

    last = db.execute(sql["tail"]).fetchone()
    return (int(last[0]), str(last[1])) if last else (0, GENESIS)


def _many(db: Any, sql: str, rows: list[Any]) -> None:
    """``executemany`` on a connection or cursor (psycopg pipelines it: one round trip)."""
    if rows:
        (db.executemany if hasattr(db, "executemany") else db.cursor().executemany)(sql, rows)


_ROWS_A_STATEMENT = 1000
"""Rows one multi-row statement writes at most (PostgreSQL takes 65,535 parameters)."""


def _insert(db: Any, sql: str, rows: list[Any]) -> None:
    """``rows`` by an ``INSERT ... VALUES (...)``, as one statement a thousand rows."""
    head, _, values = sql.partition(" VALUES ")
    for at in range(0, len(rows), _ROWS_A_STATEMENT):
        part = rows[at : at + _ROWS_A_STATEMENT]
        many = ", ".join([values] * len(part))
        db.execute(f"{head} VALUES {many}", [a for row in part for a in row])


def _states(db: Any, rows: list[tuple[bytes, float, str]]) -> None:
    """PostgreSQL: the sessions' states and times (state, updated, id), one statement."""
    for at in range(0, len(rows), _ROWS_A_STATEMENT):
        part = rows[at : at + _ROWS_A_STATEMENT]
        values = ", ".join(["(%s::bytea, %s::double precision, %s)"] * len(part))
        db.execute(
            "UPDATE sessions SET state = v.state, updated = v.updated"  # noqa: S608
            f" FROM (VALUES {values}) AS v (state, updated, id) WHERE sessions.id = v.id",
            [a for row in part for a in row],
        )
