"""Fixtures for the approval tests: a fake clock and a store with approvals."""

from __future__ import annotations

import pytest

from antiloop import Guard, GuardConfig
from antiloop.approval import MemoryLedger


class Clock:
    """A clock that moves only when told to (and a little on each read, when asked)."""

    def __init__(self, now: float = 1_700_000_000.0, step: float = 0.0) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class LedgerStore:
    """The guard's memory store plus the approval methods (until the store has its own)."""

    def __init__(self) -> None:
        from antiloop.stores.memory import MemoryStore

        self.inner = MemoryStore()
        self.ledger = MemoryLedger()

    def __getattr__(self, name: str):
        inner = self.inner
        if hasattr(inner, name):
            return getattr(inner, name)
        return getattr(self.ledger, name)


@pytest.fixture
def clock() -> Clock:
    """A fake clock."""
    return Clock()


@pytest.fixture
def store():
    """A memory store that keeps approvals (the store's own once it has them)."""
    from antiloop.stores.memory import MemoryStore

    if hasattr(MemoryStore, "decide_approval"):
        return MemoryStore()
    return LedgerStore()


@pytest.fixture
def guard(store) -> Guard:
    """A guard on that store."""
    return Guard(config=GuardConfig(embedder="ngram"), store=store)
