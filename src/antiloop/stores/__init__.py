"""Stores: where the guard keeps session state, the audit log, approvals and interventions.

A store is chosen by URL; built-ins are found the way a third party's are::

    "memory://"                 in this process only (the library's default)
    "sqlite:///path/to/db"      the default of the CLI, hooks and service
    "redis://host:6379/0"       a fleet of guards sharing sessions
    "redis+sentinel://h:26379,h2:26379/mymaster/0"   ... through Redis Sentinel
    "postgresql://…"            audit and approvals for a fleet

``open_store(state_url, records=records_url)`` keeps session state in one store (say Redis)
and the records in another (say PostgreSQL): ``antiloop.stores.split``.

Judging a step is one atomic read-modify-write of its session's state: ``transaction()``, or
the compare-and-set contract of ``antiloop.stores.state`` (``load``, ``save``, ``forget``,
``sessions``) and its one retry loop ``state.judge``, which Redis judges with. The records'
SQL is written once for SQLite and PostgreSQL (``_sql``). Beyond ``Store``, the built-ins have
four capabilities, each a Protocol here, tested with ``isinstance(store, AuditLog)``:
``AuditLog`` (a redacted, hash-chained record of every step and verdict), ``ApprovalStore``,
``ResultCache`` (the query cache) and ``Interventions`` (feedback and stop requests).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from antiloop.core.errors import ConfigError
from antiloop.stores.protocol import Store as Store

if TYPE_CHECKING:
    from antiloop.approval.request import ApprovalRequest, ApprovalStatus
    from antiloop.audit import AuditEvent
    from antiloop.stores.auditlog import AuditRecord, Problem, SessionSummary

#: Built-in stores by URL scheme, as ``"module:attr"``.
BUILTIN: dict[str, str] = {
    "memory": "antiloop.stores.memory:MemoryStore",
    "sqlite": "antiloop.stores.sqlite:SQLiteStore",
    "redis": "antiloop.stores.redis:RedisStore",
    "rediss": "antiloop.stores.redis:RedisStore",
    "postgresql": "antiloop.stores.postgres:PostgresStore",
    "postgres": "antiloop.stores.postgres:PostgresStore",
}

DEFAULT_STORE = "sqlite:///~/.antiloop/antiloop.db"
"""The store of the CLI, the hooks and the service when ``ANTILOOP_STORE`` is not set."""


def default_store_url() -> str:
    """``ANTILOOP_STORE`` when set, else ``sqlite:///~/.antiloop/antiloop.db``; ``~`` expanded."""
    url = os.environ.get("ANTILOOP_STORE") or DEFAULT_STORE
    for prefix in ("sqlite:///~", "sqlite://~"):
        if url.startswith(prefix):
            home = Path("~" + url[len(prefix) :]).expanduser()
            return "sqlite:///" + str(home).lstrip("/")
    return url


@runtime_checkable
class AuditLog(Protocol):
    """A store that keeps the tamper-evident audit log (``antiloop.stores.auditlog``)."""

    def append_audit(self, event: AuditEvent) -> None:
        """Redact, cap, chain and keep an event; inside ``transaction()`` it commits with it."""
        ...

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq`` in chain order, of one session or of all."""
        ...

    def session_summaries(self) -> list[SessionSummary]:
        """One summary per session seen in the log, the most recently active first."""
        ...

    def verify_audit(self) -> list[Problem]:
        """Check the hash chain; an empty list means no record was edited, inserted or deleted."""
        ...


@runtime_checkable
class ApprovalStore(Protocol):
    """A store that keeps approval requests; deciding one is atomic."""

    def put_approval(self, request: ApprovalRequest) -> None:
        """Keep a request (its args redacted); an existing id is replaced."""
        ...

    def get_approval(self, id: str) -> ApprovalRequest | None:
        """The request, or None when unknown."""
        ...

    def decide_approval(
        self,
        id: str,
        status: ApprovalStatus | str,
        decided_by: str,
        comment: str | None = None,
        edited_args: Mapping[str, Any] | None = None,
        now: float | None = None,
    ) -> ApprovalRequest:
        """Decide a pending, unexpired request; returns the request as it now stands.

        A request already decided is returned unchanged (the first answer wins); one past
        its ``expires_at`` becomes ``expired`` (which denies). An unknown id is a KeyError.
        """
        ...

    def list_approvals(
        self, status: ApprovalStatus | str | None = None, session: str | None = None
    ) -> list[ApprovalRequest]:
        """Requests, oldest first, filtered by status and session."""
        ...


@runtime_checkable
class ResultCache(Protocol):
    """A store that caches tool results (``antiloop.cache``)."""

    def cache_get(self, key: str) -> str | None:
        """The cached value, or None when absent or expired."""
        ...

    def cache_put(self, key: str, value: str, ttl_seconds: float) -> None:
        """Keep a value for ``ttl_seconds``."""
        ...


@runtime_checkable
class Interventions(Protocol):
    """A store that carries people's feedback and stop requests to a session's guard."""

    def push_feedback(self, session: str, text: str) -> None:
        """Queue a message from a person for the session's agent."""
        ...

    def pop_feedback(self, session: str) -> list[str]:
        """Take every queued message, oldest first (the queue is then empty)."""
        ...

    def request_stop(self, session: str, by: str) -> None:
        """Ask the session to stop; ``by`` says who asked."""
        ...

    def stop_requested(self, session: str) -> str | None:
        """Who asked the session to stop, or None."""
        ...

    def clear_stop(self, session: str) -> None:
        """Withdraw a stop request."""
        ...


def open_store(url: str, records: str | None = None) -> Store:
    """Open the store a URL names; an unknown scheme is a ConfigError naming it.

    With ``records``, a ``SplitStore``: state in ``url``, the audit log, approvals and
    interventions in ``records`` (both closed if the second fails to open).
    """
    if records:
        from antiloop.stores.split import SplitStore

        state = open_store(url)
        kept: Store | None = None
        try:
            kept = open_store(records)
            return SplitStore(state, kept)
        except BaseException:
            state.close()
            if kept is not None:
                kept.close()
            raise
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    target = BUILTIN.get(scheme) or BUILTIN.get(scheme.split("+", 1)[0])
    if target is None:
        raise ConfigError(
            f"unknown store URL {url!r}: use one of {', '.join(f'{s}://' for s in BUILTIN)}"
        )
    module, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    store: Store = factory.from_url(url)
    return store
