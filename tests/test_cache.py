"""cached(): repeated read-only calls are served from the store and logged as cache hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from antiloop import Guard, GuardConfig
from antiloop.cache import READ_ONLY, cache_key, cached
from antiloop.core.errors import ConfigError, LoopDetected
from antiloop.stores.sqlite import SQLiteStore

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")


class Clock:
    """A clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_same_canonical_call_is_served_from_the_cache(tmp_path: Path) -> None:
    """Two spellings of one grep run the tool once; the hit is in the audit log."""
    store = SQLiteStore(tmp_path / "a.db")
    guard = Guard(store=store, config=CONFIG)
    calls: list[str] = []

    @cached(guard, ttl=60, tool="bash")
    def bash(command: str) -> str:
        calls.append(command)
        return "src/a.ts:3: doubleJump"

    with guard.session("s1"):
        first = bash('grep -rn "doubleJump" src/')
        second = bash("grep  -nr 'doubleJump' src")
    assert first == second == "src/a.ts:3: doubleJump"
    assert len(calls) == 1
    hits = [r for r in store.audit_records() if r.kind == "cache"]
    assert len(hits) == 1
    assert (hits[0].session, hits[0].tool, hits[0].output) == ("s1", "bash", first)


def test_entries_expire_after_ttl(tmp_path: Path) -> None:
    """After the TTL the tool runs again."""
    clock = Clock()
    guard = Guard(store=SQLiteStore(tmp_path / "a.db", clock=clock), config=CONFIG)
    calls = []

    @cached(guard, ttl=10)
    def grep(pattern: str) -> list[str]:
        calls.append(pattern)
        return ["a.py:1"]

    assert grep("x") == ["a.py:1"]
    assert grep("x") == ["a.py:1"]
    clock.now += 11
    grep("x")
    assert len(calls) == 2


def test_writes_errors_and_non_json_results_are_not_cached() -> None:
    """Write tools, exceptions and results that are not JSON values always run."""
    guard = Guard(config=CONFIG)
    runs: list[str] = []

    @cached(guard)
    def edit(file_path: str, new: str) -> str:
        runs.append("edit")
        return "ok"

    @cached(guard, tool="read")
    def read(file_path: str) -> object:
        runs.append("read")
        if file_path == "boom":
            raise OSError("nope")
        return object()

    edit("a.py", "x")
    edit("a.py", "x")
    with pytest.raises(OSError, match="nope"):
        read("boom")
    with pytest.raises(OSError, match="nope"):
        read("boom")
    read("a.py")
    read("a.py")
    assert runs == ["edit", "edit", "read", "read", "read", "read"]


def test_keys_follow_the_canonical_procedure() -> None:
    """Equal canonical procedures share a key; different ones do not."""
    assert cache_key("Grep", {"pattern": "x", "path": "src"}) == cache_key(
        "grep", {"pattern": "x", "path": "src/"}
    )
    assert cache_key("grep", {"pattern": "x"}) != cache_key("grep", {"pattern": "y"})
    assert "grep" in READ_ONLY


def test_cache_and_loop_detection_compose() -> None:
    """Under guard.wrap, a cached repeat is still seen and stopped as a loop."""
    guard = Guard(config=CONFIG)

    @guard.wrap
    @cached(guard)
    def grep(pattern: str) -> str:
        return "no matches"

    grep("x")
    with pytest.raises(LoopDetected):
        grep("x")


def test_coroutines_are_refused() -> None:
    """cached() names coroutine functions it cannot wrap."""
    guard = Guard(config=CONFIG)

    async def grep(pattern: str) -> str:
        return ""

    with pytest.raises(ConfigError, match="coroutine"):
        cached(guard)(grep)
