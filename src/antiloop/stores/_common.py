"""What every store shares: URL options, approval decisions and their stored form."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.errors import ConfigError
from antiloop.redact import redact_value

if TYPE_CHECKING:
    from antiloop.stores.auditlog import AuditRecord, AuditRow, SessionSummary

__all__ = [
    "approval_from_json",
    "approval_to_json",
    "decide",
    "hide_password",
    "split_options",
]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def split_options(url: str, known: Mapping[str, type]) -> tuple[str, dict[str, Any]]:
    """Take antiloop's own options out of a URL's query string.

    Args:
        url: the store URL.
        known: option name -> type (``int``, ``float``, ``str``).

    Returns:
        The URL without those options, and their values converted.

    Raises:
        ConfigError: an option's value has the wrong type.
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
    """The stored form of a request: JSON, its ``args`` redacted (``edited_args`` kept)."""
    data = request.to_dict()
    data["args"] = redact_value(data["args"])
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


class AuditReading:
    """``session_summaries`` over ``audit_records``, shared by every store with an audit log."""

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq``, of one session or all."""
        raise NotImplementedError

    def session_summaries(self) -> list[SessionSummary]:
        """One summary per session in the log."""
        from antiloop.stores.auditlog import summarise

        return summarise(self.audit_records())


class SQLAuditReading(AuditReading):
    """``audit_records`` of the SQL stores, over their ``_rows(session, since_seq)`` query."""

    def _rows(self, session: str | None, since_seq: int) -> list[AuditRow]:
        raise NotImplementedError

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq``, of one session or all."""
        from antiloop.stores.auditlog import parse_rows

        return parse_rows(self._rows(session, since_seq))
