"""Where approvals, feedback and stop requests live: the store, or this process as a fallback.

Stores implement the optional methods of ``ApprovalStore``. ``ledger_of(store)`` returns the
store itself when it has them all, and otherwise a ``Ledger`` that sends each method to the
store when the store has it and to an in-process ``MemoryLedger`` when it does not (a store
without approvals still works in one process; it logs once that the records are not shared).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.stores import ApprovalStore as _Approvals
from antiloop.stores import Interventions
from antiloop.stores.memory import MemoryStore

log = logging.getLogger("antiloop")

METHODS = (
    "put_approval",
    "get_approval",
    "decide_approval",
    "list_approvals",
    "push_feedback",
    "pop_feedback",
    "request_stop",
    "stop_requested",
    "clear_stop",
)


@runtime_checkable
class ApprovalStore(_Approvals, Interventions, Protocol):
    """The store methods approvals, feedback and stops need (each built-in store has them)."""


class MemoryLedger(MemoryStore):
    """Approvals, feedback and stop requests in this process: the memory store's own.

    The fallback for a third-party store without the approval methods (tests use it too).
    """


class Ledger:
    """Each approval method from the store when it has it, else from this process."""

    def __init__(self, store: object, fallback: MemoryLedger | None = None) -> None:
        self.store = store
        self.fallback = fallback or MemoryLedger()
        missing = [m for m in METHODS if not callable(getattr(store, m, None))]
        if missing:
            log.warning(
                "antiloop: store %r keeps no %s; they live in this process only",
                store,
                ", ".join(missing),
            )
        for name in METHODS:
            source = store if name not in missing else self.fallback
            setattr(self, name, getattr(source, name))

    def __repr__(self) -> str:
        return f"Ledger({self.store!r})"

    # The attributes are set in __init__; these stubs give them types.
    def put_approval(self, req: ApprovalRequest) -> None:  # pragma: no cover - replaced
        raise NotImplementedError

    def get_approval(self, id: str) -> ApprovalRequest | None:  # pragma: no cover
        raise NotImplementedError

    def decide_approval(  # pragma: no cover
        self,
        id: str,
        status: ApprovalStatus | str,
        decided_by: str,
        comment: str | None = None,
        edited_args: Mapping[str, Any] | None = None,
        now: float | None = None,
    ) -> ApprovalRequest:
        raise NotImplementedError

    def list_approvals(  # pragma: no cover
        self, status: ApprovalStatus | str | None = None, session: str | None = None
    ) -> list[ApprovalRequest]:
        raise NotImplementedError

    def push_feedback(self, session: str, text: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def pop_feedback(self, session: str) -> list[str]:  # pragma: no cover
        raise NotImplementedError

    def request_stop(self, session: str, by: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def stop_requested(self, session: str) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def clear_stop(self, session: str) -> None:  # pragma: no cover
        raise NotImplementedError


_shared: dict[int, Ledger] = {}


def ledger_of(store: object) -> ApprovalStore:
    """The store itself when it keeps approvals, else one ``Ledger`` per store object."""
    if all(callable(getattr(store, m, None)) for m in METHODS):
        return store  # type: ignore[return-value]
    key = id(store)
    found = _shared.get(key)
    if found is None or found.store is not store:
        found = _shared[key] = Ledger(store)
    return found
