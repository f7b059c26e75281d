"""ApprovalRequest: the record of one question to a person; channels only deliver and collect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class ApprovalStatus(StrEnum):
    """Where a request stands; every status but ``pending`` is final."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EDITED = "edited"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A risky call, or a loop stop, waiting for a person's answer.

    Attributes:
        id: unique id.
        session: the session asking.
        agent: the agent asking.
        tool: the tool to run.
        args: its arguments (redacted before they are stored).
        risk: the policy's risk tier (``read``, ``write``, ``exec``, ``network``, ``loop``...).
        reason: why a person is asked.
        created_at: seconds since the epoch.
        expires_at: after this the request is expired, which denies it.
        status: pending, approved, denied, edited or expired.
        decided_by: who answered (a user name, a channel, ``timeout``).
        decided_at: when.
        comment: the person's words, passed to the agent as feedback.
        edited_args: arguments the person changed, when ``status`` is ``edited``.
        fingerprint: the loop fingerprint when a loop stop is escalated.
        rule: the policy rule that asked (``tier:exec``, a custom rule's name,
            ``escalate:repeat`` for a loop, ``budget:soft`` for a spending check-in).
        channel: the channel the deciding answer came through (``terminal``, ``web``,
            ``webhook``, ``cli``, ``callback``, ``allowance``; ``timeout`` when none came).
    """

    id: str
    session: str
    agent: str
    tool: str
    args: Mapping[str, Any]
    risk: str
    reason: str
    created_at: float
    expires_at: float | None = None
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str | None = None
    decided_at: float | None = None
    comment: str | None = None
    edited_args: Mapping[str, Any] | None = None
    fingerprint: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    rule: str | None = None
    channel: str | None = None

    @property
    def waited(self) -> float | None:
        """Seconds from the question to the answer, once decided."""
        if self.decided_at is None:
            return None
        return max(0.0, self.decided_at - self.created_at)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        out = asdict(self)
        out["status"] = str(self.status)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        """The inverse of ``to_dict``; keys a newer antiloop wrote are ignored."""
        values = {k: v for k, v in data.items() if k in _FIELDS}
        values["status"] = ApprovalStatus(values.get("status", "pending"))
        return cls(**values)


_FIELDS = frozenset(ApprovalRequest.__dataclass_fields__)
