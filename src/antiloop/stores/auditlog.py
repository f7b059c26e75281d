"""The tamper-evident audit log every store keeps: records, their hash chain, and its check.

An ``AuditEvent`` becomes an ``AuditRecord``: secrets redacted (``antiloop.core.redact``), the
args, output and error text cut to a cap (4 KiB of UTF-8 each by default) with the SHA-256
digest and size of the whole (redacted) text, the verdict's action, detector, reason and
fingerprint, and who approved. Its *body* is the record as canonical JSON without its hash;
its ``hash`` is the SHA-256 of the body, and the body holds ``prev``, the hash of the record
before it in the store (``GENESIS`` for the first) and ``seq``, its 1-based place. Each store
also keeps the chain *head*: the last ``seq`` and hash.

``verify_chain`` walks the stored rows and names each record that was edited (its body no
longer matches its hash, or its hash was rewritten and the next record still links to the
original), deleted (a ``seq`` is missing, or the head says there were more) or inserted (a
duplicate ``seq``, or a record beyond the head). Someone who rewrites every later record and
the head too is not caught: anchor the head elsewhere for that (``antiloop log verify``
prints it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from antiloop.audit import AuditEvent
from antiloop.core.redact import redact_text, redact_value
from antiloop.core.verdict import Action

__all__ = [
    "DEFAULT_CAP",
    "GENESIS",
    "PRUNE",
    "AuditRecord",
    "AuditRow",
    "Problem",
    "SessionSummary",
    "build_record",
    "parse_row",
    "prune_event",
    "summarise",
    "verify_chain",
]

DEFAULT_CAP = 4096
"""Bytes of UTF-8 kept of the args, the output and the error of each record."""

GENESIS = "0" * 64
"""The ``prev`` of the first record."""

# Bodies are hashed as stored, so no canonical key order is needed: they are built in one order.
# Values are redacted copies (plain trees) before they get here: no circular check is needed.
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)


try:  # the `fast` extra: bodies written 4x and read 3x faster (bench/results/json.md)
    import orjson

    _fast: Any = orjson
except ImportError:  # pragma: no cover - the stdlib then (antiloop needs no dependency)
    _fast = None


def _dumps(value: Any) -> str:
    """Compact JSON; orjson's when it can (not a lone surrogate, nor an int past 64 bits).

    orjson writes non-ASCII text as UTF-8 rather than escapes, and a NaN as null.
    """
    if _fast is not None:
        try:
            return str(_fast.dumps(value).decode())
        except TypeError:
            pass
    return _ENCODER.encode(value)


# orjson reads an integer past 64 bits as a float: a run of 19 digits (it may be one) goes
# to the stdlib, which reads every integer exactly (and lone surrogates).
_LONG_NUMBER = re.compile(r"\d{19}")


def loads(text: str) -> Any:
    """A stored body: through orjson when it reads it exactly, else the stdlib."""
    if _fast is not None and _LONG_NUMBER.search(text) is None:
        try:
            return _fast.loads(text)
        except _fast.JSONDecodeError:
            pass
    return json.loads(text)


_ACTIONS = {action: action.name.lower() for action in Action}


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One stored audit record (redacted and capped).

    Attributes:
        seq: 1-based place in the store's chain.
        session: the session id.
        kind: ``step``, ``check``, ``reset``, ``session``, ``approval`` or ``cache``.
        at: seconds since the epoch.
        agent: the agent name.
        index: the step's 0-based number in its session.
        tool: the tool name.
        args: the redacted arguments as compact JSON, cut to the cap.
        args_sha256: SHA-256 of the whole redacted arguments text.
        args_bytes: its size in bytes of UTF-8.
        output: the redacted output, cut to the cap.
        output_sha256: SHA-256 of the whole redacted output.
        output_bytes: its size in bytes of UTF-8.
        error: the redacted error text, cut to the cap.
        exit_code: the exit code.
        action: the verdict's action (``continue``, ``nudge``, ``ask``, ``block``, ``stop``).
        detector: the detector that decided.
        outcome: ``loop``, ``failing``, ``budget``, ``goal`` or ``stalled``.
        fingerprint: the loop fingerprint.
        reason: the verdict's reason.
        evidence: the steps that make the evidence.
        approved_by: who approved (``detail["approved_by"]`` or ``detail["decided_by"]``).
        detail: the event's other details, redacted.
        prev: the hash of the record before.
        hash: SHA-256 of this record's body.
    """

    seq: int
    session: str
    kind: str
    at: float
    agent: str | None = None
    index: int | None = None
    tool: str | None = None
    args: str | None = None
    args_sha256: str | None = None
    args_bytes: int | None = None
    output: str | None = None
    output_sha256: str | None = None
    output_bytes: int | None = None
    error: str | None = None
    exit_code: int | None = None
    action: str | None = None
    detector: str | None = None
    outcome: str | None = None
    fingerprint: str | None = None
    reason: str | None = None
    evidence: tuple[int, ...] = ()
    approved_by: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    prev: str = GENESIS
    hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (the JSONL export)."""
        out = asdict(self)
        out["evidence"] = list(self.evidence)
        out["detail"] = dict(self.detail)
        return out

    @property
    def truncated(self) -> bool:
        """True when the args, output or error were cut to the cap."""
        return any(
            size is not None and text is not None and size > len(text.encode("utf-8", "replace"))
            for text, size in ((self.args, self.args_bytes), (self.output, self.output_bytes))
        )


_FIELDS = tuple(f.name for f in fields(AuditRecord))


@dataclass(frozen=True, slots=True)
class AuditRow:
    """A record as a store keeps it: its place, its body text and its hash.

    ``columns`` holds values the store keeps beside the body (for its indexes); they must
    agree with the body.
    """

    seq: int
    body: str
    hash: str
    columns: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an audit chain.

    Attributes:
        seq: the record concerned (for deletions, the first missing one).
        kind: ``edited``, ``deleted``, ``inserted`` or ``head``.
        message: one sentence saying what and where.
    """

    seq: int
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session as its audit records show it.

    Attributes:
        session: the id.
        records: how many audit records it has.
        steps: how many of them are recorded steps.
        first_at: the time of its first record.
        last_at: the time of its last record.
        last_action: the action of its last record with a verdict.
        stopped: ``detector: reason`` of the first verdict that stopped or blocked, if any.
    """

    session: str
    records: int
    steps: int
    first_at: float
    last_at: float
    last_action: str | None = None
    stopped: str | None = None


def _cap(text: str, cap: int) -> tuple[str, str, int]:
    """(text cut to ``cap`` bytes of UTF-8, sha256 of the whole, size of the whole)."""
    raw = text.encode("utf-8", "surrogatepass")
    size = len(raw)
    digest = hashlib.sha256(raw).hexdigest()
    if size <= cap:
        return text, digest, size
    return raw[:cap].decode("utf-8", "ignore"), digest, size


def build_record(event: AuditEvent, seq: int, prev: str, cap: int = DEFAULT_CAP) -> AuditRow:
    """The stored form of an event: redacted, capped, numbered ``seq`` and linked to ``prev``."""
    body: dict[str, Any] = {
        "seq": seq,
        "session": event.session,
        "kind": event.kind,
        "at": event.at,
        "prev": prev,
    }
    named = (("agent", event.agent), ("index", event.index), ("tool", event.tool))
    body.update((name, value) for name, value in named if value is not None)
    if event.args is not None:
        text = _dumps(redact_value(event.args))
        body["args"], body["args_sha256"], body["args_bytes"] = _cap(text, cap)
    if event.output is not None:
        text = redact_text(event.output)
        body["output"], body["output_sha256"], body["output_bytes"] = _cap(text, cap)
    if event.error is not None:
        body["error"] = _cap(redact_text(event.error), cap)[0]
    if event.exit_code is not None:
        body["exit_code"] = event.exit_code
    verdict = event.verdict
    if verdict is not None:
        body["action"] = _ACTIONS[verdict.action]
        if verdict.detector is not None:
            body["detector"] = verdict.detector
        if verdict.outcome is not None:
            body["outcome"] = verdict.outcome
        if verdict.fingerprint is not None:
            body["fingerprint"] = redact_text(verdict.fingerprint)
        if verdict.reason:
            body["reason"] = redact_text(verdict.reason)
        if verdict.evidence:
            body["evidence"] = list(verdict.evidence)
    detail = dict(event.detail)
    approver = detail.pop("approved_by", None) or detail.get("decided_by")
    if approver is not None:
        body["approved_by"] = str(approver)
    if detail:
        body["detail"] = redact_value(detail)
    text = _dumps(body)
    return AuditRow(seq, text, hashlib.sha256(text.encode()).hexdigest())


def parse_row(row: AuditRow) -> AuditRecord:
    """The record a stored row holds (no check; see ``verify_chain``)."""
    data = loads(row.body)
    values = {k: v for k, v in data.items() if k in _FIELDS}
    values["evidence"] = tuple(values.get("evidence", ()))
    values["hash"] = row.hash
    return AuditRecord(**values)


def parse_rows(rows: Iterable[AuditRow]) -> Iterator[AuditRecord]:
    """``parse_row`` over rows, skipping unreadable ones (``verify_chain`` reports them)."""
    for row in rows:
        try:
            yield parse_row(row)
        except (ValueError, TypeError):
            continue


def _own_hash_ok(row: AuditRow) -> bool:
    return hashlib.sha256(row.body.encode("utf-8", "surrogatepass")).hexdigest() == row.hash


PRUNE = "prune"
"""The kind of the checkpoint record a prune appends: what it removed, up to which record."""


def prune_event(through: int, through_hash: str, removed: int, before: float, at: float) -> Any:
    """The checkpoint a prune appends to the chain: records 1..``through`` were removed.

    The chain then starts after ``through`` (its *base*), and the checkpoint, itself chained,
    vouches for that base: ``verify_chain`` accepts a base only when a checkpoint names it.
    """
    detail = {
        "through_seq": through,
        "through_hash": through_hash,
        "removed": removed,
        "older_than": before,
    }
    return AuditEvent(PRUNE, "antiloop", at, tool="log prune", detail=detail)


def verify_chain(
    rows: Iterable[AuditRow],
    head: tuple[int, str] | None,
    base: tuple[int, str] | None = None,
) -> list[Problem]:
    """Check a store's audit rows (in ``seq`` order) and its head; an empty list means intact.

    Args:
        rows: every row, sorted by ``seq`` (ties in storage order).
        head: the store's chain head ``(last seq, last hash)``, or None when it has none.
        base: after a prune, ``(last removed seq, its hash)``: the chain starts after it, and
            a checkpoint record must name it.

    Returns:
        The problems, each naming the record edited, deleted or inserted.
    """
    rows = list(rows)
    start = base if base is not None and base[0] > 0 else (0, GENESIS)
    return _base_problems(rows, base) + _verify_from(rows, head, start)


def _base_problems(rows: list[AuditRow], base: tuple[int, str] | None) -> list[Problem]:
    """A base must be vouched for by an intact prune checkpoint later in the chain."""
    if base is None or base[0] == 0:
        return []
    for row in rows:
        if PRUNE not in row.body or not _own_hash_ok(row):
            continue
        try:
            body = loads(row.body)
            detail = body.get("detail") or {} if body.get("kind") == PRUNE else {}
        except (ValueError, AttributeError):
            continue
        if detail.get("through_seq") == base[0] and detail.get("through_hash") == base[1]:
            return []
    return [
        Problem(
            base[0],
            "deleted",
            f"records 1-{base[0]} are gone, and no prune checkpoint in the chain names them",
        )
    ]


def _verify_from(
    rows: list[AuditRow], head: tuple[int, str] | None, base: tuple[int, str]
) -> list[Problem]:
    problems: list[Problem] = []
    items: list[tuple[AuditRow, dict[str, Any] | None, bool]] = []
    for row in rows:
        try:
            data = loads(row.body)
            if not isinstance(data, dict):
                data = None
        except ValueError:
            data = None
        intact = data is not None and _own_hash_ok(row) and data.get("seq") == row.seq
        if intact and data is not None:
            intact = all(data.get(k) == v for k, v in row.columns.items())
        items.append((row, data, intact))
    later_prevs = {data.get("prev") for _, data, _ in items if data is not None}

    expected = base[0] + 1
    prev_hash = base[1]
    last_seq = base[0]
    for i, (row, data, intact) in enumerate(items):
        seq = row.seq
        if seq < expected:
            problems.append(
                Problem(seq, "inserted", f"a second record with seq {seq} was inserted")
            )
            continue
        if seq > expected:
            gap = _span(expected, seq - 1)
            problems.append(Problem(expected, "deleted", f"{gap} deleted (the next is {seq})"))
        elif i + 1 < len(items) and items[i + 1][0].seq == seq and intact:
            # A duplicate follows: the genuine one links to the record before and is linked to.
            _, nxt_data, nxt_ok = items[i + 1]
            mine = data is not None and data.get("prev") == prev_hash and row.hash in later_prevs
            theirs = nxt_ok and nxt_data is not None and nxt_data.get("prev") == prev_hash
            if not mine and theirs:
                problems.append(
                    Problem(seq, "inserted", f"a second record with seq {seq} was inserted")
                )
                continue
        if not intact:
            problems.append(
                Problem(seq, "edited", f"record {seq} was edited: it no longer matches its hash")
            )
        elif data is not None and data.get("prev") != prev_hash and seq == expected and i > 0:
            before = items[i - 1]
            if before[2]:
                problems.append(
                    Problem(
                        seq - 1,
                        "edited",
                        f"record {seq - 1} was edited and its hash rewritten: record {seq} "
                        "still links to the original",
                    )
                )
        prev_hash = row.hash
        expected = seq + 1
        last_seq = seq
    if head is None:
        if items:
            problems.append(Problem(last_seq, "head", "the chain head is missing"))
        return problems
    head_seq, head_hash = head
    if last_seq < head_seq:
        gap = _span(last_seq + 1, head_seq)
        problems.append(Problem(last_seq + 1, "deleted", f"{gap} deleted from the end"))
    elif last_seq > head_seq:
        gap = _span(head_seq + 1, last_seq)
        problems.append(Problem(head_seq + 1, "inserted", f"{gap} inserted after the chain head"))
    elif items and prev_hash != head_hash and not any(p.seq == last_seq for p in problems):
        problems.append(
            Problem(
                last_seq,
                "edited",
                f"record {last_seq} was edited and its hash rewritten: the chain head still "
                "holds the original",
            )
        )
    return problems


def _span(first: int, last: int) -> str:
    return f"record {first} was" if first == last else f"records {first}-{last} were"


def summarise(records: Iterable[AuditRecord]) -> list[SessionSummary]:
    """One summary per session, the most recently active first."""
    acc: dict[str, list[Any]] = {}
    for r in records:
        s = acc.get(r.session)
        if s is None:
            s = acc[r.session] = [0, 0, r.at, r.at, None, None]
        s[0] += 1
        if r.kind == "step":
            s[1] += 1
        s[2] = min(s[2], r.at)
        s[3] = max(s[3], r.at)
        if r.action is not None:
            s[4] = r.action
            if s[5] is None and r.action in ("block", "stop"):
                s[5] = f"{r.detector}: {r.reason or ''}".rstrip(": ")
    out = [SessionSummary(k, *v) for k, v in acc.items()]
    out.sort(key=lambda s: s.last_at, reverse=True)
    return out
