"""What every store shares: URL options, approval decisions and their stored form."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.core.errors import ConfigError
from antiloop.core.redact import redact_value

if TYPE_CHECKING:
    from antiloop.audit import AuditEvent
    from antiloop.stores.auditlog import AuditRecord, AuditRow, Problem, SessionSummary

__all__ = [
    "Records",
    "approval_from_json",
    "approval_to_json",
    "decide",
    "hide_password",
    "split_options",
]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def split_options(url: str, known: Mapping[str, type]) -> tuple[str, dict[str, Any]]:
    """The URL without antiloop's own options (``known``: name -> type), and their values.

    Raises:
        ConfigError: an option's value is not of its type.
    """
    base, _, query = url.partition("?")
    kept: list[tuple[str, str]] = []
    options: dict[str, Any] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        kind = known.get(name)
        if kind is None:
            kept.append((name, value))
            continue
        try:
            options[name] = kind(value)
        except ValueError as exc:
            raise ConfigError(
                f"store URL option {name}={value!r} is not a {kind.__name__}"
            ) from exc
    return (base + "?" + urlencode(kept) if kept else base), options


def hide_password(url: str) -> str:
    """The URL with its password replaced by ``***``."""
    return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url, count=1)


def approval_to_json(request: ApprovalRequest) -> str:
    """The stored form of a request: JSON, its ``args`` and ``edited_args`` redacted.

    The numbers of edited arguments are kept (an edited limit such as
    ``session_hard_tokens`` is a number, and no secret); the call runs with the arguments as
    the person gave them, which ``Approvals`` keeps in memory.
    """
    data = request.to_dict()
    data["args"] = redact_value(data["args"])
    if data.get("edited_args") is not None:
        data["edited_args"] = redact_value(data["edited_args"], keep_numbers=True)
    return _dumps(data)


def approval_from_json(text: str | bytes) -> ApprovalRequest:
    """The request ``approval_to_json`` wrote."""
    return ApprovalRequest.from_dict(json.loads(text))


_FINAL = frozenset(
    {ApprovalStatus.APPROVED, ApprovalStatus.DENIED, ApprovalStatus.EDITED, ApprovalStatus.EXPIRED}
)


def decide(
    current: ApprovalRequest,
    status: ApprovalStatus | str,
    decided_by: str,
    comment: str | None,
    edited_args: Mapping[str, Any] | None,
    now: float,
) -> ApprovalRequest | None:
    """The request after a decision, or None when it does not change (already decided).

    A request past its ``expires_at`` becomes ``expired``, decided by ``timeout``, whatever
    the answer.

    Raises:
        ValueError: ``status`` is not a final status.
    """
    wanted = ApprovalStatus(status)
    if wanted not in _FINAL:
        raise ValueError(f"an approval is decided as one of {sorted(_FINAL)}, not {wanted!r}")
    if current.status is not ApprovalStatus.PENDING:
        return None
    if current.expires_at is not None and now >= current.expires_at:
        return replace(current, status=ApprovalStatus.EXPIRED, decided_by="timeout", decided_at=now)
    return replace(
        current,
        status=wanted,
        decided_by=decided_by,
        decided_at=now,
        comment=comment,
        edited_args=dict(edited_args) if edited_args is not None else None,
    )


class Records:
    """What every store with records shares: audit summaries, and approvals decided once.

    A store provides ``audit_records``, ``_approval_body(id)``, ``_approvals_of(status,
    session)`` (it may filter; this class filters and sorts again) and ``_swap_approval(id,
    change)``: atomically, ``change`` the current request (a KeyError when unknown) and keep
    what it returns unless None; return the request as it then stands.
    """

    clock: Callable[[], float]

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq``, of one session or all."""
        raise NotImplementedError

    def session_summaries(self) -> list[SessionSummary]:
        """One summary per session in the log, the most recently active first."""
        from antiloop.stores.auditlog import summarise

        return summarise(self.audit_records())

    def _approval_body(self, id: str) -> str | bytes | None:
        raise NotImplementedError

    def _approvals_of(self, status: str | None, session: str | None) -> list[str | bytes]:
        raise NotImplementedError

    def _swap_approval(
        self, id: str, change: Callable[[ApprovalRequest], ApprovalRequest | None]
    ) -> ApprovalRequest:
        raise NotImplementedError

    def get_approval(self, id: str) -> ApprovalRequest | None:
        """The request, or None when unknown."""
        body = self._approval_body(id)
        return None if body is None else approval_from_json(body)

    def decide_approval(
        self,
        id: str,
        status: ApprovalStatus | str,
        decided_by: str,
        comment: str | None = None,
        edited_args: Mapping[str, Any] | None = None,
        now: float | None = None,
    ) -> ApprovalRequest:
        """Decide a pending, unexpired request atomically (see ``ApprovalStore``)."""
        when = self.clock() if now is None else now
        ApprovalStatus(status)  # a bad status is a ValueError before anything is read
        return self._swap_approval(
            id, lambda current: decide(current, status, decided_by, comment, edited_args, when)
        )

    def list_approvals(
        self, status: ApprovalStatus | str | None = None, session: str | None = None
    ) -> list[ApprovalRequest]:
        """Requests, oldest first, filtered by status and session."""
        wanted = None if status is None else str(status)
        found = [approval_from_json(b) for b in self._approvals_of(wanted, session)]
        return sorted(
            (
                r
                for r in found
                if (wanted is None or r.status == wanted)
                and (session is None or r.session == session)
            ),
            key=lambda r: (r.created_at, r.id),
        )


def parse_head(text: str) -> tuple[int, str] | None:
    """``(seq, hash)`` of a stored audit head ``"seq hash"``, or None when it is damaged."""
    seq, _, digest = text.partition(" ")
    if not (seq.isascii() and seq.isdigit()) or len(digest) != 64:
        return None
    return int(seq), digest


def check_chain(rows: Iterable[AuditRow], head: str, base: str = "") -> list[Problem]:
    """``verify_chain`` under a stored head (and base) ``"seq hash"``; a damaged head is named."""
    from antiloop.stores.auditlog import Problem, verify_chain

    pair = parse_head(head) if head else None
    found = verify_chain(rows, pair, parse_head(base) if base else None)
    if head and pair is None:
        return [Problem(0, "head", f"the audit head is damaged: {head[:80]!r}"), *found]
    return found


def head_of(store: Any, text: str, tail: Callable[[], tuple[int, str]]) -> tuple[int, str]:
    """The audit head ``(seq, hash)`` a store keeps as ``text``, "seq hash".

    A missing or damaged head is no reason to stop recording: the records chain on the log's
    last record, ``tail()`` (a damaged head is logged, with the ``store``'s url), and the
    caller writes the head again.
    """
    head = parse_head(text) if text else None
    if head is None:
        head = tail()
        if text:
            import logging

            logging.getLogger("antiloop").error(
                "antiloop: the audit head of %s is damaged (%r); chaining on record %d",
                *(store.url, text[:80], head[0]),
            )
    return head


def chain(head: tuple[int, str], events: Iterable[AuditEvent], cap: int) -> list[AuditRow]:
    """The stored rows of ``events``, redacted and capped, chained after ``head``."""
    from antiloop.stores.auditlog import build_record

    rows = []
    for event in events:
        row = build_record(event, head[0] + 1, head[1], cap)
        rows.append(row)
        head = (row.seq, row.hash)
    return rows
