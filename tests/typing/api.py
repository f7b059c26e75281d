"""Pins the ergonomics of the public API for type checkers (checked by mypy --strict)."""

from __future__ import annotations

from typing import assert_type

from antiloop import (
    Action,
    AnyOf,
    Cycle,
    Guard,
    History,
    LoopDetected,
    Repeat,
    Step,
    Verdict,
)


def my_detector(history: History) -> Verdict | None:
    """A plain function is a detector."""
    return None if history.count < 3 else Verdict.nudge("custom", "three steps")


policy = Repeat(2) | Cycle(max_period=3) | my_detector
assert_type(policy, AnyOf)

guard = Guard(policy)


@guard.wrap
def search(pattern: str, limit: int = 10) -> list[str]:
    """A tool."""
    return [pattern] * limit


assert_type(search("x", limit=2), list[str])


@guard.wrap(tool="read_file", agent="explorer")
def read(path: str) -> str:
    """Another tool."""
    return path


assert_type(read("a.py"), str)
verdict = guard.record(Step(tool="grep", args={"pattern": "x"}, output="a"))
assert_type(verdict, Verdict)
assert_type(verdict.action, Action)
try:
    guard.enforce(verdict)
except LoopDetected as loop:
    assert_type(loop.fingerprint, str | None)
