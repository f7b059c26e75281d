"""Audit bodies through orjson (the ``fast`` extra) and the stdlib: one chain, read by both."""

from __future__ import annotations

from typing import Any

import pytest

from antiloop.audit import AuditEvent
from antiloop.stores import auditlog
from antiloop.stores.auditlog import GENESIS, build_record, parse_row, verify_chain


def _chain(events: list[AuditEvent]) -> list[auditlog.AuditRow]:
    rows, prev = [], GENESIS
    for seq, event in enumerate(events, 1):
        row = build_record(event, seq, prev)
        rows.append(row)
        prev = row.hash
    return rows


def _events() -> list[AuditEvent]:
    return [
        AuditEvent("step", "s", 1.0, tool="Read", args={"path": "café/ü.py"}, output="naïve ✓"),
        AuditEvent("step", "s", 2.0, tool="Bash", args={"n": 2**70}, output="big"),
        AuditEvent("step", "s", 3.0, tool="Bash", args={}, output="bad \udcff byte"),
    ]


def test_orjson_is_there_for_the_suite() -> None:
    """The dev install has the fast extra, so the suite runs the orjson path."""
    assert auditlog._fast is not None


@pytest.mark.parametrize("write_fast", [True, False])
@pytest.mark.parametrize("read_fast", [True, False])
def test_bodies_written_by_either_are_read_and_verified_by_either(
    monkeypatch: Any, write_fast: bool, read_fast: bool
) -> None:
    """Non-ASCII text, an int past 64 bits and a lone surrogate: written, read back, intact."""
    fast = auditlog._fast
    monkeypatch.setattr(auditlog, "_fast", fast if write_fast else None)
    rows = _chain(_events())
    monkeypatch.setattr(auditlog, "_fast", fast if read_fast else None)
    records = [parse_row(r) for r in rows]
    assert [r.output for r in records] == ["naïve ✓", "big", "bad \udcff byte"]
    assert [r.args for r in records] == [
        '{"path":"café/ü.py"}' if write_fast else '{"path":"caf\\u00e9/\\u00fc.py"}',
        '{"n":1180591620717411303424}',
        "{}",
    ]
    assert verify_chain(rows, (3, rows[-1].hash)) == []
    edited = [rows[0], type(rows[1])(2, rows[1].body.replace("big", "bag"), rows[1].hash), rows[2]]
    assert [p.kind for p in verify_chain(edited, (3, rows[-1].hash))] == ["edited"]


@pytest.mark.parametrize("read_fast", [True, False])
def test_integers_past_64_bits_are_read_exactly(monkeypatch: Any, read_fast: bool) -> None:
    """A 20-digit integer in a record's details reads back as that integer, not a float."""
    big, small = 98765432109876543210, -12345678901234567890
    row = build_record(AuditEvent("step", "s", 1.0, detail={"n": big, "m": small}), 1, GENESIS)
    if not read_fast:
        monkeypatch.setattr(auditlog, "_fast", None)
    detail = parse_row(row).detail
    assert detail == {"n": big, "m": small}
    assert [type(v) for v in detail.values()] == [int, int]
