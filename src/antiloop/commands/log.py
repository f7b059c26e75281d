"""``antiloop log``: the audit log: sessions, one session's timeline, live follow, export, verify.

    antiloop log                      the sessions, most recent first
    antiloop log SESSION              one session's timeline (a step answered while the
                                      store was down reads "(unguarded)": it was recorded
                                      from the local journal when the store was back)
    antiloop log SESSION -f           ... and follow it live (Ctrl+C stops)
    antiloop log [SESSION] --jsonl    export records as JSON lines
    antiloop log [SESSION] --approvals
                                      how each call was approved: who, through which
                                      channel, when, after how long, under which rule
                                      (pending requests last); with --jsonl as JSON lines
    antiloop log verify               check the hash chain (and, on SQLite, the file with
                                      SQLite's quick_check and integrity_check): exit 0
                                      sound, 1 tampered or damaged
    antiloop log prune --older-than 30d
                                      remove old records from the start of the chain, leaving
                                      a checkpoint record so that verify still checks the rest
                                      (default: the config's [audit] retention)

A session may be named by a unique prefix of its id.

``--store URL`` everywhere (default: ``ANTILOOP_STORE``, else ``~/.antiloop/antiloop.db``). A
session literally named ``verify`` is shown with ``--session verify``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING

from antiloop._color import Painter
from antiloop.core.errors import ConfigError
from antiloop.core.redact import redact_value
from antiloop.printable import printable, printable_json
from antiloop.stores import AuditLog, default_store_url, open_store
from antiloop.stores.auditlog import AuditRecord

if TYPE_CHECKING:
    from antiloop.approval.request import ApprovalRequest

EXIT_OK = 0
EXIT_TAMPERED = 1
EXIT_DAMAGED = 1
_DAMAGE_SHOWN = 20


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop log``."""
    parser.add_argument(
        "target", nargs="?", help="a session id, or 'verify' to check the chain; none: list"
    )
    parser.add_argument("--session", help="a session id (for one named 'verify')")
    parser.add_argument("--store", help="the store URL (default: ANTILOOP_STORE or ~/.antiloop)")
    parser.add_argument("-f", "--follow", action="store_true", help="follow new records live")
    parser.add_argument("--jsonl", action="store_true", help="print records as JSON lines")
    parser.add_argument(
        "--approvals",
        action="store_true",
        help="the approval decisions: who, channel, when, how long, rule",
    )
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between polls with -f")
    parser.add_argument("--max-polls", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--older-than", metavar="AGE", help="with prune: the age of the records removed (30d, 12h)"
    )
    parser.add_argument("--config", help="with prune: the config whose [audit] retention applies")
    parser.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour the tables"
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop log``."""
    _COLOUR[0] = ns.color
    url = ns.store or default_store_url()
    _must_exist(url)
    store = open_store(url)
    try:
        if not isinstance(store, AuditLog):
            raise ConfigError(f"the store {store.url} keeps no audit log")
        out = sys.stdout
        session = ns.session
        if session is None and ns.target == "verify":
            return verify(store, out)
        if session is None and ns.target == "prune":
            return prune(store, out, ns.older_than, ns.config)
        session = session or ns.target
        if session is not None:  # a name that holds a secret is kept redacted (core.redact)
            from antiloop.core.redact import redact_name

            session = redact_name(session)
        if session is not None and not ns.follow:
            from antiloop.core.text.suggest import resolve

            known = [s.session for s in store.session_summaries()]
            if session not in known and any(k.startswith(session) for k in known):
                session = resolve(session, known, "session")
        if ns.approvals:
            return list_approvals(store, out, session, ns.jsonl)
        if session is None and not ns.jsonl and not ns.follow:
            return list_sessions(store, out)
        last = 0
        records = list(store.audit_records(session))
        if session is not None and not records and not ns.follow:
            from antiloop.core.text.suggest import near

            word = near(session, ("verify", "prune")) if ns.session is None else None
            meant = f" (did you mean {word!r}?)" if word else ""
            print(
                f"antiloop: no audit records for session {session!r} in {store.url}{meant}",
                file=sys.stderr,
            )
            return 2
        last = _write(records, out, ns.jsonl, header=not ns.jsonl, session=session)
        if ns.follow:
            last = follow(store, out, session, last, ns.jsonl, ns.interval, ns.max_polls)
        return EXIT_OK
    finally:
        store.close()


def _must_exist(url: str) -> None:
    """Reading a log creates nothing: a SQLite file that is not there is named, not made."""
    if not url.startswith("sqlite:"):
        return
    from antiloop.stores.sqlite import SQLiteStore

    path = SQLiteStore.path_of(url)
    if path is not None and not path.exists():
        raise ConfigError(f"no audit log at {path}: nothing was recorded there yet")


def prune(store: AuditLog, out: IO[str], older_than: str | None, config: str | None) -> int:
    """Remove records older than the age given (or the config's retention); say how many."""
    age = older_than or _retention(config)
    if age is None:
        raise ConfigError(
            "log prune needs --older-than AGE (30d, 12h, 90m) or [audit] retention in the config"
        )
    seconds = parse_age(age)
    pruning = getattr(store, "prune_audit", None)
    if pruning is None:
        raise ConfigError(f"the store {getattr(store, 'url', '')} cannot prune its log yet")
    before = time.time() - seconds
    removed = int(pruning(before))
    when = _when(before, True)
    out.write(f"antiloop: removed {removed} audit records older than {age} (before {when} UTC)")
    out.write("; a checkpoint record keeps the chain verifiable\n" if removed else "\n")
    return EXIT_OK


_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "w": 604800.0}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s``, ``2w`` (a bare number is days) in seconds.

    Raises:
        ConfigError: the text is no such age.
    """
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:]) if value else None
    number = value[:-1] if unit is not None else value
    try:
        amount = float(number)
    except ValueError:
        raise ConfigError(f"{text!r} is no age: write 30d, 12h, 90m, 3600s or 2w") from None
    if not amount > 0 or amount == float("inf"):
        raise ConfigError(f"an age must be more than 0, not {text!r}")
    return amount * (unit or _UNITS["d"])


def _retention(config: str | None) -> str | None:
    """The ``[audit] retention`` of the config (the one named, or the one the hooks read)."""
    import os

    from antiloop.config import read_settings
    from antiloop.hooks.config import find_config

    path = find_config(config, os.environ, os.getcwd())  # noqa: PTH109
    if path is None or not path.is_file():
        return None
    audit = read_settings(path).tables.get("audit", {})
    value = audit.get("retention")
    if value is not None and not isinstance(value, str | int):
        raise ConfigError(f"{path} [audit]: 'retention' must be an age such as \"30d\"")
    return None if value is None else str(value)


def list_sessions(store: AuditLog, out: IO[str]) -> int:
    """Print one line per session: last activity, records, steps, how it stands."""
    summaries = store.session_summaries()
    if not summaries:
        out.write("no sessions in the audit log\n")
        return EXIT_OK
    rows: list[tuple[str, ...]] = [("SESSION", "LAST ACTIVITY (UTC)", "RECORDS", "STEPS", "STATUS")]
    for s in summaries:
        status = f"stopped: {s.stopped}" if s.stopped else (s.last_action or "")
        rows.append((s.session, _when(s.last_at, True), str(s.records), str(s.steps), status))
    _table(rows, out, cut=(0, 0, 0, 0, 70))
    return EXIT_OK


_APPROVAL_KEYS = (
    "request",
    "status",
    "approved",
    "decided_by",
    "channel",
    "rule",
    "risk",
    "asked_at",
    "waited_s",
    "comment",
)


def approval_rows(store: AuditLog, session: str | None) -> list[dict[str, object]]:
    """The approval decisions of the audit log, then the requests still pending, as dicts."""
    rows: list[dict[str, object]] = []
    for r in store.audit_records(session):
        if r.kind != "approval":
            continue
        detail = dict(r.detail)
        if r.approved_by and "decided_by" not in detail:
            detail["decided_by"] = r.approved_by
        row: dict[str, object] = {
            "seq": r.seq,
            "session": r.session,
            "agent": r.agent,
            "tool": r.tool,
            "decided_at": r.at,
        }
        row.update({k: detail.get(k) for k in _APPROVAL_KEYS})
        if row["status"] is None and isinstance(row["approved"], bool):
            row["status"] = "approved" if row["approved"] else "denied"
        rows.append(row)
    pending = getattr(store, "list_approvals", None)
    if pending is not None:
        rows.extend(_pending_row(req) for req in pending(status="pending", session=session))
    return rows


def _pending_row(req: ApprovalRequest) -> dict[str, object]:
    return {
        "seq": None,
        "session": req.session,
        "agent": req.agent,
        "tool": req.tool,
        "decided_at": None,
        "request": req.id,
        "status": "pending",
        "approved": None,
        "decided_by": None,
        "channel": None,
        "rule": req.rule,
        "risk": req.risk,
        "asked_at": req.created_at,
        "waited_s": None,
        "comment": None,
    }


def list_approvals(store: AuditLog, out: IO[str], session: str | None, jsonl: bool) -> int:
    """Print how each call was approved (or refused), one line or JSON object per decision."""
    rows = approval_rows(store, session)
    if jsonl:
        for row in rows:
            out.write(printable_json(json.dumps(redact_value(row), ensure_ascii=False)) + "\n")
        return EXIT_OK
    if not rows:
        out.write("no approval decisions in the audit log\n")
        return EXIT_OK
    table: list[tuple[str, ...]] = [
        ("DECIDED (UTC)", "SESSION", "TOOL", "STATUS", "BY", "CHANNEL", "WAITED", "RULE")
    ]
    for row in rows:
        at = row["decided_at"]
        waited = row["waited_s"]
        table.append(
            (
                _when(at, True) if isinstance(at, int | float) else "-",
                str(row["session"]),
                str(row["tool"] or ""),
                str(row["status"] or ""),
                str(row["decided_by"] or ""),
                str(row["channel"] or ""),
                f"{waited:.1f}s" if isinstance(waited, int | float) else "",
                str(row["rule"] or ""),
            )
        )
    _table(table, out, cut=(0, 24, 20, 0, 24, 0, 0, 40))
    return EXIT_OK


def follow(
    store: AuditLog,
    out: IO[str],
    session: str | None,
    last: int,
    jsonl: bool,
    interval: float,
    max_polls: int | None,
) -> int:
    """Print new records as they come, until Ctrl+C (or ``max_polls`` polls)."""
    polls = 0
    try:
        while max_polls is None or polls < max_polls:
            polls += 1
            records = list(store.audit_records(session, since_seq=last))
            last = _write(records, out, jsonl, header=False, session=session) or last
            out.flush()
            if max_polls is not None and polls >= max_polls:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    return last


def verify(store: AuditLog, out: IO[str]) -> int:
    """Check the file (SQLite's own checks) and the chain; 0 when both are sound, else 1."""
    url = getattr(store, "url", "the store")
    check_file = getattr(store, "check_integrity", None)
    damage: list[str] = check_file() if check_file is not None else []
    problems = store.verify_audit()
    if damage:
        out.write(f"DAMAGED: SQLite found {len(damage)} problem(s) in the file of {url}\n")
        for line in damage[:_DAMAGE_SHOWN]:
            out.write(f"  {line}\n")
        if len(damage) > _DAMAGE_SHOWN:
            out.write(f"  ... and {len(damage) - _DAMAGE_SHOWN} more\n")
        out.write("  keep a copy of the file (sqlite3's .recover may save its rows)\n")
    if problems:
        out.write(f"TAMPERED: {len(problems)} problem(s) in the audit log of {url}\n")
        for p in problems:
            out.write(f"  {p.kind:8} record {p.seq}: {p.message}\n")
        return EXIT_TAMPERED
    count = 0
    head = ""
    for record in store.audit_records():
        count += 1
        head = record.hash
    checked = ""
    if check_file is not None:
        checked = f", SQLite integrity_check {'found damage' if damage else 'ok'}"
    out.write(f"{'DAMAGED' if damage else 'ok'}: {count} audit records in {url}")
    out.write(f", chain intact{checked}")
    out.write(f" (head {head[:16]})\n" if head else "\n")
    return EXIT_DAMAGED if damage else EXIT_OK


def _write(
    records: Iterable[AuditRecord], out: IO[str], jsonl: bool, *, header: bool, session: str | None
) -> int:
    """Print records; returns the last seq printed (0 when none)."""
    last = 0
    rows: list[tuple[str, ...]] = []
    for r in records:
        last = r.seq
        if jsonl:
            out.write(_export(r) + "\n")
        else:
            rows.append(_row(r, session is None))
    if rows:
        if header:
            head: tuple[str, ...] = (
                "SEQ",
                "TIME (UTC)",
                "SESSION",
                "AGENT",
                "#",
                "KIND",
                "TOOL",
                "ACTION",
                "DETAIL",
            )
            if session is not None:
                head = head[:2] + head[3:]
            rows.insert(0, head)
        _table(
            rows,
            out,
            cut=(0, 0, 24, 16, 0, 0, 20, 0, 80) if session is None else (0, 0, 16, 0, 0, 20, 0, 80),
        )
    return last


def _row(r: AuditRecord, with_session: bool) -> tuple[str, ...]:
    detail = r.reason or ""
    if r.detector and r.action not in (None, "continue"):
        detail = f"[{r.detector}] {detail}"
    elif r.kind == "cache":
        detail = "served from the cache"
    elif r.args:
        detail = r.args
    if r.approved_by:
        detail += f" (approved by {r.approved_by})"
    action = r.action or ""
    if r.detail.get("unguarded"):  # answered while the store was down, recorded on its return
        action += " (unguarded)"
        judged, back = r.detail.get("judged"), r.detail.get("replayed_at")
        later = f"recorded at {_when(back, False)}" if isinstance(back, int | float) else "recorded"
        detail = f"[{later}; the guard's verdict then: {judged}] {detail}"
    row: tuple[str, ...] = (
        str(r.seq),
        _when(r.at, False),
        r.session,
        r.agent or "",
        "" if r.index is None else str(r.index),
        r.kind,
        r.tool or "",
        action,
        " ".join(detail.split()),
    )
    return row if with_session else row[:2] + row[3:]


def _when(at: float, date: bool) -> str:
    stamp = datetime.fromtimestamp(at, UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")


def _export(r: AuditRecord) -> str:
    """One record as a JSON line, redacted again and with no raw control character.

    Redacting again catches what records of an older version kept (newer patterns).
    """
    return printable_json(json.dumps(redact_value(r.to_dict()), ensure_ascii=False))


def _table(rows: Sequence[tuple[str, ...]], out: IO[str], cut: tuple[int, ...]) -> None:
    shown = [tuple(printable(c) for c in row) for row in rows]  # agent text cannot move the cursor
    cells = [
        tuple(
            c if not limit or len(c) <= limit else c[: limit - 1] + "…"
            for c, limit in zip(row, cut, strict=False)
        )
        for row in shown
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    paint = Painter.for_stream(out, _COLOUR[0])
    for n, row in enumerate(cells):
        padded = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        if paint.enabled:
            padded = [
                paint(c, "bold") if n == 0 else _painted(paint, c, i, len(row))
                for i, c in enumerate(padded)
            ]
        out.write("  ".join(padded).rstrip() + "\n")


_COLOUR = ["auto"]  # --color of this run
_ACTION_COLOURS = {"stop": "red", "stopped": "red", "ask": "yellow", "block": "red"}


def _painted(paint: Painter, cell: str, column: int, columns: int) -> str:
    """An action or status cell in its colour (the next-to-last or last column)."""
    word = cell.strip().split(":", 1)[0]
    if column >= columns - 2 and cell.strip().startswith(("stopped: goal", "goal")):
        return paint(cell, "green")  # a goal reached is a success
    if column >= columns - 2 and word in _ACTION_COLOURS:
        return paint(cell, _ACTION_COLOURS[word])
    return cell
