"""What the windows keep of a step, pinned: record equality field by field, the kept context,
the procedure digest, and how deep a JSON value nests (the parser's depth guard)."""

from __future__ import annotations

from typing import Any

import pytest

from antiloop.core.history import CONTEXT_KEPT, StepRecord, kept_context, key_digest
from antiloop.core.result import read_result
from antiloop.core.step import nesting_depth


def _record(**changes: Any) -> StepRecord:
    fields: dict[str, Any] = {
        "index": 3,
        "tool": "bash",
        "operation": "grep",
        "procedure": "0123456789abcdef",
        "context": "foo@src",
        "readings": read_result("grep", False, "a.py:1: foo", None, 0, {}),
        "same_as": (),
    }
    fields.update(changes)
    return StepRecord(**fields)


def test_records_with_the_same_fields_are_equal() -> None:
    assert _record() == _record()
    assert _record() != "not a record"


@pytest.mark.parametrize(
    "change",
    [
        {"index": 4},
        {"tool": "grep"},
        {"operation": "read"},
        {"procedure": "fedcba9876543210"},
        {"context": "bar@src"},
        {"readings": read_result("grep", False, "b.py:2: foo", None, 0, {})},
        {"same_as": (None,)},
    ],
)
def test_records_differing_in_one_field_are_not_equal(change: dict[str, Any]) -> None:
    assert _record() != _record(**change)
    assert _record(**change) != _record()


def test_a_short_word_context_is_kept_as_it_is() -> None:
    assert kept_context("pytest") == "pytest"


def test_a_context_is_redacted_then_cut() -> None:
    token = "ghp_" + "a" * 36
    assert kept_context(f"curl -H {token}") == "curl -H [REDACTED]"
    assert kept_context("x " * 100) == ("x " * 100)[:CONTEXT_KEPT]
    assert len(kept_context("y" * 500)) == CONTEXT_KEPT == 120


def test_the_procedure_digest_is_16_hex_digits_of_blake2b() -> None:
    assert key_digest("grep\x1ffoo") == key_digest("grep\x1ffoo")
    assert key_digest("") == "e4a6a0577479b2b4"
    assert len(key_digest("a\udcff")) == 16  # a lone surrogate is digested too


@pytest.mark.parametrize(
    ("value", "depth"),
    [
        ("x", 0),
        (1, 0),
        ([], 1),
        ({}, 1),
        ([1, "a"], 1),
        ({"a": [1]}, 2),
        ([[[]]], 3),
        ({"a": {"b": {"c": [1]}}, "d": []}, 4),
        ([[], [[[]]], []], 4),
    ],
)
def test_nesting_depth_counts_arrays_and_objects(value: Any, depth: int) -> None:
    assert nesting_depth(value) == depth


def test_nesting_depth_measures_any_depth_without_recursion() -> None:
    value: Any = []
    for _ in range(5000):
        value = [value]
    assert nesting_depth(value) == 5001
