"""Fixtures for the approval tests: a fake clock, and each store with approvals in turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.stores.conftest import PARAMS, Backend, redis_cluster  # noqa: F401 - a fixture

from antiloop import Guard, GuardConfig


class Clock:
    """A clock that moves only when told to (and a little on each read, when asked)."""

    def __init__(self, now: float = 1_700_000_000.0, step: float = 0.0) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def clock() -> Clock:
    """A fake clock."""
    return Clock()


@pytest.fixture(params=PARAMS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store that keeps approvals: memory, SQLite, Redis, PostgreSQL, split, cluster in turn."""
    cluster = request.getfixturevalue("redis_cluster") if request.param == "cluster" else None
    backend = Backend(request.param, tmp_path, cluster)
    yield backend.open()
    backend.cleanup()


@pytest.fixture
def guard(store) -> Guard:
    """A guard on that store."""
    return Guard(config=GuardConfig(embedder="ngram"), store=store)


@pytest.fixture
def guard_with(store):
    """A guard on that store that asks the given approvals (``Guard(approvals=...)``)."""

    def make(approvals: Any) -> Guard:
        return Guard(config=GuardConfig(embedder="ngram"), store=store, approvals=approvals)

    return make
